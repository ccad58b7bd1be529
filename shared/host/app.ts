// The function host: one Fastify app per FunctionDefinition. It turns HTTP requests (CloudEvents
// from the relay or an ApiServerSource, the periodic trigger, manual reconciles) into calls of the
// definition, and their results and errors into the replies of the event contract (DESIGN.md):
// 2xx once the work is done, 400 for a request that cannot succeed, 503 + Retry-After for "later",
// 500 for a failure. The app never listens; ./serve.ts does.

import { Readable } from 'node:stream';
import type {
  FastifyBaseLogger,
  FastifyPluginAsync,
  FastifyPluginOptions,
  FastifyReply,
  FastifyRequest,
  FastifyTypeProviderDefault,
  RawServerDefault,
} from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import type { CallBudgetSettings } from '../cloud/budget.ts';
import { countCloudCalls } from '../cloud/paced.ts';
import { acceptedEventTypes, eventMode, eventTypes, extensionNames, parseBudget } from '../wire/types.ts';
import { formatIssue, readCloudEvent } from '../wire/cloudevents.ts';
import { eventObjectKey, formatKey, type ObjectKey } from '../wire/keys.ts';
import { cloudCallsHeader } from '../wire/replies.ts';
import { maxEventBytes, queryParameters, verifyRequest, type AuthOptions } from '../wire/signing.ts';
import { readVerifiedBody, requireSignatureHeader, UnauthorizedError } from './auth.ts';
import { errorReply, InvalidRequestError, type ErrorReply } from './errors.ts';
import type { FunctionDefinition, ReconcileOptions, Report } from './function.ts';
import { createHostMetrics, type HostMetrics } from './metrics.ts';
import { addProbeRoutes, createHostApp, type HostApp } from './probes.ts';
import { addLoadShedding, Admission, defaultPressure, OverloadedError, type PressureOptions } from './shedding.ts';

export { defaultPressure, type PressureOptions } from './shedding.ts';

/** The default body limit: the largest event the relay sends (shared/wire/signing.ts explains the size). */
export const defaultBodyLimit = maxEventBytes;

/** How to build a function's app. */
export interface AppOptions {
  /** Where the app logs; it should carry the `fn` field (app/log.ts `createLogger` sets it). */
  readonly logger: Logger;
  /** Overrides of {@link defaultPressure} (./shedding.ts), or false for no load shedding at all. */
  readonly pressure?: PressureOptions | false;
  /** Largest request body in bytes; default {@link defaultBodyLimit}. */
  readonly bodyLimit?: number;
  /** Also export prom-client's process metrics (default true; see createHostMetrics). */
  readonly processMetrics?: boolean;
  /** The registry /metrics serves (default a new one): give it to the provider too, for its own series. */
  readonly registry?: Registry;
  /**
   * Verify the relay's request signatures (shared/wire/signing.ts): a request to a reconcile route
   * without a well-formed, fresh `X-Cirrus-Signature` is answered 401 before its body is read, one
   * whose signature does not match its method, path, query, headers and body is answered 401
   * before its body is parsed. Probes and /metrics stay open (but see `publicEndpoint`). Default:
   * no verification, and a warning in the log at start.
   */
  readonly auth?: AuthOptions;
  /**
   * The app is reachable from anywhere (an AWS Lambda function URL): every route but `/healthz`
   * and `/readyz` requires a valid signature, `/metrics` included (signed over an empty body).
   * Requires `auth`.
   */
  readonly publicEndpoint?: boolean;
}

/** The app buildApp returns: a Fastify instance logging through a pino Logger. */
export type FunctionApp = HostApp;

type Scope = FastifyPluginAsync<FastifyPluginOptions, RawServerDefault, FastifyTypeProviderDefault, Logger>;

// What the reconcile routes need to know about the app they belong to.
interface Host {
  readonly definition: FunctionDefinition;
  readonly defaultKind: string;
  readonly metrics: HostMetrics;
  readonly logger: Logger;
  readonly retryAfter: number;
  readonly auth?: AuthOptions | undefined;
  readonly bodyLimit: number;
  /** The requests in flight on the reconcile routes of the whole app. */
  readonly admission: Admission;
  /** Where the scope records its routes, as `<METHOD> <url>` (for the public endpoint's guard). */
  readonly routes: Set<string>;
}

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
 * - `GET /healthz` (200 while serving), `GET /readyz` (200; 503 once closing), `GET /metrics`,
 *   `OPTIONS /` (204, `Allow: POST`).
 *
 * Errors, on both reconcile routes: a malformed request or an InvalidRequestError → 400
 * `{ error, problems }`; a RetryError (also as a cause) → 503 with `Retry-After`; overload (too
 * many requests in flight, memory, event-loop delay) → 503 with `Retry-After`, before the body is
 * read; anything else → 500 `{ error }`. With `options.auth`, a request whose signature is missing,
 * malformed or stale → 401 `{ error }` before its body is read, one whose signature is wrong → 401
 * before its body is parsed. A reply sent before the body has been read closes the connection
 * rather than read the rest. Throws TypeError when `definition.kinds` is empty, or for
 * `publicEndpoint` without `auth`.
 */
export async function buildApp(definition: FunctionDefinition, options: AppOptions): Promise<FunctionApp> {
  return assemble([definition], options, false);
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
  const names = definitions.map((d) => d.name);
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw new TypeError(`function ${twice} is given twice`);
  return assemble(definitions, options, true);
}

async function assemble(
  definitions: readonly FunctionDefinition[],
  options: AppOptions,
  prefixed: boolean,
): Promise<FunctionApp> {
  const metrics = createHostMetrics({ processMetrics: options.processMetrics ?? true, registry: options.registry });
  const pressure = options.pressure === false ? false : { ...defaultPressure, ...options.pressure };
  const admission = new Admission(pressure ? pressure.maxConcurrentRequests : 0);
  const bodyLimit = options.bodyLimit ?? defaultBodyLimit;
  const routes = new Set<string>();
  const app = createHostApp({ logger: options.logger, bodyLimit });
  addAuthPolicy(app, options, routes);
  addProbeRoutes(app, { registry: metrics.registry });
  addWebhookOptions(app);
  for (const definition of definitions) {
    const [defaultKind] = definition.kinds;
    if (defaultKind === undefined)
      throw new TypeError(`function ${definition.name}: kinds must name at least one kind`);
    definition.registerMetrics?.(metrics.registry);
    const host: Host = {
      definition,
      defaultKind,
      metrics,
      logger: options.logger,
      retryAfter: pressure ? pressure.retryAfter : 0,
      auth: options.auth,
      bodyLimit,
      admission,
      routes,
    };
    await app.register(reconcileRoutes(host, pressure), prefixed ? { prefix: `/${definition.name}` } : {});
  }
  await app.ready();
  return app;
}

// Knative senders may probe with OPTIONS (CloudEvents Web Hook spec): allow any origin to POST.
function addWebhookOptions(app: FunctionApp): void {
  app.options('/', (request, reply) => {
    const origin = request.headers['webhook-request-origin'];
    if (typeof origin === 'string') reply.header('webhook-allowed-origin', origin);
    return reply.code(204).header('allow', 'POST').send();
  });
}

// Without a secret, a warning; on a public endpoint, the signature on every route (below).
function addAuthPolicy(app: FunctionApp, options: AppOptions, reconcileRoutes: ReadonlySet<string>): void {
  if (options.auth === undefined) {
    if (options.publicEndpoint === true) throw new TypeError('a public endpoint needs auth: a signing secret');
    options.logger.warn(
      'no signing secret (--signing-secret-file): reconcile requests are not authenticated, anyone who can reach this server can make it reconcile',
    );
  } else if (options.publicEndpoint === true) addPublicEndpointGuard(app, options.auth, reconcileRoutes);
}

// On a public endpoint, every route outside the reconcile scopes (which check signatures
// themselves) but the two probes needs a signature, over an empty body: such requests carry none.
function addPublicEndpointGuard(app: FunctionApp, auth: AuthOptions, reconcileRoutes: ReadonlySet<string>): void {
  const open = new Set(['/healthz', '/readyz']);
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.routeOptions.url;
    if (route !== undefined && (open.has(route) || reconcileRoutes.has(`${request.method} ${route}`))) {
      done();
      return;
    }
    const verification = verifyRequest(
      { method: request.method, url: request.url, headers: request.headers, body: '' },
      auth,
    );
    if (verification.ok) {
      done();
      return;
    }
    request.log.warn({ url: request.url, error: verification.reason }, 'unauthorized');
    closeIfBodyUnread(request, reply);
    void reply.code(401).send({ error: `unauthorized: ${verification.reason}` });
  });
}

// The reconcile routes live in their own encapsulated context so that load shedding, the error
// mapping and the body parsers apply to them and not to the probes and /metrics. The first hooks
// decide without reading the body, cheapest and least trusting first: the signature header (401),
// then load (503).
function reconcileRoutes(host: Host, pressure: Required<PressureOptions> | false): Scope {
  return async (scope) => {
    const triggers = new WeakMap<FastifyRequest, string>();
    scope.addHook('onRoute', (route) => {
      for (const method of [route.method].flat()) host.routes.add(`${method} ${route.url}`);
    });
    scope.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      done();
    });
    const { auth } = host;
    if (auth)
      scope.addHook('onRequest', (request, _reply, done) => {
        requireSignatureHeader(request.headers, auth);
        done();
      });
    if (pressure) await addLoadShedding(scope, pressure, host.admission);
    if (auth) addSignatureCheck(scope, auth, host.bodyLimit);
    addBodyParsers(scope);
    scope.setErrorHandler((error, request, reply) => {
      closeIfBodyUnread(request, reply);
      if (error instanceof UnauthorizedError) return send(reply, unauthorized(error, request.log));
      return send(reply, failure(error, { log: request.log, retryAfter: host.retryAfter }));
    });
    scope.addHook('onResponse', (request, reply, done) => {
      const trigger =
        request.routeOptions.url?.endsWith('/reconcile') === true ? 'manual' : (triggers.get(request) ?? 'unknown');
      host.metrics.requests.inc({ function: host.definition.name, trigger, code: String(reply.statusCode) });
      done();
    });
    scope.post('/', (request, reply) => handleEvent(host, request, reply, triggers));
    scope.post('/reconcile', (request, reply) => handleManual(host, request, reply));
  };
}

// A reply sent while the request body is still coming closes the connection, rather than let
// Node read (and discard) the rest of it: a refused stranger or an excess request costs no more
// than its headers. The relay reads the reply all the same (fetch takes an early reply) and opens
// a new connection for its retry.
function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  const { headers } = request;
  const hasBody =
    headers['transfer-encoding'] !== undefined ||
    (headers['content-length'] !== undefined && headers['content-length'] !== '0');
  // Only a socket's request has `complete` (not inject()'s, which has its whole body at hand).
  if (hasBody && 'complete' in request.raw && !request.raw.complete) reply.header('connection', 'close');
}

// The signature covers the raw body, so it is checked before any parser runs; the parsers then
// read the verified bytes as if from the socket. It covers the request target as received
// (request.url: under `cirrus start`, with the function's prefix).
function addSignatureCheck(scope: FunctionApp, auth: AuthOptions, limit: number): void {
  scope.addHook('preParsing', async (request, _reply, payload) => {
    const tooLarge = (): Error => new InvalidRequestError(`the body is larger than ${limit} bytes`);
    const signed = { method: request.method, url: request.url, headers: request.headers };
    const body = await readVerifiedBody(payload, signed, { ...auth, limit, tooLarge });
    return Readable.from([body], { objectMode: false });
  });
}

function unauthorized(error: UnauthorizedError, log: Pick<FastifyBaseLogger, 'warn'>): Outcome {
  log.warn({ outcome: 'unauthorized', code: 401, error: error.message }, 'reconcile unauthorized');
  return { status: 401, body: { error: `unauthorized: ${error.message}` } };
}

// JSON (binary-mode data, structured events, manual bodies) with an empty body meaning no data:
// a binary-mode reconcile.all may come without any. Any other content type is read as text, so
// that a binary-mode event whose key is in its extensions does not fail on a data format we
// never look at.
function addBodyParsers(scope: FunctionApp): void {
  const json = scope.getDefaultJsonParser('error', 'error');
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser(
    ['application/json', 'application/cloudevents+json'],
    { parseAs: 'string' },
    (request, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      if (text === '') {
        done(null, undefined);
        return;
      }
      void json(request, text, done); // callback style: it calls done and returns nothing
    },
  );
  scope.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    done(null, body === '' ? undefined : body);
  });
}

// What one reconcile request asks for.
interface Job {
  readonly trigger: string;
  readonly target: ObjectKey | 'all';
  readonly dryRun: boolean;
  readonly success: 200 | 202;
  readonly eventId?: string;
  readonly lastKnown?: unknown;
  readonly claimed?: unknown;
  readonly nodeSet?: string;
  /** A trigger's share of the relay's cloud call budget: the pass's calls are paced to it. */
  readonly callBudget?: CallBudgetSettings;
}

async function handleEvent(
  host: Host,
  request: FastifyRequest,
  reply: FastifyReply,
  triggers: WeakMap<FastifyRequest, string>,
): Promise<FastifyReply> {
  const dryRun = readDryRun(request.url);
  const event = readCloudEvent(request.headers, request.body);
  const mode = eventMode(event.type);
  if (mode === undefined) {
    throw new InvalidRequestError(
      `event type "${event.type}" is not accepted; accepted types: ${acceptedEventTypes.join(', ')}`,
      [`type: must be one of ${acceptedEventTypes.join(', ')}`],
    );
  }
  triggers.set(request, event.type);
  const target = mode === 'all' ? 'all' : acceptKind(host.definition, eventObjectKey(event, mode));
  const lastKnown = event.type === eventTypes.resourceDelete ? event.data : undefined;
  const claimed = mode === 'resource' && lastKnown === undefined ? claimFor(target, event.data) : undefined;
  const nodeSet = event.extensions[extensionNames.nodeSet];
  const callBudget = mode === 'all' ? readBudget(event.extensions[extensionNames.budget]) : undefined;
  return runReconcile(host, request, reply, {
    trigger: event.type,
    target,
    dryRun,
    success: 202,
    eventId: event.id,
    lastKnown,
    claimed,
    ...(typeof nodeSet === 'string' && nodeSet !== '' ? { nodeSet } : {}),
    ...(callBudget === undefined ? {} : { callBudget }),
  });
}

// A trigger's `cirrusbudget` extension: absent → no pacing; present and malformed → 400, since a
// pass run without the pace the relay asked for would break the budget.
function readBudget(value: unknown): CallBudgetSettings | undefined {
  if (value === undefined) return undefined;
  const budget = typeof value === 'string' ? parseBudget(value) : undefined;
  if (budget !== undefined) return budget;
  const problem = `${extensionNames.budget}: must be <calls a second>/<burst>, e.g. 2.5/2, not ${quote(typeof value === 'string' ? value : JSON.stringify(value))}`;
  throw new InvalidRequestError(`invalid ${extensionNames.budget} extension`, [problem]);
}

// An add or update event's object, when it is the object the event's key names (its name and
// namespace); anything else claims nothing, and the function reads the object as for any event.
function claimFor(target: ObjectKey | 'all', data: unknown): unknown {
  if (target === 'all' || typeof data !== 'object' || data === null) return undefined;
  const metadata = (data as { metadata?: { name?: unknown; namespace?: unknown } }).metadata;
  const sameName = metadata?.name === target.name;
  const sameNamespace = (metadata?.namespace ?? '') === (target.namespace ?? '');
  return sameName && sameNamespace ? data : undefined;
}

async function handleManual(host: Host, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const dryRun = readDryRun(request.url);
  const target = readManualTarget(host, request.body);
  return runReconcile(host, request, reply, { trigger: 'manual', target, dryRun, success: 200 });
}

// The query, read from the request target itself (the parameters the signature covers), not from
// Fastify's parsed request.query, which keeps unknown names and turns `dryRun[]` into a name of
// its own: a misspelt or array-shaped dryRun must not silently become a real write.
function readDryRun(url: string): boolean {
  const problems: string[] = [];
  const values: string[] = [];
  for (const { name, value } of queryParameters(url)) {
    if (name === 'dryRun') values.push(value);
    else problems.push(`unknown query parameter ${quote(name)}: the only one is dryRun (true or false)`);
  }
  if (values.length > 1) problems.push(`query parameter "dryRun" is given ${values.length} times: give it once`);
  const [value] = values;
  if (values.length === 1 && value !== 'true' && value !== 'false')
    problems.push(`query parameter "dryRun" must be true or false, not ${quote(value ?? '')}`);
  const [first] = problems;
  if (first !== undefined)
    throw new InvalidRequestError(problems.length === 1 ? `invalid query: ${first}` : 'invalid query', problems);
  return value === 'true';
}

// A name or value from the request, quoted and cut short for an error message.
function quote(text: string): string {
  return JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);
}

const manualBodyHint =
  'the body must be a JSON object: {"name": "...", "namespace"?: "...", "kind"?: "..."} or {"all": true}';
const nonEmpty = z.string({ error: 'must be a string' }).min(1, 'must not be empty');

const manualBody = z
  .strictObject(
    {
      name: nonEmpty.optional(),
      namespace: z
        .string({ error: 'must be a string' })
        .min(1, 'must not be empty (leave it out for a cluster-scoped object)')
        .optional(),
      kind: nonEmpty.optional(),
      all: z.boolean({ error: 'must be true or false' }).optional(),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? manualBodyHint : undefined) },
  )
  .superRefine((body, context) => {
    const named = body.name !== undefined || body.namespace !== undefined || body.kind !== undefined;
    if (body.all === true && named)
      context.addIssue({ code: 'custom', message: '"all": true takes no name, namespace or kind' });
    if (body.all !== true && body.name === undefined)
      context.addIssue({ code: 'custom', path: ['name'], message: 'is required (or send {"all": true})' });
  });

function readManualTarget(host: Host, body: unknown): ObjectKey | 'all' {
  const parsed = manualBody.safeParse(body);
  if (!parsed.success) throw new InvalidRequestError('invalid reconcile request', parsed.error.issues.map(formatIssue));
  const { all, name, namespace, kind = host.defaultKind } = parsed.data;
  if (all === true || name === undefined) return 'all'; // name is set unless all is true (refined above)
  return acceptKind(host.definition, namespace === undefined ? { kind, name } : { kind, name, namespace });
}

function acceptKind(definition: FunctionDefinition, key: ObjectKey): ObjectKey {
  if (definition.kinds.includes(key.kind)) return key;
  const kinds = definition.kinds.join(', ');
  throw new InvalidRequestError(`${definition.name} does not handle kind "${key.kind}"; it accepts ${kinds}`, [
    `kind: must be one of ${kinds}, not "${key.kind}"`,
  ]);
}

// Calls the definition and answers. Nothing is sent before the reconcile has finished, so a 2xx
// always means the work is done (the data-plane contract's "do not accept until handled").
async function runReconcile(host: Host, request: FastifyRequest, reply: FastifyReply, job: Job): Promise<FastifyReply> {
  const key = job.target === 'all' ? '*' : formatKey(job.target);
  const log = host.logger.child({
    reqId: request.id,
    key,
    trigger: job.trigger,
    dryRun: job.dryRun,
    ...(job.eventId === undefined ? {} : { ceId: job.eventId }),
  });
  const options: ReconcileOptions = {
    dryRun: job.dryRun,
    signal: abandonSignal(reply),
    log,
    ...(job.lastKnown === undefined ? {} : { lastKnown: job.lastKnown }),
    ...(job.claimed === undefined ? {} : { claimed: job.claimed }),
    ...(job.nodeSet === undefined ? {} : { nodeSet: job.nodeSet }),
  };
  const started = performance.now();
  host.admission.hold(request);
  const { callBudget } = job;
  const run = (): Promise<Report> => invoke(host.definition, job.target, options);
  // The reply says how many cloud calls the reconcile made: the relay gives back what it charged beyond them.
  const pace = callBudget === undefined ? undefined : { settings: callBudget, signal: options.signal };
  const outcome = await countCloudCalls(run, pace)
    .then(
      ({ result: report, calls }): Outcome => {
        const summary = summarize(report);
        for (const [result, count] of Object.entries(summary.results))
          host.metrics.results.inc({ function: host.definition.name, result }, count);
        // A periodic pass that changed nothing is routine (node-lifecycle's comes every 5 s): debug.
        const routine = job.target === 'all' && job.trigger !== 'manual' && summary.changes === 0;
        log[routine ? 'debug' : 'info'](
          { outcome: 'done', code: job.success, durationMs: since(started), ...summary },
          'reconciled',
        );
        return { status: job.success, body: report, cloudCalls: calls };
      },
      (error: unknown) => failure(error, { log, retryAfter: host.retryAfter, durationMs: since(started) }),
    )
    .finally(() => {
      host.admission.release(request);
    });
  host.metrics.duration.observe({ function: host.definition.name, trigger: job.trigger }, since(started) / 1000);
  return send(reply, outcome);
}

// async, so that a definition that throws before returning its promise is handled the same way.
async function invoke(
  definition: FunctionDefinition,
  target: ObjectKey | 'all',
  options: ReconcileOptions,
): Promise<Report> {
  return target === 'all' ? definition.reconcileAll(options) : definition.reconcileOne(target, options);
}

// Aborted when the connection closes before the reply is written: the client gave up, or serve()
// cut the connection at the end of the shutdown grace period. Fastify's request.signal is no use
// here: it aborts on the request stream's close, which Node emits as soon as the body is read.
function abandonSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) controller.abort(new Error('the connection closed before the reply was sent'));
  });
  return controller.signal;
}

function since(started: number): number {
  return Math.round((performance.now() - started) * 1000) / 1000;
}

// Counts, not contents: a report may hold whole patches, and logs must not carry objects.
function summarize(report: Report): { objects: number; changes: number; results: Record<string, number> } {
  const results: Record<string, number> = {};
  let changes = 0;
  for (const object of report.objects) {
    results[object.result] = (results[object.result] ?? 0) + 1;
    changes += object.changes.length;
  }
  return { objects: report.objects.length, changes, results };
}

// A reply to send: a report, or an error body.
interface Outcome {
  readonly status: number;
  readonly body: unknown;
  readonly retryAfterSeconds?: number | undefined;
  readonly cloudCalls?: number;
}

function send(reply: FastifyReply, outcome: Outcome): FastifyReply {
  if (outcome.retryAfterSeconds !== undefined) reply.header('retry-after', String(outcome.retryAfterSeconds));
  if (outcome.cloudCalls !== undefined) reply.header(cloudCallsHeader, String(outcome.cloudCalls));
  return reply.code(outcome.status).send(outcome.body);
}

interface ErrorContext {
  readonly log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>;
  readonly retryAfter: number;
  readonly durationMs?: number;
}

const outcomes = { 400: 'rejected', 500: 'failed', 503: 'retry' } as const;

// The one place an error becomes a reply, and its log line: for errors from the definition and
// from the host's own checks, body parsers and load shedding alike.
function failure(error: unknown, context: ErrorContext): ErrorReply {
  const mapped = fastifyErrorReply(error, context.retryAfter) ?? errorReply(error);
  const fields = {
    outcome: outcomes[mapped.status],
    code: mapped.status,
    ...(context.durationMs === undefined ? {} : { durationMs: context.durationMs }),
    ...(mapped.retryAfterSeconds === undefined ? {} : { retryAfter: mapped.retryAfterSeconds }),
  };
  if (mapped.level === 'error') context.log.error({ ...fields, err: error }, 'reconcile failed');
  else
    context.log[mapped.level](
      { ...fields, error: mapped.body.error, problems: mapped.body.problems },
      `reconcile ${fields.outcome}`,
    );
  return mapped;
}

// Load shedding's refusals (ours and under-pressure's) → 503; Fastify's client errors of the body
// parsers (415, 413, malformed JSON) → 400 — the event itself is unusable, and a Knative sender
// would retry a 413 or 415 forever.
function fastifyErrorReply(error: unknown, retryAfter: number): ErrorReply | undefined {
  const overloaded = error instanceof OverloadedError;
  if (overloaded || (isFastifyError(error) && error.code === 'FST_UNDER_PRESSURE'))
    return {
      status: 503,
      body: { error: overloaded ? error.message : 'overloaded: try again later' },
      retryAfterSeconds: retryAfter,
      level: 'warn',
    };
  if (!isFastifyError(error)) return undefined;
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    return { status: 400, body: { error: error.message, problems: [error.message] }, level: 'warn' };
  }
  return undefined;
}

function isFastifyError(error: unknown): error is Error & { code: string; statusCode?: number } {
  return error instanceof Error && 'code' in error && typeof error.code === 'string' && error.code.startsWith('FST_');
}
