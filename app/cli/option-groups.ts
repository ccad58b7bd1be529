// The option groups the commands are made of (./commands.ts): each list written once, for the
// commands that take it alike, and `cirrus serve`'s list, which the Lambda entry (app/lambda) reads
// without loading the command table.

import type { FunctionOption } from '../../shared/catalogue.ts';
import type { OptionName } from '../config.ts';

// What builds the provider and reaches the cluster: serve, conformance and start take them alike.
export const providerOptions = [
  'cloudProvider',
  'cloudConfig',
  'defaultProvider',
  'providerModule',
  'clusterName',
  'kubeconfig',
] as const;

// What the functions' implementations read (shared/catalogue.ts FunctionSettings): serve and start.
export const functionOptions = [
  'concurrentNodeSyncs',
  'concurrentServiceSyncs',
  'loadBalancerClass',
  'configureCloudRoutes',
  'clusterCidr',
  'concurrentRouteOperations',
] as const satisfies readonly FunctionOption[];

// Where a function listens: serve and start; the Lambda entry, where nothing listens, leaves them out.
export const listenOptions = ['bindAddress', 'port', 'maxConcurrentRequests'] as const;

// How a command that logs logs: every such command takes both.
export const logOptions = ['logLevel', 'logFormat'] as const;

// The periods of the periodic triggers that start and relay both send.
export const periodOptions = ['nodeMonitorPeriod', 'routeReconciliationPeriod', 'nodeStatusUpdateFrequency'] as const;

// The cloud call budget, leader election and the known-keys cursor: start and relay.
export const relayOptions = [
  'cloudCallRate',
  'cloudCallBurst',
  'leaderElect',
  'leaderElectLeaseDuration',
  'leaderElectRenewDeadline',
  'leaderElectRetryPeriod',
  'leaderElectResourceName',
  'leaderElectResourceNamespace',
  'relayCursor',
] as const;

/**
 * What `cirrus serve` takes; the Lambda entry (app/lambda) takes the same but where to listen, with
 * a Secrets Manager ID beside each file.
 */
export const serveOptions = [
  ...providerOptions,
  'serveProviders',
  ...listenOptions,
  ...functionOptions,
  'signingSecretFile',
  ...logOptions,
] as const satisfies readonly OptionName[];

/** Whether `option` says where a function listens (`cirrus serve` has them; a Lambda does not). */
export function isListenOption(option: OptionName): option is (typeof listenOptions)[number] {
  return (listenOptions as readonly OptionName[]).includes(option);
}
