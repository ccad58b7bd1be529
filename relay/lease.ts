// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does
// it (client-node has none): read the Lease; take it when it is free, released or expired; renew
// it while holding it; every write is a replace carrying the resourceVersion read, so two
// candidates racing for it cannot both win (the loser gets 409 Conflict).
//
// Timings: lease 12 s, renew deadline 8 s, retry period 2 s — client-go's 15 s / 10 s / 2 s
// shortened so that a standby takes over from a SIGKILLed leader within 15 s even in the worst case
// (the kill right after a renewal: the lease duration plus a read and a write), with the same ratio
// of renew deadline to lease duration (ADR 0007, amended). The flags give client-go's back.
// - The holder renews every retry period and steps down when it has not renewed for the renew
//   deadline. A candidate takes over once the Lease has not changed for the lease duration.
// - Expiry is judged on the candidate's own clock, from when it saw the Lease change: it takes
//   the holder's renewTime, bounded to the interval between the candidate's previous read (the
//   change was not there yet) and this one. Clock skew can only move that estimate within the
//   interval, so the holder (steps down 8 s after its last renewal) is gone before a candidate
//   (waits 12 s after it, minus at most one retry period) takes over; and a candidate that reads
//   on the retry period sees a dead holder's Lease expire within the lease duration, not a
//   retry period later.
// - A holder that stops cleanly releases the Lease (empty holder), so a standby takes over on
//   its next read instead of waiting for expiry.
// - All of it runs on an injected clock (settings.clock): the times it reads and writes, its waits,
//   and the renew deadline a request gets (a hung request must not keep a holder leading).

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ApiException, V1MicroTime, type CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../shared/clock.ts';

/** Which Lease, and the timings. */
export interface LeaseSettings {
  readonly name: string;
  readonly namespace: string;
  /** This candidate's identity, unique among candidates; default {@link defaultIdentity}(). */
  readonly identity: string;
  /** How long a Lease is valid after its last renewal; whole seconds on the wire. */
  readonly leaseDurationMs: number;
  /** The holder steps down when it has not renewed for this long; less than the lease duration. */
  readonly renewDeadlineMs: number;
  /** How often candidates and the holder try. */
  readonly retryPeriodMs: number;
  /** What the election reads the time and waits on; default the system clock. */
  readonly clock?: Clock;
}

/** cirrus's Lease and timings: client-go's 15 s / 10 s / 2 s shortened to 12 s / 8 s / 2 s (see above). */
export const defaultLeaseSettings: Omit<LeaseSettings, 'identity'> = {
  name: 'cirrus-relay',
  namespace: 'kube-system',
  leaseDurationMs: 12_000,
  renewDeadlineMs: 8_000,
  retryPeriodMs: 2_000,
};

/** `<hostname>_<8 random hex digits>`: distinct for two processes on one host (or two pods named alike). */
export function defaultIdentity(): string {
  return `${hostname()}_${randomBytes(4).toString('hex')}`;
}

/** Throws RangeError unless renewDeadline < leaseDuration and retryPeriod < renewDeadline, all positive. */
export function checkLeaseSettings(settings: LeaseSettings): void {
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = settings;
  if (!(retryPeriodMs > 0 && renewDeadlineMs > retryPeriodMs && leaseDurationMs > renewDeadlineMs)) {
    throw new RangeError(
      `leader election needs 0 < retry period (${retryPeriodMs} ms) < renew deadline (${renewDeadlineMs} ms) < lease duration (${leaseDurationMs} ms)`,
    );
  }
  if (settings.name === '' || settings.namespace === '' || settings.identity === '')
    throw new RangeError('leader election needs a lease name, namespace and identity');
}

/** What the election tells its owner. */
export interface LeaderCallbacks {
  /** This candidate now holds the Lease. */
  onStartedLeading(): void;
  /** It no longer does (lost, or stopping). */
  onStoppedLeading(): void;
}

// What the candidate last saw of the Lease, and when it decided the Lease last changed.
interface Observation {
  readonly resourceVersion: string;
  readonly holder: string;
  readonly durationMs: number;
  readonly changedAt: number;
}

/** One candidate in the election; see the module comment. */
export class LeaderElection {
  readonly #api: CoordinationV1Api;
  readonly #settings: LeaseSettings;
  readonly #callbacks: LeaderCallbacks;
  readonly #log: Logger;
  readonly #clock: Clock;
  #observed: Observation | undefined;
  #previousReadAt: number | undefined;
  #leading = false;
  #lastRenewAt = 0;
  #reachable = false;

  constructor(api: CoordinationV1Api, settings: LeaseSettings, callbacks: LeaderCallbacks, log: Logger) {
    checkLeaseSettings(settings);
    this.#api = api;
    this.#settings = settings;
    this.#callbacks = callbacks;
    this.#clock = settings.clock ?? systemClock;
    this.#log = log.child({ lease: `${settings.namespace}/${settings.name}`, identity: settings.identity });
  }

  get leading(): boolean {
    return this.#leading;
  }

  /** The holder last seen ('' when none), or undefined before the first read. */
  get holder(): string | undefined {
    return this.#observed?.holder;
  }

  /** Whether the last attempt could read the Lease (a refused or failed read — 403, a network error — is false). */
  get reachable(): boolean {
    return this.#reachable;
  }

  /** Campaigns (and leads) until `signal` aborts; then releases the Lease if it holds it. Never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const startedAt = this.#clock.now();
      const acquired = await this.#attempt();
      await this.#clock.sleep(this.#afterAttempt(acquired, startedAt), signal);
    }
    if (this.#leading) {
      this.#stepDown('stopping', 'requested');
      await this.#release();
    }
  }

  // Updates leadership after an attempt; returns how long to wait before the next. A renewal
  // counts from when the attempt started: the Lease's renewTime is no earlier than that.
  #afterAttempt(acquired: boolean, startedAt: number): number {
    const now = this.#clock.now();
    if (acquired) {
      this.#lastRenewAt = startedAt;
      if (!this.#leading) {
        this.#leading = true;
        this.#log.info('became the leader');
        this.#callbacks.onStartedLeading();
      }
      return this.#settings.retryPeriodMs;
    }
    if (this.#leading && now - this.#lastRenewAt >= this.#settings.renewDeadlineMs)
      this.#stepDown('could not renew the lease within the renew deadline');
    if (this.#leading || this.#observed === undefined) return this.#settings.retryPeriodMs;
    // A standby wakes at the moment the Lease would expire, if that comes before the next retry.
    const expiresIn = this.#observed.changedAt + this.#observed.durationMs - now;
    return expiresIn > 0 ? Math.min(this.#settings.retryPeriodMs, expiresIn + 1) : this.#settings.retryPeriodMs;
  }

  // A stop that was asked for (Ctrl-C, SIGTERM) is routine: info; losing the Lease is a warning.
  #stepDown(reason: string, why: 'requested' | 'lost' = 'lost'): void {
    this.#leading = false;
    this.#log[why === 'requested' ? 'info' : 'warn']({ reason }, 'stopped leading');
    this.#callbacks.onStoppedLeading();
  }

  // One read, and a write when the Lease is ours to take or renew. True when this candidate holds it now.
  async #attempt(): Promise<boolean> {
    const readAt = this.#clock.now();
    try {
      const lease = await this.#withTimeout(
        this.#api.readNamespacedLease({ name: this.#settings.name, namespace: this.#settings.namespace }),
      );
      this.#reachable = true;
      this.#observe(lease, readAt);
      if (!this.#mayTake(readAt)) return false;
      const written = await this.#withTimeout(
        this.#api.replaceNamespacedLease({
          name: this.#settings.name,
          namespace: this.#settings.namespace,
          body: this.#claim(lease),
        }),
      );
      this.#observe(written, this.#clock.now());
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return await this.#create();
      // A write that lost a race (409) comes after a good read; anything else means the Lease cannot be read.
      this.#reachable = statusOf(error) === 409;
      this.#log.debug({ err: error }, 'lease attempt failed');
      return false;
    } finally {
      this.#previousReadAt = readAt;
    }
  }

  async #create(): Promise<boolean> {
    try {
      const lease: V1Lease = {
        metadata: { name: this.#settings.name, namespace: this.#settings.namespace },
        spec: this.#claim(undefined).spec ?? {},
      };
      const created = await this.#withTimeout(
        this.#api.createNamespacedLease({ namespace: this.#settings.namespace, body: lease }),
      );
      this.#reachable = true;
      this.#observe(created, this.#clock.now());
      return true;
    } catch (error) {
      this.#reachable = statusOf(error) === 409; // another candidate created it first
      this.#log.debug({ err: error }, 'creating the lease failed');
      return false;
    }
  }

  #observe(lease: V1Lease, readAt: number): void {
    const resourceVersion = lease.metadata?.resourceVersion ?? '';
    if (this.#observed?.resourceVersion === resourceVersion) return;
    const spec = lease.spec ?? {};
    const changedAt =
      this.#observed === undefined
        ? readAt
        : changeTime(timeOf(spec.renewTime), this.#previousReadAt ?? readAt, readAt);
    this.#observed = {
      resourceVersion,
      holder: spec.holderIdentity ?? '',
      durationMs: (spec.leaseDurationSeconds ?? 0) * 1000,
      changedAt,
    };
  }

  #mayTake(now: number): boolean {
    const observed = this.#observed;
    if (observed === undefined || observed.holder === '' || observed.holder === this.#settings.identity) return true;
    return now >= observed.changedAt + observed.durationMs;
  }

  // The Lease with this candidate as holder, renewed now; acquireTime and transitions move on a change of holder.
  #claim(lease: V1Lease | undefined): V1Lease {
    const spec = lease?.spec ?? {};
    const now = new V1MicroTime(this.#clock.now());
    const ours = spec.holderIdentity === this.#settings.identity;
    return {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: this.#settings.identity,
        leaseDurationSeconds: Math.ceil(this.#settings.leaseDurationMs / 1000),
        renewTime: now,
        acquireTime: ours && spec.acquireTime !== undefined ? spec.acquireTime : now,
        leaseTransitions: ours ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? -1) + 1,
      },
    };
  }

  // client-go's release: an empty holder and a 1 s duration, so that a standby takes over at once.
  async #release(): Promise<void> {
    try {
      const lease = await this.#withTimeout(
        this.#api.readNamespacedLease({ name: this.#settings.name, namespace: this.#settings.namespace }),
      );
      if (lease.spec?.holderIdentity !== this.#settings.identity) return;
      const now = new V1MicroTime(this.#clock.now());
      const body: V1Lease = {
        ...lease,
        spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: now, acquireTime: now },
      };
      await this.#withTimeout(
        this.#api.replaceNamespacedLease({ name: this.#settings.name, namespace: this.#settings.namespace, body }),
      );
      this.#log.info('released the lease');
    } catch (error) {
      this.#log.warn({ err: error }, 'could not release the lease; standbys take over when it expires');
    }
  }

  // A request that hangs must not keep a holder believing it leads past its renew deadline.
  async #withTimeout<T>(request: Promise<T>): Promise<T> {
    const settled = new AbortController();
    const ms = this.#settings.renewDeadlineMs;
    const timeout = new Promise<never>((_resolve, reject) => {
      void this.#clock.sleep(ms, settled.signal).then(() => {
        if (!settled.signal.aborted) reject(new Error(`lease request timed out after ${ms} ms`));
      });
    });
    try {
      return await Promise.race([request, timeout]);
    } finally {
      settled.abort();
    }
  }
}

// When a Lease change seen at `readAt` happened: after the previous read (which did not see it)
// and not after this one; within that, the holder's renewTime. Without a renewTime, this read.
function changeTime(renewedAt: number | undefined, previousReadAt: number, readAt: number): number {
  return renewedAt === undefined ? readAt : Math.min(readAt, Math.max(previousReadAt, renewedAt));
}

function statusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

// client-node may hand MicroTime back as a Date or as the string it read.
function timeOf(value: unknown): number | undefined {
  if (value instanceof Date) return value.getTime();
  if (typeof value !== 'string') return undefined;
  const time = Date.parse(value);
  return Number.isNaN(time) ? undefined : time;
}
