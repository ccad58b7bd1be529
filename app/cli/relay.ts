// `cirrus relay`: the watch-to-event bridge, with its probes and metrics on --port.

import type { PeriodOption } from '../../shared/catalogue.ts';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import { ConfigError, type CommandLine, type Config } from '../config.ts';
import { createLogger, logDestination } from '../log.ts';
import { providerPlan } from '../providers.ts';
import type { Io } from './io.ts';
import { catalogue, loadRelay, type LeaseSettings } from '../root.ts';
import type { RelayStatus } from '../../relay/index.ts';
import { readSecret } from './secret.ts';
import { checkAccess, checkReachable, grantedBy, kubeconfigSource, relayAccess } from './preflight.ts';

/** The options `cirrus relay` takes. */
export type RelayCommandOptions =
  | 'kubeconfig'
  | 'to'
  | 'routingConfig'
  | 'cloudProvider'
  | 'defaultProvider'
  | 'loadBalancerClass'
  | 'nodeMonitorPeriod'
  | 'routeReconciliationPeriod'
  | 'nodeStatusUpdateFrequency'
  | 'serviceSyncPeriod'
  | 'concurrentDeliveries'
  | CallBudgetOption
  | 'leaderElect'
  | 'leaderElectLeaseDuration'
  | 'leaderElectRenewDeadline'
  | 'leaderElectRetryPeriod'
  | 'leaderElectResourceName'
  | 'leaderElectResourceNamespace'
  | 'relayCursor'
  | 'signingSecretFile'
  | 'bindAddress'
  | 'port'
  | 'logLevel'
  | 'logFormat';

/** Runs the relay until `io.signal` aborts; exit status 0 after a clean stop. */
export async function runRelay(line: CommandLine<RelayCommandOptions>, io: Io): Promise<number> {
  const { config } = line;
  const relayModule = await loadRelay();
  const knative = relayModule.readKnativeEnvironment(io.env);
  // The ownership rules of a split hybrid deployment, for destinations serving some providers: the
  // relay builds no provider, it only reads the names and classes (ADR 0026).
  const { ownership } = providerPlan(config);
  let routing;
  try {
    const file =
      config.routingConfig === undefined ? undefined : await relayModule.loadRoutingFile(config.routingConfig);
    routing = relayModule.buildRoutingTable(catalogue, {
      file,
      to: config.to,
      ownership,
      periods: periodsOf(config),
      sink: knative.sink,
    });
  } catch (error) {
    if (error instanceof relayModule.RoutingError) throw new ConfigError(error.message);
    throw error;
  }
  const logger = createLogger({
    name: 'relay',
    level: config.logLevel,
    destination: await logDestination(config.logFormat),
  });
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const source = kubeconfigSource(config.kubeconfig, io.env);
  await checkReachable(kubeConfig, source);
  const feeds = routing.destinations.map((d) => d.feed);
  const kinds = catalogue.filter((e) => feeds.includes(e.name) || feeds.includes('all')).flatMap((e) => e.watches);
  await checkAccess(
    kubeConfig,
    source,
    [relayAccess(config.leaderElect ? leaseSettings(config) : false, kinds)],
    grantedBy.relay,
  );
  const relay = relayModule.startRelay({
    kubeConfig,
    routing,
    logger,
    secret: await readSecret(config.signingSecretFile),
    concurrency: config.concurrentDeliveries,
    cloudCallBudget: callBudget(config),
    leaderElection: config.leaderElect ? leaseSettings(config) : false,
    cursor: relayCursor(config),
    ceOverrides: knative.ceOverrides,
  });
  const { serve } = await import('../../shared/host/serve.ts');
  const { buildProbeApp } = await import('../../shared/host/probes.ts');
  const app = await buildProbeApp({
    logger,
    registry: relay.registry,
    readiness: () => relayModule.relayReadiness(relay.status()),
  });
  const server = await serve(app, { host: config.bindAddress, port: config.port, signal: io.signal });
  logger.info(
    { address: server.address, identity: relay.identity, destinations: routing.destinations.map((d) => d.name) },
    'relay serving',
  );
  await server.closed;
  await relay.stop();
  return 0;
}

/** The options that say which Lease the relay elects its leader with, and how. */
export type LeaseOption =
  | 'leaderElectLeaseDuration'
  | 'leaderElectRenewDeadline'
  | 'leaderElectRetryPeriod'
  | 'leaderElectResourceName'
  | 'leaderElectResourceNamespace';

/** The periods set by flags or variables, by function; a function whose option is unset keeps the routing file's or its own default. */
export function periodsOf(config: Partial<Config<PeriodOption>>): Record<string, number> {
  const given: Record<string, number> = {};
  for (const entry of catalogue) {
    const value = config[entry.period.option];
    if (value !== undefined) given[entry.name] = value;
  }
  return given;
}

/** The options of the cloud call budget (ADR 0015). */
export type CallBudgetOption = 'cloudCallRate' | 'cloudCallBurst';

/**
 * The cloud call budget the relay enforces, from --cloud-call-rate and --cloud-call-burst (the
 * burst defaults to the rate, rounded up); undefined without a rate. Throws ConfigError for a
 * burst without a rate.
 */
export function callBudget(config: Config<CallBudgetOption>): { rate: number; burst: number } | undefined {
  const { cloudCallRate: rate, cloudCallBurst: burst } = config;
  if (rate === undefined) {
    if (burst !== undefined)
      throw new ConfigError(
        '--cloud-call-burst: needs --cloud-call-rate (CIRRUS_CLOUD_CALL_RATE), the budget it is the burst of',
      );
    return undefined;
  }
  return { rate, burst: burst ?? Math.max(1, Math.ceil(rate)) };
}

/** The Lease and its timings from the leader election options (the relay's, and `cirrus start`'s). */
export function leaseSettings(config: Config<LeaseOption>): Omit<LeaseSettings, 'identity'> {
  return {
    name: config.leaderElectResourceName,
    namespace: config.leaderElectResourceNamespace,
    leaseDurationMs: config.leaderElectLeaseDuration,
    renewDeadlineMs: config.leaderElectRenewDeadline,
    retryPeriodMs: config.leaderElectRetryPeriod,
  };
}

/**
 * Where the relay keeps its known-keys cursor (ADR 0014), from --relay-cursor and the Lease flags:
 * beside the Lease, `<lease name>-known`, with or without leader election; false when turned off.
 */
export function relayCursor(
  config: Config<'relayCursor' | 'leaderElectResourceName' | 'leaderElectResourceNamespace'>,
): { readonly namespace: string; readonly name: string } | false {
  if (!config.relayCursor) return false;
  return { namespace: config.leaderElectResourceNamespace, name: `${config.leaderElectResourceName}-known` };
}

/** What a relay that is not ready waits for, for the log line every 30 s. */
export function waitingFor(status: RelayStatus): string {
  if (status.role === 'leader') {
    const closed = Object.entries(status.watches)
      .filter(([, open]) => !open)
      .map(([name]) => name);
    return `waiting for the watch of ${closed.join(', ')} to open again (is the API server reachable?)`;
  }
  return `waiting for the API server, to read the Lease${status.holder === undefined ? '' : ` (last holder ${status.holder})`}`;
}
