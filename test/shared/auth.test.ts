// Request signing (shared/wire/signing.ts) and its check in the function host: what a signature
// covers (method, path, query, headers, body), when it is refused, and that the host answers 401
// to a request without a well-formed, fresh signature before reading its body.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { buildApp, buildMultiApp, type FunctionApp } from '../../shared/host/app.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions } from '../../shared/host/function.ts';
import { serve } from '../../shared/host/serve.ts';
import {
  canonicalQuery,
  checkSignatureHeader,
  maxEventBytes,
  queryParameters,
  signatureHeader,
  signRequest,
  verifyRequest,
  type SignedRequest,
} from '../../shared/wire/signing.ts';
import { silentLogger } from '../harness/builders.ts';
import { answerWithoutBody } from '../harness/http.ts';

const secret = 'a shared secret';
const now = 1_800_000_000;
const clock = (): number => now;

const event: SignedRequest = {
  method: 'POST',
  url: '/',
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

const refused = { ok: false, reason: 'signature does not match' };

describe('request signatures', () => {
  it('verify with the secret they were made with, as scheme v3', () => {
    const request = signed(event);
    assert.match(String(request.headers[signatureHeader]), /^t=1800000000,v3=[0-9a-f]{64}$/);
    assert.deepEqual(verifyRequest(request, { secret, now: clock }), { ok: true });
  });

  it('fail for another secret, a changed body, a changed attribute, an added attribute', () => {
    const request = signed(event);
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

  it("cover every ce- header, the contract's extensions included, whatever the case of its name", () => {
    const request = signed({ ...event, headers: { ...event.headers, 'ce-cirrusnodeset': 'abc' } });
    for (const [name, value] of [
      ['ce-cirrusnodeset', 'abd'],
      ['ce-cirrustarget', 'routes'],
      ['ce-anything', ''],
      ['content-type', 'application/cloudevents+json'],
    ] as const) {
      assert.deepEqual(
        verifyRequest({ ...request, headers: { ...request.headers, [name]: value } }, { secret, now: clock }),
        refused,
        name,
      );
    }
    const { 'ce-cirrusnodeset': removed, ...without } = request.headers;
    assert.equal(removed, 'abc');
    assert.deepEqual(verifyRequest({ ...request, headers: without }, { secret, now: clock }), refused);
    // Header names are case-insensitive: a signer's `Ce-Id` is a server's `ce-id`.
    const mixed = { ...event, headers: { 'Content-Type': 'application/json', 'Ce-Id': 'e1', 'x-other': '1' } };
    const lower = { ...event, headers: { 'content-type': 'application/json', 'ce-id': 'e1', 'x-else': '2' } };
    assert.deepEqual(verifyRequest(signed(lower), { secret, now: clock }), { ok: true });
    assert.equal(signRequest(secret, mixed, now), signRequest(secret, lower, now));
  });

  it('cover the method, the path and the query', () => {
    const request = signed({ ...event, url: '/node-init/reconcile?dryRun=true' });
    assert.deepEqual(verifyRequest(request, { secret, now: clock }), { ok: true });
    for (const url of [
      '/node-init/reconcile?dryRun=false',
      '/node-init/reconcile',
      '/node-init/reconcile?dryRun=true&dryRun=false',
      '/node-init/reconcile?dryRun=true&dryrun=false',
      '/routes/reconcile?dryRun=true',
      '/reconcile?dryRun=true',
      '/node-init/?dryRun=true',
    ])
      assert.deepEqual(verifyRequest({ ...request, url }, { secret, now: clock }), refused, url);
    assert.deepEqual(verifyRequest({ ...request, method: 'PUT' }, { secret, now: clock }), refused);
    assert.deepEqual(verifyRequest({ ...request, method: 'post' }, { secret, now: clock }), { ok: true });
  });

  it('cover the query in a canonical form: order and encoding of the parameters do not matter, their values do', () => {
    const request = signed({ ...event, url: '/reconcile?b=x%20y&a=1' });
    for (const url of ['/reconcile?a=1&b=x%20y', '/reconcile?a=%31&b=x+y', '/reconcile?&a=1&&b=x%20y&'])
      assert.deepEqual(verifyRequest({ ...request, url }, { secret, now: clock }), { ok: true }, url);
    assert.deepEqual(verifyRequest({ ...request, url: '/reconcile?a=1&b=x%2By' }, { secret, now: clock }), refused);
    assert.equal(canonicalQuery('/r?b=x%20y&a=1&c'), 'a=1&b=x%20y&c=');
    assert.equal(canonicalQuery("/r?q=it's(*)!~"), 'q=it%27s%28%2A%29%21~');
    assert.equal(canonicalQuery('/r'), '');
    assert.deepEqual(queryParameters('/r?dryRun[]=true&x=%zz&=v'), [
      { name: 'dryRun[]', value: 'true' },
      { name: 'x', value: '%zz' },
      { name: '', value: 'v' },
    ]);
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
    for (const value of ['v3=abc', 't=1800000000', 't=soon,v3=00', `t=${now},v3=${'0'.repeat(63)}`]) {
      assert.deepEqual(
        verifyRequest({ ...event, headers: { ...event.headers, [signatureHeader]: value } }, { secret, now: clock }),
        {
          ok: false,
          reason: `malformed ${signatureHeader} header: expected t=<unix seconds>,v3=<hex>`,
        },
        value,
      );
    }
  });

  for (const old of ['v1', 'v2']) {
    it(`of the old scheme ${old} are refused, saying so, rather than failing to match`, () => {
      const signature = signRequest(secret, event, now).replace(',v3=', `,${old}=`);
      const expected = {
        ok: false,
        reason: `${signatureHeader} is signature scheme ${old}, which is no longer accepted: sign with v3, which covers the method, path, query and every ce- header (ADR 0007)`,
      };
      const request = { ...event, headers: { ...event.headers, [signatureHeader]: signature } };
      assert.deepEqual(verifyRequest(request, { secret, now: clock }), expected);
      assert.deepEqual(checkSignatureHeader(request.headers, { secret, now: clock }), expected);
    });
  }

  it('are checked without the body for form and freshness only', () => {
    const forged = { [signatureHeader]: `t=${now},v3=${'0'.repeat(64)}` };
    assert.deepEqual(checkSignatureHeader(forged, { secret, now: clock }), { ok: true });
    assert.deepEqual(checkSignatureHeader({}, { secret, now: clock }), {
      ok: false,
      reason: `missing ${signatureHeader} header`,
    });
    assert.equal(checkSignatureHeader(forged, { secret, now: () => now + 301 }).ok, false);
  });

  it('accept any of several secrets (rotation), and any of several signatures', () => {
    assert.deepEqual(verifyRequest(signed(event, { secret: 'old' }), { secret: ['new', 'old'], now: clock }), {
      ok: true,
    });
    const both = `${signRequest('old', event, now)},v3=${signRequest('new', event, now).split('v3=')[1] ?? ''}`;
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

  it('agree with the relay on the largest body: 3 MiB (the API server) and 64 KiB of envelope', () => {
    assert.equal(maxEventBytes, 3 * 1024 * 1024 + 64 * 1024);
  });
});

describe('the function host with signatures required', () => {
  const calls: { key: ObjectKey | 'all'; dryRun: boolean }[] = [];
  const reconcile = (key: ObjectKey | 'all', options: ReconcileOptions) => {
    calls.push({ key, dryRun: options.dryRun });
    return Promise.resolve({ function: 'node-init', dryRun: options.dryRun, objects: [] });
  };
  const definition: FunctionDefinition = {
    name: 'node-init',
    kinds: ['Node'],
    reconcileOne: (key, options) => reconcile(key, options),
    reconcileAll: (options) => reconcile('all', options),
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

  // Sends `request` as it is: its method, URL, headers and body.
  function inject(app: FunctionApp, request: SignedRequest): Promise<LightMyRequestResponse> {
    const headers = Object.fromEntries(
      Object.entries(request.headers).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
    );
    return app.inject({
      method: request.method as 'POST',
      url: request.url,
      headers,
      body: typeof request.body === 'string' ? request.body : Buffer.from(request.body),
    });
  }

  const fresh = (): { at: number } => ({ at: Math.floor(Date.now() / 1000) });
  const manual = (url: string, body = '{"name":"worker-2"}'): SignedRequest => ({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json' },
    body,
  });

  it('answers 401 to an unsigned or badly signed event, before the function runs', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const unsigned = await inject(app, event);
    assert.equal(unsigned.statusCode, 401);
    assert.deepEqual(unsigned.json(), { error: `unauthorized: missing ${signatureHeader} header` });
    const wrong = await inject(app, signed(event, { secret: 'guess', ...fresh() }));
    assert.equal(wrong.statusCode, 401);
    assert.deepEqual(wrong.json(), { error: 'unauthorized: signature does not match' });
    const malformedAndUnsigned = await inject(app, { ...event, body: '{not json' });
    assert.equal(malformedAndUnsigned.statusCode, 401, 'authentication comes before parsing');
    assert.deepEqual(calls, []);
  });

  it('accepts a signed event and a signed manual reconcile', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const accepted = await inject(app, signed(event, fresh()));
    assert.equal(accepted.statusCode, 202, accepted.body);
    const reconciled = await inject(app, signed(manual('/reconcile'), fresh()));
    assert.equal(reconciled.statusCode, 200, reconciled.body);
    assert.deepEqual(calls, [
      { key: { kind: 'Node', name: 'worker-1' }, dryRun: false },
      { key: { kind: 'Node', name: 'worker-2' }, dryRun: false },
    ]);
  });

  it('answers 401 to a query outside the signature: signed ?dryRun=true, sent ?dryRun=false', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const dry = signed(manual('/reconcile?dryRun=true'), fresh());
    const replayed = await inject(app, { ...dry, url: '/reconcile?dryRun=false' });
    assert.equal(replayed.statusCode, 401, replayed.body);
    assert.deepEqual(replayed.json(), { error: 'unauthorized: signature does not match' });
    const dropped = await inject(app, { ...dry, url: '/reconcile' });
    assert.equal(dropped.statusCode, 401, 'nor without it');
    const event202 = signed({ ...event, url: '/?dryRun=true' }, fresh());
    assert.equal((await inject(app, { ...event202, url: '/?dryRun=false' })).statusCode, 401, 'POST / too');
    assert.deepEqual(calls, [], 'nothing ran, nothing was written');
    const honest = await inject(app, dry);
    assert.equal(honest.statusCode, 200, honest.body);
    assert.deepEqual(calls, [{ key: { kind: 'Node', name: 'worker-2' }, dryRun: true }]);
  });

  it('answers 401 to a signature for another route (the path is signed)', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const toAll = signed(manual('/', ''), fresh());
    const moved = await inject(app, { ...toAll, url: '/reconcile' });
    assert.equal(moved.statusCode, 401);
    assert.deepEqual(calls, []);
  });

  it('under `cirrus start`, verifies the path it received, with the function prefix', async (t) => {
    const app = await buildMultiApp([definition, { ...definition, name: 'routes' }], {
      logger: silentLogger(),
      processMetrics: false,
      pressure: false,
      auth: { secret },
    });
    t.after(() => app.close());
    calls.length = 0;
    const request = signed(manual('/node-init/reconcile?dryRun=true'), fresh());
    const response = await inject(app, request);
    assert.equal(response.statusCode, 200, response.body);
    assert.equal((await inject(app, { ...request, url: '/routes/reconcile?dryRun=true' })).statusCode, 401);
    const unprefixed = signed(manual('/reconcile?dryRun=true'), fresh());
    assert.equal((await inject(app, { ...unprefixed, url: '/node-init/reconcile?dryRun=true' })).statusCode, 401);
    assert.equal(calls.length, 1);
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
    const large: SignedRequest = { ...event, body: JSON.stringify({ metadata: { name: 'x'.repeat(100) } }) };
    const response = await inject(app, signed(large, fresh()));
    assert.equal(response.statusCode, 400);
  });

  describe('over a socket', { timeout: 20_000 }, () => {
    async function listening(t: TestContext, bodyLimit?: number): Promise<number> {
      const app = await host(t, bodyLimit);
      const stop = new AbortController();
      const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal, graceMs: 100 });
      t.after(async () => {
        stop.abort();
        await server.closed;
      });
      return server.port;
    }

    const eventHeaders = Object.fromEntries(
      Object.entries(event.headers).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
    );

    it('answers 401 to an unsigned request with a large body before the body is sent, and closes the connection', async (t) => {
      const port = await listening(t);
      calls.length = 0;
      const reply = await answerWithoutBody(port, {
        path: '/',
        headers: eventHeaders,
        contentLength: maxEventBytes,
      });
      assert.equal(reply.status, 401);
      assert.deepEqual(JSON.parse(reply.body), { error: `unauthorized: missing ${signatureHeader} header` });
      assert.equal(reply.headers['connection'], 'close');
      assert.equal(reply.closedByServer, true, 'the rest of the body is never read');
      assert.deepEqual(calls, []);
    });

    it('answers 401 to a stale or old-scheme signature before the body is sent', async (t) => {
      const port = await listening(t);
      const stale = signRequest(secret, event, Math.floor(Date.now() / 1000) - 3600);
      for (const signature of [stale, signRequest(secret, event).replace(',v3=', ',v1=')]) {
        const reply = await answerWithoutBody(port, {
          path: '/',
          headers: { ...eventHeaders, [signatureHeader]: signature },
          contentLength: 1_000_000,
        });
        assert.equal(reply.status, 401, signature);
      }
    });

    it('reads the body of a request whose signature header looks right (the HMAC needs it)', async (t) => {
      const port = await listening(t);
      await assert.rejects(
        answerWithoutBody(
          port,
          { path: '/', headers: { ...eventHeaders, [signatureHeader]: signRequest(secret, event) }, contentLength: 10 },
          300,
        ),
        /the server waits for it/,
      );
    });

    it('answers 400 at once to a signed request announcing a body over the limit', async (t) => {
      const port = await listening(t, 1000);
      const reply = await answerWithoutBody(port, {
        path: '/',
        headers: { ...eventHeaders, [signatureHeader]: signRequest(secret, event) },
        contentLength: 1001,
      });
      assert.equal(reply.status, 400);
      assert.match(reply.body, /larger than 1000 bytes/);
      assert.equal(reply.closedByServer, true);
    });
  });
});
