// The functions of an app taken in process (`cirrus start`, ADR 0021): the relay hands a function
// the CloudEvent it would have sent (shared/wire/local.ts), and the function runs it as its
// `POST /` route would — the same Job (./requests.ts, its data taken by reference, no JSON, no
// schema over the object), the same run (./run.ts: the per-key guard is the definition's own, the
// logs, the duration and result metrics, the cloud calls counted), counted among the app's
// requests in flight (refused 503 over the limit, as a request would be), counted in
// `cirrus_reconcile_requests_total` by the status its reply would have had, and answered with the
// reply's values. What it skips is what a hand-over has no use for: reading and verifying a
// signature (the event never left the process), a body and its parsers, and the memory and
// event-loop shedding of @fastify/under-pressure, which guards against request bodies arriving
// faster than they are processed (the relay's own `concurrency` bounds the hand-overs in flight).

import type { CloudEvent } from '../wire/cloudevents.ts';
import type { LocalHandler, LocalReply } from '../wire/local.ts';
import { failure, OverloadedError } from './errors.ts';
import { jobOfEvent, type Job } from './requests.ts';
import { runJob, type Outcome, type Runner } from './run.ts';

/** The functions of one app for the relay's hand-overs, and a way to wait for those in flight. */
export interface LocalFunctions {
  /** Each function's hand-over, by function name. */
  readonly handlers: ReadonlyMap<string, LocalHandler>;
  /** Resolves once no hand-over is running (for a graceful stop: the relay stopped handing over first). */
  settled(): Promise<void>;
}

/** The hand-overs of the functions `runners` (one app's, sharing its metrics and requests in flight). */
export function localFunctions(runners: readonly Runner[]): LocalFunctions {
  const running = new Set<Promise<LocalReply>>();
  const handlers = new Map<string, LocalHandler>();
  for (const runner of runners) {
    handlers.set(runner.definition.name, (event, signal) => {
      const reply = runLocal(runner, event, signal);
      running.add(reply);
      void reply.finally(() => running.delete(reply));
      return reply;
    });
  }
  return {
    handlers,
    settled: async () => {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
}

// One hand-over: admitted, read into a Job, run; every failure a reply, as for a request.
async function runLocal(runner: Runner, event: CloudEvent, signal: AbortSignal): Promise<LocalReply> {
  const holder = {};
  let trigger = 'unknown';
  const answer = (outcome: Outcome): LocalReply => {
    runner.metrics.requests.inc({ function: runner.definition.name, trigger, code: String(outcome.status) });
    runner.metrics.answered(runner.definition.name);
    return {
      status: outcome.status,
      body: outcome.body,
      ...(outcome.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: outcome.retryAfterSeconds }),
      ...(outcome.cloudCalls === undefined ? {} : { cloudCalls: outcome.cloudCalls }),
    };
  };
  const refused = (error: unknown): LocalReply =>
    answer(failure(error, { log: runner.logger.child({ ceId: event.id }), retryAfter: runner.retryAfter }));
  if (!runner.admission.admit(holder))
    return refused(
      new OverloadedError(
        `overloaded: ${runner.admission.limit} requests in flight, the most this instance takes; try again later`,
      ),
    );
  try {
    let job: Job;
    try {
      job = jobOfEvent(runner.definition, event, {
        dryRun: false,
        noteTrigger: (type) => (trigger = type),
        verified: true,
      });
    } catch (error) {
      return refused(error);
    }
    return answer(await runJob(runner, job, { reqId: event.id, signal, holder }));
  } finally {
    runner.admission.release(holder);
  }
}
