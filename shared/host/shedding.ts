// Load shedding on the reconcile routes: a limit on the requests in flight in the process, and
// @fastify/under-pressure's limits on memory and event-loop delay. Both answer in the request's
// first hooks, before its body is read: 503 with `Retry-After`, which the relay and Knative's
// senders retry. The probes and /metrics are never shed.
//
// Why both: under-pressure samples once a second, so a burst that arrives within one sample is
// admitted whole however large (100 requests of 8 MB each took a function to 1.3 GB); the count of
// requests in flight is exact at every request, and bounds the memory that requests can take
// (at worst about 2.5 × the limit × maxEventBytes, shared/wire/signing.ts). The memory limits
// catch what the count cannot: a process grown by something other than request bodies.

import { totalmem } from 'node:os';
import { getHeapStatistics } from 'node:v8';
import underPressure from '@fastify/under-pressure';
import { OverloadedError } from './errors.ts';
import type { HostApp } from './probes.ts';

export { OverloadedError } from './errors.ts';

/** Load shedding on the reconcile routes; a limit of 0 is off. */
export interface PressureOptions {
  /**
   * Reconcile requests in flight at once in the process (all its functions together); one more
   * is answered 503 at once. The `--max-concurrent-requests` option.
   */
  readonly maxConcurrentRequests?: number;
  /** Mean event-loop delay over a sample, in ms. */
  readonly maxEventLoopDelay?: number;
  /** Event-loop utilization over a sample, 0 to 1. */
  readonly maxEventLoopUtilization?: number;
  /** V8 heap in use, in bytes, at the last sample. */
  readonly maxHeapUsedBytes?: number;
  /** The process's resident set, in bytes, at the last sample. */
  readonly maxRssBytes?: number;
  /** How often the event loop and memory are sampled, in ms. */
  readonly sampleInterval?: number;
  /** Seconds sent as `Retry-After` with the 503. */
  readonly retryAfter?: number;
}

/**
 * The default of `--max-concurrent-requests`: 512, the relay's default `--concurrent-deliveries`,
 * so that one relay delivering at full speed to one instance (`cirrus start`, a plain Deployment)
 * is never shed, while a burst from anywhere else is. The width is what a node-set change needs:
 * 1,000 load balancers updated at 1 s a cloud call within 5 s (G6). Real events are a few KiB; a
 * request holds about 2.5 times its body in memory while it runs (100 requests of 1 MiB took a
 * function from 177 to 419 MB, `npm run bench -- --only burst`), so many requests at the largest
 * body (maxEventBytes) are stopped by memory shedding, not by this count; with a tight memory
 * limit, set it lower. Behind Knative,
 * set it to the Service's `containerConcurrency` (deploy/knative does: 20 or 10, at most ~155 MB):
 * queue-proxy then holds the excess back, and the limit never refuses what Knative lets through.
 */
export const defaultMaxConcurrentRequests = 512;

/** Without a container memory limit, memory shedding reads its fractions of this: 1 GiB. */
export const unconstrainedMemoryBytes = 1024 * 1024 * 1024;

/**
 * The memory the process may use: its cgroup limit (a container's `resources.limits.memory`, as
 * `process.constrainedMemory()` reports it), else {@link unconstrainedMemoryBytes}.
 */
export function memoryBudget(): number {
  const limit = process.constrainedMemory();
  return limit > 0 && limit < totalmem() ? limit : unconstrainedMemoryBytes;
}

/**
 * The defaults: at most {@link defaultMaxConcurrentRequests} reconciles in flight; shed when the
 * resident set passes 80 % of the memory budget (the container's limit: 410 MiB of the manifests'
 * 512 MiB, leaving the rest for the requests already admitted; 819 MiB without a limit), when the
 * V8 heap passes 85 % of its limit (past it V8 spends its time collecting, then aborts), or when the
 * event loop lags by a second on average (reconciles are I/O bound, so a loop that late means the
 * process is saturated, and new work would only time out); sample once a second, and ask to come
 * back in 5 s, a few samples later.
 */
export const defaultPressure: Required<PressureOptions> = {
  maxConcurrentRequests: defaultMaxConcurrentRequests,
  maxEventLoopDelay: 1000,
  maxEventLoopUtilization: 0,
  maxHeapUsedBytes: Math.floor(0.85 * getHeapStatistics().heap_size_limit),
  maxRssBytes: Math.floor(0.8 * memoryBudget()),
  sampleInterval: 1000,
  retryAfter: 5,
};

/**
 * The requests in flight on the reconcile routes of one app, against its limit (0: none). A
 * request counts from its admission until both its response is over (sent, failed, or its
 * connection gone) and every hold on it is released: a client that hangs up does not free the
 * slot of a reconcile that is still running.
 */
export class Admission {
  readonly limit: number;
  #inFlight = 0;
  readonly #holds = new WeakMap<object, number>();

  constructor(limit: number) {
    this.limit = limit;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** Counts `request` in flight, holding it once, unless the limit is reached (then false). */
  admit(request: object): boolean {
    if (this.limit > 0 && this.#inFlight >= this.limit) return false;
    this.#inFlight += 1;
    this.#holds.set(request, 1);
    return true;
  }

  /** One more hold on an admitted request (a no-op for a request that was not admitted). */
  hold(request: object): void {
    const holds = this.#holds.get(request);
    if (holds !== undefined) this.#holds.set(request, holds + 1);
  }

  /** Releases one hold; the last one frees the request's place. */
  release(request: object): void {
    const holds = this.#holds.get(request);
    if (holds === undefined) return;
    if (holds > 1) {
      this.#holds.set(request, holds - 1);
      return;
    }
    this.#holds.delete(request);
    this.#inFlight -= 1;
  }
}

/**
 * Adds load shedding to the reconcile routes of `scope`: under-pressure's limits, then the
 * concurrency limit of `admission` (shared by every scope of an app). A refused request gets
 * under-pressure's FST_UNDER_PRESSURE error or an OverloadedError, for the scope's error handler.
 */
export async function addLoadShedding(
  scope: HostApp,
  pressure: Required<PressureOptions>,
  admission: Admission,
): Promise<void> {
  const { maxEventLoopDelay, maxEventLoopUtilization, maxHeapUsedBytes, maxRssBytes, sampleInterval, retryAfter } =
    pressure;
  await scope.register(underPressure, {
    maxEventLoopDelay,
    maxEventLoopUtilization,
    maxHeapUsedBytes,
    maxRssBytes,
    sampleInterval,
    retryAfter,
  });
  if (admission.limit <= 0) return;
  scope.addHook('onRequest', (request, reply, done) => {
    if (!admission.admit(request)) {
      done(
        new OverloadedError(
          `overloaded: ${admission.limit} requests in flight, the most this instance takes; try again later`,
        ),
      );
      return;
    }
    // 'close' comes once for every response: sent, failed, or its connection gone. The reconcile
    // itself holds the request while it runs (./run.ts runReconcile).
    reply.raw.once('close', () => {
      admission.release(request);
    });
    done();
  });
}
