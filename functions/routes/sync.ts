// The route controller's reconcile (k8s.io/cloud-provider controllers/route/route_controller.go,
// reconcile and updateNetworkingCondition): list the cloud's routes, take the nodes (the
// instance's copy or a LIST: ./nodes.ts), delete the routes in the cluster CIDR that no node
// wants, create the missing ones, then set each node's NetworkUnavailable condition.
//
// Only listing routes or reading the nodes fails the reconcile. A failed create, delete or condition write is
// reported on its object and the others go on, as upstream: the next pass retries it.

import type { V1Node } from '@kubernetes/client-node';
import type { Core } from '../../shared/kube/core.ts';
import type { Logger } from 'pino';
import type { Cidr } from '../../shared/net/ip.ts';
import type { Route, Routes } from '../../shared/cloud/provider.ts';
import { mapLimit } from '../../shared/concurrency.ts';
import type { Change, ObjectReport } from '../../shared/host/function.ts';
import { apiMessage, strategicMergePatch } from '../../shared/kube/api.ts';
import { eventFor, recordEvent } from '../../shared/kube/events.ts';
import {
  conditionCurrent,
  conditionPatch,
  networkCondition,
  networkUnavailable,
  nodeResult,
  planRoutes,
  podCidrs,
  routesCreated,
  type NodePlan,
  type RouteDeletion,
  type RoutePlan,
} from './plan.ts';

/** What the routes reconcile works with. */
export interface RoutesDeps {
  readonly core: Core;
  readonly routes: Routes;
  /** Whether a Node is routed by these routes (a hybrid cluster: its provider's own Nodes); undefined: every Node. */
  readonly owns?: ((node: V1Node, log?: Logger) => boolean) | undefined;
  readonly clusterName: string;
  readonly clusterCidrs: readonly Cidr[];
  /** Provider route calls in flight at once; also node status writes at once. */
  readonly concurrency: number;
  /**
   * The Nodes of this pass (./nodes.ts: the instance's copy, or a LIST); `fresh` asks for a LIST
   * (the provider compares node addresses, which the relay's digest does not cover).
   */
  readonly nodes: (fresh: boolean) => Promise<readonly V1Node[]>;
  /** Hears the API server's answer to a condition write (the Node as it now is), for the copy. */
  readonly written?: ((node: V1Node) => void) | undefined;
}

/** How one reconcile runs. */
export interface SyncOptions {
  readonly dryRun: boolean;
  readonly log: Logger;
  readonly signal?: AbortSignal;
}

const component = 'route_controller';

/**
 * One whole-cluster pass. Reports every node (changes, or why none) and every deleted route.
 * Throws only when the routes or the nodes cannot be read (a provider RetryError stays the cause).
 * A dry run makes no provider mutation and persists nothing: condition writes are sent with
 * `dryRun=All`, and conditions are computed as if every creation succeeded.
 */
export async function reconcileRoutes(deps: RoutesDeps, options: SyncOptions): Promise<ObjectReport[]> {
  const routes = await listRoutes(deps, options.signal);
  const listed = await deps.nodes(routes.some((route) => route.enableNodeAddresses));
  // Another provider's (or CCM's) Nodes get no route here and no NetworkUnavailable condition.
  const owns = deps.owns;
  const items = owns === undefined ? listed : listed.filter((node) => owns(node, options.log));
  const plan = planRoutes(items, routes, deps.clusterCidrs);
  const { deleted, created } = await applyRoutes(deps, plan, options);
  const byNode = Map.groupBy(created, (c) => c.node);
  const nodes = await mapLimit(plan.nodes, deps.concurrency, async (node) =>
    finishNode(deps, node, byNode.get(node.node.metadata?.name ?? '') ?? [], options),
  );
  const skipped = plan.skipped.map((node) => ({ key: nodeKey(node), result: 'no-pod-cidr', changes: [] }));
  return [...nodes, ...skipped, ...deleted];
}

async function listRoutes(deps: RoutesDeps, signal?: AbortSignal): Promise<Route[]> {
  try {
    return await deps.routes.listRoutes(deps.clusterName, signal);
  } catch (error) {
    throw new Error(`error listing routes: ${message(error)}`, { cause: error });
  }
}

// A route to create: a pod CIDR of a node whose action is add or update.
interface Creation {
  readonly node: V1Node;
  readonly cidr: string;
}

// How a creation went: the node's spelling of the CIDR, and what was done.
interface Created {
  readonly node: string;
  readonly cidr: string;
  readonly ok: boolean;
  readonly changes: readonly Change[];
  readonly error?: string;
}

type Outcome =
  { readonly kind: 'deleted'; readonly report: ObjectReport } | { readonly kind: 'created'; readonly created: Created };

// Deletions and creations share one bound on calls in flight. They run together, as upstream,
// unless the provider compares node addresses: then an `update` deletes and re-creates the same
// destination, and the deletions must be done first.
async function applyRoutes(
  deps: RoutesDeps,
  plan: RoutePlan,
  options: SyncOptions,
): Promise<{ deleted: ObjectReport[]; created: Created[] }> {
  const deletes = plan.deletions.map((deletion) => async (): Promise<Outcome> => ({
    kind: 'deleted',
    report: await deleteRoute(deps, deletion, options),
  }));
  const creates = creations(plan).map((creation) => async (): Promise<Outcome> => ({
    kind: 'created',
    created: await createRoute(deps, creation, options),
  }));
  const run = async (tasks: (() => Promise<Outcome>)[]): Promise<Outcome[]> =>
    mapLimit(tasks, deps.concurrency, async (task) => task());
  const outcomes = plan.deleteFirst
    ? [...(await run(deletes)), ...(await run(creates))]
    : await run([...deletes, ...creates]);
  return {
    deleted: outcomes.flatMap((o) => (o.kind === 'deleted' ? [o.report] : [])),
    created: outcomes.flatMap((o) => (o.kind === 'created' ? [o.created] : [])),
  };
}

function creations(plan: RoutePlan): Creation[] {
  return plan.nodes.flatMap(({ node, cidrs }) =>
    cidrs.filter((c) => c.action !== 'keep').map((c) => ({ node, cidr: c.cidr })),
  );
}

async function deleteRoute(
  deps: RoutesDeps,
  { route, reason }: RouteDeletion,
  options: SyncOptions,
): Promise<ObjectReport> {
  const key = `Route/${route.destinationCidr}`;
  const detail = {
    name: route.name,
    destinationCidr: route.destinationCidr,
    targetNode: route.targetNode,
    blackhole: route.blackhole,
    reason,
  };
  if (!options.dryRun) {
    const started = performance.now();
    try {
      await deps.routes.deleteRoute(deps.clusterName, route, options.signal);
    } catch (error) {
      const text = `Could not delete route ${route.name} ${route.destinationCidr} after ${duration(started)}: ${message(error)}`;
      options.log.warn({ route: route.name, cidr: route.destinationCidr, err: error }, 'route not deleted');
      return { key, result: 'failed', changes: [], error: text };
    }
  }
  return { key, result: 'deleted', changes: [{ action: 'delete-route', target: key, detail }] };
}

// nameHint is the node's UID; the route carries the node's addresses (the provider decides
// whether it uses them). A failure is reported and recorded as a FailedToCreateRoute event.
async function createRoute(deps: RoutesDeps, { node, cidr }: Creation, options: SyncOptions): Promise<Created> {
  const name = node.metadata?.name ?? '';
  const nameHint = node.metadata?.uid ?? '';
  const targetNodeAddresses = (node.status?.addresses ?? []).map((a) => ({ type: a.type, address: a.address }));
  const route: Route = {
    name: '',
    targetNode: name,
    enableNodeAddresses: false,
    targetNodeAddresses,
    destinationCidr: cidr,
    blackhole: false,
  };
  const change: Change = {
    action: 'create-route',
    target: `Route/${cidr}`,
    detail: { nameHint, targetNode: name, destinationCidr: cidr, targetNodeAddresses },
  };
  if (options.dryRun) return { node: name, cidr, ok: true, changes: [change] };
  const started = performance.now();
  try {
    await deps.routes.createRoute(deps.clusterName, nameHint, route, options.signal);
    return { node: name, cidr, ok: true, changes: [change] };
  } catch (error) {
    const text = `Could not create route ${nameHint} ${cidr} for node ${name} after ${duration(started)}: ${message(error)}`;
    options.log.warn({ node: name, cidr, err: error }, 'route not created');
    const event = await failedToCreate(deps.core, node, text, options.log);
    return { node: name, cidr, ok: false, changes: event ? [event] : [], error: text };
  }
}

async function failedToCreate(core: Core, node: V1Node, text: string, log: Logger): Promise<Change | undefined> {
  const reference = { apiVersion: 'v1', kind: 'Node', name: node.metadata?.name ?? '', uid: node.metadata?.uid ?? '' };
  const event = eventFor(reference, { type: 'Warning', reason: 'FailedToCreateRoute', message: text, component });
  try {
    await recordEvent(core, event);
  } catch (error) {
    log.warn({ node: reference.name, err: error }, 'event not recorded');
    return undefined;
  }
  return {
    action: 'event',
    target: nodeKey(node),
    detail: { type: event.type, reason: event.reason, message: event.message },
  };
}

// After the route calls: the node's report, and its condition set when it says something else.
async function finishNode(
  deps: RoutesDeps,
  plan: NodePlan,
  own: readonly Created[],
  options: SyncOptions,
): Promise<ObjectReport> {
  const name = plan.node.metadata?.name ?? '';
  const changes: Change[] = own.flatMap((c) => c.changes);
  const errors = own.flatMap((c) => (c.error === undefined ? [] : [c.error]));
  const condition = networkCondition(routesCreated(plan.cidrs, new Set(own.filter((c) => c.ok).map((c) => c.cidr))));
  let conditionSet = false;
  if (!conditionCurrent(plan.node, condition)) {
    const body = conditionPatch(condition, new Date());
    // Conditions merge by `type` under a strategic merge patch; a JSON merge patch would replace
    // the whole list, and with it the kubelet's conditions.
    try {
      const written = await deps.core.patchNodeStatus(
        options.dryRun ? { name, body, dryRun: 'All' } : { name, body },
        strategicMergePatch,
      );
      if (!options.dryRun) deps.written?.(written);
      changes.push({ action: 'patch-status', target: nodeKey(plan.node), detail: body });
      conditionSet = true;
    } catch (error) {
      options.log.warn({ node: name, err: error }, 'condition not set');
      errors.push(`condition ${networkUnavailable} not set: ${apiMessage(error)}`);
    }
  }
  const result = nodeResult({
    hasPodCidrs: podCidrs(plan.node).length > 0,
    routesCreated: own.filter((c) => c.ok).length,
    conditionSet,
    failed: errors.length > 0,
  });
  return errors.length === 0
    ? { key: nodeKey(plan.node), result, changes }
    : { key: nodeKey(plan.node), result, changes, error: errors.join('; ') };
}

function nodeKey(node: V1Node): string {
  return `Node/${node.metadata?.name ?? ''}`;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

// Go's time.Duration text, near enough for a message: `12.5ms`, `1.204s`.
function duration(started: number): string {
  const ms = performance.now() - started;
  return ms < 1000 ? `${Number(ms.toFixed(3))}ms` : `${Number((ms / 1000).toFixed(3))}s`;
}
