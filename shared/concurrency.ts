// Bounded concurrency for work over many objects, so a large cluster does not flood an API.

/** Runs `fn` over `items` with at most `limit` calls in flight; results keep the items' order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`mapLimit: limit must be a positive integer, got ${limit}`);
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next;
      next += 1;
      results[index] = await fn(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Runs one key's work under a pass's guard: `stale` says whether the pass's listed copy may be out of date. */
export type PassRun = <T>(key: string, fn: (stale: boolean) => Promise<T>) => Promise<T>;

/**
 * One run per key at a time within this process: a run for a busy key waits until every run of
 * that key queued before it has finished, whatever started it (an event, a manual request, a pass
 * over all objects). `fn` learns whether it waited. A pass over listed copies goes through pass(),
 * which also tells a run whether any run of its key started since the pass began (before its
 * list was read): a run that came and went between the list and the pass reaching that key made
 * the listed copy stale although nothing was waiting.
 */
export class KeyedSerializer {
  // Per busy key: settles when the last run queued for it has finished (never rejects).
  readonly #tails = new Map<string, Promise<undefined>>();
  // Per open pass: the keys whose runs started since it began.
  readonly #passes = new Set<Set<string>>();

  /** Runs `fn` once no other run of `key` is in flight; its result or error is the caller's. */
  run<T>(key: string, fn: (waited: boolean) => Promise<T>): Promise<T> {
    return this.#run(key, fn, undefined);
  }

  /**
   * A pass over copies listed inside `body`: begin it before reading the list. Its `run` is
   * {@link run}, but `stale` is also true when a run of the key started since the pass began.
   */
  async pass<T>(body: (run: PassRun) => Promise<T>): Promise<T> {
    const started = new Set<string>();
    this.#passes.add(started);
    try {
      return await body((key, fn) => this.#run(key, fn, started));
    } finally {
      this.#passes.delete(started);
    }
  }

  async #run<T>(key: string, fn: (stale: boolean) => Promise<T>, pass: Set<string> | undefined): Promise<T> {
    const previous = this.#tails.get(key);
    const done = Promise.withResolvers<undefined>();
    this.#tails.set(key, done.promise);
    try {
      if (previous !== undefined) await previous;
      const stale = previous !== undefined || (pass?.has(key) ?? false);
      for (const open of this.#passes) open.add(key);
      return await fn(stale);
    } finally {
      done.resolve(undefined);
      if (this.#tails.get(key) === done.promise) this.#tails.delete(key);
    }
  }

  /** Keys with a run in flight or queued (for tests and metrics). */
  get busy(): number {
    return this.#tails.size;
  }
}
