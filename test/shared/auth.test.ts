// Request signing (shared/wire/signing.ts) and its check in the function host: what a signature
// covers, when it is refused, and that the host answers 401 before reading anything else.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { buildApp, type FunctionApp } from '../../shared/host/app.ts';
import type { FunctionDefinition, ObjectKey } from '../../shared/host/function.ts';
import { signatureHeader, signRequest, verifyRequest, type SignedRequest } from '../../shared/wire/signing.ts';
import { silentLogger } from '../helpers/builders.ts';

const secret = 'a shared secret';
const now = 1_800_000_000;
const clock = (): number => now;

const event: SignedRequest = {
  headers: {
    'content-type': 'application/json',
    'ce-specversion': '1.0',
    'ce-id': 'e1',
    'ce-source': 'https://10.96.0.1:443',
    'ce-type': 'dev.knative.apiserver.resource.update',
    'ce-kind': 'Node',
    'ce-name': 'worker-1',
    'ce-namespace': '',
  },
  body: '{"metadata":{"name":"worker-1"}}',
};

function signed(request: SignedRequest, options: { secret?: string; at?: number } = {}): SignedRequest {
  return {
    ...request,
    headers: {
      ...request.headers,
      [signatureHeader]: signRequest(options.secret ?? secret, request, options.at ?? now),
    },
  };
}

describe('request signatures', () => {
  it('verify with the secret they were made with', () => {
    const request = signed(event);
    assert.match(String(request.headers[signatureHeader]), /^t=1800000000,v1=[0-9a-f]{64}$/);
    assert.deepEqual(verifyRequest(request, { secret, now: clock }), { ok: true });
  });

  it('fail for another secret, a changed body, a changed attribute, an added attribute', () => {
    const request = signed(event);
    const refused = { ok: false, reason: 'signature does not match' };
    assert.deepEqual(verifyRequest(request, { secret: 'another', now: clock }), refused);
    assert.deepEqual(
      verifyRequest({ ...request, body: '{"metadata":{"name":"worker-2"}}' }, { secret, now: clock }),
      refused,
    );
    assert.deepEqual(
      verifyRequest(
        { ...request, headers: { ...request.headers, 'ce-type': 'dev.knative.apiserver.resource.delete' } },
        { secret, now: clock },
      ),
      refused,
    );
    assert.deepEqual(
      verifyRequest(
        { ...request, headers: { ...request.headers, 'ce-subject': '/apis/v1/namespaces//nodes/x' } },
        { secret, now: clock },
      ),
      refused,
    );
  });

  it('are refused more than five minutes away from the clock, either way', () => {
    for (const at of [now - 301, now + 301]) {
      assert.deepEqual(verifyRequest(signed(event, { at }), { secret, now: clock }), {
        ok: false,
        reason: "signature timestamp is more than 300 s away from this server's clock",
      });
    }
    assert.deepEqual(verifyRequest(signed(event, { at: now - 300 }), { secret, now: clock }), { ok: true });
  });

  it('are refused when missing or malformed', () => {
    assert.deepEqual(verifyRequest(event, { secret, now: clock }), {
      ok: false,
      reason: `missing ${signatureHeader} header`,
    });
    for (const value of ['v1=abc', 't=1800000000', 't=soon,v1=00', `t=${now},v1=${'0'.repeat(63)}`]) {
      assert.deepEqual(
        verifyRequest({ ...event, headers: { ...event.headers, [signatureHeader]: value } }, { secret, now: clock }),
        {
          ok: false,
          reason: `malformed ${signatureHeader} header: expected t=<unix seconds>,v1=<hex>`,
        },
        value,
      );
    }
  });

  it('accept any of several secrets (rotation), and any of several signatures', () => {
    assert.deepEqual(verifyRequest(signed(event, { secret: 'old' }), { secret: ['new', 'old'], now: clock }), {
      ok: true,
    });
    const both = `${signRequest('old', event, now)},v1=${signRequest('new', event, now).split('v1=')[1] ?? ''}`;
    assert.deepEqual(
      verifyRequest(
        { ...event, headers: { ...event.headers, [signatureHeader]: both } },
        { secret: 'new', now: clock },
      ),
      { ok: true },
    );
  });

  it('cannot be made with an empty secret', () => {
    assert.throws(() => signRequest('', event), TypeError);
  });
});

describe('the function host with signatures required', () => {
  const calls: ObjectKey[] = [];
  const definition: FunctionDefinition = {
    name: 'node-init',
    kinds: ['Node'],
    reconcileOne: (key, options) => {
      calls.push(key);
      return Promise.resolve({ function: 'node-init', dryRun: options.dryRun, objects: [] });
    },
    reconcileAll: (options) => Promise.resolve({ function: 'node-init', dryRun: options.dryRun, objects: [] }),
  };

  async function host(t: TestContext, bodyLimit?: number): Promise<FunctionApp> {
    const app = await buildApp(definition, {
      logger: silentLogger(),
      processMetrics: false,
      pressure: false,
      auth: { secret },
      ...(bodyLimit === undefined ? {} : { bodyLimit }),
    });
    t.after(() => app.close());
    return app;
  }

  function inject(app: FunctionApp, request: SignedRequest, url = '/'): Promise<LightMyRequestResponse> {
    const headers = Object.fromEntries(
      Object.entries(request.headers).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
    );
    return app.inject({
      method: 'POST',
      url,
      headers,
      body: typeof request.body === 'string' ? request.body : Buffer.from(request.body),
    });
  }

  it('answers 401 to an unsigned or badly signed event, before the function runs', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const unsigned = await inject(app, event);
    assert.equal(unsigned.statusCode, 401);
    assert.deepEqual(unsigned.json(), { error: `unauthorized: missing ${signatureHeader} header` });
    const wrong = await inject(app, signed(event, { secret: 'guess' }));
    assert.equal(wrong.statusCode, 401);
    const malformedAndUnsigned = await inject(app, { headers: event.headers, body: '{not json' });
    assert.equal(malformedAndUnsigned.statusCode, 401, 'authentication comes before parsing');
    assert.deepEqual(calls, []);
  });

  it('accepts a signed event and a signed manual reconcile', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const accepted = await inject(app, signed(event, { at: Math.floor(Date.now() / 1000) }));
    assert.equal(accepted.statusCode, 202, accepted.body);
    const manual: SignedRequest = { headers: { 'content-type': 'application/json' }, body: '{"name":"worker-2"}' };
    const reconciled = await inject(app, signed(manual, { at: Math.floor(Date.now() / 1000) }), '/reconcile');
    assert.equal(reconciled.statusCode, 200, reconciled.body);
    assert.deepEqual(calls, [
      { kind: 'Node', name: 'worker-1' },
      { kind: 'Node', name: 'worker-2' },
    ]);
  });

  it('keeps the probes and /metrics open', async (t) => {
    const app = await host(t);
    for (const url of ['/healthz', '/readyz', '/metrics'])
      assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url);
    await inject(app, event);
    assert.match(
      (await app.inject({ method: 'GET', url: '/metrics' })).body,
      /cirrus_reconcile_requests_total\{function="node-init",trigger="unknown",code="401"\} 1/,
    );
  });

  it('answers 400 to a body over the limit', async (t) => {
    const app = await host(t, 64);
    const large: SignedRequest = {
      headers: event.headers,
      body: JSON.stringify({ metadata: { name: 'x'.repeat(100) } }),
    };
    const response = await inject(app, signed(large, { at: Math.floor(Date.now() / 1000) }));
    assert.equal(response.statusCode, 400);
  });
});
