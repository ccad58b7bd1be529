// The static provider's address management decisions, as pure functions: which pool a Service
// uses, which addresses it asks for, and which addresses it gets given the allocations recorded so
// far. No I/O here: load-balancer.ts reads and writes the allocations around these decisions.
//
// Every error names the Service and says why, as a sentence a user can act on: the service
// controller records it on the Service as a Warning event (SyncLoadBalancerFailed).

import type { V1Service } from '@kubernetes/client-node';
import { formatIp, type Ip, type IpFamily } from '../../shared/net/ip.ts';
import { blockContains, lowestFree } from './ip.ts';
import { parseLoadBalancerIp, poolSize, type LoadBalancerConfig, type Pool } from './pools.ts';

/** Names the pool a Service's addresses come from; wins over the namespace's pool and the default. */
export const POOL_ANNOTATION = 'static.cirrus-ccm.dev/pool';
/** Comma-separated addresses a Service asks for, at most one per IP family (like `192.0.2.10,2001:db8::10`). */
export const ADDRESSES_ANNOTATION = 'static.cirrus-ccm.dev/load-balancer-ips';

/**
 * What is recorded for a Service (under its UID): the addresses it holds and the pool they came
 * from. A record is a Service's only when its key is the Service's UID and it names the Service's
 * namespace and name: a UID alone is a claim anyone can copy (a forged delete event carries one).
 */
export interface Allocation {
  readonly namespace: string;
  readonly name: string;
  readonly pool: string;
  /** Canonical addresses, in the order of the Service's `spec.ipFamilies`. */
  readonly addresses: readonly string[];
}

/** A Service's load balancer request: everything the allocation depends on, read from the Service and the pools. */
export interface AddressRequest {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly pool: Pool;
  /** Why this pool, for messages: "the pool for namespace team-a". */
  readonly poolReason: string;
  readonly families: readonly IpFamily[];
  /** The addresses asked for, by family. */
  readonly requested: ReadonlyMap<IpFamily, Ip>;
}

/**
 * A Service cannot have the addresses it needs. `holders` are the UIDs of the allocations in the
 * way (the holder of a requested address; every allocation in an exhausted pool): if one of those
 * Services is gone, reclaiming its allocation may resolve the error.
 */
export class AllocationError extends Error {
  override readonly name = 'AllocationError';
  readonly holders: readonly string[];
  constructor(message: string, holders: readonly string[] = []) {
    super(message);
    this.holders = holders;
  }
}

/**
 * Reads what `service` asks for: its pool (the pool its annotation names, else the pool listing
 * its namespace, else the default pool), its IP families (`spec.ipFamilies`, IPv4 when empty) and
 * the addresses it requests (the annotation, or `spec.loadBalancerIP`). Throws AllocationError
 * when the request cannot be met whatever is allocated: no such pool, no pool applies, a pool
 * fenced to other namespaces (see servesNamespace), a pool without addresses of a needed family,
 * a malformed address, or one outside the pool.
 */
export function readRequest(config: LoadBalancerConfig, service: V1Service): AddressRequest {
  const namespace = namespaceOf(service);
  const name = service.metadata?.name ?? '';
  const who = `service ${namespace}/${name}`;
  const uid = service.metadata?.uid ?? '';
  if (uid === '') throw new AllocationError(`${who} has no UID; addresses are recorded by UID`);
  const { pool, poolReason } = choosePool(config, service, who);
  checkFence(pool, poolReason, namespace, who);
  const families = ipFamilies(service);
  const requested = requestedAddresses(service, families, who);
  checkFamilies(pool, poolReason, families, who);
  for (const ip of requested.values()) checkInPool(config, { pool, poolReason, namespace }, ip, who);
  return { uid, namespace, name, pool, poolReason, families, requested };
}

function choosePool(config: LoadBalancerConfig, service: V1Service, who: string): { pool: Pool; poolReason: string } {
  const namespace = namespaceOf(service);
  const usable = usablePools(config, namespace);
  const known = knownText(usable, namespace);
  const named = annotation(service, POOL_ANNOTATION);
  if (named !== '') {
    const pool = config.byName.get(named);
    if (pool === undefined)
      throw new AllocationError(
        `${who} names pool "${named}" in its annotation ${POOL_ANNOTATION}, but there is no such pool; ${known}`,
      );
    return { pool, poolReason: `named by its annotation ${POOL_ANNOTATION}` };
  }
  const forNamespace = config.byNamespace.get(namespace);
  if (forNamespace !== undefined) return { pool: forNamespace, poolReason: `the pool for namespace ${namespace}` };
  if (config.defaultPool !== undefined) return { pool: config.defaultPool, poolReason: 'the default pool' };
  const hint = usable.length === 0 ? known : `name one with the annotation ${POOL_ANNOTATION} (${known})`;
  throw new AllocationError(
    `no address pool applies to ${who}: no pool lists namespace ${namespace} and no pool is the default; ${hint}`,
  );
}

// The pools a Service in `namespace` may name, for messages: pools fenced to other namespaces are left out.
function usablePools(config: LoadBalancerConfig, namespace: string): string[] {
  return config.pools.filter((pool) => servesNamespace(pool, namespace)).map((pool) => pool.name);
}

function knownText(usable: readonly string[], namespace: string): string {
  return usable.length === 0
    ? `no pool serves namespace ${namespace}: every pool lists other namespaces`
    : `the pools for namespace ${namespace} are ${usable.join(', ')}`;
}

/**
 * Whether `pool` may hand addresses to Services in `namespace`: a pool that lists `namespaces` is
 * fenced to them, however it is chosen (as the default, by annotation, for a requested address),
 * so that a user who may create Services in one namespace cannot take another's addresses. A pool
 * without `namespaces` is shared by every namespace. MetalLB's IPAddressPool `serviceAllocation`
 * and kube-vip's cloud provider (per-namespace `cidr-<namespace>` keys) fence pools the same way.
 */
export function servesNamespace(pool: Pool, namespace: string): boolean {
  return pool.namespaces.length === 0 || pool.namespaces.includes(namespace);
}

function fenceText(pool: Pool): string {
  const [first, ...rest] = pool.namespaces;
  return rest.length === 0 ? `namespace ${first ?? ''}` : `namespaces ${pool.namespaces.join(', ')}`;
}

function checkFence(pool: Pool, poolReason: string, namespace: string, who: string): void {
  if (servesNamespace(pool, namespace)) return;
  throw new AllocationError(
    `pool "${pool.name}" (${poolReason} of ${who}) serves only ${fenceText(pool)}, not namespace ${namespace}; ` +
      'no address is handed out from it (see "Sharing a pool" in docs/providers/static.md)',
  );
}

/**
 * The allocation `service` holds, with its key: the one recorded under its UID for its namespace
 * and name. A Service object whose namespace, name and UID do not all match a record holds nothing.
 */
export function heldBy(
  service: V1Service,
  allocations: ReadonlyMap<string, Allocation>,
): { uid: string; allocation: Allocation } | undefined {
  const uid = service.metadata?.uid ?? '';
  const allocation = allocations.get(uid);
  if (uid === '' || allocation === undefined) return undefined;
  return recordsService(allocation, namespaceOf(service), service.metadata?.name ?? '')
    ? { uid, allocation }
    : undefined;
}

function recordsService(allocation: Allocation, namespace: string, name: string): boolean {
  return name !== '' && allocation.namespace === namespace && allocation.name === name;
}

function annotation(service: V1Service, key: string): string {
  return (service.metadata?.annotations?.[key] ?? '').trim();
}

// A Service without a namespace is in "default", as the API server would have it.
function namespaceOf(service: V1Service): string {
  return service.metadata?.namespace ?? 'default';
}

function ipFamilies(service: V1Service): IpFamily[] {
  const families = (service.spec?.ipFamilies ?? []).filter(
    (family): family is IpFamily => family === 'IPv4' || family === 'IPv6',
  );
  return families.length === 0 ? ['IPv4'] : [...new Set(families)];
}

// The requested addresses as written, and where: the annotation, else the deprecated spec field.
function requestSource(service: V1Service, who: string): { texts: string[]; source: string } {
  const inAnnotation = annotation(service, ADDRESSES_ANNOTATION);
  const field = (service.spec?.loadBalancerIP ?? '').trim();
  if (inAnnotation !== '' && field !== '') {
    throw new AllocationError(
      `${who} sets both spec.loadBalancerIP and the annotation ${ADDRESSES_ANNOTATION}; use only the annotation`,
    );
  }
  const source = inAnnotation === '' ? 'spec.loadBalancerIP' : `the annotation ${ADDRESSES_ANNOTATION}`;
  const texts = (inAnnotation === '' ? field : inAnnotation)
    .split(',')
    .map((text) => text.trim())
    .filter((text) => text !== '');
  return { texts, source };
}

function requestedAddresses(service: V1Service, families: readonly IpFamily[], who: string): Map<IpFamily, Ip> {
  const { texts, source } = requestSource(service, who);
  const requested = new Map<IpFamily, Ip>();
  for (const text of texts) {
    const ip = parseLoadBalancerIp(text);
    if (ip === undefined)
      throw new AllocationError(`${who} requests "${text}" in ${source}, which is not an IPv4 or IPv6 address`);
    const same = requested.get(ip.family);
    if (same !== undefined) {
      throw new AllocationError(
        `${who} requests two ${ip.family} addresses (${formatIp(same)} and ${formatIp(ip)}); a Service gets one address per IP family`,
      );
    }
    if (!families.includes(ip.family)) {
      throw new AllocationError(
        `${who} requests ${formatIp(ip)}, an ${ip.family} address, but its spec.ipFamilies are ${families.join(', ')}`,
      );
    }
    requested.set(ip.family, ip);
  }
  return requested;
}

function checkFamilies(pool: Pool, poolReason: string, families: readonly IpFamily[], who: string): void {
  for (const family of families) {
    if (poolSize(pool, family) > 0n) continue;
    throw new AllocationError(
      `pool "${pool.name}" (${poolReason} of ${who}) has no ${family} addresses, and the Service's spec.ipFamilies are ${families.join(', ')}`,
    );
  }
}

function checkInPool(
  config: LoadBalancerConfig,
  chosen: { pool: Pool; poolReason: string; namespace: string },
  ip: Ip,
  who: string,
): void {
  const { pool, poolReason, namespace } = chosen;
  if (pool.blocks.some((block) => blockContains(block, ip))) return;
  const address = formatIp(ip);
  const other = config.pools.find((candidate) => candidate.blocks.some((block) => blockContains(block, ip)));
  throw new AllocationError(
    `${who} requests ${address}, which is not in its pool "${pool.name}" (${poolReason}); ${otherPoolHint(other, namespace)}`,
  );
}

// Where a requested address outside the Service's pool is: a fenced pool is named, but not offered.
function otherPoolHint(other: Pool | undefined, namespace: string): string {
  if (other === undefined) return 'nor in any other pool';
  if (!servesNamespace(other, namespace)) {
    return `it is in pool "${other.name}", which serves only ${fenceText(other)}, not namespace ${namespace}`;
  }
  return `it is in pool "${other.name}": name that pool with the annotation ${POOL_ANNOTATION} to use it`;
}

/**
 * The allocation `request` gets, given `allocations` (by Service UID, the request's own included).
 * Per family: the requested address; else the address the Service already holds, if it came from
 * the same pool or is in it (addresses are sticky: a Service keeps its address when its pool
 * shrinks); else the lowest free address of the pool. Throws AllocationError when a requested
 * address is held by another Service, the pool has no free address of a family, or the request's
 * UID is recorded for another Service (its holder is then the one in the way).
 */
export function allocate(request: AddressRequest, allocations: ReadonlyMap<string, Allocation>): Allocation {
  const own = allocations.get(request.uid);
  if (own !== undefined && !recordsService(own, request.namespace, request.name)) {
    throw new AllocationError(
      `service ${request.namespace}/${request.name} has UID ${request.uid}, which the allocations record for service ` +
        `${own.namespace}/${own.name} (${own.addresses.join(', ')}); a Service holds addresses only under its own ` +
        'namespace, name and UID',
      [request.uid],
    );
  }
  const holders = holdersByAddress(allocations, request.uid);
  const addresses = request.families.map((family) => {
    const requested = request.requested.get(family);
    if (requested !== undefined) return checkFree(request, formatIp(requested), holders);
    return kept(request, own, family) ?? freeAddress(request, family, holders);
  });
  return { namespace: request.namespace, name: request.name, pool: request.pool.name, addresses };
}

interface Holder {
  readonly uid: string;
  readonly allocation: Allocation;
}

// Every address held by another Service, by canonical text.
function holdersByAddress(allocations: ReadonlyMap<string, Allocation>, self: string): Map<string, Holder> {
  const holders = new Map<string, Holder>();
  for (const [uid, allocation] of allocations) {
    if (uid === self) continue;
    for (const address of allocation.addresses) holders.set(address, { uid, allocation });
  }
  return holders;
}

function checkFree(request: AddressRequest, address: string, holders: ReadonlyMap<string, Holder>): string {
  const holder = holders.get(address);
  if (holder === undefined) return address;
  const { namespace, name } = holder.allocation;
  throw new AllocationError(
    `service ${request.namespace}/${request.name} requests ${address}, which is already allocated to service ${namespace}/${name}`,
    [holder.uid],
  );
}

function kept(request: AddressRequest, own: Allocation | undefined, family: IpFamily): string | undefined {
  if (own === undefined) return undefined;
  for (const address of own.addresses) {
    const ip = parseLoadBalancerIp(address);
    if (ip?.family !== family) continue;
    if (own.pool === request.pool.name || request.pool.blocks.some((block) => blockContains(block, ip))) return address;
  }
  return undefined;
}

function freeAddress(request: AddressRequest, family: IpFamily, holders: ReadonlyMap<string, Holder>): string {
  const taken = takenValues(holders, family);
  for (const block of request.pool.blocks) {
    if (block.family !== family) continue;
    const value = lowestFree(block, taken);
    if (value !== undefined) return formatIp({ family, value });
  }
  const { pool } = request;
  const inPool = [...holders]
    .filter(([address]) => {
      const ip = parseLoadBalancerIp(address);
      return ip?.family === family && pool.blocks.some((block) => blockContains(block, ip));
    })
    .map(([, holder]) => holder.uid);
  const size = poolSize(pool, family);
  throw new AllocationError(
    `pool "${pool.name}" is exhausted (${size} ${family} ${size === 1n ? 'address' : 'addresses'}, all allocated): ` +
      `no ${family} address for service ${request.namespace}/${request.name} (${request.poolReason})`,
    [...new Set(inPool)],
  );
}

function takenValues(holders: ReadonlyMap<string, Holder>, family: IpFamily): bigint[] {
  const values: bigint[] = [];
  for (const address of holders.keys()) {
    const ip = parseLoadBalancerIp(address);
    if (ip?.family === family) values.push(ip.value);
  }
  return values.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
