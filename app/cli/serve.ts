// `cirrus serve <function>`: one function over HTTP, as a container or Knative Service runs it; and
// the building of a function's app that it shares with the AWS Lambda entry (app/lambda).

import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { findFunction, knownNames, type FunctionEntry } from '../../shared/catalogue.ts';
import { Registry } from 'prom-client';
import type { Fleet } from '../../shared/cloud/fleet.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { importProviderModule } from './provider-module.ts';

export { importProviderModule } from './provider-module.ts';
import { ConfigError, type CommandLine, type Config } from '../config.ts';
import { initProviders, providerPlan, providersFor } from '../providers.ts';
import type { AppOptions, FunctionApp, PressureOptions } from '../../shared/host/app.ts';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import { LeanCore } from '../../shared/kube/core.ts';
import { createLogger, logDestination } from '../log.ts';
import type { Io } from './io.ts';
import { hint } from '../suggest.ts';
import { catalogue } from '../root.ts';
import { readSecret } from './secret.ts';
import {
  checkAccess,
  grantedBy,
  checkProvider,
  checkReachable,
  functionAccess,
  kubeconfigSource,
  usesLoadBalancers,
} from './preflight.ts';

/** The options `cirrus serve` takes. */
export type ServeCommandOptions =
  | 'cloudProvider'
  | 'cloudConfig'
  | 'defaultProvider'
  | 'serveProviders'
  | 'providerModule'
  | 'clusterName'
  | 'kubeconfig'
  | 'bindAddress'
  | 'port'
  | 'maxConcurrentRequests'
  | 'concurrentNodeSyncs'
  | 'concurrentServiceSyncs'
  | 'loadBalancerClass'
  | 'configureCloudRoutes'
  | 'clusterCidr'
  | 'concurrentRouteOperations'
  | 'signingSecretFile'
  | 'logLevel'
  | 'logFormat';

/** Serves the function until `io.signal` aborts; exit status 0 after a clean stop. */
export async function runServe(line: CommandLine<ServeCommandOptions>, io: Io): Promise<number> {
  const { config } = line;
  const entry = functionNamed(line.positionals[0] ?? '');
  const { name } = entry;
  const log = createLogger({ name, level: config.logLevel, destination: await logDestination(config.logFormat) });
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const source = kubeconfigSource(config.kubeconfig, io.env);
  // The start-up checks (reaching the API server, then the rights the function uses, then the
  // provider's own) run while the function loads and after it listens: a cold start waits for
  // neither their round trips nor their CPU before its first answer. Until they pass, /readyz
  // answers 503 and a reconcile request waits for them (shared/host/starting.ts); if one fails,
  // the server closes and the command exits 1 with its message, as it did before listening.
  const checks = Promise.withResolvers<unknown>();
  checks.promise.catch(() => undefined);
  const reached = checkReachable(kubeConfig, source).then(() =>
    checkAccess(kubeConfig, source, functionAccess([entry]), grantedBy.serve(name)),
  );
  reached.catch(() => undefined);
  const { app, providerName, cloud } = await buildFunctionApp(entry, config, {
    signal: io.signal,
    log,
    pressure: { maxConcurrentRequests: config.maxConcurrentRequests },
    kubeConfig,
    started: checks.promise,
  });
  const checked = reached.then(() =>
    checkProvider(cloud, {
      kubeConfig,
      loadBalancers: usesLoadBalancers([entry]),
      mayCreate: true,
      log,
      signal: io.signal,
    }),
  );
  checked.then(checks.resolve, checks.reject);
  const failed = new AbortController();
  const { serve } = await import('../../shared/host/index.ts');
  const server = await serve(app, {
    host: config.bindAddress,
    port: config.port,
    signal: AbortSignal.any([io.signal, failed.signal]),
  });
  try {
    await Promise.race([checked, server.closed]);
  } catch (error) {
    failed.abort();
    await server.closed;
    throw error;
  }
  if (!io.signal.aborted) log.info({ address: server.address, provider: providerName }, `${name} serving`);
  await server.closed;
  return 0;
}

/**
 * The options that shape a function's app, wherever it runs (`cirrus serve`, AWS Lambda). Load
 * shedding is the platform's: see buildFunctionApp's `pressure`.
 */
export type FunctionOptions = Exclude<ServeCommandOptions, 'bindAddress' | 'port' | 'maxConcurrentRequests'>;

/** The catalogue entry for a function name or alias; throws ConfigError listing the known names. */
export function functionNamed(name: string): FunctionEntry {
  const entry = findFunction(catalogue, name);
  if (entry === undefined) {
    const known = knownNames(catalogue);
    // Suggested from the short names: a Go controller's full name would match every `node…`.
    const near = catalogue.flatMap((e) => [e.name, e.controller.alias]);
    const canonical = (n: string): string => findFunction(catalogue, n)?.name ?? n;
    throw new ConfigError(`unknown function '${name}'${hint(name, near, canonical)} (known: ${known.join(', ')})`);
  }
  return entry;
}

// One provider, or a hybrid cluster's (ADR 0026): the function serves the objects of those it can.
// With one provider the function's load refuses one it cannot serve, naming what is missing.
async function providersOf(
  entry: FunctionEntry,
  config: Config<FunctionOptions>,
  context: Parameters<typeof initProviders>[1],
): Promise<{ cloud: CloudProvider; fleet?: Fleet | undefined }> {
  const plan = providerPlan(config);
  const providers = await initProviders(plan, context);
  const chosen = providersFor(entry, plan, providers, config);
  if (chosen.skip === undefined) return chosen;
  const [first] = providers.values();
  if (plan.ownership !== undefined || first === undefined)
    throw new ConfigError(`${entry.name}: no provider of ${plan.names.join(', ')} supports it (${chosen.skip})`);
  return { cloud: first };
}

/**
 * The ready app of function `entry`, as `cirrus serve` runs it: the provider module
 * imported, the kubeconfig loaded, the provider initialized, signatures verified when a signing
 * secret is configured (without one, the host warns in the log). `pressure` overrides the load
 * shedding defaults, or turns it off (false); `publicEndpoint` requires the signature on every
 * route but the probes (AppOptions).
 */
export async function buildFunctionApp(
  entry: FunctionEntry,
  config: Config<FunctionOptions>,
  context: {
    readonly signal: AbortSignal;
    readonly log: Logger;
    readonly pressure?: PressureOptions | false;
    readonly publicEndpoint?: boolean;
    /** The cluster's client configuration, when the caller loaded it already; else --kubeconfig's. */
    readonly kubeConfig?: KubeConfig;
    /** The start-up checks, when the app listens before they pass (AppOptions.started). */
    readonly started?: Promise<unknown>;
  },
): Promise<{ app: FunctionApp; providerName: string; cloud: CloudProvider }> {
  const { signal, log } = context;
  if (config.providerModule !== undefined) await importProviderModule(config.providerModule);
  const kubeConfig = context.kubeConfig ?? loadKubeConfig(config.kubeconfig);
  // One registry for /metrics, shared with the provider for its own series (the aws provider's API calls).
  const registry = new Registry();
  const { cloud, fleet } = await providersOf(entry, config, { signal, log, kubeConfig, metrics: registry });
  const core = new LeanCore(kubeConfig);
  const definition = await entry.load({ core, cloud, config, fleet });
  const { buildApp } = await import('../../shared/host/index.ts');
  const secret = await readSecret(config.signingSecretFile);
  const options: AppOptions = {
    logger: log,
    registry,
    ...(secret === undefined ? {} : { auth: { secret } }),
    ...(context.pressure === undefined ? {} : { pressure: context.pressure }),
    ...(context.publicEndpoint === true ? { publicEndpoint: true } : {}),
    ...(context.started === undefined ? {} : { started: context.started }),
  };
  return { app: await buildApp(definition, options), providerName: cloud.providerName(), cloud };
}
