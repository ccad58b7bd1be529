// Running a Job: the definition called with the request's options (its logger, dry run, the
// abandonment signal, the claims of the event), under the trigger's share of the cloud call budget
// when it carries one, held among the requests in flight until it ends, observed in the metrics
// and answered once done (the data-plane contract's "do not accept until handled"). A report's
// errors and notes repeat providers' error text: their URLs are scrubbed (shared/net/url.ts).

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { countCloudCalls } from '../cloud/paced.ts';
import { scrubUrls } from '../net/url.ts';
import { formatKey, type ObjectKey } from '../wire/keys.ts';
import { cloudCallsHeader } from '../wire/replies.ts';
import { failure } from './errors.ts';
import type { FunctionDefinition, ObjectReport, ReconcileOptions, Report } from './function.ts';
import type { HostMetrics } from './metrics.ts';
import type { Job } from './requests.ts';
import type { Admission } from './shedding.ts';

/** What running a job needs of the app it belongs to. */
export interface Runner {
  readonly definition: FunctionDefinition;
  readonly metrics: HostMetrics;
  readonly logger: Logger;
  /** The Retry-After of load shedding's 503s. */
  readonly retryAfter: number;
  /** The requests in flight on the reconcile routes of the whole app. */
  readonly admission: Admission;
}

/** A reply to send: a report, or an error reply. */
export interface Outcome {
  readonly status: number;
  readonly body: unknown;
  readonly retryAfterSeconds?: number | undefined;
  /** The cloud calls the reconcile made, for a 2xx reply's header (the relay gives back what it charged beyond them). */
  readonly cloudCalls?: number;
}

/** Calls the definition and answers. Nothing is sent before the reconcile has finished, so a 2xx always means the work is done. */
export async function runReconcile(
  host: Runner,
  request: FastifyRequest,
  reply: FastifyReply,
  job: Job,
): Promise<FastifyReply> {
  const outcome = await runJob(host, job, { reqId: request.id, signal: abandonSignal(reply), holder: request });
  return send(reply, outcome);
}

/** Where a job came from, for {@link runJob}. */
export interface JobContext {
  /** The request's id in the logs (`reqId`). */
  readonly reqId: string;
  /** The reconcile's abandonment signal: the caller gave up (a closed connection, the relay's timeout). */
  readonly signal: AbortSignal;
  /** What the job was admitted as among the requests in flight (./shedding.ts Admission): held while it runs. */
  readonly holder: object;
}

/**
 * Runs `job` (see the module comment) and resolves with the reply to give once it has ended:
 * its report, or the error's reply (./errors.ts). Never rejects.
 */
export async function runJob(host: Runner, job: Job, context: JobContext): Promise<Outcome> {
  const log = host.logger.child({
    reqId: context.reqId,
    key: job.target === 'all' ? '*' : formatKey(job.target),
    trigger: job.trigger,
    dryRun: job.dryRun,
    // The event's id only when it is not the request's: in process the hand-over's id is both.
    ...(job.eventId === undefined || job.eventId === context.reqId ? {} : { ceId: job.eventId }),
  });
  const options = reconcileOptions(job, context.signal, log);
  const started = performance.now();
  host.admission.hold(context.holder);
  const { callBudget } = job;
  const run = (): Promise<Report> => invoke(host.definition, job.target, options);
  const pace = callBudget === undefined ? undefined : { settings: callBudget, signal: options.signal };
  const outcome = await countCloudCalls(run, pace)
    .then(
      ({ result: report, calls }): Outcome => ({ ...done(host, { job, log, started }, report), cloudCalls: calls }),
      (error: unknown) => failure(error, { log, retryAfter: host.retryAfter, durationMs: since(started) }),
    )
    .finally(() => {
      host.admission.release(context.holder);
    });
  host.metrics.duration.observe({ function: host.definition.name, trigger: job.trigger }, since(started) / 1000);
  return outcome;
}

/** Sends `outcome`, with its Retry-After and its cloud calls when it has them. */
export function send(reply: FastifyReply, outcome: Outcome): FastifyReply {
  if (outcome.retryAfterSeconds !== undefined) reply.header('retry-after', String(outcome.retryAfterSeconds));
  if (outcome.cloudCalls !== undefined) reply.header(cloudCallsHeader, String(outcome.cloudCalls));
  return reply.code(outcome.status).send(outcome.body);
}

function done(host: Runner, run: { job: Job; log: Logger; started: number }, report: Report): Outcome {
  const { job, log } = run;
  const summary = summarize(report);
  for (const [result, count] of Object.entries(summary.results))
    host.metrics.results.inc({ function: host.definition.name, result }, count);
  // A periodic pass or recheck that changed nothing is routine (a NotReady Node's recheck comes
  // every 5 s): debug.
  const periodic = (job.target === 'all' && job.trigger !== 'manual') || job.recheck === true;
  const routine = periodic && summary.changes === 0;
  log[routine ? 'debug' : 'info'](
    { outcome: 'done', code: job.success, durationMs: since(run.started), ...summary },
    'reconciled',
  );
  return { status: job.success, body: scrubbed(report) };
}

/** `report` with the URLs in its objects' errors and notes scrubbed; the same object when none has one. */
export function scrubbed(report: Report): Report {
  const objects = report.objects.map((object): ObjectReport => {
    const error = object.error === undefined ? undefined : scrubUrls(object.error);
    const note = object.note === undefined ? undefined : scrubUrls(object.note);
    if (error === object.error && note === object.note) return object;
    return { ...object, ...(error === undefined ? {} : { error }), ...(note === undefined ? {} : { note }) };
  });
  return objects.every((object, i) => object === report.objects[i]) ? report : { ...report, objects };
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

// What the function is told of the job: its dry run, signal and logger, and what the event carried.
function reconcileOptions(job: Job, signal: AbortSignal, log: Logger): ReconcileOptions {
  return {
    dryRun: job.dryRun,
    signal,
    log,
    ...(job.lastKnown === undefined ? {} : { lastKnown: job.lastKnown }),
    ...(job.claimed === undefined ? {} : { claimed: job.claimed }),
    ...(job.claimVerified === true ? { claimVerified: true } : {}),
    ...(job.lastKnownVerified === true ? { lastKnownVerified: true } : {}),
    ...(job.recheck === true ? { recheck: true } : {}),
    ...(job.nodeSet === undefined ? {} : { nodeSet: job.nodeSet }),
    ...(job.periodic === true ? { periodic: true } : {}),
  };
}
