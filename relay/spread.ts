// A period's rechecks spread over the period (ADR 0031): a function whose period rechecks every
// object the relay knows (node-init's address refresh: every Node, every 5 minutes) gets them one
// after the other, evenly, instead of in one burst each period: with 5,000 Nodes and 5 minutes,
// about 17 a second. Each item is handed to `send` at its time (the leader pushes it onto the
// object's own queue key then, with the copy it has by then), so the per-key serialization and the
// skip of a busy key apply to each as they did to the burst.

/** The shortest wait between two sends: below it, several items go at each send. */
export const minimumStepMs = 10;

/** One round of items at a time, sent evenly over a period. */
export class Spread<T> {
  readonly #send: (item: T) => void;
  #items: readonly T[] = [];
  #next = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(send: (item: T) => void) {
    this.#send = send;
  }

  /** Items of the current round not sent yet. */
  get pending(): number {
    return this.#items.length - this.#next;
  }

  /**
   * Starts a round: `items` sent evenly over `periodMs`, the first ones at once and the last a step
   * before the period ends. What the round before has not sent yet (timers late under load) is
   * sent at once first, so that no item waits more than a period and a step.
   */
  start(items: readonly T[], periodMs: number): void {
    this.flush();
    this.#items = items;
    this.#next = 0;
    if (items.length === 0) return;
    // Sends of `batch` items each, `step` ms apart, never closer than minimumStepMs.
    const batch = Math.max(1, Math.ceil((items.length * minimumStepMs) / periodMs));
    const step = (periodMs * batch) / items.length;
    const tick = (): void => {
      this.#timer = undefined;
      this.#sendUpTo(this.#next + batch);
      if (this.pending > 0) this.#timer = setTimeout(tick, step);
    };
    tick();
  }

  /** Sends what is left of the current round at once. */
  flush(): void {
    this.#clear();
    this.#sendUpTo(this.#items.length);
  }

  /** Drops what is left of the current round. */
  stop(): void {
    this.#clear();
    this.#items = [];
    this.#next = 0;
  }

  #sendUpTo(end: number): void {
    while (this.#next < Math.min(end, this.#items.length)) {
      const item = this.#items[this.#next] as T;
      this.#next += 1;
      this.#send(item);
    }
  }

  #clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
