// The delivery queue: one slot per (destination, key), so that
// - events for one key coalesce while they wait (the newest state wins, see `merge`),
// - a key never has two deliveries in flight, and its deliveries leave in order,
// - a failed delivery is retried with exponential backoff and jitter until it is accepted (a key
//   that keeps failing settles at the ceiling, 300 s by default, and is logged at every attempt),
//   or until the function rejects it for good (400);
// - at most `concurrency` deliveries are in flight across all keys and destinations, and a free
//   place goes to the lanes (a destination and the kind of key: `Node`, `Service`,
//   `reconcile.all`) with something ready in turn, so that a flood in one lane (a thousand
//   Services relabelled) never holds another (a new Node) back behind it (ADR 0018).
//
// A key waiting for a retry keeps its delay when new events for it arrive; they join the waiting
// delivery. Keys that failed only because their destination was unreachable are released at once
// when a delivery to that destination is accepted: the function is back, there is no reason to
// make each key sit out the rest of its backoff.

import type { Logger } from 'pino';
import { systemClock, type Clock } from '../shared/clock.ts';
import { backoffDelay, type BackoffPolicy } from './backoff.ts';
import type { QueueGauges, RelayMetrics } from './metrics.ts';

/** How one delivery attempt went. */
export type DeliveryOutcome =
  | {
      readonly kind: 'accepted';
      readonly status: number;
      /** The cloud calls the function says it made (its reply's `cloudCalls`), when it says so. */
      readonly cloudCalls?: number;
    }
  | { readonly kind: 'rejected'; readonly status: number; readonly reason: string; readonly logged?: true }
  | {
      readonly kind: 'retry';
      /** The function logged this failure in the relay's own log (it answered in process): the queue's line is debug. */
      readonly logged?: true;
      /** `status`: an HTTP error; `retry-after`: 429/503 naming a delay; `unreachable`: no answer (refused, reset, timed out). */
      readonly reason: 'status' | 'retry-after' | 'unreachable';
      readonly detail: string;
      readonly status?: number;
      /** From Retry-After: the delay the function asked for. */
      readonly retryAfterMs?: number;
    };

/** What the queue needs. */
export interface QueueOptions<T> {
  /** Deliveries in flight at most, over all keys. */
  readonly concurrency: number;
  readonly retry: BackoffPolicy;
  /** The newer of two waiting values for one key replacing (or merging into) the older; undefined keeps both, in order. */
  readonly merge: (older: T, newer: T) => T | undefined;
  /** Makes one delivery; should resolve with the outcome rather than reject (a rejection counts as unreachable). */
  readonly send: (destination: string, key: string, value: T, signal: AbortSignal) => Promise<DeliveryOutcome>;
  readonly metrics: RelayMetrics;
  readonly log: Logger;
  readonly random?: () => number;
  /** What retries wait on and latency is measured by; default the system clock. */
  readonly clock?: Clock;
}

/** What push did. */
export type PushResult = 'queued' | 'coalesced' | 'skipped';

interface Waiting<T> {
  readonly value: T;
  /** When the oldest change it carries was observed (the clock's now()), for the latency metric. */
  readonly observedAt: number;
  /** The oldest watch event it carries (none for a periodic trigger or recheck), for the event age. */
  readonly event?: WatchEvent | undefined;
}

/** A watch event a delivery carries: when the relay observed it, and its resource (`nodes`). */
interface WatchEvent {
  readonly at: number;
  readonly resource: string;
}

// What two waiting values of one key merged into `value` carry: the older observation and event.
function joined<T>(a: Waiting<T>, b: Waiting<T>, value: T): Waiting<T> {
  const event = a.event === undefined || (b.event !== undefined && b.event.at < a.event.at) ? b.event : a.event;
  return { value, observedAt: Math.min(a.observedAt, b.observedAt), event };
}

interface Slot<T> {
  readonly destination: string;
  readonly key: string;
  pending: Waiting<T>[];
  current: Waiting<T> | undefined;
  failures: number;
  /** Set while the slot waits out a retry delay; aborting it ends the wait without a retry. */
  retryWait: AbortController | undefined;
  unreachable: boolean;
  ready: boolean;
}

/** The per-key coalescing, retrying delivery queue; see the module comment. */
export class DeliveryQueue<T> implements QueueGauges {
  readonly #options: QueueOptions<T>;
  readonly #clock: Clock;
  readonly #slots = new Map<string, Slot<T>>();
  // Slots ready to send, by lane, and the lanes with any in turn order.
  readonly #lanes = new Map<string, Slot<T>[]>();
  readonly #turns: string[] = [];
  // Slots waiting out a backoff only because their destination did not answer.
  readonly #unreachable = new Map<string, Set<Slot<T>>>();
  readonly #abort = new AbortController();
  #active = 0;
  #idle: (() => void)[] = [];

  constructor(options: QueueOptions<T>) {
    if (!Number.isInteger(options.concurrency) || options.concurrency < 1)
      throw new RangeError(`concurrency must be a positive integer, got ${options.concurrency}`);
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Queues `value` for `key` at `destination`. It merges into a value already waiting for that key
   * ('coalesced'), or waits behind it and behind a delivery in flight ('queued'). With `skipIfBusy`
   * nothing is queued when the key has anything waiting, in flight or in backoff ('skipped'): for
   * periodic triggers, which must not pile up behind a slow or failing function.
   */
  push(
    destination: string,
    key: string,
    value: T,
    options: {
      readonly observedAt?: number;
      readonly skipIfBusy?: boolean;
      /** The value comes from a watch event of this resource, observed at `observedAt`. */
      readonly event?: string;
    } = {},
  ): PushResult {
    if (this.#abort.signal.aborted) return 'skipped';
    const slot = this.#slot(destination, key);
    if (
      options.skipIfBusy === true &&
      (slot.current !== undefined || slot.pending.length > 0 || slot.retryWait !== undefined)
    )
      return 'skipped';
    const observedAt = options.observedAt ?? this.#clock.now();
    const event = options.event === undefined ? undefined : { at: observedAt, resource: options.event };
    const result = this.#add(slot, { value, observedAt, event });
    this.#schedule(slot);
    this.#pump();
    return result;
  }

  /** Stops: aborts deliveries in flight, cancels retries, forgets everything waiting. */
  stop(): void {
    this.#abort.abort(new Error('the relay stopped delivering'));
    for (const slot of this.#slots.values()) slot.retryWait?.abort();
    this.#slots.clear();
    this.#lanes.clear();
    this.#turns.length = 0;
    this.#unreachable.clear();
    this.#settleIdle();
  }

  /** Resolves once nothing is waiting, in flight or in backoff (or the queue stopped). */
  async idle(): Promise<void> {
    if (this.#slots.size === 0) return;
    await new Promise<void>((resolve) => this.#idle.push(resolve));
  }

  /** Keys of `destination` with something waiting or in flight. */
  keys(destination: string): string[] {
    return [...this.#slots.values()].filter((slot) => slot.destination === destination).map((slot) => slot.key);
  }

  depth(): ReadonlyMap<string, number> {
    return this.#count((slot) => slot.pending.length > 0 && slot.current === undefined);
  }

  inFlight(): ReadonlyMap<string, number> {
    return this.#count((slot) => slot.current !== undefined);
  }

  retrying(): ReadonlyMap<string, number> {
    return this.#count((slot) => slot.retryWait !== undefined);
  }

  #count(predicate: (slot: Slot<T>) => boolean): Map<string, number> {
    const counts = new Map<string, number>();
    for (const slot of this.#slots.values())
      if (predicate(slot)) counts.set(slot.destination, (counts.get(slot.destination) ?? 0) + 1);
    return counts;
  }

  #slot(destination: string, key: string): Slot<T> {
    const id = `${destination}\u0000${key}`;
    let slot = this.#slots.get(id);
    if (slot === undefined) {
      slot = {
        destination,
        key,
        pending: [],
        current: undefined,
        failures: 0,
        retryWait: undefined,
        unreachable: false,
        ready: false,
      };
      this.#slots.set(id, slot);
    }
    return slot;
  }

  #add(slot: Slot<T>, waiting: Waiting<T>): PushResult {
    const last = slot.pending.at(-1);
    const merged = last === undefined ? undefined : this.#options.merge(last.value, waiting.value);
    if (last === undefined || merged === undefined) {
      slot.pending.push(waiting);
      return 'queued';
    }
    slot.pending[slot.pending.length - 1] = joined(last, waiting, merged);
    this.#options.metrics.coalesced.inc({ destination: slot.destination });
    return 'coalesced';
  }

  // Marks the slot ready to send, unless it is busy, backing off, or has nothing to send.
  #schedule(slot: Slot<T>): void {
    if (slot.ready || slot.current !== undefined || slot.retryWait !== undefined || slot.pending.length === 0) return;
    slot.ready = true;
    const lane = laneOf(slot);
    const ready = this.#lanes.get(lane);
    if (ready !== undefined) ready.push(slot);
    else {
      this.#lanes.set(lane, [slot]);
      this.#turns.push(lane);
    }
  }

  #pump(): void {
    while (this.#active < this.#options.concurrency && !this.#abort.signal.aborted) {
      const slot = this.#nextReady();
      if (slot === undefined) return;
      slot.ready = false;
      this.#start(slot);
    }
  }

  // The first ready slot of the lane whose turn it is; the lane goes to the back of the turns.
  #nextReady(): Slot<T> | undefined {
    const lane = this.#turns.shift();
    if (lane === undefined) return undefined;
    const ready = this.#lanes.get(lane) ?? [];
    const slot = ready.shift();
    if (ready.length > 0) this.#turns.push(lane);
    else this.#lanes.delete(lane);
    return slot;
  }

  #start(slot: Slot<T>): void {
    const current = slot.pending.shift();
    if (current === undefined) return;
    slot.current = current;
    this.#active += 1;
    const signal = this.#abort.signal;
    this.#options.send(slot.destination, slot.key, current.value, signal).then(
      (outcome) => {
        this.#finish(slot, outcome);
      },
      (error: unknown) => {
        this.#finish(slot, { kind: 'retry', reason: 'unreachable', detail: (error as Error).message });
      },
    );
  }

  #finish(slot: Slot<T>, outcome: DeliveryOutcome): void {
    this.#active -= 1;
    if (this.#abort.signal.aborted) return;
    this.#options.metrics.deliveries.inc({ destination: slot.destination, outcome: outcome.kind });
    if (outcome.kind === 'retry') this.#retry(slot, outcome);
    else this.#done(slot, outcome);
    this.#pump();
    if (this.#slots.size === 0) this.#settleIdle();
  }

  #done(slot: Slot<T>, outcome: Exclude<DeliveryOutcome, { kind: 'retry' }>): void {
    const current = slot.current;
    slot.current = undefined;
    slot.failures = 0;
    this.#setUnreachable(slot, false);
    if (outcome.kind === 'accepted') {
      this.#observeAccepted(slot.destination, current);
      this.#releaseUnreachable(slot.destination);
    } else {
      this.#options.log[outcome.logged === true ? 'debug' : 'error'](
        { destination: slot.destination, key: slot.key, status: outcome.status, reason: shortened(outcome.reason) },
        'delivery rejected by the function; not retried',
      );
    }
    this.#next(slot);
  }

  #observeAccepted(destination: string, accepted: Waiting<T> | undefined): void {
    if (accepted === undefined) return;
    const now = this.#clock.now();
    this.#options.metrics.latency.observe({ destination }, (now - accepted.observedAt) / 1000);
    const { event } = accepted;
    if (event !== undefined)
      this.#options.metrics.eventAge.observe({ destination, resource: event.resource }, (now - event.at) / 1000);
  }

  #next(slot: Slot<T>): void {
    if (slot.pending.length === 0 && slot.current === undefined && slot.retryWait === undefined) {
      this.#slots.delete(`${slot.destination}\u0000${slot.key}`);
      return;
    }
    this.#schedule(slot);
  }

  // Puts the failed value back in front (merged with anything newer that arrived meanwhile) and
  // waits: the function's Retry-After if it gave one (within the ceiling), else the backoff.
  #retry(slot: Slot<T>, outcome: Extract<DeliveryOutcome, { kind: 'retry' }>): void {
    const current = slot.current;
    slot.current = undefined;
    if (current !== undefined) this.#requeue(slot, current);
    slot.failures += 1;
    const policy = this.#options.retry;
    const delayMs =
      outcome.retryAfterMs === undefined
        ? backoffDelay(policy, slot.failures, this.#options.random)
        : Math.min(outcome.retryAfterMs, policy.maxMs);
    this.#options.metrics.retries.inc({ destination: slot.destination, reason: outcome.reason });
    const level = outcome.logged === true ? 'debug' : delayMs >= policy.maxMs ? 'error' : 'warn';
    this.#options.log[level](
      {
        destination: slot.destination,
        key: slot.key,
        attempt: slot.failures,
        reason: outcome.reason,
        status: outcome.status,
        detail: shortened(outcome.detail),
        delayMs,
      },
      'delivery failed; retrying',
    );
    this.#setUnreachable(slot, outcome.reason === 'unreachable');
    const wait = new AbortController();
    slot.retryWait = wait;
    void this.#clock.sleep(delayMs, wait.signal).then(() => {
      if (!wait.signal.aborted) this.#retryDue(slot);
    });
  }

  // The retry delay is over: the slot may send again.
  #retryDue(slot: Slot<T>): void {
    slot.retryWait = undefined;
    this.#setUnreachable(slot, false);
    this.#schedule(slot);
    this.#pump();
  }

  #requeue(slot: Slot<T>, failed: Waiting<T>): void {
    const newer = slot.pending[0];
    const merged = newer === undefined ? undefined : this.#options.merge(failed.value, newer.value);
    if (newer === undefined || merged === undefined) slot.pending.unshift(failed);
    else slot.pending[0] = joined(failed, newer, merged);
  }

  #setUnreachable(slot: Slot<T>, unreachable: boolean): void {
    slot.unreachable = unreachable;
    let set = this.#unreachable.get(slot.destination);
    if (unreachable) {
      if (set === undefined) this.#unreachable.set(slot.destination, (set = new Set()));
      set.add(slot);
    } else {
      set?.delete(slot);
    }
  }

  // The destination answered: the keys that were waiting only because it did not may go now.
  #releaseUnreachable(destination: string): void {
    const set = this.#unreachable.get(destination);
    if (set === undefined || set.size === 0) return;
    this.#unreachable.delete(destination);
    for (const slot of set) {
      slot.retryWait?.abort();
      slot.retryWait = undefined;
      slot.unreachable = false;
      this.#schedule(slot);
    }
  }

  #settleIdle(): void {
    const waiters = this.#idle;
    this.#idle = [];
    for (const resolve of waiters) resolve();
  }
}

// A slot's lane: its destination and the kind its key starts with (`Service/ns/name`: Service).
function laneOf(slot: { readonly destination: string; readonly key: string }): string {
  const slash = slot.key.indexOf('/');
  return `${slot.destination}\u0000${slash < 0 ? slot.key : slot.key.slice(0, slash)}`;
}

// The function's reason in the relay's line, cut short: the line names the destination and the
// key; the whole story is in the function's own log.
function shortened(text: string): string {
  return text.length <= 120 ? text : `${text.slice(0, 119)}…`;
}
