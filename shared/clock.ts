// Time, injected. Code that reads the time or waits does it through a Clock, so that a test can
// run it on a ManualClock, which moves only when the test moves it, instead of waiting on real time.

/** Reads the time and waits. */
export interface Clock {
  /** Milliseconds since the epoch, as Date.now(). */
  now(): number;
  /** Resolves after `ms`, or at once (without rejecting) when `signal` aborts; at once when `ms` <= 0. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Real time: Date.now() and setTimeout. */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: systemSleep,
};

async function systemSleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted === true || ms <= 0) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** One sleep waiting on a {@link ManualClock}. */
export interface PendingSleep {
  /** When it ends. */
  readonly until: number;
  /** How long it was asked to last. */
  readonly ms: number;
}

interface Sleeper extends PendingSleep {
  readonly wake: () => void;
}

/**
 * A clock for tests: time stands still until {@link ManualClock.advance} moves it, which wakes the
 * sleeps that end by then. Code woken runs after advance() returns, and sees the new time.
 */
export class ManualClock implements Clock {
  #now: number;
  #sleepers: Sleeper[] = [];

  constructor(start: number) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  async sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted === true || ms <= 0) return;
    await new Promise<void>((resolve) => {
      const sleeper: Sleeper = {
        until: this.#now + ms,
        ms,
        wake: () => {
          this.#sleepers = this.#sleepers.filter((other) => other !== sleeper);
          signal?.removeEventListener('abort', sleeper.wake);
          resolve();
        },
      };
      this.#sleepers.push(sleeper);
      signal?.addEventListener('abort', sleeper.wake, { once: true });
    });
  }

  /** The sleeps waiting, the one that ends first first. */
  get pending(): readonly PendingSleep[] {
    return this.#sleepers.map(({ until, ms }) => ({ until, ms })).sort((a, b) => a.until - b.until);
  }

  /** Moves time forward by `ms` and wakes, in the order they end, the sleeps that end by then. */
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`a clock only moves forward, not by ${ms} ms`);
    this.#now += ms;
    const due = this.#sleepers.filter((sleeper) => sleeper.until <= this.#now).sort((a, b) => a.until - b.until);
    for (const sleeper of due) sleeper.wake();
  }
}
