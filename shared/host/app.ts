// The function host: one Fastify app per FunctionDefinition (or one for several, `cirrus start`).
// It turns HTTP requests (CloudEvents from the relay or an ApiServerSource, the periodic trigger,
// manual reconciles) into calls of the definition, and their results and errors into the replies
// of the HTTP contract (docs/http-contract.md): 2xx once the work is done, 400 for a request that
// cannot succeed, 401 for one not signed as it must be, 503 + Retry-After for "later", 500 for a
// failure, each error with a stable code. The app never listens; ./serve.ts does. What each part
// does: ./routes.ts (the reconcile routes), ./auth.ts (signatures), ./replay.ts (replays),
// ./shedding.ts (load), ./body.ts (bodies), ./requests.ts (request → job), ./run.ts (job → reply),
// ./errors.ts (the error table), ./probes.ts (probes, /metrics, the server's deadlines).

import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { maxEventBytes, type AuthOptions } from '../wire/signing.ts';
import { addAuthPolicy, type Signatures } from './auth.ts';
import type { FunctionDefinition } from './function.ts';
import { localFunctions, type LocalFunctions } from './local.ts';
import { createHostMetrics } from './metrics.ts';
import { addProbeRoutes, createHostApp, type HostApp } from './probes.ts';
import { ReplayGuard } from './replay.ts';
import { reconcileRoutes, type Host } from './routes.ts';
import { Admission, defaultPressure, type PressureOptions } from './shedding.ts';
import { addStartGate } from './starting.ts';

export { defaultPressure, type PressureOptions } from './shedding.ts';

/** The default body limit: the largest event the relay sends (shared/wire/signing.ts explains the size). */
export const defaultBodyLimit = maxEventBytes;

/** How to build a function's app. */
export interface AppOptions {
  /** Where the app logs; it should carry the `fn` field (app/log.ts `createLogger` sets it). */
  readonly logger: Logger;
  /** Overrides of {@link defaultPressure} (./shedding.ts), or false for no load shedding at all. */
  readonly pressure?: PressureOptions | false;
  /**
   * Largest request body of the reconcile routes in bytes; default {@link defaultBodyLimit}. Every
   * other route reads no body at all (shared/host/body.ts `addBodyGuard`).
   */
  readonly bodyLimit?: number;
  /** The deadline on a request's headers and body, in ms (./probes.ts, default 30 s). */
  readonly requestTimeoutMs?: number;
  /** Also export prom-client's process metrics (default true; see createHostMetrics). */
  readonly processMetrics?: boolean;
  /** The registry /metrics serves (default a new one): give it to the provider too, for its own series. */
  readonly registry?: Registry;
  /**
   * Verify request signatures (shared/wire/signing.ts): a request to a reconcile route whose
   * `X-Cirrus-Signature` is missing, malformed, stale, does not match its method, target and
   * headers, or was accepted before is answered 401 before its body is read and before it counts
   * among the requests in flight; one whose body does not have the digest the header states is
   * answered 401 before its body is parsed. Probes and /metrics stay open (but see
   * `publicEndpoint`). Default: no verification, and a warning in the log at start.
   */
  readonly auth?: AuthOptions;
  /**
   * The app is reachable from anywhere (an AWS Lambda function URL): every route but `/healthz`
   * and `/readyz` requires a valid signature, `/metrics` included (signed over an empty body).
   * Requires `auth`.
   */
  readonly publicEndpoint?: boolean;
  /**
   * Serve the probes and /metrics (default true). False for an app that serves only the reconcile
   * routes, beside another that serves the probes (`cirrus start`: the functions on loopback).
   */
  readonly probes?: boolean;
  /**
   * The process's start-up checks, when the app listens before they have answered (`cirrus
   * serve`): until this resolves `/readyz` answers 503 `{ status: 'starting' }` and every request
   * but the probes waits; if it rejects, they are answered 503 CIRRUS_ERR_CLOSING (./starting.ts).
   * Default: none, ready at once.
   */
  readonly started?: Promise<unknown>;
}

/** The app buildApp returns: a Fastify instance logging through a pino Logger. */
export type FunctionApp = HostApp;

/**
 * Builds the ready, not listening, app serving `definition`:
 *
 * - `POST /`: one CloudEvent, binary or structured mode. Kubernetes events
 *   (`dev.knative.apiserver.{resource,ref}.{add,update,delete}`) call `reconcileOne` with the key
 *   they name; `dev.cirrus-ccm.reconcile.all` calls `reconcileAll`. 202 with the Report.
 * - `POST /reconcile`: `{ name, namespace?, kind? }` (kind defaults to the first of
 *   `definition.kinds`) or `{ all: true }`. 200 with the Report.
 *   Both take `?dryRun=true|false` (default false) and no other query parameter: an unknown one
 *   (`dryrun`), a repeated one or another value is a 400 naming it.
 * - `GET /healthz` (200 while serving), `GET /readyz` (200; 503 once closing, or while the
 *   start-up checks of `started` have not passed), `GET /metrics`,
 *   `OPTIONS /` (204, `Allow: POST`).
 *
 * Errors (docs/http-contract.md has the table, shared/wire/replies.ts the codes), each
 * `{ error, code, problems? }`: a malformed request or an InvalidRequestError → 400; a signature
 * that fails (with `auth`) → 401; a RetryError (also as a cause) → 503 with `Retry-After`;
 * overload (too many requests in flight, memory, event-loop delay) → 503 with `Retry-After`,
 * before the body is read; anything else → 500; a request not in within the deadline → 408 and
 * the connection closed. A reply sent before the body has been read closes the connection rather
 * than read the rest. Throws TypeError when `definition.kinds` is empty, or for `publicEndpoint`
 * without `auth`.
 */
export async function buildApp(definition: FunctionDefinition, options: AppOptions): Promise<FunctionApp> {
  return (await assemble([definition], options, false)).app;
}

/**
 * One app for several functions (`cirrus start`): each function's routes under `/<name>`
 * (`POST /node-init`, `POST /node-init/reconcile`, …), one set of probes and one /metrics at the
 * root. Throws TypeError for a definition without kinds or two definitions of one name.
 */
export async function buildMultiApp(
  definitions: readonly FunctionDefinition[],
  options: AppOptions,
): Promise<FunctionApp> {
  return (await buildMultiHost(definitions, options)).app;
}

/**
 * `cirrus start`'s host: the app of {@link buildMultiApp}, and the same functions for the relay's
 * hand-overs in process (./local.ts), sharing the app's metrics and its requests in flight.
 */
export async function buildMultiHost(
  definitions: readonly FunctionDefinition[],
  options: AppOptions,
): Promise<{ readonly app: FunctionApp; readonly local: LocalFunctions }> {
  const names = definitions.map((d) => d.name);
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw new TypeError(`function ${twice} is given twice`);
  const { app, hosts } = await assemble(definitions, options, true);
  return { app, local: localFunctions(hosts) };
}

async function assemble(
  definitions: readonly FunctionDefinition[],
  options: AppOptions,
  prefixed: boolean,
): Promise<{ app: FunctionApp; hosts: Host[] }> {
  const metrics = createHostMetrics({ processMetrics: options.processMetrics ?? true, registry: options.registry });
  const pressure = options.pressure === false ? false : { ...defaultPressure, ...options.pressure };
  const admission = new Admission(pressure ? pressure.maxConcurrentRequests : 0);
  const bodyLimit = options.bodyLimit ?? defaultBodyLimit;
  const routes = new Set<string>();
  const app = createHostApp({
    logger: options.logger,
    requestTimeoutMs: options.requestTimeoutMs,
    registry: metrics.registry,
  });
  const signatures: Signatures | undefined =
    options.auth === undefined ? undefined : { auth: options.auth, replays: new ReplayGuard(options.auth) };
  const readiness = addStartGate(app, options.started);
  addAuthPolicy(app, options, signatures, routes);
  if (options.probes !== false) addProbeRoutes(app, { registry: metrics.registry, readiness });
  addWebhookOptions(app);
  const shared = { metrics, logger: options.logger, retryAfter: pressure ? pressure.retryAfter : 0 };
  const hosts: Host[] = [];
  for (const definition of definitions) {
    const host = hostFor(definition, { ...shared, signatures, bodyLimit, admission, routes }, prefixed);
    hosts.push(host);
    await app.register(reconcileRoutes(host, pressure), prefixed ? { prefix: `/${definition.name}` } : {});
  }
  await app.ready();
  return { app, hosts };
}

// One function's view of the app. Throws TypeError for a definition without kinds.
// Many functions in one app (`shared`: cirrus start) share its logger and its `fn`: there each
// function's lines also say `function`.
function hostFor(definition: FunctionDefinition, app: Omit<Host, 'definition' | 'defaultKind'>, shared: boolean): Host {
  const [defaultKind] = definition.kinds;
  if (defaultKind === undefined) throw new TypeError(`function ${definition.name}: kinds must name at least one kind`);
  definition.registerMetrics?.(app.metrics.registry);
  const logger = shared ? app.logger.child({ function: definition.name }) : app.logger;
  return { ...app, logger, definition, defaultKind };
}

// Knative senders may probe with OPTIONS (CloudEvents Web Hook spec): allow any origin to POST.
function addWebhookOptions(app: FunctionApp): void {
  app.options('/', (request, reply) => {
    const origin = request.headers['webhook-request-origin'];
    if (typeof origin === 'string') reply.header('webhook-allowed-origin', origin);
    return reply.code(204).header('allow', 'POST').send();
  });
}
