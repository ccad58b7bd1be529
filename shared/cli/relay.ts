// `cirrus relay`: the watch-to-event bridge, with its probes and metrics on --port.

import { loadKubeConfig } from '../kube/client.ts';
import { ConfigError, type CommandLine } from '../config.ts';
import { createLogger } from '../log.ts';
import type { LeaseSettings } from '../../functions/relay/index.ts';
import type { Io } from './main.ts';
import { readSecret } from './secret.ts';

/** The options `cirrus relay` takes. */
export type RelayCommandOptions =
  | 'kubeconfig' | 'to' | 'routingConfig' | 'nodeMonitorPeriod' | 'routeReconciliationPeriod' | 'nodeStatusUpdateFrequency'
  | 'serviceSyncPeriod' | 'concurrentDeliveries' | 'leaderElect' | 'leaderElectLeaseDuration' | 'leaderElectRenewDeadline'
  | 'leaderElectRetryPeriod' | 'leaderElectResourceName' | 'leaderElectResourceNamespace' | 'signingSecretFile'
  | 'bindAddress' | 'port' | 'logLevel';

/** Runs the relay until `io.signal` aborts; exit status 0 after a clean stop. */
export async function runRelay(line: CommandLine<RelayCommandOptions>, io: Io): Promise<number> {
  const { config } = line;
  const relayModule = await import('../../functions/relay/index.ts');
  const knative = relayModule.readKnativeEnvironment(io.env);
  let routing;
  try {
    const file = config.routingConfig === undefined ? undefined : await relayModule.loadRoutingFile(config.routingConfig);
    routing = relayModule.buildRoutingTable({ file, to: config.to, periods: periods(config), sink: knative.sink });
  } catch (error) {
    if (error instanceof relayModule.RoutingError) throw new ConfigError(error.message);
    throw error;
  }
  const logger = createLogger({ name: 'relay', level: config.logLevel });
  const relay = relayModule.startRelay({
    kubeConfig: loadKubeConfig(config.kubeconfig),
    routing,
    logger,
    secret: await readSecret(config.signingSecretFile),
    concurrency: config.concurrentDeliveries,
    leaderElection: config.leaderElect ? leaseSettings(config) : false,
    ceOverrides: knative.ceOverrides,
  });
  const { serve } = await import('../host/serve.ts');
  const app = await relayModule.buildRelayApp(relay, logger);
  const server = await serve(app, { host: config.bindAddress, port: config.port, signal: io.signal });
  logger.info({ address: server.address, identity: relay.identity, destinations: routing.destinations.map((d) => d.name) }, 'relay serving');
  await server.closed;
  await relay.stop();
  return 0;
}

// Period flags override the routing file; a value equal to the flag's default counts as unset, so
// that a routing file's periods take effect when no flag or variable was given.
function periods(config: CommandLine<RelayCommandOptions>['config']): Partial<Record<'node-lifecycle' | 'routes' | 'node-init' | 'service-lb', number>> {
  const given: Partial<Record<'node-lifecycle' | 'routes' | 'node-init' | 'service-lb', number>> = {};
  const flags = [
    ['node-lifecycle', config.nodeMonitorPeriod, 5_000],
    ['routes', config.routeReconciliationPeriod, 10_000],
    ['node-init', config.nodeStatusUpdateFrequency, 300_000],
    ['service-lb', config.serviceSyncPeriod, 0],
  ] as const;
  for (const [name, value, fallback] of flags) if (value !== fallback) given[name] = value;
  return given;
}

function leaseSettings(config: CommandLine<RelayCommandOptions>['config']): Omit<LeaseSettings, 'identity'> {
  return {
    name: config.leaderElectResourceName,
    namespace: config.leaderElectResourceNamespace,
    leaseDurationMs: config.leaderElectLeaseDuration,
    renewDeadlineMs: config.leaderElectRenewDeadline,
    retryPeriodMs: config.leaderElectRetryPeriod,
  };
}
