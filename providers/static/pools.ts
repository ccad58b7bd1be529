// The `loadBalancers` section of the static provider's cloud-config: address pools for Services of
// type LoadBalancer, and where allocations are recorded. inventory.ts parses it as part of the
// file; this module holds its schema and the checks that span entries (names, overlaps,
// namespaces, the default). The format is documented in docs/providers/static.md.

import { z } from 'zod';
import { CloudConfigError } from '../../shared/cloud/errors.ts';
import { blockSize, firstCommon, formatIp, parseBlock, type AddressBlock, type IpFamily } from './ip.ts';
import { dnsLabelProblem, dnsSubdomainProblem } from './syntax.ts';

/** An address pool, validated. Frozen. */
export interface Pool {
  readonly name: string;
  /** In file order; no two overlap (in this pool or any other). */
  readonly blocks: readonly AddressBlock[];
  /** The namespaces whose Services use this pool unless they name another. */
  readonly namespaces: readonly string[];
  readonly isDefault: boolean;
}

/** Where allocations are recorded: one ConfigMap. */
export interface AllocationsLocation {
  readonly namespace: string;
  readonly configMap: string;
}

/** The validated `loadBalancers` section: an immutable snapshot, like the rest of the inventory. */
export interface LoadBalancerConfig {
  /** In file order. */
  readonly pools: readonly Pool[];
  readonly byName: ReadonlyMap<string, Pool>;
  readonly byNamespace: ReadonlyMap<string, Pool>;
  readonly defaultPool: Pool | undefined;
  readonly allocations: AllocationsLocation;
}

/** Where allocations are recorded when the file does not say. */
export const DEFAULT_ALLOCATIONS: AllocationsLocation = Object.freeze({ namespace: 'kube-system', configMap: 'cirrus-lb-ipam' });

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
      namespace: entry.allocations?.namespace ?? DEFAULT_ALLOCATIONS.namespace,
      configMap: entry.allocations?.configMap ?? DEFAULT_ALLOCATIONS.configMap,
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
    if (earlier !== undefined) throw new CloudConfigError(file, poolField(index, '.name'), `"${pool.name}" is also the name of ${poolField(earlier)}`);
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
        throw new CloudConfigError(file, field, `${block.text} overlaps ${earlier.block.text} (${earlier.field}): ${address} is in both`);
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
      const where = earlier === index ? 'earlier in the same list' : `by pool "${pools[earlier]?.name ?? ''}" (${poolField(earlier)})`;
      throw new CloudConfigError(file, poolField(index, `.namespaces[${position}]`), `"${namespace}" is also listed ${where}; a namespace has one pool`);
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
      throw new CloudConfigError(file, poolField(index, '.default'), `pool "${pool.name}" and ${other} are both the default; at most one pool may be`);
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
 * would lose track of every address handed out.
 */
export function reloadProblem(previous: LoadBalancerConfig | undefined, next: LoadBalancerConfig | undefined): { field: string; problem: string } | undefined {
  if (previous === undefined && next !== undefined) {
    return { field: SECTION, problem: 'was added, but load balancers are only turned on at start-up: restart cirrus to use them' };
  }
  if (previous !== undefined && next === undefined) {
    return { field: SECTION, problem: 'was removed, but load balancers are only turned off at start-up: restart cirrus to stop them' };
  }
  if (previous === undefined || next === undefined) return undefined;
  const [from, to] = [previous.allocations, next.allocations];
  if (from.namespace === to.namespace && from.configMap === to.configMap) return undefined;
  return {
    field: `${SECTION}.allocations`,
    problem: `moves the allocations from ConfigMap ${from.namespace}/${from.configMap} to ${to.namespace}/${to.configMap}, ` +
      'which only takes effect at start-up: copy the ConfigMap\'s data to the new one, then restart cirrus',
  };
}
