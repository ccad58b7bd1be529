// The Fastify instance every cirrus process serves, and its probes: `GET /healthz`, `GET /readyz`
// and `GET /metrics`, for a function's app (./app.ts) and for the relay alike. The kubelet (or
// Knative's queue-proxy) probes every few seconds and Prometheus scrapes; none of it is logged.

import { randomUUID } from 'node:crypto';
import fastify, {
  LogController,
  type FastifyInstance,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

/** An app the host builds: a Fastify instance logging through a pino Logger. */
export type HostApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>;

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
  const app = createHostApp({ logger: options.logger });
  addProbeRoutes(app, options);
  await app.ready();
  return app;
}

/** How {@link createHostApp} configures Fastify. */
export interface HostAppOptions {
  /** Where the app logs. */
  readonly logger: Logger;
  /** Largest request body in bytes; default Fastify's (1 MiB). */
  readonly bodyLimit?: number | undefined;
}

/**
 * The Fastify instance, without routes, that every app of the host starts from: quiet request
 * logging, its own request ids, 503 for requests that arrive while closing (and idle connections
 * closed then), and no JSON schema compilers.
 */
export function createHostApp(options: HostAppOptions): HostApp {
  const app = fastify({
    loggerInstance: options.logger,
    logController: new QuietLogController(),
    // Our own id, not the `ce-id` header (or X-Request-Id): the sender controls those, retries of
    // one event share its id, and structured mode has no such header. The event id is logged
    // as `ceId` next to this one.
    genReqId: () => randomUUID(),
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
    return503OnClosing: true,
    // The routes validate with zod and have no JSON schemas. Left to itself, Fastify loads Ajv and
    // fast-json-stringify at construction anyway: 35-85 ms and 8 MB of a cold start (measured).
    schemaController: { compilersFactory: { buildValidator: noSchemas, buildSerializer: noSchemas } },
  });
  addClosingHooks(app);
  return app;
}

function noSchemas(): never {
  throw new Error('cirrus host: routes validate with zod, JSON schemas are not compiled');
}

// One line per reconcile (./app.ts runReconcile) instead of Fastify's two per request: probes and
// scrapes would otherwise fill the log, and per-request logging costs a quarter of the throughput
// (reference/performance.md). Fastify's other lines (404s, errors outside the reconcile routes) stay.
class QuietLogController extends LogController {
  override incomingRequest(): void {
    // not logged
  }

  override requestCompleted(): void {
    // not logged
  }
}

// Fastify answers requests that arrive once close() has begun with 503 (return503OnClosing), and
// Node closes the connections that are idle then. A keep-alive connection whose request was in
// flight would stay open until its keep-alive timeout (72 s), holding close() that long; it is
// closed as soon as it goes idle. (Not by answering `Connection: close`: a request pipelined
// behind it would then get no answer at all instead of the 503.)
function addClosingHooks(app: HostApp): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
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
