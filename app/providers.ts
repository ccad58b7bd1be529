// The providers a command runs: one (`--cloud-provider aws`), as the Go CCM runs one, or several
// for a hybrid cluster (`--cloud-provider static,aws`, ADR 0026), each with its own cloud-config
// (`--cloud-config static=inventory.yaml,aws=aws.conf`), the default provider (`--default-provider`)
// and each provider's load balancer class (`--load-balancer-class aws=service.k8s.aws/nlb`). The
// command line says it; this module reads it into ownership rules and builds the providers.

import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { FunctionEntry, FunctionSettings } from '../shared/catalogue.ts';
import { hybridFleet, type Fleet } from '../shared/cloud/fleet.ts';
import { validOwnership, type Ownership } from '../shared/cloud/ownership.ts';
import type { CloudProvider } from '../shared/cloud/provider.ts';
import { initCloudProvider } from '../shared/cloud/registry.ts';
import { ConfigError } from './config.ts';

/** The providers of a command line. */
export interface ProviderPlan {
  /** Their names, in the order given. */
  readonly names: readonly string[];
  /** Each one's cloud-config path (undefined: none). */
  readonly cloudConfigs: ReadonlyMap<string, string | undefined>;
  /** The ownership rules with several providers; undefined with one. */
  readonly ownership: Ownership | undefined;
  /** Those this instance acts for and builds (`--serve-providers`; default: all of them). */
  readonly served: readonly string[];
}

/** What providerPlan() reads. */
export interface ProviderOptions {
  readonly cloudProvider?: string | undefined;
  readonly cloudConfig?: string | undefined;
  readonly defaultProvider?: string | undefined;
  readonly loadBalancerClass?: string | undefined;
  readonly serveProviders?: string | undefined;
}

/**
 * Reads the providers from the options; `fallback` is the provider when none is named (start's
 * demo: static). Throws ConfigError naming the flag and what is wrong: a cloud-config or class by
 * name with one provider, a name that is not among --cloud-provider, a provider named twice.
 */
export function providerPlan(config: ProviderOptions, fallback?: string): ProviderPlan {
  const names = (config.cloudProvider ?? fallback ?? '').split(',').filter((name) => name !== '');
  if (names.length <= 1) {
    singleProviderOnly(config, names);
    return {
      names,
      cloudConfigs: new Map([[names[0] ?? '', config.cloudConfig]]),
      ownership: undefined,
      served: names,
    };
  }
  const twice = names.filter((name, i) => names.indexOf(name) !== i);
  if (twice.length > 0) throw new ConfigError(`--cloud-provider: ${twice.join(', ')} named twice`);
  const cloudConfigs = pairs('--cloud-config', config.cloudConfig, names, 'name=path');
  const classes = pairs('--load-balancer-class', config.loadBalancerClass, names, 'name=class');
  const byClass = new Map([...classes].map(([name, loadBalancerClass]) => [loadBalancerClass, name]));
  try {
    const ownership = validOwnership({ providers: names, defaultProvider: config.defaultProvider, classes: byClass });
    const served = servedOf(config.serveProviders, names);
    return { names, cloudConfigs: new Map(names.map((name) => [name, cloudConfigs.get(name)])), ownership, served };
  } catch (error) {
    throw new ConfigError(`--cloud-provider ${names.join(',')}: ${(error as Error).message}`, { cause: error });
  }
}

// `--serve-providers`: each one of `names`, none twice; all of them when unset.
function servedOf(value: string | undefined, names: readonly string[]): readonly string[] {
  if (value === undefined) return names;
  const served = value.split(',');
  for (const name of served)
    if (!names.includes(name))
      throw new ConfigError(`--serve-providers: ${name} is not one of --cloud-provider ${names.join(',')}`);
  const twice = served.filter((name, i) => served.indexOf(name) !== i);
  if (twice.length > 0) throw new ConfigError(`--serve-providers: ${twice.join(', ')} named twice`);
  return names.filter((name) => served.includes(name));
}

// With one provider, nothing is given by provider name, no default is named and nothing else served.
function singleProviderOnly(config: ProviderOptions, names: readonly string[]): void {
  if (config.serveProviders !== undefined && config.serveProviders !== names[0])
    throw new ConfigError(`--serve-providers: ${config.serveProviders} is not the one --cloud-provider`);
  if (config.cloudConfig !== undefined && byName(config.cloudConfig))
    throw new ConfigError(`--cloud-config: ${config.cloudConfig} gives files by provider name, but one provider runs`);
  if (config.defaultProvider !== undefined)
    throw new ConfigError('--default-provider: there is one provider; it needs no default');
  if (config.loadBalancerClass !== undefined && byName(config.loadBalancerClass))
    throw new ConfigError(
      `--load-balancer-class: ${config.loadBalancerClass} gives classes by provider name, but one provider runs`,
    );
}

// Whether a value gives things by provider name (`aws=…`).
function byName(value: string): boolean {
  return /^[a-z0-9-]+=/.test(value);
}

/**
 * The `name=value` pairs of `flag`, each name one of `names`, none twice; an empty map when unset.
 * Throws ConfigError naming the flag (`shape`: what one pair looks like, for the message).
 */
export function pairs(
  flag: string,
  value: string | undefined,
  names: readonly string[],
  shape: string,
): Map<string, string> {
  const found = new Map<string, string>();
  if (value === undefined) return found;
  if (!byName(value))
    throw new ConfigError(`${flag}: with several providers, give each one's as ${shape}, comma-separated`);
  for (const pair of value.split(',')) {
    const at = pair.indexOf('=');
    const name = pair.slice(0, at);
    if (at <= 0 || pair.slice(at + 1) === '') throw new ConfigError(`${flag}: "${pair}" is not ${shape}`);
    if (!names.includes(name))
      throw new ConfigError(`${flag}: ${name} is not one of --cloud-provider ${names.join(',')}`);
    if (found.has(name)) throw new ConfigError(`${flag}: ${name} given twice`);
    found.set(name, pair.slice(at + 1));
  }
  return found;
}

/** Builds every provider of `plan`, in order. Each provider's IDs must carry its name as their scheme. */
export async function initProviders(
  plan: ProviderPlan,
  options: { signal: AbortSignal; log: Logger; kubeConfig?: KubeConfig; metrics?: Registry },
): Promise<Map<string, CloudProvider>> {
  const providers = new Map<string, CloudProvider>();
  for (const name of plan.served) {
    const cloud = await initCloudProvider(name, plan.cloudConfigs.get(name), options);
    if (plan.ownership !== undefined && cloud.providerName() !== name)
      throw new ConfigError(
        `--cloud-provider ${name}: its provider IDs are ${cloud.providerName()}://…, so a Node's provider ID cannot ` +
          'name it; in a hybrid cluster a provider is named by its provider IDs’ scheme',
      );
    providers.set(name, cloud);
  }
  return providers;
}

/** What one function runs with: its provider, or its fleet in a hybrid cluster; or why it cannot run. */
export type FunctionProviders =
  | { readonly cloud: CloudProvider; readonly fleet?: Fleet | undefined; readonly skip?: undefined }
  | { readonly skip: string };

/**
 * The providers `entry` runs with: with one provider, that one (unless the catalogue skips it);
 * in a hybrid cluster, those the catalogue would not skip — the function serves their objects, and
 * the Nodes and Services of the others stay with nobody here — and a skip when there are none.
 */
export function providersFor(
  entry: FunctionEntry,
  plan: ProviderPlan,
  providers: ReadonlyMap<string, CloudProvider>,
  config: FunctionSettings,
): FunctionProviders {
  const able = [...providers].filter(([, cloud]) => entry.skipReason(cloud, config) === undefined);
  const [first] = able;
  if (first === undefined) {
    const reasons = [...providers.values()].flatMap((cloud) => entry.skipReason(cloud, config) ?? []);
    return { skip: reasons.length === 0 ? 'no provider' : reasons.join('; ') };
  }
  if (plan.ownership === undefined) return { cloud: first[1] };
  return { cloud: first[1], fleet: hybridFleet(plan.ownership, new Map(able)) };
}
