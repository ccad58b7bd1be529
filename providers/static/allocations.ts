// The record of which Service holds which load balancer addresses: one ConfigMap, one data key per
// Service UID, the value a JSON Allocation. The API server is the arbiter between the many
// stateless function instances that allocate at once: every change is a JSON merge patch carrying
// the resourceVersion that was read (or a create, when there is no ConfigMap yet), so of two
// writers that read the same version one wins and the other gets 409 Conflict, reads again and
// decides again on what the winner wrote. No address can be handed out twice, and none is lost.

import { setTimeout as sleep } from 'node:timers/promises';
import {
  Observable,
  type ConfigurationOptions,
  type CoreV1Api,
  type ObservableMiddleware,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { z } from 'zod';
import { RetryError } from '../../shared/cloud/errors.ts';
import { apiMessage, apiStatus, mergePatch } from '../../shared/kube/api.ts';
import type { Allocation } from './ipam.ts';
import { canonicalLoadBalancerIp, type AllocationsLocation } from './pools.ts';

/** The allocations as read, with the version a write must be conditional on. */
export interface AllocationState {
  /** The ConfigMap's resourceVersion; undefined when there is no ConfigMap yet. */
  readonly resourceVersion: string | undefined;
  /** By Service UID. */
  readonly entries: ReadonlyMap<string, Allocation>;
  /** Keys whose value is not a valid allocation (edited by hand?): their addresses are unknown. */
  readonly invalid: readonly string[];
}

/** What a transaction decided: the entries to set (an Allocation) or remove (null), and its result. */
export interface Decision<T> {
  readonly changes: ReadonlyMap<string, Allocation | null>;
  readonly result: T;
}

/** How hard a transaction tries before it gives up with a RetryError. */
export interface RetryPolicy {
  readonly attempts: number;
  /** Conflicts back off exponentially from this, with full jitter. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

/**
 * Enough for dozens of writers racing on one ConfigMap: each round of a race has one winner, and
 * the jittered backoff spreads the losers out.
 */
export const DEFAULT_RETRY: RetryPolicy = Object.freeze({ attempts: 40, baseDelayMs: 10, maxDelayMs: 500 });

const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'cirrus' };
const DESCRIPTION =
  "Load balancer addresses handed out by cirrus's static provider: one key per Service UID. " +
  'Written by cirrus; deleting a key frees the address while its Service may still use it.';

/** The allocations ConfigMap, read and written through the API server. */
export class AllocationStore {
  readonly #core: CoreV1Api;
  readonly #location: AllocationsLocation;
  readonly #log: Logger;
  readonly #retry: RetryPolicy;

  constructor(core: CoreV1Api, location: AllocationsLocation, log: Logger, retry: RetryPolicy = DEFAULT_RETRY) {
    this.#core = core;
    this.#location = location;
    this.#log = log;
    this.#retry = retry;
  }

  /** `namespace/name` of the ConfigMap, for messages. */
  get where(): string {
    return `${this.#location.namespace}/${this.#location.configMap}`;
  }

  /** The allocations now; a missing ConfigMap is an empty record. */
  async read(signal?: AbortSignal): Promise<AllocationState> {
    const { namespace, configMap: name } = this.#location;
    try {
      return parseState(await this.#core.readNamespacedConfigMap({ name, namespace }, withSignal(signal)));
    } catch (error) {
      if (apiStatus(error) === 404) return { resourceVersion: undefined, entries: new Map(), invalid: [] };
      throw new Error(
        `could not read ConfigMap ${this.where}, where load balancer addresses are recorded: ${apiMessage(error)}`,
        { cause: error },
      );
    }
  }

  /**
   * Reads the allocations, lets `decide` choose changes, and writes them conditionally on what was
   * read; on a conflict (someone wrote in between) starts over after a jittered backoff. `decide`
   * may run several times and must depend on nothing but its argument and the cluster. No changes
   * means no write. Throws RetryError after `attempts` conflicts in a row, and whatever `decide` throws.
   */
  async transact<T>(decide: (state: AllocationState) => Promise<Decision<T>>, signal?: AbortSignal): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      signal?.throwIfAborted();
      const state = await this.read(signal);
      const { changes, result } = await decide(state);
      if (changes.size === 0 || (await this.#write(state, changes, signal))) return result;
      if (attempt >= this.#retry.attempts) {
        throw new RetryError(
          `gave up after ${attempt} conflicting writes to ConfigMap ${this.where} (many load balancer changes at once); trying again`,
          this.#backoff(attempt),
        );
      }
      this.#log.debug({ configMap: this.where, attempt }, 'allocations changed while deciding; reading them again');
      await sleep(this.#backoff(attempt), undefined, signal === undefined ? {} : { signal });
    }
  }

  // Full jitter: spreads writers that collided over the whole interval, so the next round has fewer collisions.
  #backoff(attempt: number): number {
    const { baseDelayMs, maxDelayMs } = this.#retry;
    return Math.round(Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** attempt));
  }

  // True when written; false on a conflict (the ConfigMap changed, appeared or vanished since it was read).
  async #write(
    state: AllocationState,
    changes: ReadonlyMap<string, Allocation | null>,
    signal?: AbortSignal,
  ): Promise<boolean> {
    try {
      if (state.resourceVersion === undefined) await this.#create(changes, signal);
      else await this.#patch(state.resourceVersion, changes, signal);
      return true;
    } catch (error) {
      const status = apiStatus(error);
      if (status === 409 || (status === 404 && state.resourceVersion !== undefined)) return false;
      throw this.#writeError(error, state.resourceVersion === undefined);
    }
  }

  async #create(changes: ReadonlyMap<string, Allocation | null>, signal?: AbortSignal): Promise<void> {
    const { namespace, configMap: name } = this.#location;
    const data = Object.fromEntries(
      [...changes].flatMap(([uid, allocation]) => (allocation === null ? [] : [[uid, serialize(allocation)]])),
    );
    const body: V1ConfigMap = {
      metadata: { name, namespace, labels: MANAGED_BY, annotations: { description: DESCRIPTION } },
      data,
    };
    await this.#core.createNamespacedConfigMap({ namespace, body }, withSignal(signal));
  }

  // A merge patch touches only the keys that change; the resourceVersion in it makes it conditional.
  async #patch(
    resourceVersion: string,
    changes: ReadonlyMap<string, Allocation | null>,
    signal?: AbortSignal,
  ): Promise<void> {
    const { namespace, configMap: name } = this.#location;
    const data = Object.fromEntries(
      [...changes].map(([uid, allocation]) => [uid, allocation === null ? null : serialize(allocation)]),
    );
    await this.#core.patchNamespacedConfigMap(
      { name, namespace, body: { metadata: { resourceVersion }, data } },
      withSignal(signal, mergePatch),
    );
  }

  #writeError(error: unknown, creating: boolean): Error {
    const { namespace, namespaceFrom } = this.#location;
    const status = apiStatus(error);
    if (creating && status === 404) {
      return new Error(
        `could not create ConfigMap ${this.where} to record load balancer addresses: namespace ${namespace} ` +
          `(${namespaceFrom}) does not exist; create it, or set loadBalancers.allocations.namespace in the cloud-config`,
        { cause: error },
      );
    }
    if (creating && status === 403) {
      // The deployments create the ConfigMap and grant no create: it was deleted, or never applied.
      return new Error(
        `could not create ConfigMap ${this.where} to record load balancer addresses, as it does not exist: ${apiMessage(error)} ` +
          '(create it, empty, as the deployment does, or allow cirrus to create ConfigMaps there)',
        { cause: error },
      );
    }
    return new Error(
      `could not write ConfigMap ${this.where}, where load balancer addresses are recorded: ${apiMessage(error)}`,
      { cause: error },
    );
  }
}

const allocationSchema = z.object({
  namespace: z.string(),
  name: z.string(),
  pool: z.string().default(''),
  addresses: z.array(z.string().refine((address) => canonicalLoadBalancerIp(address) !== undefined)),
});

/** The ConfigMap's data as allocations, by key; a value that is not an allocation is listed as invalid. */
export function parseState(configMap: V1ConfigMap): AllocationState {
  const entries = new Map<string, Allocation>();
  const invalid: string[] = [];
  for (const [uid, value] of Object.entries(configMap.data ?? {})) {
    const allocation = parseAllocation(value);
    if (allocation === undefined) invalid.push(uid);
    else entries.set(uid, allocation);
  }
  return { resourceVersion: configMap.metadata?.resourceVersion ?? '', entries, invalid };
}

function parseAllocation(value: string): Allocation | undefined {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    return undefined;
  }
  const result = allocationSchema.safeParse(json);
  if (!result.success) return undefined;
  const { namespace, name, pool, addresses } = result.data;
  // Canonical text, so that an address written by hand in another form still counts as taken.
  return { namespace, name, pool, addresses: addresses.map((address) => canonicalLoadBalancerIp(address) ?? address) };
}

function serialize(allocation: Allocation): string {
  const { namespace, name, pool, addresses } = allocation;
  return JSON.stringify({ namespace, name, pool, addresses });
}

/**
 * Request options that cancel the call when `signal` aborts, added to `options`. client-node takes
 * no AbortSignal per call; a middleware hands it to the request, so a shutdown cancels a call in
 * flight instead of waiting for it.
 */
export function withSignal(
  signal: AbortSignal | undefined,
  options?: ConfigurationOptions,
): ConfigurationOptions | undefined {
  if (signal === undefined) return options;
  const middleware: ObservableMiddleware = {
    pre: (context) => {
      context.setSignal(signal);
      return new Observable(Promise.resolve(context));
    },
    post: (context) => new Observable(Promise.resolve(context)),
  };
  return { ...options, middleware: [...(options?.middleware ?? []), middleware], middlewareMergeStrategy: 'append' };
}
