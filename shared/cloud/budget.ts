// The cloud call budget (ADR 0015): a token bucket, `rate` cloud calls a second up to `burst`.
//
// The relay holds one, from which every delivery to a function takes, before it is sent, as many
// tokens as the calls its reconcile may make (the function's `cloudCallsPerObject` in the
// catalogue; one for a `reconcile.all` trigger). The relay is the one sender of events to every
// function instance (one leader, ADR 0007), so a bucket held here paces the work of all instances
// together, however many a platform scales out to: a per-instance limit would multiply with them.
// A pass over all objects runs inside one instance: the relay lends it a share of the rate for as
// long as its trigger is in flight (lend()), and the instance paces the pass's calls with a bucket
// of that share (./paced.ts). What the budget cannot pace is said in the ADR.
//
// Takes are served in order: a waiting delivery is not overtaken by later ones.

import { systemClock, type Clock } from '../clock.ts';

/** Calls a second, and how many may go at once after a quiet spell. */
export interface CallBudgetSettings {
  readonly rate: number;
  readonly burst: number;
}

/** Throws RangeError naming the setting unless rate > 0 and burst is a whole number >= 1. */
export function checkCallBudget(settings: CallBudgetSettings): void {
  if (!Number.isFinite(settings.rate) || settings.rate <= 0)
    throw new RangeError(`cloud call budget: the rate must be more than 0 calls a second, got ${settings.rate}`);
  if (!Number.isInteger(settings.burst) || settings.burst < 1)
    throw new RangeError(`cloud call budget: the burst must be a whole number of at least 1, got ${settings.burst}`);
}

/** A token bucket; see the module comment. */
export class CallBudget {
  readonly #rate: number;
  readonly #burst: number;
  // Calls a second and tokens lent to passes in flight: the bucket refills at #rate minus the
  // first and holds #burst minus the second (at least one), so that it and the passes' buckets
  // together never hold more than the burst (unless the burst is smaller than the passes).
  #lent = 0;
  #lentBurst = 0;
  readonly #clock: Clock;
  #tokens: number;
  #at: number;
  #tail: Promise<void> = Promise.resolve();

  constructor(settings: CallBudgetSettings, clock: Clock = systemClock) {
    checkCallBudget(settings);
    this.#rate = settings.rate;
    this.#burst = settings.burst;
    this.#clock = clock;
    this.#tokens = settings.burst;
    this.#at = clock.now();
  }

  /**
   * Waits for `calls` tokens (at most what the bucket holds, the burst less what is lent) and takes them;
   * resolves with the ms waited. When `signal` aborts first, resolves at once and takes nothing
   * (the delivery is not made either).
   */
  take(signal: AbortSignal, calls = 1): Promise<number> {
    const started = this.#clock.now();
    const turn = this.#tail.then(async () => {
      for (;;) {
        if (signal.aborted) return;
        this.#refill();
        // Computed each time: a lend or a give-back while this take waits changes what the bucket holds.
        const cost = Math.min(Math.max(calls, 1), this.#capacity());
        if (this.#tokens >= cost) {
          this.#tokens -= cost;
          return;
        }
        await this.#clock.sleep(Math.ceil(((cost - this.#tokens) * 1000) / this.#refillRate()), signal);
      }
    });
    this.#tail = turn;
    return turn.then(() => this.#clock.now() - started);
  }

  /** Calls a second, lent ones included. */
  get rate(): number {
    return this.#rate;
  }

  /** The most tokens the bucket holds. */
  get burst(): number {
    return this.#burst;
  }

  /**
   * Lends `share` (its rate less than what is left unlent) until the returned function is called:
   * meanwhile the bucket refills that much slower and holds `share.burst` fewer tokens (the
   * borrower's own bucket starts with them). Calling the returned function again does nothing.
   */
  lend(share: CallBudgetSettings): () => void {
    const { rate, burst } = share;
    if (!(rate > 0) || rate >= this.#refillRate())
      throw new RangeError(`cloud call budget: cannot lend ${rate} calls a second of the ${this.#refillRate()} left`);
    this.#refill();
    this.#lent += rate;
    this.#lentBurst += burst;
    this.#tokens = Math.min(this.#tokens, this.#capacity());
    let returned = false;
    return () => {
      if (returned) return;
      returned = true;
      this.#refill();
      this.#lent -= rate;
      this.#lentBurst -= burst;
    };
  }

  /** The most tokens the bucket holds now: the burst less what is lent, at least one. */
  #capacity(): number {
    return Math.max(1, this.#burst - this.#lentBurst);
  }

  /** Calls a second not lent: what the bucket refills at now. */
  #refillRate(): number {
    return this.#rate - this.#lent;
  }

  #refill(): void {
    const now = this.#clock.now();
    this.#tokens = Math.min(this.#capacity(), this.#tokens + ((now - this.#at) * this.#refillRate()) / 1000);
    this.#at = now;
  }
}
