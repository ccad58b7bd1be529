// The `loadBalancers` section of the static provider's cloud-config: address pools for Services of
// type LoadBalancer, and where allocations are recorded. inventory.ts parses it as part of the
// file; this module holds its schema and the checks that span entries (names, overlaps,
// namespaces, the default), and how its addresses are written. The format is documented in
// docs/providers/static.md.

import { z } from 'zod';
import { CloudConfigError } from '../../shared/cloud/errors.ts';
import {
  canonicalIp,
  familyBits,
  formatCidr,
  formatIp,
  lastAddress,
  parseCidrAddress,
  parseIp,
  type Cidr,
  type Ip,
  type IpFamily,
  type IpSyntax,
} from '../../shared/net/ip.ts';
import { blockSize, firstCommon, type AddressBlock } from './ip.ts';
import type { DeploymentNamespace } from './namespace.ts';
import { dnsLabelProblem, dnsSubdomainProblem } from './syntax.ts';

/** An address pool, validated. Frozen. */
export interface Pool {
  readonly name: string;
  /** In file order; no two overlap (in this pool or any other). */
  readonly blocks: readonly AddressBlock[];
  /**
   * The namespaces whose Services use this pool unless they name another, and the only ones it
   * serves (a fence, ipam.ts servesNamespace); empty: shared by every namespace.
   */
  readonly namespaces: readonly string[];
  readonly isDefault: boolean;
}

/** Where allocations are recorded: one ConfigMap. */
export interface AllocationsLocation {
  readonly namespace: string;
  readonly configMap: string;
  /** Where the namespace came from, for messages: the file's setting, the pod's namespace or the default. */
  readonly namespaceFrom: string;
}

/** The `allocations` setting as the file gives it: without a namespace, the namespace cirrus runs in. */
export interface AllocationsSetting {
  readonly namespace: string | undefined;
  readonly configMap: string;
}

/** The validated `loadBalancers` section: an immutable snapshot, like the rest of the inventory. */
export interface LoadBalancerConfig {
  /** In file order. */
  readonly pools: readonly Pool[];
  readonly byName: ReadonlyMap<string, Pool>;
  readonly byNamespace: ReadonlyMap<string, Pool>;
  readonly defaultPool: Pool | undefined;
  readonly allocations: AllocationsSetting;
}

/** The allocations ConfigMap's name when the file does not say. */
export const DEFAULT_ALLOCATIONS_CONFIG_MAP = 'cirrus-lb-ipam';

const ALLOCATIONS_NAMESPACE_FROM = 'set by loadBalancers.allocations.namespace';

/**
 * Where the allocations are recorded: the file's `allocations.namespace` when it sets one, else
 * `deployment` (the namespace cirrus runs in, namespace.ts), and the file's ConfigMap name or
 * the default.
 */
export function allocationsLocation(setting: AllocationsSetting, deployment: DeploymentNamespace): AllocationsLocation {
  const { namespace, configMap } = setting;
  return namespace === undefined
    ? { namespace: deployment.namespace, configMap, namespaceFrom: deployment.from }
    : { namespace, configMap, namespaceFrom: ALLOCATIONS_NAMESPACE_FROM };
}

/**
 * How load balancer addresses are written, in pools, requests and the allocations record: IPv4
 * without leading zeros (which some tools read as octal), IPv4 addresses as such (never inside an
 * IPv6 address), no zone.
 */
const LOAD_BALANCER_IP: IpSyntax = { leadingZeros: false, embeddedIpv4: false };

/** Parses a load balancer address (see LOAD_BALANCER_IP); undefined when `text` is none. */
export function parseLoadBalancerIp(text: string): Ip | undefined {
  return parseIp(text, LOAD_BALANCER_IP);
}

/**
 * The canonical form of a load balancer address, or undefined when `text` is none. Addresses are
 * always written out in this form, so that one address is one string wherever it is compared: in the
 * allocations ConfigMap, in requests and in Service status.
 */
export function canonicalLoadBalancerIp(text: string): string | undefined {
  return canonicalIp(text, LOAD_BALANCER_IP);
}

const EXAMPLES = 'a CIDR (like 192.0.2.0/28), a range (like 192.0.2.10-192.0.2.20) or a single address';

/**
 * Parses a pool entry: a CIDR (`192.0.2.0/28`, `2001:db8::/120`), a range of two addresses of the
 * same family joined by "-" (`192.0.2.10-192.0.2.20`), or a single address. Returns the block, or
 * the problem with `text` as a sentence fragment (for CloudConfigError).
 *
 * Usable addresses: an IPv4 CIDR of /30 or wider leaves out its first and last address (network
 * and broadcast: a CIDR usually names the link's subnet, and those two are not host addresses on
 * it); an IPv6 CIDR of /126 or wider leaves out its first address (the subnet-router anycast
 * address, RFC 4291 §2.6.1). /31, /32, /127, /128, ranges and single addresses are used whole.
 */
export function parseBlock(text: string): AddressBlock | string {
  const block = text.includes('/') ? parseCidrBlock(text) : parseRange(text);
  if (typeof block === 'string') return block;
  return reservedProblem(block) ?? block;
}

function parseCidrBlock(text: string): AddressBlock | string {
  // Space around the slash is allowed, as around a range's dash.
  const parsed = parseCidrAddress(text.replace(/\s*\/\s*/, '/'), LOAD_BALANCER_IP);
  if (parsed === undefined) return cidrProblem(text);
  const { ip, cidr } = parsed;
  if (cidr.network !== ip.value)
    return `has bits set after its /${cidr.prefix} prefix; the network is ${formatCidr(cidr)}`;
  return cidrBlock(text, cidr);
}

// Why shared/net/ip.ts reads `text` as no CIDR, as a sentence fragment: its address, or its prefix length.
function cidrProblem(text: string): string {
  const [address = '', prefixText = '', extra] = text.split('/').map((part) => part.trim());
  if (extra !== undefined) return `is not ${EXAMPLES}`;
  const ip = parseLoadBalancerIp(address);
  if (ip === undefined) return notAnAddress(address);
  return `has the prefix length /${prefixText}; an ${ip.family} prefix length is 0 to ${familyBits(ip.family)}`;
}

// IPv4 /30 and wider lose network and broadcast, IPv6 /126 and wider the subnet-router anycast address.
function cidrBlock(text: string, cidr: Cidr): AddressBlock {
  const [first, last] = [cidr.network, lastAddress(cidr).value];
  const trims = familyBits(cidr.family) - cidr.prefix >= 2;
  const usableLast = trims && cidr.family === 'IPv4' ? last - 1n : last;
  return { text, family: cidr.family, first, last, usableFirst: trims ? first + 1n : first, usableLast };
}

function parseRange(text: string): AddressBlock | string {
  const parts = text.split('-').map((part) => part.trim());
  if (parts.length > 2) return `is not ${EXAMPLES}`;
  const [startText = '', endText = startText] = parts;
  const start = parseLoadBalancerIp(startText);
  if (start === undefined) return notAnAddress(startText);
  const end = parseLoadBalancerIp(endText);
  if (end === undefined) return notAnAddress(endText);
  if (start.family !== end.family)
    return `starts with an ${start.family} address and ends with an ${end.family} address`;
  if (end.value < start.value) return `ends (${formatIp(end)}) before it starts (${formatIp(start)})`;
  return {
    text,
    family: start.family,
    first: start.value,
    last: end.value,
    usableFirst: start.value,
    usableLast: end.value,
  };
}

function notAnAddress(address: string): string {
  if (address.includes('%'))
    return `holds ${JSON.stringify(address)}, an address with a zone, which cannot be a load balancer address`;
  if (parseIp(address, { ...LOAD_BALANCER_IP, embeddedIpv4: true })?.family === 'IPv6') {
    return `holds ${JSON.stringify(address)}, an IPv6 address with an embedded IPv4 part; write IPv4 addresses as such`;
  }
  return `holds ${JSON.stringify(address)}, which is not an IPv4 or IPv6 address; write ${EXAMPLES}`;
}

// Addresses no Service may have: a pool that reaches into them is a typo or a misunderstanding.
const RESERVED: readonly (readonly [cidr: string, what: string])[] = [
  ['0.0.0.0/8', '"this network" addresses'],
  ['127.0.0.0/8', 'loopback addresses'],
  ['224.0.0.0/4', 'multicast addresses'],
  ['255.255.255.255/32', 'the limited broadcast address'],
  ['::/128', 'the unspecified address'],
  ['::1/128', 'the loopback address'],
  ['::ffff:0:0/96', 'IPv4-mapped addresses'],
  ['ff00::/8', 'multicast addresses'],
];

const RESERVED_BLOCKS = RESERVED.map(([cidr, what]) => ({ block: parseCidrBlock(cidr) as AddressBlock, what }));

function reservedProblem(block: AddressBlock): string | undefined {
  for (const { block: reserved, what } of RESERVED_BLOCKS) {
    const shared = firstCommon(block, reserved);
    if (shared !== undefined) {
      return `holds ${formatIp({ family: block.family, value: shared })}, which is in ${reserved.text} (${what}): no load balancer can have such an address`;
    }
  }
  return undefined;
}

type Check = (value: string) => string | undefined;

function checked(check: Check) {
  return z.string().superRefine((value, context) => {
    const problem = check(value);
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
  });
}

const addressEntry = z.string().transform((text, context) => {
  const block = parseBlock(text.trim());
  if (typeof block === 'string') {
    context.addIssue({ code: 'custom', message: block });
    return z.NEVER;
  }
  return block;
});

export const poolSchema = z.strictObject({
  name: checked(dnsLabelProblem),
  addresses: z.array(addressEntry).min(1, 'must list at least one CIDR, range or address'),
  namespaces: z.array(checked(dnsLabelProblem)).optional(),
  default: z.boolean().optional(),
});

export const allocationsSchema = z.strictObject({
  namespace: checked(dnsLabelProblem).optional(),
  configMap: checked(dnsSubdomainProblem).optional(),
});

export const loadBalancersSchema = z.strictObject({
  pools: z.array(poolSchema).min(1, 'must list at least one pool'),
  allocations: allocationsSchema.optional(),
});

type LoadBalancersEntry = z.output<typeof loadBalancersSchema>;
type PoolEntry = z.output<typeof poolSchema>;

const SECTION = 'loadBalancers';

/**
 * Builds the section from entries that passed the schema, checking what spans entries: unique
 * pool names, no address in two entries, a namespace in at most one pool, at most one default.
 * Throws CloudConfigError naming `file`, the later of two conflicting fields and the earlier one.
 */
export function buildLoadBalancers(entry: LoadBalancersEntry, file: string | undefined): LoadBalancerConfig {
  checkNames(entry.pools, file);
  checkOverlaps(entry.pools, file);
  const byNamespace = namespaceIndex(entry.pools, file);
  const defaultPool = findDefault(entry.pools, file);
  const pools = entry.pools.map(toPool);
  const byName = new Map(pools.map((pool) => [pool.name, pool] as const));
  return Object.freeze({
    pools: Object.freeze(pools),
    byName,
    byNamespace: new Map([...byNamespace].map(([namespace, index]) => [namespace, pools[index] as Pool] as const)),
    defaultPool: defaultPool === undefined ? undefined : pools[defaultPool],
    allocations: Object.freeze({
      namespace: entry.allocations?.namespace,
      configMap: entry.allocations?.configMap ?? DEFAULT_ALLOCATIONS_CONFIG_MAP,
    }),
  });
}

function poolField(index: number, rest = ''): string {
  return `${SECTION}.pools[${index}]${rest}`;
}

function checkNames(pools: readonly PoolEntry[], file: string | undefined): void {
  const seen = new Map<string, number>();
  pools.forEach((pool, index) => {
    const earlier = seen.get(pool.name);
    if (earlier !== undefined)
      throw new CloudConfigError(
        file,
        poolField(index, '.name'),
        `"${pool.name}" is also the name of ${poolField(earlier)}`,
      );
    seen.set(pool.name, index);
  });
}

// Every pair of entries, in this pool and across pools: an address in two places could be handed
// out twice (or from the wrong pool). Pools list a few entries, so pairs are cheap.
function checkOverlaps(pools: readonly PoolEntry[], file: string | undefined): void {
  const seen: { block: AddressBlock; field: string }[] = [];
  pools.forEach((pool, index) => {
    pool.addresses.forEach((block, position) => {
      const field = poolField(index, `.addresses[${position}]`);
      for (const earlier of seen) {
        const shared = firstCommon(block, earlier.block);
        if (shared === undefined) continue;
        const address = formatIp({ family: block.family, value: shared });
        throw new CloudConfigError(
          file,
          field,
          `${block.text} overlaps ${earlier.block.text} (${earlier.field}): ${address} is in both`,
        );
      }
      seen.push({ block, field });
    });
  });
}

function namespaceIndex(pools: readonly PoolEntry[], file: string | undefined): Map<string, number> {
  const owners = new Map<string, number>();
  pools.forEach((pool, index) => {
    (pool.namespaces ?? []).forEach((namespace, position) => {
      const earlier = owners.get(namespace);
      if (earlier === undefined) {
        owners.set(namespace, index);
        return;
      }
      const where =
        earlier === index
          ? 'earlier in the same list'
          : `by pool "${pools[earlier]?.name ?? ''}" (${poolField(earlier)})`;
      throw new CloudConfigError(
        file,
        poolField(index, `.namespaces[${position}]`),
        `"${namespace}" is also listed ${where}; a namespace has one pool`,
      );
    });
  });
  return owners;
}

function findDefault(pools: readonly PoolEntry[], file: string | undefined): number | undefined {
  let found: number | undefined;
  pools.forEach((pool, index) => {
    if (pool.default !== true) return;
    if (found !== undefined) {
      const other = `pool "${pools[found]?.name ?? ''}" (${poolField(found)})`;
      throw new CloudConfigError(
        file,
        poolField(index, '.default'),
        `pool "${pool.name}" and ${other} are both the default; at most one pool may be`,
      );
    }
    found = index;
  });
  return found;
}

function toPool(entry: PoolEntry): Pool {
  return Object.freeze({
    name: entry.name,
    blocks: Object.freeze(entry.addresses.map((block) => Object.freeze({ ...block }))),
    namespaces: Object.freeze([...(entry.namespaces ?? [])]),
    isDefault: entry.default === true,
  });
}

/** How many addresses of `family` the pool hands out. */
export function poolSize(pool: Pool, family: IpFamily): bigint {
  return pool.blocks.filter((block) => block.family === family).reduce((total, block) => total + blockSize(block), 0n);
}

/**
 * Why the running provider cannot take `next` in place of `previous` (undefined when it can): the
 * load balancer capability is fixed at start-up, and moving the allocations record while running
 * would lose track of every address handed out. `deployment` is where the allocations go when the
 * file names no namespace (fixed while cirrus runs; undefined when it runs without load
 * balancers), so that writing that namespace out, or leaving it out again, is no move.
 */
export function reloadProblem(
  previous: LoadBalancerConfig | undefined,
  next: LoadBalancerConfig | undefined,
  deployment: DeploymentNamespace | undefined,
): { field: string; problem: string } | undefined {
  if (previous === undefined && next !== undefined) {
    return {
      field: SECTION,
      problem: 'was added, but load balancers are only turned on at start-up: restart cirrus to use them',
    };
  }
  if (previous !== undefined && next === undefined) {
    return {
      field: SECTION,
      problem: 'was removed, but load balancers are only turned off at start-up: restart cirrus to stop them',
    };
  }
  if (previous === undefined || next === undefined) return undefined;
  const where = ({ namespace, configMap }: AllocationsSetting): string =>
    `${namespace ?? deployment?.namespace ?? '(the namespace cirrus runs in)'}/${configMap}`;
  const [from, to] = [where(previous.allocations), where(next.allocations)];
  if (from === to) return undefined;
  return {
    field: `${SECTION}.allocations`,
    problem:
      `moves the allocations from ConfigMap ${from} to ${to}, ` +
      "which only takes effect at start-up: copy the ConfigMap's data to the new one, then restart cirrus",
  };
}
