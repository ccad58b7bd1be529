// Coalescing of whole-cluster reconciles within one process. Every Node event and every periodic
// trigger asks routes for the same thing — reconcile the whole route table — so requests that
// arrive while a pass runs need not each start one: they share the next pass. At most one pass
// runs and at most one waits; a request's answer always comes from a pass that started after the
// request arrived, so it reflects state at least as new as the request.
//
// This holds within one process only. Two replicas run their passes independently (harmless, as
// every pass is level-triggered and idempotent, but duplicate cloud calls): deploy routes with a
// single instance (Knative max-scale 1) to get the coalescing across all senders.

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

/**
 * Runs `pass` for the requests that join it, one pass at a time. `join` starts a pass when none
 * runs; while one runs, it waits for the one queued behind it (queuing it if needed), which starts
 * when the running one ends. A request gets its pass's result or error. The queued pass runs with
 * the context (logger, options) of the first request that queued it.
 */
export class Coalescer<T, C> {
  readonly #pass: Pass<T, C>;
  #running: Batch<T, C> | undefined;
  #queued: Batch<T, C> | undefined;

  constructor(pass: Pass<T, C>) {
    this.#pass = pass;
  }

  /** Whether a pass runs now (for tests and metrics). */
  get busy(): boolean {
    return this.#running !== undefined;
  }

  /** The result of a pass that starts no earlier than this call. */
  async join(context: C, signal: AbortSignal): Promise<T> {
    let batch = this.#queued;
    if (batch === undefined && this.#running !== undefined) batch = this.#queued = new Batch(context);
    batch ??= this.#start(new Batch(context));
    batch.attach(signal);
    return batch.result.promise;
  }

  #start(batch: Batch<T, C>): Batch<T, C> {
    this.#running = batch;
    void this.#run(batch);
    return batch;
  }

  async #run(batch: Batch<T, C>): Promise<void> {
    try {
      batch.result.resolve(await this.#pass(batch.context, batch.controller.signal));
    } catch (error) {
      batch.result.reject(error);
    }
    // Synchronously with the end of this pass, so no request can slip in and start a third one.
    this.#running = undefined;
    const next = this.#queued;
    this.#queued = undefined;
    if (next !== undefined) this.#start(next);
  }
}
