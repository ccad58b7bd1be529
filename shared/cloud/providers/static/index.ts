// The `static` provider: for clusters with no cloud API (bare metal, edge, home labs). The
// "cloud" is a YAML inventory of machines, the cloud-config file, re-read when it changes so that
// adding a machine needs no restart. Format and behaviour for users: docs/providers/static.md.
//
// Requests only ever read an immutable inventory snapshot; a reload builds and validates a new one
// and swaps it in whole, so concurrent calls see either the old file or the new one, never a mix.

import { CloudConfigError } from '../../errors.ts';
import type { CloudProvider, InstancesV2 } from '../../provider.ts';
import type { ProviderContext } from '../../registry.ts';
import { StaticInstances } from './instances.ts';
import { parseInventory, type Inventory } from './inventory.ts';
import { watchFile } from './watch.ts';

export { parseInventory, type Inventory, type StaticInstance } from './inventory.ts';

/** Tuning of the reload; the defaults suit production, tests shorten them. */
export interface StaticProviderOptions {
  /** How often the file is stat'ed, as a fallback for changes the folder watch misses. Default 5000. */
  readonly pollIntervalMs?: number;
  /** How long after the last change event the file is read. Default 100. */
  readonly debounceMs?: number;
}

const DEFAULT_POLL_INTERVAL_MS = 5_000;
const DEFAULT_DEBOUNCE_MS = 100;

/**
 * Builds the static provider from the inventory in `context.config`. Throws CloudConfigError when
 * there is no cloud-config or it is invalid. When `context.configPath` is set, the file is watched
 * until `context.signal` aborts: a valid change replaces the inventory (logged at info), an
 * invalid one is logged as an error and the last good inventory stays in force. The watch never
 * keeps the process alive.
 */
export async function createStaticProvider(context: ProviderContext, options: StaticProviderOptions = {}): Promise<CloudProvider> {
  if (context.config === undefined) {
    throw new CloudConfigError(context.configPath, '', 'the static provider needs --cloud-config with an inventory file');
  }
  const holder = { inventory: parseInventory(context.config, context.configPath) };
  if (context.configPath !== undefined) {
    await watchFile(context.configPath, context.config, {
      onChange: (contents) => { reload(holder, contents, context); },
      signal: context.signal,
      log: context.log,
      pollIntervalMs: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
      debounceMs: options.debounceMs ?? DEFAULT_DEBOUNCE_MS,
    });
  }
  return new StaticCloud(new StaticInstances(() => holder.inventory));
}

function reload(holder: { inventory: Inventory }, contents: string, context: ProviderContext): void {
  const file = context.configPath;
  try {
    holder.inventory = parseInventory(contents, file);
  } catch (error) {
    if (!(error instanceof CloudConfigError)) throw error;
    const { field, problem, message } = error;
    context.log.error({ file, field, problem }, `rejected a change to the static inventory, keeping the last good one: ${message}`);
    return;
  }
  context.log.info({ file, instances: holder.inventory.instances.length }, 'reloaded the static inventory');
}

/** The static provider: instances only. */
class StaticCloud implements CloudProvider {
  readonly #instances: InstancesV2;

  constructor(instances: InstancesV2) {
    this.#instances = instances;
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

  // Load balancers (for bare metal: announcing addresses from a pool) will be a capability of
  // their own beside instances, with their own section in the inventory. Until then Services of
  // type LoadBalancer are left to another controller.
  loadBalancer(): undefined {
    return undefined;
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
