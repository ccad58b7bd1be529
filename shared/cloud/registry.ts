// The provider registry, with the semantics of k8s.io/cloud-provider's plugins.go: a name is
// registered once; an unknown name is an error that lists the known ones; the factory receives
// the cloud-config file's contents (and its path, for providers that watch it for changes).
// The built-in providers are registered by the composition root (app/root.ts).

import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { CloudProvider } from './provider.ts';
import { pacedProvider } from './paced.ts';

/** What a factory gets to build its provider from. */
export interface ProviderContext {
  /** The cloud-config file's contents; undefined when no --cloud-config was given. */
  readonly config: string | undefined;
  /** The cloud-config file's path, for error messages and for providers that re-read it. */
  readonly configPath: string | undefined;
  /** Aborted when the process shuts down: stop watchers and timers. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  /**
   * The cluster's client configuration (as Go's Initialize() gets a client builder), for providers
   * that keep state in the cluster; undefined where none was given.
   */
  readonly kubeConfig: KubeConfig | undefined;
  /** The registry the process serves on /metrics, for a provider's own series (e.g. its cloud API calls); undefined where none is served. */
  readonly metrics?: Registry | undefined;
}

/** Builds a provider; throws CloudConfigError for a config it cannot use. */
export type CloudProviderFactory = (context: ProviderContext) => CloudProvider | Promise<CloudProvider>;

const factories = new Map<string, CloudProviderFactory>();

/** Registers `factory` under `name`; a name registered twice is an error. */
export function registerCloudProvider(name: string, factory: CloudProviderFactory): void {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    throw new Error(`cloud provider name "${name}" must be lower-case letters, digits and "-"`);
  }
  if (factories.has(name)) throw new Error(`cloud provider "${name}" was registered twice`);
  factories.set(name, factory);
}

/** Whether a provider is registered under `name`. */
export function isCloudProvider(name: string): boolean {
  return factories.has(name);
}

/** The registered names, sorted. */
export function registeredCloudProviders(): string[] {
  return [...factories.keys()].sort();
}

/** Options of initCloudProvider(). */
export interface InitOptions {
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly kubeConfig?: KubeConfig;
  readonly metrics?: Registry;
}

/**
 * Builds the provider registered as `name` from the cloud-config file at `configPath` (if any).
 * Unlike plugins.go, an empty name and "external" are errors: a CCM needs a real provider.
 */
export async function initCloudProvider(
  name: string,
  configPath: string | undefined,
  options: InitOptions,
): Promise<CloudProvider> {
  if (name === '' || name === 'external') {
    throw new Error(`--cloud-provider must name a provider (${known()}), not "${name}"`);
  }
  const factory = factories.get(name);
  if (factory === undefined) throw new Error(`unknown cloud provider "${name}"; ${known()}`);
  let config: string | undefined;
  if (configPath !== undefined) {
    try {
      config = await readFile(configPath, 'utf8');
    } catch (error) {
      throw new Error(`could not read cloud-config ${configPath}: ${(error as Error).message}`, { cause: error });
    }
  }
  try {
    const log = options.log.child({ provider: name });
    // Paced within a pass that carries a share of the relay's cloud call budget (./paced.ts).
    return pacedProvider(
      await factory({
        config,
        configPath,
        signal: options.signal,
        log,
        kubeConfig: options.kubeConfig,
        metrics: options.metrics,
      }),
    );
  } catch (error) {
    throw new Error(`could not init cloud provider "${name}": ${(error as Error).message}`, { cause: error });
  }
}

function known(): string {
  return `registered: ${registeredCloudProviders().join(', ') || 'none'}`;
}
