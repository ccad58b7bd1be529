// The `static` provider: for clusters with no cloud API (bare metal, edge, home labs). The
// "cloud" is a YAML inventory of machines, the cloud-config file, re-read when it changes so that
// adding a machine needs no restart; optionally, pools of addresses for Services of type
// LoadBalancer. Format and behaviour for users: docs/providers/static.md.
//
// Requests only ever read an immutable inventory snapshot; a reload builds and validates a new one
// and swaps it in whole, so concurrent calls see either the old file or the new one, never a mix.
// Load balancer allocations are not in the snapshot: they live in a ConfigMap (allocations.ts).

import { CoreV1Api } from '@kubernetes/client-node';
import { CloudConfigError, findCause } from '../../shared/cloud/errors.ts';
import type {
  CloudProvider,
  InstancesV2,
  LoadBalancer,
  PreflightContext,
  PreflightReport,
} from '../../shared/cloud/provider.ts';
import type { ProviderContext } from '../../shared/cloud/registry.ts';
import { AllocationStore } from './allocations.ts';
import { StaticInstances } from './instances.ts';
import { parseInventory, type Inventory } from './inventory.ts';
import { StaticLoadBalancer } from './load-balancer.ts';
import { deploymentNamespace, type DeploymentNamespace } from './namespace.ts';
import { allocationsLocation, reloadProblem, type AllocationsLocation, type LoadBalancerConfig } from './pools.ts';
import { allocationsPreflight } from './preflight.ts';
import { watchFile } from './watch.ts';

export { parseInventory, type Inventory, type StaticInstance } from './inventory.ts';
export { ADDRESSES_ANNOTATION, AllocationError, POOL_ANNOTATION, type Allocation } from './ipam.ts';
export type { LoadBalancerConfig, Pool } from './pools.ts';

/** Tuning of the reload; the defaults suit production, tests shorten them. */
export interface StaticProviderOptions {
  /** How often the file is stat'ed, as a fallback for changes the folder watch misses. Default 5000. */
  readonly pollIntervalMs?: number;
  /** How long after the last change event the file is read. Default 100. */
  readonly debounceMs?: number;
  /**
   * The file holding the namespace cirrus runs in, where allocations go when the file names no
   * namespace. Default the pod's ServiceAccount namespace file; when it is missing, cirrus-system.
   */
  readonly namespaceFile?: string;
  /**
   * How long a Service holding an address, found to exist when a pool was exhausted, is not read
   * again (load-balancer.ts HOLDER_CHECK_PERIOD_MS). Default 60000.
   */
  readonly holderCheckPeriodMs?: number;
}

const DEFAULT_POLL_INTERVAL_MS = 5_000;
const DEFAULT_DEBOUNCE_MS = 100;

/**
 * Builds the static provider from the inventory in `context.config`. Throws CloudConfigError when
 * there is no cloud-config or it is invalid, and an Error when the file has `loadBalancers` but
 * `context.kubeConfig` is undefined (allocations are recorded in the cluster). When
 * `context.configPath` is set, the file is watched until `context.signal` aborts: a valid change
 * replaces the inventory and the pools (logged at info), an invalid one — or one that adds or
 * removes `loadBalancers` or moves its allocations — is logged as an error and the last good
 * inventory stays in force. The watch never keeps the process alive. Allocations go to the file's
 * `loadBalancers.allocations.namespace`, else to the namespace cirrus runs in (namespace.ts).
 */
export async function createStaticProvider(
  context: ProviderContext,
  options: StaticProviderOptions = {},
): Promise<CloudProvider> {
  if (context.config === undefined) {
    throw new CloudConfigError(
      context.configPath,
      '',
      'the static provider needs --cloud-config with an inventory file',
    );
  }
  const holder = { inventory: parseInventory(context.config, context.configPath) };
  const initialPools = holder.inventory.loadBalancers;
  // The namespace cirrus runs in is read only for load balancers: without them it has no use.
  let deployment: DeploymentNamespace | undefined;
  let loadBalancer: LoadBalancer | undefined;
  let location: AllocationsLocation | undefined;
  if (initialPools !== undefined) {
    deployment = await deploymentNamespace(options.namespaceFile);
    // A reload may not move the allocations (reloadProblem), so the first location stays the one.
    location = allocationsLocation(initialPools.allocations, deployment);
    loadBalancer = createLoadBalancer(
      context,
      () => holder.inventory.loadBalancers ?? initialPools,
      deployment,
      options.holderCheckPeriodMs,
    );
  }
  if (context.configPath !== undefined) {
    await watchFile(context.configPath, context.config, {
      onChange: (contents) => {
        reload(holder, contents, { context, deployment });
      },
      signal: context.signal,
      log: context.log,
      pollIntervalMs: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
      debounceMs: options.debounceMs ?? DEFAULT_DEBOUNCE_MS,
    });
  }
  return new StaticCloud(new StaticInstances(() => holder.inventory), loadBalancer, location);
}

function createLoadBalancer(
  context: ProviderContext,
  pools: () => LoadBalancerConfig,
  deployment: DeploymentNamespace,
  holderCheckPeriodMs: number | undefined,
): LoadBalancer {
  const location = allocationsLocation(pools().allocations, deployment);
  if (context.kubeConfig === undefined) {
    throw new Error(
      `the static provider's loadBalancers need a connection to the cluster (a kubeconfig), to record allocations in ConfigMap ${location.namespace}/${location.configMap}; none was given ` +
        '(cirrus conformance: give one with --kubeconfig; cirrus cluster starts a local control plane and prints its ' +
        'KUBECONFIG; or check an inventory without loadBalancers)',
    );
  }
  const core = context.kubeConfig.makeApiClient(CoreV1Api);
  const log = context.log.child({ capability: 'loadBalancer' });
  const store = new AllocationStore(core, location, log);
  return new StaticLoadBalancer(pools, {
    store,
    core,
    log,
    ...(holderCheckPeriodMs === undefined ? {} : { holderCheckPeriodMs }),
  });
}

function reload(
  holder: { inventory: Inventory },
  contents: string,
  { context, deployment }: { context: ProviderContext; deployment: DeploymentNamespace | undefined },
): void {
  const file = context.configPath;
  try {
    const next = parseInventory(contents, file);
    const problem = reloadProblem(holder.inventory.loadBalancers, next.loadBalancers, deployment);
    if (problem !== undefined) throw new CloudConfigError(file, problem.field, problem.problem);
    holder.inventory = next;
  } catch (error) {
    const invalid = findCause(error, CloudConfigError);
    if (!invalid) throw error;
    const { field, problem, message } = invalid;
    context.log.error(
      { file, field, problem },
      `rejected a change to the static inventory, keeping the last good one: ${message}`,
    );
    return;
  }
  const pools = holder.inventory.loadBalancers?.pools.length ?? 0;
  context.log.info({ file, instances: holder.inventory.instances.length, pools }, 'reloaded the static inventory');
}

/** The static provider: instances, and load balancers when the file has pools. */
class StaticCloud implements CloudProvider {
  readonly #instances: InstancesV2;
  readonly #loadBalancer: LoadBalancer | undefined;
  readonly #allocations: AllocationsLocation | undefined;

  constructor(instances: InstancesV2, loadBalancer: LoadBalancer | undefined, allocations?: AllocationsLocation) {
    this.#instances = instances;
    this.#loadBalancer = loadBalancer;
    this.#allocations = allocations;
  }

  // With load balancers: the allocations' namespace (created when missing and allowed) and the rights on their ConfigMap.
  async preflight(context: PreflightContext): Promise<PreflightReport> {
    if (this.#allocations === undefined) return { created: [], problems: [] };
    return allocationsPreflight(this.#allocations, context);
  }

  /** Also the default scheme of provider IDs (`static://<name>`); entries may use any other. */
  providerName(): string {
    return 'static';
  }

  hasClusterId(): boolean {
    return true;
  }

  instancesV2(): InstancesV2 {
    return this.#instances;
  }

  // Addresses from the pools of `loadBalancers`; without that section, Services of type
  // LoadBalancer are left to another controller.
  loadBalancer(): LoadBalancer | undefined {
    return this.#loadBalancer;
  }

  // Not needed: instancesV2() is what the node controllers use when it is present.
  instances(): undefined {
    return undefined;
  }

  // Zones come with instanceMetadata().
  zones(): undefined {
    return undefined;
  }

  clusters(): undefined {
    return undefined;
  }

  // Routes are the job of the cluster's network plugin on bare metal.
  routes(): undefined {
    return undefined;
  }
}
