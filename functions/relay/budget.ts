// The cloud call budget (ADR 0015): a token bucket, `rate` cloud calls a second up to `burst`, from
// which every delivery to a function takes, before it is sent, as many tokens as the calls its
// reconcile may make (the function's `cloudCallsPerObject` in the catalogue; one for a
// `reconcile.all` trigger). The relay is the one sender of events to every function instance (one
// leader, ADR 0007), so a bucket held here paces the work of all instances together, however many
// a platform scales out to: a per-instance limit would multiply with them. What the budget cannot
// pace is said in the ADR.
//
// Takes are served in order: a waiting delivery is not overtaken by later ones.

import { systemClock, type Clock } from '../../shared/clock.ts';

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
   * Waits for `calls` tokens (at most the burst, which is all the bucket holds) and takes them;
   * resolves with the ms waited. When `signal` aborts first, resolves at once and takes nothing
   * (the delivery is not made either).
   */
  take(signal: AbortSignal, calls = 1): Promise<number> {
    const started = this.#clock.now();
    const cost = Math.min(Math.max(calls, 1), this.#burst);
    const turn = this.#tail.then(async () => {
      for (;;) {
        if (signal.aborted) return;
        this.#refill();
        if (this.#tokens >= cost) {
          this.#tokens -= cost;
          return;
        }
        await this.#clock.sleep(Math.ceil(((cost - this.#tokens) * 1000) / this.#rate), signal);
      }
    });
    this.#tail = turn;
    return turn.then(() => this.#clock.now() - started);
  }

  #refill(): void {
    const now = this.#clock.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#at) * this.#rate) / 1000);
    this.#at = now;
  }
}
