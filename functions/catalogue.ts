// The catalogue of functions: the one place that lists them. Each entry says what the function is
// called (and which Go CCM controller it stands for), what a manual reconcile names, which watch
// changes it receives (its feed, from its own folder), its periodic pass, what it needs from the
// provider, and how to load it. The command line, the relay's routing, the Lambda entry and the
// tests of deploy/ and serverless.yml read this list. Adding a function: its folder, one entry
// here, its manifests (deploy/, serverless.yml).

import type { Catalogue, FunctionEntry } from '../shared/catalogue.ts';
import type { CloudProvider } from '../shared/cloud/provider.ts';
import { nodeInitFeed } from './node-init/feed.ts';
import { nodeLifecycleFeed } from './node-lifecycle/feed.ts';
import { routesFeed } from './routes/feed.ts';
import { serviceLbFeed, serviceLbNodeSet } from './service-lb/feed.ts';

const noInstances = (cloud: CloudProvider): string | undefined =>
  cloud.instancesV2() || cloud.instances() ? undefined : `provider ${cloud.providerName()} has no instances`;

const nodeInit: FunctionEntry = {
  name: 'node-init',
  controller: { name: 'cloud-node-controller', alias: 'cloud-node' },
  reconcileAliases: ['node'],
  target: { kind: 'Node', namespaced: false },
  watches: ['Node'],
  feed: nodeInitFeed,
  // instanceMetadata.
  cloudCallsPerObject: 1,
  // The Go CCM's --node-status-update-frequency: the pass that refreshes addresses.
  period: { option: 'nodeStatusUpdateFrequency', defaultMs: 300_000 },
  skipReason: noInstances,
  load: async ({ core, cloud, config }) =>
    (await import('./node-init/index.ts')).nodeInitFunction({ core, cloud, concurrency: config.concurrentNodeSyncs }),
};

const nodeLifecycle: FunctionEntry = {
  name: 'node-lifecycle',
  controller: { name: 'cloud-node-lifecycle-controller', alias: 'cloud-node-lifecycle' },
  reconcileAliases: [],
  target: { kind: 'Node', namespaced: false },
  watches: ['Node'],
  feed: nodeLifecycleFeed,
  // instanceExists, then instanceShutdown.
  cloudCallsPerObject: 2,
  // The Go CCM's --node-monitor-period.
  period: { option: 'nodeMonitorPeriod', defaultMs: 5_000 },
  skipReason: noInstances,
  load: async ({ core, cloud, config }) =>
    (await import('./node-lifecycle/index.ts')).nodeLifecycleFunction({
      core,
      cloud,
      concurrency: config.concurrentNodeSyncs,
    }),
};

const serviceLb: FunctionEntry = {
  name: 'service-lb',
  controller: { name: 'service-lb-controller', alias: 'service' },
  reconcileAliases: [],
  target: { kind: 'Service', namespaced: true },
  // Services for their own events, Nodes for the node-set trigger.
  watches: ['Node', 'Service'],
  feed: serviceLbFeed,
  // A node-set change: one event per load-balanced Service, never a pass over all of them.
  fanOut: 'Service',
  nodeSetDigest: serviceLbNodeSet,
  // ensureLoadBalancer or updateLoadBalancer; for a cleanup, getLoadBalancer then ensureLoadBalancerDeleted.
  cloudCallsPerObject: 2,
  // The service controller has no periodic pass over all Services (its resyncs are filtered out).
  period: { option: 'serviceSyncPeriod', defaultMs: 0 },
  skipReason: (cloud) => (cloud.loadBalancer() ? undefined : `provider ${cloud.providerName()} has no load balancers`),
  load: async ({ core, cloud, config }) =>
    (await import('./service-lb/index.ts')).serviceLbFunction({
      core,
      cloud,
      clusterName: config.clusterName,
      concurrency: config.concurrentServiceSyncs,
    }),
};

const routes: FunctionEntry = {
  name: 'routes',
  controller: { name: 'node-route-controller', alias: 'route' },
  reconcileAliases: [],
  // The cluster's route table is one object: a node name is accepted, and the whole table reconciled.
  target: { kind: 'Node', namespaced: false, wholeCluster: true },
  watches: ['Node'],
  feed: routesFeed,
  // Never one object: its events are passes over the route table (one token, ADR 0015).
  cloudCallsPerObject: 1,
  // The Go CCM's --route-reconciliation-period.
  period: { option: 'routeReconciliationPeriod', defaultMs: 10_000 },
  skipReason: (cloud, config) => {
    if (!config.configureCloudRoutes) return '--configure-cloud-routes=false';
    if (!cloud.routes()) return `provider ${cloud.providerName()} has no routes`;
    return config.clusterCidr.length === 0 ? 'no --cluster-cidr' : undefined;
  },
  load: async ({ core, cloud, config }) =>
    (await import('./routes/index.ts')).routesFunction({
      core,
      cloud,
      clusterName: config.clusterName,
      clusterCidrs: config.clusterCidr,
      configureCloudRoutes: config.configureCloudRoutes,
      concurrency: config.concurrentRouteOperations,
    }),
};

/** Every function cirrus ships, in the order `cirrus start` runs them. */
export const catalogue: Catalogue = [nodeInit, nodeLifecycle, serviceLb, routes];
