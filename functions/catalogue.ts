// The catalogue of functions: the one place that lists them. Each entry says what the function is
// called (and which Go CCM controller it stands for), what a manual reconcile names, which watch
// changes it receives (its feed, from its own folder), its periodic pass, what it needs from the
// provider, and how to load it. The command line, the relay's routing, the Lambda entry and the
// tests of deploy/ and serverless.yml read this list. Adding a function: its folder, one entry
// here, its manifests (deploy/, serverless.yml).

import type { Catalogue, FunctionEntry } from '../shared/catalogue.ts';
import { singleFleet, type Fleet } from '../shared/cloud/fleet.ts';
import { OwnershipCheck } from '../shared/cloud/skips.ts';
import type { CloudProvider } from '../shared/cloud/provider.ts';
import type { RouteTable } from './routes/index.ts';
import { nodeInitFeed, needsRefresh } from './node-init/feed.ts';
import { nodeLifecycleFeed } from './node-lifecycle/feed.ts';
import { routesFeed, routesNodeSet } from './routes/feed.ts';
import { serviceLbFeed, serviceLbNodeSet } from './service-lb/feed.ts';

// What a function needs from the provider and the configuration is checked here and nowhere else:
// `cirrus start` asks skipReason and skips a function that cannot run, as the Go CCM skips a
// controller (k8s.io/cloud-provider app/core.go, startCloudNodeController and the others); a
// process that loads one without asking (`cirrus serve`, the Lambda entry) is refused by load.

const hasInstances = (cloud: CloudProvider): boolean => Boolean(cloud.instancesV2() || cloud.instances());

const noInstances = (cloud: CloudProvider): string | undefined =>
  hasInstances(cloud) ? undefined : `provider ${cloud.providerName()} has no instances`;

// Why `name` refuses to start with this provider.
function unsupported(name: string, cloud: CloudProvider, what: string): Error {
  return new Error(`${name}: cloud provider "${cloud.providerName()}" does not support ${what}`);
}

const nodeInit: FunctionEntry = {
  name: 'node-init',
  controller: { name: 'cloud-node-controller', alias: 'cloud-node' },
  reconcileAliases: ['node'],
  target: { kind: 'Node', namespaced: false },
  watches: ['Node'],
  feed: nodeInitFeed,
  // instanceMetadata.
  cloudCallsPerObject: 1,
  // The Go CCM's --node-status-update-frequency: the pass that refreshes addresses. The relay
  // rechecks every Node it knows, from its copy (addresses included), spread over the period: the
  // function asks the cloud and writes only what changed (ADR 0031).
  period: { option: 'nodeStatusUpdateFrequency', defaultMs: 300_000, recheck: 'Node', rechecks: needsRefresh },
  access: [
    { group: '', resource: 'nodes', verb: 'get' },
    { group: '', resource: 'nodes', verb: 'list' },
    { group: '', resource: 'nodes', verb: 'patch' },
    { group: '', resource: 'nodes/status', verb: 'patch' },
    // Events about Nodes are written in namespace default.
    { group: '', resource: 'events', verb: 'create', namespace: 'default' },
  ],
  skipReason: noInstances,
  load: async ({ core, cloud, config, fleet }) => {
    if (!hasInstances(cloud)) throw unsupported('node-init', cloud, 'instances');
    return (await import('./node-init/index.ts')).nodeInitFunction({
      core,
      ...(fleet === undefined ? { cloud } : { fleet }),
      concurrency: config.concurrentNodeSyncs,
    });
  },
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
  // The Go CCM's --node-monitor-period. Upstream's pass acts only on a Node that is not Ready, or
  // Ready with the shutdown taint: the relay rechecks exactly those, from its copy (ADR 0029).
  period: { option: 'nodeMonitorPeriod', defaultMs: 5_000, recheck: 'Node' },
  access: [
    { group: '', resource: 'nodes', verb: 'get' },
    { group: '', resource: 'nodes', verb: 'list' },
    { group: '', resource: 'nodes', verb: 'patch' },
    { group: '', resource: 'nodes', verb: 'delete' },
    // Events about Nodes are written in namespace default.
    { group: '', resource: 'events', verb: 'create', namespace: 'default' },
  ],
  skipReason: noInstances,
  load: async ({ core, cloud, config, fleet }) => {
    if (!hasInstances(cloud)) throw unsupported('node-lifecycle', cloud, 'instances');
    return (await import('./node-lifecycle/index.ts')).nodeLifecycleFunction({
      core,
      ...(fleet === undefined ? { cloud } : { fleet }),
      concurrency: config.concurrentNodeSyncs,
    });
  },
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
  access: [
    { group: '', resource: 'services', verb: 'get' },
    { group: '', resource: 'services', verb: 'list' },
    { group: '', resource: 'services/status', verb: 'patch' },
    { group: '', resource: 'nodes', verb: 'list' },
    // Events in each Service's own namespace: any.
    { group: '', resource: 'events', verb: 'create' },
  ],
  skipReason: (cloud) => (cloud.loadBalancer() ? undefined : `provider ${cloud.providerName()} has no load balancers`),
  load: async ({ core, cloud, config, fleet }) => {
    const loadBalancer = cloud.loadBalancer();
    if (!loadBalancer) throw unsupported('service-lb', cloud, 'load balancers');
    const common = { core, clusterName: config.clusterName, concurrency: config.concurrentServiceSyncs };
    // A fleet with one provider too: its load balancers' node sets hold only its own Nodes.
    return (await import('./service-lb/index.ts')).serviceLbFunction(
      fleet === undefined
        ? { ...common, fleet: singleFleet(cloud), loadBalancerClass: config.loadBalancerClass }
        : { ...common, fleet },
    );
  },
};

const routes: FunctionEntry = {
  name: 'routes',
  controller: { name: 'node-route-controller', alias: 'route' },
  reconcileAliases: [],
  // The cluster's route table is one object: a node name is accepted, and the whole table reconciled.
  target: { kind: 'Node', namespaced: false, wholeCluster: true },
  watches: ['Node'],
  // A Node's own event for each change that may change routes, carrying the Node (KEP-5237's
  // triggers), and with every event the digest of the Nodes' route views, so that a pass reads the
  // Nodes only when the function's copy of them is not current (ADR 0030).
  feed: routesFeed,
  nodeSetDigest: routesNodeSet,
  // Never one object: its events are passes over the route table (one token, ADR 0015).
  cloudCallsPerObject: 1,
  // The Go CCM's --route-reconciliation-period (10 s): the drift check, a pass that lists the
  // cloud's routes and, when the relay vouches for the function's copy, no Node. Upstream's
  // watch-based controller checks for drift only at its informers' resync (--min-resync-period,
  // 12 h, spread to 12–24 h); --route-reconciliation-period=12h comes close to it (ADR 0030).
  period: { option: 'routeReconciliationPeriod', defaultMs: 10_000 },
  access: [
    { group: '', resource: 'nodes', verb: 'list' },
    { group: '', resource: 'nodes/status', verb: 'patch' },
    // Events about Nodes are written in namespace default.
    { group: '', resource: 'events', verb: 'create', namespace: 'default' },
  ],
  skipReason: (cloud, config) => {
    if (!config.configureCloudRoutes) return '--configure-cloud-routes=false';
    if (!cloud.routes()) return `provider ${cloud.providerName()} has no routes`;
    return config.clusterCidr.length === 0 ? 'no --cluster-cidr' : undefined;
  },
  // In the order of upstream's startRouteController; the function checks the rest (its CIDRs).
  load: async ({ core, cloud, config, fleet }) => {
    if (!config.configureCloudRoutes)
      throw new Error(
        'routes: cloud routes are disabled (configure-cloud-routes is false); this function has nothing to do',
      );
    const routes = cloud.routes();
    if (!routes) throw unsupported('routes', cloud, 'routes');
    const ownership = new OwnershipCheck('routes');
    return (await import('./routes/index.ts')).routesFunction({
      core,
      // A table per provider with routes, with one provider too: only its own Nodes are routed.
      routes: routeTables(fleet ?? singleFleet(cloud), ownership),
      ownership,
      clusterName: config.clusterName,
      clusterCidrs: config.clusterCidr,
      concurrency: config.concurrentRouteOperations,
    });
  },
};

// The route tables: each provider with routes, for the Nodes it owns (never another's or another CCM's).
function routeTables(fleet: Fleet, ownership: OwnershipCheck): RouteTable[] {
  return [...fleet.served].flatMap(([provider, cloud]) => {
    const routes = cloud.routes();
    const owns: RouteTable['owns'] = (node, log) => ownership.owns(fleet, provider, node, log);
    return routes === undefined ? [] : [{ provider, routes, owns }];
  });
}

/** Every function cirrus ships, in the order `cirrus start` runs them. */
export const catalogue: Catalogue = [nodeInit, nodeLifecycle, serviceLb, routes];
