// LoadBalancer for the static provider: IP address management only, in the spirit of kube-vip's
// cloud provider. A Service of type LoadBalancer gets one address per IP family from a pool of
// the cloud-config; something else announces it (kube-vip, MetalLB's speakers, BGP or static
// routes). The node set plays no part: updateLoadBalancer has nothing to do.
//
// Stateless: the allocations live in a ConfigMap (allocations.ts), and each call reads them,
// decides (ipam.ts) and writes conditionally on what it read. A Service's allocation is the record
// under its UID that names its namespace and name (ipam.ts, heldBy): a Service object that matches
// no record in all three holds nothing, whatever UID it carries.

import type { CoreV1Api, V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { apiStatus } from '../../shared/kube/api.ts';
import { defaultLoadBalancerName, type LoadBalancer, type OwnedLoadBalancer } from '../../shared/cloud/provider.ts';
import { withSignal, type AllocationState, type AllocationStore, type Decision } from './allocations.ts';
import { allocate, AllocationError, heldBy, readRequest, type AddressRequest, type Allocation } from './ipam.ts';
import type { LoadBalancerConfig } from './pools.ts';

/** At most this many Services are read to look for a deleted one when a pool is exhausted. */
const MAX_STALE_CHECKS = 100;
/** How many of those reads run at once. */
const STALE_CHECK_BATCH = 10;
/** Reclaim rounds per ensure: one per IP family, and one more. */
const MAX_RECLAIM_ROUNDS = 3;
/**
 * How long a holder found alive is not read again: a refused Service is retried (with backoff) for
 * as long as its pool is exhausted, and each retry would otherwise read every holder in the pool.
 * Upstream's service controller re-syncs its node set every 100 s; a minute is within one such pass.
 */
export const HOLDER_CHECK_PERIOD_MS = 60_000;
/** Holders remembered alive per process, at most: the memo only saves reads, it decides nothing. */
const MAX_REMEMBERED_HOLDERS = 10_000;

const NO_CHANGES: ReadonlyMap<string, Allocation | null> = new Map();

/** What the load balancer needs besides the pools. */
export interface StaticLoadBalancerDeps {
  readonly store: AllocationStore;
  /** Reads Services, to tell a deleted Service's leftover allocation from a live one. */
  readonly core: CoreV1Api;
  readonly log: Logger;
  /** How long a holder found alive is not read again (HOLDER_CHECK_PERIOD_MS). */
  readonly holderCheckPeriodMs?: number;
  /** The clock, in ms. */
  readonly now?: () => number;
}

/** The static provider's LoadBalancer: answers from whatever pools `config()` returns at the call. */
export class StaticLoadBalancer implements LoadBalancer {
  readonly #config: () => LoadBalancerConfig;
  readonly #deps: StaticLoadBalancerDeps;
  // Holders found alive (UID → when, ms), oldest first: not read again for a period. Per process and
  // bounded; an instance that does not have it reads again, which is only slower.
  readonly #alive = new Map<string, number>();

  constructor(config: () => LoadBalancerConfig, deps: StaticLoadBalancerDeps) {
    this.#config = config;
    this.#deps = deps;
  }

  /** The Service's addresses when it has an allocation (matched by namespace, name and UID); undefined otherwise. One read. */
  async getLoadBalancer(
    _clusterName: string,
    service: V1Service,
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus | undefined> {
    if ((service.metadata?.uid ?? '') === '') return undefined;
    const held = heldBy(service, (await this.#deps.store.read(signal)).entries);
    return held === undefined ? undefined : statusOf(held.allocation);
  }

  /** Upstream's default name ("a" + the UID without dashes, 32 characters): stable for the Service's life. */
  getLoadBalancerName(_clusterName: string, service: V1Service): string {
    return defaultLoadBalancerName(service);
  }

  /**
   * Allocates (or confirms) the Service's addresses and returns them as `ipMode: VIP` ingress, in
   * the order of `spec.ipFamilies`. Idempotent: a Service keeps its addresses across calls unless
   * its request changes. Throws AllocationError (a message naming the Service and the reason) when
   * it cannot have them, RetryError when the allocations ConfigMap is too busy.
   */
  async ensureLoadBalancer(
    _clusterName: string,
    service: V1Service,
    _nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus> {
    const request = readRequest(this.#config(), service);
    const allocation = await this.#deps.store.transact((state) => this.#decide(request, state, signal), signal);
    return statusOf(allocation);
  }

  /** Nothing to do: addresses do not depend on the nodes. */
  updateLoadBalancer(
    _clusterName: string,
    _service: V1Service,
    _nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<void> {
    return new Promise((resolve) => {
      signal?.throwIfAborted();
      resolve();
    });
  }

  /**
   * Releases the Service's addresses; succeeds when it holds none, which is also the case of a
   * Service object matching no record in namespace, name and UID (another incarnation, a forgery).
   */
  async ensureLoadBalancerDeleted(_clusterName: string, service: V1Service, signal?: AbortSignal): Promise<void> {
    if ((service.metadata?.uid ?? '') === '') return;
    await this.#deps.store.transact((state) => {
      const held = heldBy(service, state.entries);
      return Promise.resolve<Decision<undefined>>({
        changes: held === undefined ? NO_CHANGES : new Map([[held.uid, null]]),
        result: undefined,
      });
    }, signal);
  }

  /**
   * Every allocation of the ConfigMap, as the Service (namespace, name, UID) it was made for, named
   * as getLoadBalancerName names it. One read. A value that is not an allocation is left out: it
   * names no Service for certain (and blocks allocations until fixed, see #decide).
   */
  async listLoadBalancers(_clusterName: string, signal?: AbortSignal): Promise<OwnedLoadBalancer[]> {
    const { entries } = await this.#deps.store.read(signal);
    return [...entries].map(([uid, allocation]) => ({
      name: defaultLoadBalancerName({ metadata: { uid } }),
      service: { namespace: allocation.namespace, name: allocation.name, uid },
    }));
  }

  async #decide(request: AddressRequest, state: AllocationState, signal?: AbortSignal): Promise<Decision<Allocation>> {
    if (state.invalid.length > 0) {
      throw new Error(
        `ConfigMap ${this.#deps.store.where} holds values that are not allocations (keys ${state.invalid.join(', ')}); ` +
          'no address is handed out until they are fixed or removed, as their addresses could be handed out twice',
      );
    }
    const entries = new Map(state.entries);
    const reclaimed: string[] = [];
    const allocation = await this.#allocateReclaiming(request, { entries, reclaimed }, signal);
    const changes = new Map<string, Allocation | null>(reclaimed.map((uid) => [uid, null]));
    if (!sameAllocation(state.entries.get(request.uid), allocation)) changes.set(request.uid, allocation);
    if (reclaimed.length > 0) this.#logReclaimed(reclaimed, state);
    return { changes, result: allocation };
  }

  // An allocation error caused by other Services' allocations may be resolved by reclaiming those
  // of Services that no longer exist (deleted without cleanup: the finalizer was removed by hand,
  // or the allocation was left by a crash). `work.entries` loses them, `work.reclaimed` lists them.
  async #allocateReclaiming(
    request: AddressRequest,
    work: { entries: Map<string, Allocation>; reclaimed: string[] },
    signal?: AbortSignal,
  ): Promise<Allocation> {
    for (let round = 1; ; round += 1) {
      try {
        return allocate(request, work.entries);
      } catch (error) {
        if (!(error instanceof AllocationError) || error.holders.length === 0 || round >= MAX_RECLAIM_ROUNDS)
          throw error;
        const stale = await this.#findStale(error.holders, work.entries, signal);
        if (stale.length === 0) throw error;
        for (const uid of stale) work.entries.delete(uid);
        work.reclaimed.push(...stale);
      }
    }
  }

  // Reads the holders' Services in random order (so repeated attempts cover a large pool), a batch
  // at a time, and stops at the first batch that finds one gone: one free address is what is needed.
  // A holder found alive less than a period ago is not read again, so a refused Service's retries
  // read nothing until the period is over (a Service deleted meanwhile frees its address through
  // its own delete; only one deleted without cleanup waits for the period).
  async #findStale(
    holders: readonly string[],
    entries: ReadonlyMap<string, Allocation>,
    signal?: AbortSignal,
  ): Promise<string[]> {
    const candidates = shuffled(holders.filter((uid) => !this.#recentlyAlive(uid))).slice(0, MAX_STALE_CHECKS);
    for (let start = 0; start < candidates.length; start += STALE_CHECK_BATCH) {
      const batch = candidates.slice(start, start + STALE_CHECK_BATCH);
      const gone = await Promise.all(batch.map((uid) => this.#isGone(uid, entries.get(uid), signal)));
      const stale = batch.filter((_, index) => gone[index]);
      batch.forEach((uid, index) => {
        if (gone[index] === false) this.#rememberAlive(uid);
      });
      if (stale.length > 0) return stale;
    }
    return [];
  }

  #now(): number {
    return (this.#deps.now ?? Date.now)();
  }

  #recentlyAlive(uid: string): boolean {
    const at = this.#alive.get(uid);
    if (at === undefined) return false;
    if (this.#now() - at < (this.#deps.holderCheckPeriodMs ?? HOLDER_CHECK_PERIOD_MS)) return true;
    this.#alive.delete(uid);
    return false;
  }

  #rememberAlive(uid: string): void {
    this.#alive.delete(uid);
    this.#alive.set(uid, this.#now());
    for (const oldest of this.#alive.keys()) {
      if (this.#alive.size <= MAX_REMEMBERED_HOLDERS) break;
      this.#alive.delete(oldest);
    }
  }

  // Gone: no Service of that name, or one with another UID (deleted and created again).
  async #isGone(uid: string, allocation: Allocation | undefined, signal?: AbortSignal): Promise<boolean> {
    if (allocation === undefined) return false;
    signal?.throwIfAborted();
    try {
      const service = await this.#deps.core.readNamespacedService(
        { name: allocation.name, namespace: allocation.namespace },
        withSignal(signal),
      );
      return service.metadata?.uid !== uid;
    } catch (error) {
      if (apiStatus(error) === 404) return true;
      // Cannot tell (no permission to read Services?): keep the allocation, it may be in use.
      this.#deps.log.warn(
        { err: error, service: `${allocation.namespace}/${allocation.name}` },
        'could not check whether a Service holding load balancer addresses still exists',
      );
      return false;
    }
  }

  #logReclaimed(reclaimed: readonly string[], state: AllocationState): void {
    for (const uid of reclaimed) {
      const allocation = state.entries.get(uid);
      this.#deps.log.info(
        {
          uid,
          service: `${allocation?.namespace ?? ''}/${allocation?.name ?? ''}`,
          addresses: allocation?.addresses,
          configMap: this.#deps.store.where,
        },
        'reclaiming the load balancer addresses of a Service that no longer exists',
      );
    }
  }
}

function statusOf(allocation: Allocation): V1LoadBalancerStatus {
  return { ingress: allocation.addresses.map((ip) => ({ ip, ipMode: 'VIP' })) };
}

function sameAllocation(a: Allocation | undefined, b: Allocation): boolean {
  return (
    a !== undefined &&
    a.pool === b.pool &&
    a.namespace === b.namespace &&
    a.name === b.name &&
    a.addresses.length === b.addresses.length &&
    a.addresses.every((address, index) => address === b.addresses[index])
  );
}

function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}
