// Request signing (shared/wire/signing.ts) and its check in the function host: what a signature
// covers (method, path, query, headers, the body's digest), when it is refused (with which code),
// that the host answers 401 to a request without a matching, fresh, first-seen signature before
// reading its body, and that a replay is refused.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { buildApp, buildMultiApp, type FunctionApp } from '../../shared/host/app.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions } from '../../shared/host/function.ts';
import { ReplayGuard } from '../../shared/host/replay.ts';
import { serve } from '../../shared/host/serve.ts';
import {
  canonicalQuery,
  bodyDigest,
  maxEventBytes,
  queryParameters,
  signatureHeader,
  signRequest,
  verifyRequest,
  verifySignatureHeader,
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

const nonce = '0123456789abcdef0123456789abcdef';

function signed(request: SignedRequest, options: { secret?: string; at?: number } = {}): SignedRequest {
  return {
    ...request,
    headers: {
      ...request.headers,
      [signatureHeader]: signRequest(options.secret ?? secret, request, options.at ?? now),
    },
  };
}

const refused = { ok: false, reason: 'signature does not match', code: 'CIRRUS_ERR_SIGNATURE_INVALID' };
const digestRefused = {
  ok: false,
  reason: 'the body does not have the digest its signature states',
  code: 'CIRRUS_ERR_BODY_DIGEST_MISMATCH',
};

describe('request signatures', () => {
  it('verify with the secret they were made with, as scheme v4 with a nonce and the body digest', () => {
    const request = signed(event);
    assert.match(
      String(request.headers[signatureHeader]),
      /^t=1800000000,n=[0-9a-f]{32},d=[0-9a-f]{64},v4=[0-9a-f]{64}$/,
    );
    assert.notEqual(signRequest(secret, event, now), signRequest(secret, event, now), 'a fresh nonce each time');
    assert.deepEqual(verifyRequest(request, { secret, now: clock }), { ok: true });
  });

  it('fail for another secret, a changed body, a changed attribute, an added attribute', () => {
    const request = signed(event);
    assert.deepEqual(verifyRequest(request, { secret: 'another', now: clock }), refused);
    assert.deepEqual(
      verifyRequest({ ...request, body: '{"metadata":{"name":"worker-2"}}' }, { secret, now: clock }),
      digestRefused,
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
    assert.equal(signRequest(secret, mixed, now, nonce), signRequest(secret, lower, now, nonce));
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

  it('are refused more than 30 s old, or more than 5 s ahead of the clock', () => {
    for (const at of [now - 31, now - 300])
      assert.deepEqual(verifyRequest(signed(event, { at }), { secret, now: clock }), {
        ok: false,
        reason: "signature timestamp is more than 30 s older than this server's clock",
        code: 'CIRRUS_ERR_SIGNATURE_EXPIRED',
      });
    for (const at of [now + 6, now + 30])
      assert.deepEqual(verifyRequest(signed(event, { at }), { secret, now: clock }), {
        ok: false,
        reason: "signature timestamp is more than 5 s ahead of this server's clock: check the clocks",
        code: 'CIRRUS_ERR_SIGNATURE_EXPIRED',
      });
    for (const at of [now - 30, now + 5])
      assert.deepEqual(verifyRequest(signed(event, { at }), { secret, now: clock }), { ok: true }, String(at));
    const wider = { secret, now: clock, clockSkewSeconds: 60, toleranceSeconds: 300 };
    assert.deepEqual(verifyRequest(signed(event, { at: now + 60 }), wider), { ok: true });
    assert.deepEqual(verifyRequest(signed(event, { at: now - 300 }), wider), { ok: true });
  });

  it('are refused when missing or malformed', () => {
    assert.deepEqual(verifyRequest(event, { secret, now: clock }), {
      ok: false,
      reason: `missing ${signatureHeader} header`,
      code: 'CIRRUS_ERR_SIGNATURE_MISSING',
    });
    const [d, h] = ['0'.repeat(64), '0'.repeat(64)];
    for (const value of [
      'v4=abc',
      't=1800000000',
      't=soon,v4=00',
      `t=${now},n=${nonce},d=${d},v4=${'0'.repeat(63)}`,
      `t=${now},d=${d},v4=${h}`,
      `t=${now},n=${nonce},v4=${h}`,
      `t=${now},n=${nonce.slice(1)},d=${d},v4=${h}`,
    ]) {
      assert.deepEqual(
        verifyRequest({ ...event, headers: { ...event.headers, [signatureHeader]: value } }, { secret, now: clock }),
        {
          ok: false,
          reason: `malformed ${signatureHeader} header: expected t=<unix seconds>,n=<32 hex>,d=<64 hex>,v4=<64 hex>`,
          code: 'CIRRUS_ERR_SIGNATURE_INVALID',
        },
        value,
      );
    }
  });

  for (const old of ['v1', 'v2', 'v3']) {
    it(`of the old scheme ${old} are refused, saying so, rather than failing to match`, () => {
      const signature = `t=${now},${old}=${'a'.repeat(64)}`;
      const expected = {
        ok: false,
        reason: `${signatureHeader} is signature scheme ${old}, which is no longer accepted: sign with v4, which covers the method, path, query, every ce- header and the body's digest (docs/http-contract.md)`,
        code: 'CIRRUS_ERR_SIGNATURE_INVALID',
      };
      const request = { ...event, headers: { ...event.headers, [signatureHeader]: signature } };
      assert.deepEqual(verifyRequest(request, { secret, now: clock }), expected);
      assert.deepEqual(verifySignatureHeader(request, { secret, now: clock }), expected);
    });
  }

  it('are verified from the headers alone: a forged HMAC is refused without the body', () => {
    const forged = {
      ...event,
      headers: { [signatureHeader]: `t=${now},n=${nonce},d=${'0'.repeat(64)},v4=${'0'.repeat(64)}` },
    };
    assert.deepEqual(verifySignatureHeader(forged, { secret, now: clock }), refused);
    const genuine = signed(event);
    const header = verifySignatureHeader({ ...genuine, body: 'not read' } as SignedRequest, { secret, now: clock });
    assert.ok(header.ok);
    assert.equal(header.bodyDigest, bodyDigest(event.body));
    assert.equal(header.timestamp, now);
    assert.match(header.id, /^[0-9a-f]{64}$/);
    assert.equal(String(genuine.headers[signatureHeader]).endsWith(`v4=${header.id}`), true, 'the id is the HMAC');
  });

  it('accept any of several secrets (rotation), and any of several signatures', () => {
    assert.deepEqual(verifyRequest(signed(event, { secret: 'old' }), { secret: ['new', 'old'], now: clock }), {
      ok: true,
    });
    const both = `${signRequest('old', event, now, nonce)},v4=${signRequest('new', event, now, nonce).split('v4=')[1] ?? ''}`;
    assert.deepEqual(
      verifyRequest(
        { ...event, headers: { ...event.headers, [signatureHeader]: both } },
        { secret: 'new', now: clock },
      ),
      { ok: true },
    );
  });

  it('cannot be made with an empty secret or a malformed nonce', () => {
    assert.throws(() => signRequest('', event), TypeError);
    assert.throws(() => signRequest(secret, event, now, 'short'), TypeError);
  });

  it('agree with the relay on the largest body: 3 MiB (the API server) and 64 KiB of envelope', () => {
    assert.equal(maxEventBytes, 3 * 1024 * 1024 + 64 * 1024);
  });
});

describe('the replay guard', () => {
  it('remembers an id until its timestamp is past the tolerance, and forgets it then', () => {
    let clockNow = now;
    const guard = new ReplayGuard({ toleranceSeconds: 300, now: () => clockNow });
    assert.equal(guard.accept('a', now), true);
    assert.equal(guard.accept('a', now), false);
    assert.equal(guard.accept('b', now + 10), true);
    clockNow = now + 300;
    assert.equal(guard.accept('a', now), false, 'still within the tolerance');
    clockNow = now + 301;
    assert.equal(guard.accept('c', now + 301), true);
    assert.equal(guard.size, 2, 'a expired and was swept; b and c remain');
    clockNow = now + 400;
    assert.equal(guard.accept('d', now + 400), true);
    assert.equal(guard.size, 2, 'b swept too');
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
    assert.deepEqual(unsigned.json(), {
      error: `unauthorized: missing ${signatureHeader} header`,
      code: 'CIRRUS_ERR_SIGNATURE_MISSING',
    });
    const wrong = await inject(app, signed(event, { secret: 'guess', ...fresh() }));
    assert.equal(wrong.statusCode, 401);
    assert.deepEqual(wrong.json(), {
      error: 'unauthorized: signature does not match',
      code: 'CIRRUS_ERR_SIGNATURE_INVALID',
    });
    const request = signed(event, fresh());
    const swapped = await inject(app, { ...request, body: '{"metadata":{"name":"worker-9"}}' });
    assert.equal(swapped.statusCode, 401);
    assert.equal(swapped.json<{ code: string }>().code, 'CIRRUS_ERR_BODY_DIGEST_MISMATCH');
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

  it('accepts a signed request once: a replay is answered 401 and runs nothing', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const all = signed(manual('/reconcile', '{"all":true}'), fresh());
    const first = await inject(app, all);
    assert.equal(first.statusCode, 200, first.body);
    for (let i = 0; i < 2; i += 1) {
      const again = await inject(app, all);
      assert.equal(again.statusCode, 401);
      assert.deepEqual(again.json(), {
        error: 'unauthorized: this signature has been accepted before: a replay',
        code: 'CIRRUS_ERR_SIGNATURE_REPLAYED',
      });
    }
    const event1 = signed(event, fresh());
    assert.equal((await inject(app, event1)).statusCode, 202);
    assert.equal((await inject(app, event1)).statusCode, 401, 'events too');
    const resigned = signed(manual('/reconcile', '{"all":true}'), fresh());
    assert.equal((await inject(app, resigned)).statusCode, 200, 'the same request signed again is a new one');
    assert.deepEqual(calls, [
      { key: 'all', dryRun: false },
      { key: { kind: 'Node', name: 'worker-1' }, dryRun: false },
      { key: 'all', dryRun: false },
    ]);
  });

  it('lets a captured request through another instance only within its 30 s (ADR 0027)', async (t) => {
    // Each instance (a replica, the same process restarted, another Lambda sandbox) has a replay
    // guard of its own: what bounds a replay across them is the signature's lifetime.
    let clockNow = now;
    const instance = async (): Promise<FunctionApp> => {
      const app = await buildApp(definition, {
        logger: silentLogger(),
        processMetrics: false,
        pressure: false,
        auth: { secret, now: () => clockNow },
      });
      t.after(() => app.close());
      return app;
    };
    calls.length = 0;
    const captured = signed(manual('/reconcile', '{"all":true}'), { at: now });
    assert.equal((await inject(await instance(), captured)).statusCode, 200, 'the request itself');
    clockNow = now + 30;
    assert.equal((await inject(await instance(), captured)).statusCode, 200, 'a replay to a replica, 30 s on');
    clockNow = now + 31;
    const late = await inject(await instance(), captured);
    assert.equal(late.statusCode, 401, 'a replay to a third instance, 31 s on');
    assert.deepEqual(late.json(), {
      error: "unauthorized: signature timestamp is more than 30 s older than this server's clock",
      code: 'CIRRUS_ERR_SIGNATURE_EXPIRED',
    });
    assert.equal(calls.length, 2);
  });

  it('answers 401 to a query outside the signature: signed ?dryRun=true, sent ?dryRun=false', async (t) => {
    const app = await host(t);
    calls.length = 0;
    const dry = signed(manual('/reconcile?dryRun=true'), fresh());
    const replayed = await inject(app, { ...dry, url: '/reconcile?dryRun=false' });
    assert.equal(replayed.statusCode, 401, replayed.body);
    assert.deepEqual(replayed.json(), {
      error: 'unauthorized: signature does not match',
      code: 'CIRRUS_ERR_SIGNATURE_INVALID',
    });
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
      assert.deepEqual(JSON.parse(reply.body), {
        error: `unauthorized: missing ${signatureHeader} header`,
        code: 'CIRRUS_ERR_SIGNATURE_MISSING',
      });
      assert.equal(reply.headers['connection'], 'close');
      assert.equal(reply.closedByServer, true, 'the rest of the body is never read');
      assert.deepEqual(calls, []);
    });

    it('answers 401 to a stale or old-scheme signature before the body is sent', async (t) => {
      const port = await listening(t);
      const stale = signRequest(secret, event, Math.floor(Date.now() / 1000) - 3600);
      for (const signature of [stale, signRequest(secret, event).replace(',v4=', ',v3=')]) {
        const reply = await answerWithoutBody(port, {
          path: '/',
          headers: { ...eventHeaders, [signatureHeader]: signature },
          contentLength: 1_000_000,
        });
        assert.equal(reply.status, 401, signature);
      }
    });

    it('answers 401 before the body to a well-formed, fresh signature header whose HMAC does not match', async (t) => {
      const port = await listening(t);
      const forged = `t=${Math.floor(Date.now() / 1000)},n=${nonce},d=${'0'.repeat(64)},v4=${'0'.repeat(64)}`;
      const reply = await answerWithoutBody(port, {
        path: '/',
        headers: { ...eventHeaders, [signatureHeader]: forged },
        contentLength: 100_000,
      });
      assert.equal(reply.status, 401);
      assert.equal((JSON.parse(reply.body) as { code?: string }).code, 'CIRRUS_ERR_SIGNATURE_INVALID');
      assert.equal(reply.closedByServer, true, 'the rest of the body is never read');
    });

    it('reads the body of a request whose signature header verifies (the body must match its digest)', async (t) => {
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
