// Issue 38, finding 1, over real sockets: outside the reconcile routes no listener reads a body
// before answering. Every other path, and every method but GET on the probes, is answered at once
// (404, or 400 for a body on a route that takes none) with the connection closed, while the client
// has sent its headers and a few bytes of a large body; nothing waits for the rest. A client that
// aborts its request writes no ERROR line and is counted in cirrus_http_requests_aborted_total.
// The reconcile routes' own checks (signature before body) are test/shared/slow-clients.test.ts's.

import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { describe, it, type TestContext } from 'node:test';
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import { buildApp, type AppOptions } from '../../shared/host/app.ts';
import { noopDefinition } from '../harness/builders.ts';
import { buildProbeApp, type HostApp } from '../../shared/host/probes.ts';
import { serve } from '../../shared/host/serve.ts';
import { signatureHeader, signRequest } from '../../shared/wire/signing.ts';

const secret = 'unsigned-bodies secret';

const definition = noopDefinition('node-init');

// A logger whose lines the test reads back (JSON, one per line).
function recordingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done): void {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

async function listen(t: TestContext, app: HostApp): Promise<{ host: string; port: number }> {
  const stop = new AbortController();
  const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal, graceMs: 100 });
  t.after(async () => {
    stop.abort();
    await server.closed;
  });
  const url = new URL(server.address);
  return { host: url.hostname, port: Number(url.port) };
}

interface Answer {
  /** The status line's code, or undefined when the server sent nothing before the wait ended. */
  readonly status: number | undefined;
  /** Whether the server ended the connection (it will not read the rest of the body). */
  readonly closed: boolean;
  readonly head: string;
}

// Sends a request's headers declaring a 900 KiB body (Content-Length, or chunked when `chunked`:
// under every listener's old limit, so that the old server waited for it), then 16 KiB of it, and
// waits up to 3 s for the answer and the close.
async function sendLargeBody(
  address: { host: string; port: number },
  request: { method: string; path: string; headers?: Record<string, string>; chunked?: boolean },
): Promise<Answer> {
  const declared = 900 * 1024;
  const sent = 16 * 1024;
  const waitMs = 3000;
  const socket = connect(address.port, address.host);
  let received = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('error', () => {
    closed = true;
  });
  const ended = new Promise<void>((resolve) => {
    socket.on('close', () => {
      closed = true;
      resolve();
    });
  });
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const headers = {
    host: `${address.host}:${address.port}`,
    'content-type': 'application/json',
    ...(request.chunked === true ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(declared) }),
    ...request.headers,
  };
  const head = `${request.method} ${request.path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}\r\n`;
  const bytes = Buffer.alloc(sent, 0x61);
  socket.write(head);
  socket.write(request.chunked === true ? `${sent.toString(16)}\r\n${bytes.toString('latin1')}\r\n` : bytes);
  await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, waitMs))]);
  socket.destroy();
  const status = /^HTTP\/1\.1 (\d{3})/.exec(received)?.[1];
  return {
    status: status === undefined ? undefined : Number(status),
    closed,
    head: received.split('\r\n\r\n')[0] ?? '',
  };
}

// The requests that are neither a reconcile route nor a probe's GET, each with a large body.
const strangers: ReadonlyArray<{ method: string; path: string; status: number; chunked?: boolean }> = [
  { method: 'POST', path: '/nowhere', status: 404 },
  { method: 'PUT', path: '/nowhere', status: 404, chunked: true },
  { method: 'POST', path: '/healthz', status: 404 },
  { method: 'PUT', path: '/readyz', status: 404 },
  { method: 'DELETE', path: '/metrics', status: 404 },
  { method: 'PATCH', path: '/metrics', status: 404, chunked: true },
  { method: 'POST', path: '/reconcile/more', status: 404 },
  { method: 'PROPFIND', path: '/', status: 404 },
  // Routes that exist but take no body: the probes' GETs, and OPTIONS / (the webhook handshake).
  { method: 'GET', path: '/healthz', status: 400 },
  { method: 'GET', path: '/metrics', status: 400, chunked: true },
  { method: 'OPTIONS', path: '/', status: 400 },
];

async function functionApp(options: Partial<AppOptions> = {}): Promise<HostApp> {
  return buildApp(definition, { logger: pino({ level: 'silent' }), processMetrics: false, ...options });
}

describe('unsigned bodies outside the reconcile routes', { timeout: 120_000 }, () => {
  for (const [listener, build] of [
    ['a function app with a signing secret (cirrus serve)', () => functionApp({ auth: { secret } })],
    ['a function app without a secret (ApiServerSource wiring)', () => functionApp()],
    [
      "a probe app (cirrus start's port, the relay's)",
      () => buildProbeApp({ logger: pino({ level: 'silent' }), registry: new Registry() }),
    ],
  ] as const) {
    it(`${listener}: every other path and method is answered before the body, the connection closed`, async (t) => {
      const address = await listen(t, await build());
      for (const request of strangers) {
        // The probe app has no OPTIONS / route: a 404 there.
        const expected = listener.startsWith('a probe app') && request.method === 'OPTIONS' ? 404 : request.status;
        const answer = await sendLargeBody(address, request);
        const what = `${request.method} ${request.path}${request.chunked === true ? ' (chunked)' : ''}`;
        assert.equal(answer.status, expected, `${what}: answered ${String(answer.status)} (${answer.head})`);
        assert.ok(answer.closed, `${what}: the connection stays open, reading the body`);
        assert.match(answer.head, /connection: close/i, `${what}: not answered Connection: close`);
      }
    });
  }

  it('64 clients each announcing 900 KiB to an unknown path hold no memory and no connection', async (t) => {
    const address = await listen(t, await functionApp({ auth: { secret } }));
    const answers = await Promise.all(
      Array.from({ length: 64 }, () => sendLargeBody(address, { method: 'POST', path: '/nowhere' })),
    );
    assert.deepEqual(
      answers.map((a) => [a.status, a.closed]),
      answers.map(() => [404, true]),
    );
  });

  it('the probes still answer a GET without a body, and keep the connection', async (t) => {
    const address = await listen(t, await functionApp({ auth: { secret } }));
    const response = await fetch(`http://${address.host}:${address.port}/healthz`);
    assert.equal(response.status, 200);
    assert.notEqual(response.headers.get('connection'), 'close');
    const options = await fetch(`http://${address.host}:${address.port}/`, { method: 'OPTIONS' });
    assert.equal(options.status, 204);
  });

  it('a signed reconcile request whose client aborts mid-body writes no ERROR line and is counted', async (t) => {
    const { logger, lines } = recordingLogger();
    const registry = new Registry();
    const address = await listen(t, await functionApp({ auth: { secret }, logger, registry }));
    const body = JSON.stringify({ all: true, padding: 'x'.repeat(100_000) });
    const headers = { 'content-type': 'application/json' };
    const signature = signRequest(secret, { method: 'POST', url: '/reconcile', headers, body });
    const socket = connect(address.port, address.host);
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /reconcile HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${signatureHeader}: ${signature}\r\n\r\n`,
    );
    socket.write(body.slice(0, 1000));
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const errors = lines.filter((line) => line['level'] === 50);
    assert.deepEqual(errors, [], 'an ERROR line for a client that went away');
    const aborted = await registry.getSingleMetric('cirrus_http_requests_aborted_total')?.get();
    assert.equal(
      aborted?.values.reduce((sum, value) => sum + value.value, 0),
      1,
    );
  });

  it('an unsigned request aborting mid-body (no secret) writes no ERROR line and is counted', async (t) => {
    const { logger, lines } = recordingLogger();
    const registry = new Registry();
    const address = await listen(t, await functionApp({ logger, registry }));
    for (let i = 0; i < 8; i += 1) {
      const socket = connect(address.port, address.host);
      await new Promise<void>((resolve) => socket.once('connect', resolve));
      socket.write(
        'POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"a":',
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      socket.destroy();
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(
      lines.filter((line) => line['level'] === 50),
      [],
      'an ERROR line for a client that went away',
    );
    const aborted = await registry.getSingleMetric('cirrus_http_requests_aborted_total')?.get();
    assert.equal(
      aborted?.values.reduce((sum, value) => sum + value.value, 0),
      8,
    );
  });
});
