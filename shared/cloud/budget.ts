// The cloud call budget (ADR 0015): a token bucket, `rate` cloud calls a second up to `burst`.
//
// The relay holds one, from which every delivery to a function takes, before it is sent, as many
// tokens as the calls its reconcile may make (the function's `cloudCallsPerObject` in the
// catalogue; one for a `reconcile.all` trigger), and to which it gives back what the function
// says it did not use (the reply's `cloudCalls`). The relay is the one sender of events to every
// function instance (one leader, ADR 0007), so a bucket held here paces the work of all instances
// together, however many a platform scales out to: a per-instance limit would multiply with them.
// A pass over all objects runs inside one instance: the relay lends it a share of the rate for as
// long as its trigger is in flight (lend()), and the instance paces the pass's calls with a bucket
// of that share (./paced.ts). What the budget cannot pace is said in the ADR.
//
// Takes are fair between flows (the relay's: a destination and a kind of object): each waiting
// flow is served in turn by the tokens it has taken, the one that has taken the least since it
// began waiting first (start-time fair queueing, by tokens), so a flood of one flow — a tenant
// relabelling a thousand Services — delays another flow's take by about one take of its own, not
// by the flood. A flow with nothing waiting leaves its share to the others (ADR 0018). Within a
// flow, takes are served in order: a waiting take is not overtaken by later ones of its flow.
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

/** What a take got: how long it waited, and how many tokens it took (0 when it was aborted). */
export interface Taken {
  readonly waitedMs: number;
  readonly tokens: number;
}

// One take waiting its turn.
interface Waiter {
  readonly calls: number;
  readonly flow: Flow;
  readonly signal: AbortSignal;
  /** Arrival order: ties between flows go to the earliest waiter. */
  readonly seq: number;
  readonly done: (tokens: number) => void;
}

// A flow's tokens taken (its start tag, in tokens) and its waiting takes, in order.
interface Flow {
  served: number;
  readonly waiters: Waiter[];
}

/** A token bucket with takes served fairly between flows; see the module comment. */
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
  readonly #flows = new Map<string, Flow>();
  // The start tag of the take served last: a flow that begins waiting starts no lower, so that an
  // idle spell earns it no credit over the flows that kept waiting.
  #virtual = 0;
  #seq = 0;
  #serving = false;
  // Ends the server's sleep early: something changed that may let a take go sooner or change whose turn it is.
  #wake: AbortController | undefined;

  constructor(settings: CallBudgetSettings, clock: Clock = systemClock) {
    checkCallBudget(settings);
    this.#rate = settings.rate;
    this.#burst = settings.burst;
    this.#clock = clock;
    this.#tokens = settings.burst;
    this.#at = clock.now();
  }

  /**
   * Waits for `calls` tokens (at most what the bucket holds, the burst less what is lent) and takes
   * them, served fairly with the other flows' takes (see the module comment); resolves with the ms
   * waited and the tokens taken. When `signal` aborts first, resolves at once and takes nothing
   * (the delivery is not made either).
   */
  take(signal: AbortSignal, calls = 1, flow = ''): Promise<Taken> {
    const started = this.#clock.now();
    if (signal.aborted) return Promise.resolve({ waitedMs: 0, tokens: 0 });
    const queue = this.#flow(flow);
    if (queue.waiters.length === 0) queue.served = Math.max(queue.served, this.#virtual);
    return new Promise<Taken>((resolve) => {
      const onAbort = (): void => {
        const at = queue.waiters.indexOf(waiter);
        if (at >= 0) queue.waiters.splice(at, 1);
        waiter.done(0);
        this.#poke();
      };
      const waiter: Waiter = {
        calls: Math.max(calls, 1),
        flow: queue,
        signal,
        seq: (this.#seq += 1),
        done: (tokens) => {
          signal.removeEventListener('abort', onAbort);
          resolve({ waitedMs: this.#clock.now() - started, tokens });
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      queue.waiters.push(waiter);
      this.#poke();
      void this.#serve();
    });
  }

  /**
   * Puts back `tokens` that `flow` took and did not use (a delivery whose function made fewer
   * calls than it was charged): the bucket holds them again, up to what it may hold, and the flow
   * is counted as having taken that many fewer.
   */
  giveBack(tokens: number, flow = ''): void {
    if (!(tokens > 0)) return;
    this.#refill();
    this.#tokens = Math.min(this.#capacity(), this.#tokens + tokens);
    const queue = this.#flows.get(flow);
    if (queue !== undefined) queue.served = Math.max(0, queue.served - tokens);
    this.#poke();
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
      this.#poke();
    };
  }

  // Serves the waiting takes, one at a time, until none is left; one server at a time.
  async #serve(): Promise<void> {
    if (this.#serving) return;
    this.#serving = true;
    try {
      for (let waiter = this.#next(); waiter !== undefined; waiter = this.#next()) {
        this.#refill();
        // Computed each time: a lend or a give-back while it waits changes what the bucket holds.
        const cost = Math.min(waiter.calls, this.#capacity());
        if (this.#tokens >= cost) {
          this.#tokens -= cost;
          this.#virtual = waiter.flow.served;
          waiter.flow.served += cost;
          waiter.flow.waiters.shift();
          waiter.done(cost);
          continue;
        }
        const wake = new AbortController();
        this.#wake = wake;
        await this.#clock.sleep(Math.ceil(((cost - this.#tokens) * 1000) / this.#refillRate()), wake.signal);
      }
    } finally {
      this.#serving = false;
      this.#wake = undefined;
    }
  }

  // The take whose turn it is: the head of the waiting flow that has taken the fewest tokens, the
  // earliest on a tie.
  #next(): Waiter | undefined {
    let best: Waiter | undefined;
    for (const flow of this.#flows.values()) {
      const head = flow.waiters[0];
      if (head === undefined) continue;
      if (
        best === undefined ||
        flow.served < best.flow.served ||
        (flow.served === best.flow.served && head.seq < best.seq)
      )
        best = head;
    }
    return best;
  }

  #flow(name: string): Flow {
    let flow = this.#flows.get(name);
    if (flow === undefined) {
      flow = { served: this.#virtual, waiters: [] };
      this.#flows.set(name, flow);
    }
    return flow;
  }

  #poke(): void {
    this.#wake?.abort();
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
