// `cirrus serve <function>`: one function over HTTP, as a container or Knative Service runs it; and
// the building of a function's app that it shares with the AWS Lambda entry (shared/lambda).

import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { existsSync } from 'node:fs';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { initCloudProvider } from '../cloud/registry.ts';
import type { CloudProvider } from '../cloud/provider.ts';
import { ConfigError, type CommandLine, type Config } from '../config.ts';
import type { AppOptions, FunctionApp } from '../host/app.ts';
import type { FunctionDefinition } from '../host/function.ts';
import { loadKubeConfig } from '../kube/client.ts';
import { createLogger } from '../log.ts';
import { canonicalFunction, knownFunctionNames } from '../names.ts';
import type { Io } from './main.ts';
import { readSecret } from './secret.ts';

/** The options `cirrus serve` takes. */
export type ServeOptions =
  | 'cloudProvider' | 'cloudConfig' | 'providerModule' | 'clusterName' | 'kubeconfig' | 'bindAddress' | 'port'
  | 'concurrentNodeSyncs' | 'concurrentServiceSyncs' | 'configureCloudRoutes' | 'clusterCidr' | 'concurrentRouteOperations'
  | 'signingSecretFile' | 'logLevel';

/** Serves the function until `io.signal` aborts; exit status 0 after a clean stop. */
export async function runServe(line: CommandLine<ServeOptions>, io: Io): Promise<number> {
  const { config } = line;
  const name = canonicalFunction(line.positionals[0] ?? '');
  if (name === undefined) {
    throw new ConfigError(`unknown function '${line.positionals[0] ?? ''}' (known: ${knownFunctionNames().join(', ')})`);
  }
  const log = createLogger({ name, level: config.logLevel });
  const { app, providerName } = await buildFunctionApp(name, config, { signal: io.signal, log });
  const { serve } = await import('../host/index.ts');
  const server = await serve(app, { host: config.bindAddress, port: config.port, signal: io.signal });
  log.info({ address: server.address, provider: providerName }, `${name} serving`);
  await server.closed;
  return 0;
}

/** The options that shape a function's app, wherever it runs (`cirrus serve`, AWS Lambda). */
export type FunctionOptions = Exclude<ServeOptions, 'bindAddress' | 'port'>;

/**
 * The ready app of function `name` (canonical), as `cirrus serve` runs it: the provider module
 * imported, the kubeconfig loaded, the provider initialized, signatures verified when a signing
 * secret is configured. `pressure: false` turns load shedding off.
 */
export async function buildFunctionApp(
  name: string,
  config: Config<FunctionOptions>,
  context: { readonly signal: AbortSignal; readonly log: Logger; readonly pressure?: false },
): Promise<{ app: FunctionApp; providerName: string }> {
  const { signal, log } = context;
  if (config.providerModule !== undefined) await importProviderModule(config.providerModule);
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const cloud = await initCloudProvider(config.cloudProvider ?? '', config.cloudConfig, { signal, log, kubeConfig });
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const definition = await functionFor(name, { core, cloud, config });
  const { buildApp } = await import('../host/index.ts');
  const secret = await readSecret(config.signingSecretFile);
  const options: AppOptions = { logger: log, ...(secret === undefined ? {} : { auth: { secret } }), ...(context.pressure === false ? { pressure: false } : {}) };
  return { app: await buildApp(definition, options), providerName: cloud.providerName() };
}

/** The function called `name`, built for the given cluster, provider and configuration. */
// Each function module is imported only by the process that serves it.
export async function functionFor(name: string, deps: { core: CoreV1Api; cloud: CloudProvider; config: Config<FunctionOptions> }): Promise<FunctionDefinition> {
  const { core, cloud, config } = deps;
  switch (name) {
    case 'node-init':
      return (await import('../../functions/node-init/index.ts')).nodeInitFunction({ core, cloud, concurrency: config.concurrentNodeSyncs });
    case 'node-lifecycle':
      return (await import('../../functions/node-lifecycle/index.ts')).nodeLifecycleFunction({ core, cloud, concurrency: config.concurrentNodeSyncs });
    case 'service-lb':
      return (await import('../../functions/service-lb/index.ts')).serviceLbFunction({
        core, cloud, clusterName: config.clusterName, concurrency: config.concurrentServiceSyncs,
      });
    case 'routes':
      return (await import('../../functions/routes/index.ts')).routesFunction({
        core,
        cloud,
        clusterName: config.clusterName,
        clusterCidrs: config.clusterCidr,
        configureCloudRoutes: config.configureCloudRoutes,
        concurrency: config.concurrentRouteOperations,
      });
    default:
      throw new ConfigError(`unknown function '${name}'`);
  }
}

/** Imports `specifier` — a file path (relative to the working directory) or a package name — for its side effects. */
export async function importProviderModule(specifier: string): Promise<void> {
  const path = resolve(specifier);
  const target = specifier.startsWith('.') || specifier.startsWith('/') || existsSync(path) ? pathToFileURL(path).href : specifier;
  try {
    await import(target);
  } catch (error) {
    throw new Error(`--provider-module ${specifier}: ${(error as Error).message}`, { cause: error });
  }
}
