// The record of which Service holds which load balancer addresses (ADR 0028): PARTS ConfigMaps,
// `<name>-0` … `<name>-7`, each with one data key per Service UID, the value a JSON Allocation. An
// address has one part, by its 256-address block (partOf): an IPv4 /24, or the last 8 bits of an
// IPv6 address, modulo the parts. A Service's entry is written to the part of each of its addresses
// (both parts of a dual-stack Service whose addresses fall in two), and an address is held only by
// an entry in its own part. So every claim of an address is a write to one ConfigMap, conditional
// on the resourceVersion that was read (a merge patch, or a create when the part does not exist
// yet): of two writers that read the same version one wins and the other gets 409 Conflict, reads
// again and decides again on what the winner wrote. No address can be handed out twice, and none is
// lost. A pool's addresses spread over the parts a /24 at a time, so no pool, and no part, meets
// the API server's 1 MiB object limit at the sizes ADR 0028 states; a write that would is refused.
//
// The record was one ConfigMap, `<name>`, before: it is moved into the parts on first use (migrate).

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
import { canonicalLoadBalancerIp, parseLoadBalancerIp, type AllocationsLocation } from './pools.ts';

/** ConfigMaps the allocations are spread over. Fixed: the deployments create them and name them in RBAC. */
export const PARTS = 8;

/**
 * The most bytes of data (keys and values) a part is written with: the API server refuses a
 * ConfigMap whose data is over 1 MiB (ValidateConfigMap); 64 KiB are left for the rest of the
 * object. As the relay's cursor (relay/cursor-format.ts).
 */
export const PART_LIMIT_BYTES = 1024 * 1024 - 64 * 1024;

/**
 * The key written into the single ConfigMap of earlier versions once its entries are moved: its
 * value is no allocation, so an earlier version still running refuses to hand out addresses from
 * it (its "values that are not allocations" check) instead of handing out addresses the parts hold.
 */
export const MOVED_KEY = 'moved-to-parts';

/** The name of part `index` of the record named `configMap`. */
export function partName(configMap: string, index: number): string {
  return `${configMap}-${index}`;
}

/** The names of every part of the record named `configMap`. */
export function partNames(configMap: string): string[] {
  return Array.from({ length: PARTS }, (_, index) => partName(configMap, index));
}

/** The part an address's claim is recorded in: its 256-address block modulo the parts; undefined for no address. */
export function partOf(address: string): number | undefined {
  const ip = parseLoadBalancerIp(address);
  return ip === undefined ? undefined : Number((ip.value >> 8n) % BigInt(PARTS));
}

/** One part as read. */
interface PartState {
  /** The ConfigMap's resourceVersion; undefined when it does not exist yet. */
  readonly resourceVersion: string | undefined;
  /** By Service UID, as written. */
  readonly entries: ReadonlyMap<string, Allocation>;
  /** Keys whose value is not a valid allocation (edited by hand?): their addresses are unknown. */
  readonly invalid: readonly string[];
  /** Bytes of data (keys and values) as read. */
  readonly bytes: number;
  /** Whether it holds MOVED_KEY (the single ConfigMap of earlier versions, moved). */
  readonly moved: boolean;
}

/** The allocations as read, over every part. */
export interface AllocationState {
  /**
   * By Service UID: the addresses each Service holds, those recorded in their own part (a
   * dual-stack Service written to one of its two parts only holds the one address there).
   */
  readonly entries: ReadonlyMap<string, Allocation>;
  /** Keys whose value is not a valid allocation, as `<ConfigMap>/<key>`: their addresses are unknown. */
  readonly invalid: readonly string[];
  /** Each part, by index. */
  readonly parts: readonly PartState[];
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
  "Load balancer addresses handed out by cirrus's static provider: one key per Service UID, in the part of " +
  'each of its addresses (docs/adr/0028). Written by cirrus; deleting a key frees the address while its Service may still use it.';
const MOVED_TEXT = (configMap: string): string =>
  `The allocations are recorded in ConfigMaps ${partName(configMap, 0)} to ${partName(configMap, PARTS - 1)} (docs/adr/0028); ` +
  'this key stops an earlier cirrus from handing out addresses from here.';

/** The allocations ConfigMaps, read and written through the API server. */
export class AllocationStore {
  readonly #core: CoreV1Api;
  readonly #location: AllocationsLocation;
  readonly #log: Logger;
  readonly #retry: RetryPolicy;
  // Set once the single ConfigMap of earlier versions is known moved (or absent): not read again.
  #moved = false;

  constructor(core: CoreV1Api, location: AllocationsLocation, log: Logger, retry: RetryPolicy = DEFAULT_RETRY) {
    this.#core = core;
    this.#location = location;
    this.#log = log;
    this.#retry = retry;
  }

  /** `namespace/<name>-{0..7}` of the ConfigMaps, for messages. */
  get where(): string {
    return `${this.#location.namespace}/${this.#location.configMap}-{0..${PARTS - 1}}`;
  }

  #part(index: number): string {
    return `${this.#location.namespace}/${partName(this.#location.configMap, index)}`;
  }

  /** The allocations now (after moving those of an earlier version's ConfigMap); a missing part is empty. */
  async read(signal?: AbortSignal): Promise<AllocationState> {
    await this.#migrate(signal);
    return this.#readParts(signal);
  }

  async #readParts(signal?: AbortSignal): Promise<AllocationState> {
    const parts = await Promise.all(
      Array.from({ length: PARTS }, (_, index) => this.#readPart(partName(this.#location.configMap, index), signal)),
    );
    return merged(parts, (index) => partName(this.#location.configMap, index));
  }

  async #readPart(name: string, signal?: AbortSignal): Promise<PartState> {
    const { namespace } = this.#location;
    try {
      return parsePart(await this.#core.readNamespacedConfigMap({ name, namespace }, withSignal(signal)));
    } catch (error) {
      if (apiStatus(error) === 404)
        return { resourceVersion: undefined, entries: new Map(), invalid: [], bytes: 0, moved: false };
      throw new Error(
        `could not read ConfigMap ${namespace}/${name}, where load balancer addresses are recorded: ${apiMessage(error)}`,
        { cause: error },
      );
    }
  }

  /**
   * Reads the allocations, lets `decide` choose changes, and writes them conditionally on what was
   * read, each part that changes in turn; on a conflict (someone wrote in between) starts over after
   * a jittered backoff. `decide` may run several times and must depend on nothing but its argument
   * and the cluster. No changes means no write. Throws RetryError after `attempts` conflicts in a
   * row, and whatever `decide` throws.
   */
  async transact<T>(decide: (state: AllocationState) => Promise<Decision<T>>, signal?: AbortSignal): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      signal?.throwIfAborted();
      const state = await this.read(signal);
      const { changes, result } = await decide(state);
      if (changes.size === 0 || (await this.#writeParts(state, partChanges(state, changes), signal))) return result;
      await this.#afterConflict(attempt, signal);
    }
  }

  async #afterConflict(attempt: number, signal?: AbortSignal): Promise<void> {
    if (attempt >= this.#retry.attempts) {
      throw new RetryError(
        `gave up after ${attempt} conflicting writes to ConfigMaps ${this.where} (many load balancer changes at once); trying again`,
        this.#backoff(attempt),
      );
    }
    this.#log.debug({ configMap: this.where, attempt }, 'allocations changed while deciding; reading them again');
    await sleep(this.#backoff(attempt), undefined, signal === undefined ? {} : { signal });
  }

  // Full jitter: spreads writers that collided over the whole interval, so the next round has fewer collisions.
  #backoff(attempt: number): number {
    const { baseDelayMs, maxDelayMs } = this.#retry;
    return Math.round(Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** attempt));
  }

  // Writes each part's changes, lowest part first; false on the first conflict (the parts written
  // before it stay written: what they hold is a claim the next round reads and keeps or removes).
  async #writeParts(
    state: AllocationState,
    byPart: ReadonlyMap<number, ReadonlyMap<string, Allocation | null>>,
    signal?: AbortSignal,
  ): Promise<boolean> {
    for (const index of [...byPart.keys()].sort((a, b) => a - b)) {
      const part = state.parts[index];
      const changes = byPart.get(index);
      if (part === undefined || changes === undefined) continue;
      this.#checkSize(index, part, changes);
      if (!(await this.#write(partName(this.#location.configMap, index), part.resourceVersion, changes, signal)))
        return false;
    }
    return true;
  }

  // A part whose data would pass the limit is not written: the API server would refuse it anyway.
  #checkSize(index: number, part: PartState, changes: ReadonlyMap<string, Allocation | null>): void {
    let bytes = part.bytes;
    for (const [uid, allocation] of changes) {
      const before = part.entries.get(uid);
      if (before !== undefined) bytes -= uid.length + serialize(before).length;
      if (allocation !== null) bytes += uid.length + serialize(allocation).length;
    }
    if (bytes <= PART_LIMIT_BYTES) return;
    throw new Error(
      `ConfigMap ${this.#part(index)} would hold ${bytes} bytes of load balancer allocations, over the ` +
        `${PART_LIMIT_BYTES} a ConfigMap can hold; no address is handed out from it (docs/adr/0028-sharded-ipam-record.md says why this should not happen)`,
    );
  }

  // True when written; false on a conflict (the ConfigMap changed, appeared or vanished since it was read).
  async #write(
    name: string,
    resourceVersion: string | undefined,
    changes: ReadonlyMap<string, Allocation | null>,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const data = Object.fromEntries(
      [...changes].map(([uid, allocation]) => [uid, allocation === null ? null : serialize(allocation)]),
    );
    try {
      if (resourceVersion === undefined) await this.#create(name, data, signal);
      else await this.#patch(name, resourceVersion, data, signal);
      return true;
    } catch (error) {
      const status = apiStatus(error);
      if (status === 409 || (status === 404 && resourceVersion !== undefined)) return false;
      throw this.#writeError(name, error, resourceVersion === undefined);
    }
  }

  async #create(name: string, data: Record<string, string | null>, signal?: AbortSignal): Promise<void> {
    const { namespace } = this.#location;
    const body: V1ConfigMap = {
      metadata: { name, namespace, labels: MANAGED_BY, annotations: { description: DESCRIPTION } },
      data: Object.fromEntries(Object.entries(data).filter((entry): entry is [string, string] => entry[1] !== null)),
    };
    await this.#core.createNamespacedConfigMap({ namespace, body }, withSignal(signal));
  }

  // A merge patch touches only the keys that change; the resourceVersion in it makes it conditional.
  async #patch(
    name: string,
    resourceVersion: string,
    data: Record<string, string | null>,
    signal?: AbortSignal,
  ): Promise<void> {
    const { namespace } = this.#location;
    await this.#core.patchNamespacedConfigMap(
      { name, namespace, body: { metadata: { resourceVersion }, data } },
      withSignal(signal, mergePatch),
    );
  }

  /**
   * Moves the entries of the single ConfigMap earlier versions wrote (`<name>`) into the parts,
   * once per process: first marks it (MOVED_KEY, conditional on its version, so an earlier version
   * writing it at the same time either wrote before, and its entry is moved, or is refused), then
   * copies its entries to their parts (an entry already there is left as it is), then removes them
   * from it (conditional again: an entry an earlier version removed meanwhile is left to the stale
   * check). Every step can be repeated; an entry is in the old ConfigMap, in the parts, or in both,
   * and both read as one claim.
   */
  async #migrate(signal?: AbortSignal): Promise<void> {
    for (let attempt = 1; !this.#moved; attempt += 1) {
      signal?.throwIfAborted();
      if (await this.#migrateStep(signal)) continue;
      await this.#afterConflict(attempt, signal);
    }
  }

  // One step of the move; false on a conflict.
  async #migrateStep(signal?: AbortSignal): Promise<boolean> {
    const { configMap: legacy } = this.#location;
    const old = await this.#readPart(legacy, signal);
    if (old.resourceVersion === undefined) {
      this.#moved = true;
      return true;
    }
    if (old.invalid.length > 0) {
      throw new Error(
        `ConfigMap ${this.#location.namespace}/${legacy} holds values that are not allocations (keys ${old.invalid.join(', ')}); ` +
          'its allocations are not moved, and no address is handed out, until they are fixed or removed, as their addresses could be handed out twice',
      );
    }
    if (!old.moved) return this.#writeRaw(legacy, old.resourceVersion, { [MOVED_KEY]: MOVED_TEXT(legacy) }, signal);
    if (old.entries.size === 0) {
      this.#moved = true;
      return true;
    }
    const state = await this.#readParts(signal);
    const copies = new Map<string, Allocation>();
    for (const [uid, allocation] of old.entries) if (!state.entries.has(uid)) copies.set(uid, allocation);
    if (!(await this.#writeParts(state, partChanges(state, copies), signal))) return false;
    const removals = Object.fromEntries([...old.entries.keys()].map((uid) => [uid, null]));
    if (!(await this.#writeRaw(legacy, old.resourceVersion, removals, signal))) return false;
    this.#log.info(
      { configMap: `${this.#location.namespace}/${legacy}`, moved: old.entries.size, parts: this.where },
      'moved load balancer allocations from the single ConfigMap of an earlier version into its parts',
    );
    return true;
  }

  async #writeRaw(
    name: string,
    resourceVersion: string,
    data: Record<string, string | null>,
    signal?: AbortSignal,
  ): Promise<boolean> {
    try {
      await this.#patch(name, resourceVersion, data, signal);
      return true;
    } catch (error) {
      if (apiStatus(error) === 409 || apiStatus(error) === 404) return false;
      throw this.#writeError(name, error, false);
    }
  }

  #writeError(name: string, error: unknown, creating: boolean): Error {
    const { namespace, namespaceFrom } = this.#location;
    const where = `${namespace}/${name}`;
    const status = apiStatus(error);
    if (creating && status === 404) {
      return new Error(
        `could not create ConfigMap ${where} to record load balancer addresses: namespace ${namespace} ` +
          `(${namespaceFrom}) does not exist; create it, or set loadBalancers.allocations.namespace in the cloud-config`,
        { cause: error },
      );
    }
    if (creating && status === 403) {
      // The deployments create the ConfigMaps and grant no create: it was deleted, or never applied.
      return new Error(
        `could not create ConfigMap ${where} to record load balancer addresses, as it does not exist: ${apiMessage(error)} ` +
          '(create it, empty, as the deployment does, or allow cirrus to create ConfigMaps there)',
        { cause: error },
      );
    }
    return new Error(
      `could not write ConfigMap ${where}, where load balancer addresses are recorded: ${apiMessage(error)}`,
      { cause: error },
    );
  }
}

/**
 * The parts as one record: per Service UID the addresses recorded in their own part (partOf), in
 * the order its entry lists them. An entry whose addresses are all elsewhere (the other half of a
 * dual-stack entry whose own half was not written) still names the Service, with no address.
 */
function merged(parts: readonly PartState[], nameOf: (index: number) => string): AllocationState {
  const entries = new Map<string, Allocation>();
  const invalid: string[] = [];
  parts.forEach((part, index) => {
    invalid.push(...part.invalid.map((key) => `${nameOf(index)}/${key}`));
    for (const [uid, allocation] of part.entries) {
      const own = allocation.addresses.filter((address) => partOf(address) === index);
      const seen = entries.get(uid);
      const addresses = [...(seen?.addresses ?? []), ...own.filter((address) => !seen?.addresses.includes(address))];
      const order = allocation.addresses;
      addresses.sort((a, b) => order.indexOf(a) - order.indexOf(b));
      entries.set(uid, { ...(seen ?? allocation), addresses });
    }
  });
  return { entries, invalid, parts };
}

/**
 * The writes that make `changes` so, by part: an allocation is set in the part of each of its
 * addresses (where it differs from what is there) and removed from every other part holding its
 * UID; a removal removes the UID from every part holding it.
 */
function partChanges(
  state: AllocationState,
  changes: ReadonlyMap<string, Allocation | null>,
): Map<number, Map<string, Allocation | null>> {
  const byPart = new Map<number, Map<string, Allocation | null>>();
  const put = (index: number, uid: string, value: Allocation | null): void => {
    const part = byPart.get(index) ?? new Map<string, Allocation | null>();
    part.set(uid, value);
    byPart.set(index, part);
  };
  for (const [uid, allocation] of changes) {
    const wanted = new Set(allocation === null ? [] : allocation.addresses.map((address) => partOf(address) ?? 0));
    state.parts.forEach((part, index) => {
      const there = part.entries.get(uid);
      if (allocation !== null && wanted.has(index)) {
        if (there === undefined || serialize(there) !== serialize(allocation)) put(index, uid, allocation);
      } else if (there !== undefined || part.invalid.includes(uid)) put(index, uid, null);
    });
  }
  return byPart;
}

const allocationSchema = z.object({
  namespace: z.string(),
  name: z.string(),
  pool: z.string().default(''),
  addresses: z.array(z.string().refine((address) => canonicalLoadBalancerIp(address) !== undefined)),
});

/** A part's data as allocations, by key; a value that is not an allocation is listed as invalid. */
export function parsePart(configMap: V1ConfigMap): PartState {
  const entries = new Map<string, Allocation>();
  const invalid: string[] = [];
  let bytes = 0;
  const data = configMap.data ?? {};
  for (const [uid, value] of Object.entries(data)) {
    bytes += uid.length + value.length;
    if (uid === MOVED_KEY) continue;
    const allocation = parseAllocation(value);
    if (allocation === undefined) invalid.push(uid);
    else entries.set(uid, allocation);
  }
  return {
    resourceVersion: configMap.metadata?.resourceVersion ?? '',
    entries,
    invalid,
    bytes,
    moved: MOVED_KEY in data,
  };
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
