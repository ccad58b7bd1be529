// The Fastify instance every cirrus process serves, and its probes: `GET /healthz`, `GET /readyz`
// and `GET /metrics`, for a function's app (./app.ts) and for the relay alike. The kubelet (or
// Knative's queue-proxy) probes every few seconds and Prometheus scrapes; none of it is logged.
// The server's deadlines live here too: a client that sends its request slowly is cut off.

import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import fastify, { LogController } from 'fastify';
import type { Logger } from 'pino';
import { Registry, type Counter } from 'prom-client';
import type { HostApp } from './app-type.ts';
import { addBodyGuard, noteClientGone, outsideBodyLimit } from './body.ts';
import { errorBody, errorReply, statusOf, type ErrorCode } from './errors.ts';
import { abortedRequests } from './metrics.ts';

export type { HostApp } from './app-type.ts';

/** What `GET /readyz` answers: 200 with `body` when `ready`, else 503 with it. */
export interface Readiness {
  readonly ready: boolean;
  readonly body: Readonly<Record<string, unknown>>;
}

/** What the probe routes serve. */
export interface ProbeOptions {
  /** Scraped at `GET /metrics`. */
  readonly registry: Registry;
  /**
   * Asked at each `GET /readyz`. Default: always ready, `{ status: 'ready' }`. Either way the app
   * answers 503 once it is closing, before any handler runs.
   */
  readonly readiness?: (() => Readiness) | undefined;
}

const alwaysReady: Readiness = { ready: true, body: { status: 'ready' } };

/**
 * Adds `GET /healthz` (200 `{ status: 'ok' }` while the process serves), `GET /readyz` (see
 * {@link ProbeOptions.readiness}) and `GET /metrics` (the registry in Prometheus' text format).
 */
export function addProbeRoutes(app: HostApp, options: ProbeOptions): void {
  const readiness = options.readiness ?? ((): Readiness => alwaysReady);
  app.get('/healthz', () => ({ status: 'ok' }));
  app.get('/readyz', (_request, reply) => {
    const { ready, body } = readiness();
    return reply.code(ready ? 200 : 503).send(body);
  });
  app.get('/metrics', async (_request, reply) => {
    const text = await options.registry.metrics();
    return reply.type(options.registry.contentType).send(text);
  });
}

/**
 * A ready, not listening, app with only the probe routes (serve it with ./serve.ts): for a process
 * whose work is not request-driven, such as the relay.
 */
export async function buildProbeApp(options: ProbeOptions & { readonly logger: Logger }): Promise<HostApp> {
  const app = createHostApp({ logger: options.logger, registry: options.registry });
  addProbeRoutes(app, options);
  await app.ready();
  return app;
}

/** How {@link createHostApp} configures Fastify. */
export interface HostAppOptions {
  /** Where the app logs. */
  readonly logger: Logger;
  /**
   * Largest request body in bytes outside routes that set their own; default 64 KiB
   * (./body.ts `outsideBodyLimit`). No route there reads a body: ./body.ts `addBodyGuard`
   * answers a request that brings one before reading it.
   */
  readonly bodyLimit?: number | undefined;
  /** Where `cirrus_http_requests_aborted_total` is counted (default a registry of its own). */
  readonly registry?: Registry | undefined;
  /** The deadline on a request's headers and body, in ms; default {@link defaultRequestTimeoutMs}. */
  readonly requestTimeoutMs?: number | undefined;
}

/**
 * The deadline on receiving a request, headers and body, from its first byte: 30 s. The largest
 * event (maxEventBytes, 3 MiB + 64 KiB) takes under a second on any network a relay delivers
 * over; a client slower than about 100 KiB/s is cut off with a 408 and its connection closed, so
 * that a request dribbling its body holds its place at most this long. The reconcile that follows
 * is not under this deadline (the sender's own timeout bounds it).
 */
export const defaultRequestTimeoutMs = 30_000;

/** The deadline on a request's headers alone: 10 s, or the request deadline if that is shorter. */
export const defaultHeadersTimeoutMs = 10_000;

/**
 * The Fastify instance, without routes, that every app of the host starts from: quiet request
 * logging, its own request ids, a body read only by routes that say they take one (./body.ts),
 * 503 for requests that arrive while closing (and idle connections closed then), clients that go
 * away counted rather than logged as errors, and no JSON schema compilers.
 */
export function createHostApp(options: HostAppOptions): HostApp {
  const requestTimeout = options.requestTimeoutMs ?? defaultRequestTimeoutMs;
  const app = fastify({
    loggerInstance: options.logger,
    logController: new QuietLogController(),
    // Our own id, not the `ce-id` header (or X-Request-Id): the sender controls those, retries of
    // one event share its id, and structured mode has no such header. The event id is logged
    // as `ceId` next to this one.
    genReqId: () => randomUUID(),
    bodyLimit: options.bodyLimit ?? outsideBodyLimit,
    // Node checks the deadlines every connectionsCheckingInterval (30 s by default, which would
    // let a slow client keep its place up to twice the deadline): once a second.
    requestTimeout,
    http: {
      requestTimeout,
      headersTimeout: Math.min(defaultHeadersTimeoutMs, requestTimeout),
      connectionsCheckingInterval: Math.min(1000, requestTimeout),
    },
    clientErrorHandler,
    // Our own 503 while closing (addClosingHooks), which carries a code.
    return503OnClosing: false,
    // The routes validate with zod and have no JSON schemas. Left to itself, Fastify loads Ajv and
    // fast-json-stringify at construction anyway: 35-85 ms and 8 MB of a cold start (measured).
    schemaController: { compilersFactory: { buildValidator: noSchemas, buildSerializer: noSchemas } },
  });
  addBodyGuard(app);
  addClosingHooks(app);
  addErrorReplies(app, abortedRequests(options.registry ?? new Registry()));
  return app;
}

// Fastify's own 404s and errors outside the reconcile routes (which have their own handler, with
// the same table) carry a code like every other error reply.
function addErrorReplies(app: HostApp, aborted: Counter): void {
  app.setNotFoundHandler((request, reply) =>
    reply
      .code(404)
      .send(errorBody('CIRRUS_ERR_NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`)),
  );
  app.setErrorHandler((error, request, reply) => {
    if (noteClientGone(error, request, aborted)) return reply.code(400).send();
    const { status, body, level } = errorReply(error);
    request.log[level]({ err: error, code: status, errorCode: body.code }, 'request failed');
    return reply.code(status).send(body);
  });
}

const clientErrors: Readonly<Record<string, { code: ErrorCode; message: string }>> = {
  ERR_HTTP_REQUEST_TIMEOUT: {
    code: 'CIRRUS_ERR_REQUEST_TIMEOUT',
    message: 'the request did not arrive within the deadline: the connection is closed',
  },
  HPE_HEADER_OVERFLOW: { code: 'CIRRUS_ERR_HEADERS_TOO_LARGE', message: 'the request headers are too large' },
};

// Node's errors about a connection rather than a request (a deadline passed, HTTP it cannot
// parse), answered as Fastify would, with a code, and the connection closed.
function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { code, message } = clientErrors[error.code ?? ''] ?? {
    code: 'CIRRUS_ERR_BAD_HTTP',
    message: 'not an HTTP request this server can read',
  };
  const body = JSON.stringify(errorBody(code, message));
  const status = statusOf(code);
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  socket.destroy(error);
}

function noSchemas(): never {
  throw new Error('cirrus host: routes validate with zod, JSON schemas are not compiled');
}

// One line per reconcile (./app.ts runReconcile) instead of Fastify's two per request: probes and
// scrapes would otherwise fill the log, and per-request logging costs a quarter of the throughput
// (measured on a no-op reconcile). Fastify's other lines (404s, errors outside the reconcile routes) stay.
class QuietLogController extends LogController {
  override incomingRequest(): void {
    // not logged
  }

  override requestCompleted(): void {
    // not logged
  }
}

// Requests that arrive once close() has begun are answered 503 CIRRUS_ERR_CLOSING before any
// other hook runs (as Fastify's return503OnClosing would, with a code), and Node closes the
// connections that are idle then. A keep-alive connection whose request was in
// flight would stay open until its keep-alive timeout (72 s), holding close() that long; it is
// closed as soon as it goes idle. (Not by answering `Connection: close`: a request pipelined
// behind it would then get no answer at all instead of the 503.)
function addClosingHooks(app: HostApp): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) {
      done();
      return;
    }
    void reply.code(503).send(errorBody('CIRRUS_ERR_CLOSING', 'this instance is shutting down'));
  });
  app.addHook('onResponse', (_request, _reply, done) => {
    // On the next turn: Node marks the connection idle after this response's listeners have run.
    if (closing)
      setImmediate(() => {
        app.server.closeIdleConnections();
      });
    done();
  });
}
