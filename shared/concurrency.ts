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

/**
 * One run per key at a time within this process: a run for a busy key waits until every run of
 * that key queued before it has finished, whatever started it (an event, a manual request, a pass
 * over all objects). `fn` learns whether it waited, so a caller holding a listed copy of the
 * object knows that copy may be stale and reads it again.
 */
export class KeyedSerializer {
  // Per busy key: settles when the last run queued for it has finished (never rejects).
  readonly #tails = new Map<string, Promise<undefined>>();

  /** Runs `fn` once no other run of `key` is in flight; its result or error is the caller's. */
  async run<T>(key: string, fn: (waited: boolean) => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key);
    const done = Promise.withResolvers<undefined>();
    this.#tails.set(key, done.promise);
    try {
      if (previous !== undefined) await previous;
      return await fn(previous !== undefined);
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
