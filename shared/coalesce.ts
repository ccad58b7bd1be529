// Coalescing of passes within one process. Requests that each want the same thing done afresh —
// reconcile the whole route table, list every node — and arrive while a pass runs need not each
// start one: they share the next pass. At most one pass runs and at most one waits; a request's
// answer always comes from a pass that started after the request arrived, so it reflects state at
// least as new as the request. Passes can also be spaced: one starts no sooner than a minimum
// interval after the one before it started (upstream's watch-based route reconcile does the same
// with a token bucket), so a stream of requests costs one pass per interval, not one per request.
//
// This holds within one process only. Two replicas run their passes independently (harmless when
// every pass is level-triggered and idempotent, but duplicate work).

import { systemClock, type Clock } from './clock.ts';

/** What a pass is run with: a signal that aborts once every request waiting for it has gone. */
export type Pass<T, C> = (context: C, signal: AbortSignal) => Promise<T>;

// One pass and the requests waiting for it.
class Batch<T, C> {
  readonly controller = new AbortController();
  readonly result = Promise.withResolvers<T>();
  readonly context: C;
  #waiting = 0;

  constructor(context: C) {
    this.context = context;
    // Every request awaits the result; this only keeps a failed pass nobody waits for any more
    // from being reported as an unhandled rejection.
    this.result.promise.catch(() => undefined);
  }

  // The pass is aborted only when every request waiting for it was abandoned: one client giving
  // up must not cut the work the others wait for.
  attach(signal: AbortSignal): void {
    if (signal.aborted) return;
    this.#waiting += 1;
    signal.addEventListener(
      'abort',
      () => {
        this.#waiting -= 1;
        if (this.#waiting === 0) this.controller.abort(signal.reason);
      },
      { once: true },
    );
  }
}

/** How passes are spaced. */
export interface CoalescerOptions {
  /** A pass starts no sooner than this after the previous one started (default 0: at once). */
  readonly minIntervalMs?: number;
  readonly clock?: Clock;
}

/**
 * Runs `pass` for the requests that join it, one pass at a time. `join` queues a pass when none
 * is queued, or joins the queued one; the queued pass starts when none runs and the minimum
 * interval since the last start has passed. A request gets its pass's result or error. The queued
 * pass runs with the context (logger, options) of the first request that queued it.
 */
export class Coalescer<T, C> {
  readonly #pass: Pass<T, C>;
  readonly #minIntervalMs: number;
  readonly #clock: Clock;
  #running: Batch<T, C> | undefined;
  #queued: Batch<T, C> | undefined;
  #lastStart = Number.NEGATIVE_INFINITY;

  constructor(pass: Pass<T, C>, options: CoalescerOptions = {}) {
    this.#pass = pass;
    this.#minIntervalMs = options.minIntervalMs ?? 0;
    this.#clock = options.clock ?? systemClock;
  }

  /** Whether a pass runs now (for tests and metrics). */
  get busy(): boolean {
    return this.#running !== undefined;
  }

  /** The result of a pass that starts no earlier than this call. */
  async join(context: C, signal: AbortSignal): Promise<T> {
    let batch = this.#queued;
    if (batch === undefined) {
      batch = this.#queued = new Batch(context);
      if (this.#running === undefined) this.#startQueued();
    }
    batch.attach(signal);
    return batch.result.promise;
  }

  // Starts the queued pass now, or once the minimum interval since the last start has passed
  // (requests arriving meanwhile join it: it has not started yet).
  #startQueued(): void {
    const wait = this.#lastStart + this.#minIntervalMs - this.#clock.now();
    if (wait <= 0) this.#begin();
    else
      void this.#clock.sleep(wait).then(() => {
        this.#begin();
      });
  }

  #begin(): void {
    const batch = this.#queued;
    if (batch === undefined || this.#running !== undefined) return;
    this.#queued = undefined;
    this.#running = batch;
    this.#lastStart = this.#clock.now();
    void this.#run(batch);
  }

  async #run(batch: Batch<T, C>): Promise<void> {
    try {
      batch.result.resolve(await this.#pass(batch.context, batch.controller.signal));
    } catch (error) {
      batch.result.reject(error);
    }
    // Synchronously with the end of this pass, so no request can slip in and start a third one.
    this.#running = undefined;
    if (this.#queued !== undefined) this.#startQueued();
  }
}
