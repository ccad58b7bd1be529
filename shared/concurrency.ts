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
