// Exponential backoff with jitter, one policy shape for the two places the relay waits after a
// failure: reconnecting a watch (client-go's reflector: 0.8 s to 30 s) and retrying a delivery
// (the Go service controller: 5 s to 300 s).

/** How delays grow. */
export interface BackoffPolicy {
  /** The first delay, in ms. */
  readonly initialMs: number;
  /** The ceiling the un-jittered delay stops growing at, in ms. */
  readonly maxMs: number;
  /**
   * Each delay is stretched by a random factor in [1, 1 + jitter): 0 is none, 1 up to double
   * (client-go's reflector). Jitter only ever adds, so the ceiling is also the least a saturated
   * retry waits: a permanently failing key is retried at most once per `maxMs`.
   */
  readonly jitter: number;
}

/** The delay before retry number `failures` (1 for the first retry): initial × 2^(failures−1), capped, then jittered. */
export function backoffDelay(policy: BackoffPolicy, failures: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, failures - 1);
  // 2^exponent overflows to Infinity long after the cap has been reached; min() keeps it finite.
  const base = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(exponent, 1023));
  return Math.round(base * (1 + policy.jitter * random()));
}

/** Throws RangeError naming `what` unless the policy's numbers make sense. */
export function checkBackoff(policy: BackoffPolicy, what: string): void {
  const valid =
    Number.isFinite(policy.initialMs) &&
    policy.initialMs >= 0 &&
    Number.isFinite(policy.maxMs) &&
    policy.maxMs >= policy.initialMs &&
    Number.isFinite(policy.jitter) &&
    policy.jitter >= 0;
  if (!valid)
    throw new RangeError(`${what}: need 0 <= initialMs <= maxMs and jitter >= 0, got ${JSON.stringify(policy)}`);
}

/** A failure counter with the delay it implies; reset() after a success. */
export class Backoff {
  readonly #policy: BackoffPolicy;
  readonly #random: () => number;
  #failures = 0;

  constructor(policy: BackoffPolicy, random: () => number = Math.random) {
    this.#policy = policy;
    this.#random = random;
  }

  /** Failures since the last reset. */
  get failures(): number {
    return this.#failures;
  }

  /** Counts a failure and returns how long to wait before trying again, in ms. */
  next(): number {
    this.#failures += 1;
    return backoffDelay(this.#policy, this.#failures, this.#random);
  }

  reset(): void {
    this.#failures = 0;
  }
}
