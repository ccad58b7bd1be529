// Replays refused: the ids (shared/wire/signing.ts: the HMAC that matched, which covers a random
// nonce) of the signed requests this instance has accepted, each remembered until its timestamp
// is past the tolerance, after which the signature check refuses it anyway. Per instance, in
// memory: docs/http-contract.md says what that means across replicas and why it is enough.
//
// Only requests whose HMAC matched are recorded, so only a holder of the secret adds entries: at
// most (requests a second) × (tolerance + clock skew) of them, 64 hex digits each.

import { defaultToleranceSeconds, unixNow, type AuthOptions } from '../wire/signing.ts';

/** The ids of accepted signed requests, until they expire. */
export class ReplayGuard {
  readonly #tolerance: number;
  readonly #now: () => number;
  // By insertion: expiries are almost in order (timestamps differ by at most tolerance + skew), so
  // sweeping from the head keeps every entry at most that much past its expiry.
  readonly #seen = new Map<string, number>();

  constructor(options: Pick<AuthOptions, 'toleranceSeconds' | 'now'>) {
    this.#tolerance = options.toleranceSeconds ?? defaultToleranceSeconds;
    this.#now = options.now ?? unixNow;
  }

  /** How many ids are remembered now. */
  get size(): number {
    return this.#seen.size;
  }

  /**
   * Records `id` (of a request signed at `timestamp`) and returns true, or returns false when it
   * is already recorded: the request is a replay.
   */
  accept(id: string, timestamp: number): boolean {
    this.#sweep();
    if (this.#seen.has(id)) return false;
    this.#seen.set(id, timestamp + this.#tolerance);
    return true;
  }

  #sweep(): void {
    const now = this.#now();
    for (const [id, expiry] of this.#seen) {
      if (expiry >= now) return;
      this.#seen.delete(id);
    }
  }
}
