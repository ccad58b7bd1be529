// The route controller's decisions (k8s.io/cloud-provider controllers/route/route_controller.go),
// computed without side effects: which cluster CIDRs are valid, which routes each node needs,
// which listed routes must go, and what the NetworkUnavailable condition must say.

import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { canonicalCidr, cidrContains, firstAddress, lastAddress, parseCidr, type Cidr } from '../../shared/net/ip.ts';
import type { Route } from '../../shared/cloud/provider.ts';

/**
 * The cluster CIDRs as `--cluster-cidr` gives them (already split on commas and trimmed):
 * one, or two of different IP families. Throws an Error that names the bad value otherwise.
 */
export function parseClusterCidrs(texts: readonly string[]): Cidr[] {
  if (texts.length === 0 || texts.every((t) => t === '')) {
    throw new Error('no cluster CIDR is set (cluster-cidr): routes are programmed only inside the cluster CIDR(s)');
  }
  if (texts.length > 2) {
    throw new Error(
      `${texts.length} cluster CIDRs are set (${texts.map((t) => `"${t}"`).join(', ')}): at most 2, one per IP family`,
    );
  }
  const cidrs = texts.map((text) => {
    const cidr = parseCidr(text);
    if (cidr === undefined)
      throw new Error(`cluster CIDR "${text}" is not a valid CIDR (e.g. 10.244.0.0/16 or fd00:10:244::/56)`);
    return cidr;
  });
  const [first, second] = cidrs;
  if (first !== undefined && second !== undefined && first.family === second.family) {
    throw new Error(
      `cluster CIDRs "${texts[0] ?? ''}" and "${texts[1] ?? ''}" are both ${first.family}: two cluster CIDRs must be dual stack, one IPv4 and one IPv6`,
    );
  }
  return cidrs;
}

/**
 * The node's pod CIDRs: `spec.podCIDRs`, or `[spec.podCIDR]` when only the singular is set. (The
 * API server keeps the two in step, so the fallback only matters for objects not read from it.)
 */
export function podCidrs(node: V1Node): string[] {
  const plural = node.spec?.podCIDRs ?? [];
  if (plural.length > 0) return [...plural];
  const singular = node.spec?.podCIDR;
  return singular ? [singular] : [];
}

/** Whether two address lists hold the same addresses (type and address), ignoring order. */
export function sameAddresses(a: readonly V1NodeAddress[], b: readonly V1NodeAddress[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((x) => b.some((y) => x.type === y.type && x.address === y.address));
}

/**
 * What a node's pod CIDR needs: `keep` when one of the node's routes has that destination (and,
 * when the provider opts in to node addresses, the node's current addresses); `update` when it
 * has the destination but stale addresses (delete, then create); `add` when there is none.
 * CIDRs compare in canonical form, so two spellings of one network are the same route.
 */
export function routeAction(routes: readonly Route[], cidr: string, addresses: readonly V1NodeAddress[]): RouteAction {
  const wanted = canonicalCidr(cidr);
  const route = routes.find((r) => canonicalCidr(r.destinationCidr) === wanted);
  if (route === undefined) return 'add';
  if (!route.enableNodeAddresses || sameAddresses(addresses, route.targetNodeAddresses)) return 'keep';
  return 'update';
}

/** What to do about one pod CIDR of a node. */
export type RouteAction = 'keep' | 'add' | 'update';

/**
 * Whether cirrus manages `route`: its destination parses and its first or last address lies in a
 * cluster CIDR. Routes outside every cluster CIDR belong to someone else and are never deleted.
 */
export function isResponsibleForRoute(route: Route, clusterCidrs: readonly Cidr[]): boolean {
  const cidr = parseCidr(route.destinationCidr);
  if (cidr === undefined) return false;
  const [first, last] = [firstAddress(cidr), lastAddress(cidr)];
  return clusterCidrs.some((cluster) => cidrContains(cluster, first) || cidrContains(cluster, last));
}

/** One pod CIDR of a node and what it needs. */
export interface CidrAction {
  /** As the node spells it; what a created route is given. */
  readonly cidr: string;
  readonly action: RouteAction;
}

/** A node the route controller looks after: it has pod CIDRs, or routes that target it. */
export interface NodePlan {
  readonly node: V1Node;
  /** One per pod CIDR; empty when the node has routes but no pod CIDR (its routes are then deleted). */
  readonly cidrs: readonly CidrAction[];
}

/** Why a listed route is deleted. */
export type DeleteReason = 'blackhole' | 'unknown-node' | 'cidr-not-assigned' | 'addresses-changed';

/** A listed route to delete. */
export interface RouteDeletion {
  readonly route: Route;
  readonly reason: DeleteReason;
}

/** What one reconcile does, decided from the node list and the route list. */
export interface RoutePlan {
  /** Nodes with pod CIDRs or routes, in list order. */
  readonly nodes: readonly NodePlan[];
  /** Nodes with neither: the controller leaves them (and their conditions) alone. */
  readonly skipped: readonly V1Node[];
  readonly deletions: readonly RouteDeletion[];
  /**
   * Deletions must end before creations start: the provider compares node addresses, so an
   * `update` deletes and re-creates the same destination (upstream looks at the first route).
   */
  readonly deleteFirst: boolean;
}

/** The reconcile's decisions (upstream's reconcile in route_controller.go, before it acts). */
export function planRoutes(
  nodes: readonly V1Node[],
  routes: readonly Route[],
  clusterCidrs: readonly Cidr[],
): RoutePlan {
  const byNode = routesByNode(routes);
  const planned: NodePlan[] = [];
  const skipped: V1Node[] = [];
  for (const node of nodes) {
    const name = node.metadata?.name ?? '';
    const own = byNode.get(name) ?? [];
    const addresses = node.status?.addresses ?? [];
    const cidrs = podCidrs(node).map((cidr) => ({ cidr, action: routeAction(own, cidr, addresses) }));
    if (cidrs.length === 0 && own.length === 0) skipped.push(node);
    else planned.push({ node, cidrs });
  }
  const byName = new Map(planned.map((plan) => [plan.node.metadata?.name ?? '', plan]));
  const deletions = routes.flatMap((route) => {
    if (!isResponsibleForRoute(route, clusterCidrs)) return [];
    const reason = deleteReason(route, byName);
    return reason === undefined ? [] : [{ route, reason }];
  });
  return { nodes: planned, skipped, deletions, deleteFirst: routes[0]?.enableNodeAddresses === true };
}

// Routes with a target node, by that node's name (routes without one are matched to no node).
function routesByNode(routes: readonly Route[]): Map<string, Route[]> {
  const byNode = new Map<string, Route[]>();
  for (const route of routes) {
    if (route.targetNode === '') continue;
    byNode.set(route.targetNode, [...(byNode.get(route.targetNode) ?? []), route]);
  }
  return byNode;
}

/**
 * Why a route in the cluster CIDR must be deleted, or undefined when it is still wanted: it is a
 * blackhole; its target is no listed node (or it has none); its destination is none of the
 * node's pod CIDRs; or the node's addresses changed (an `update`, re-created afterwards).
 */
export function deleteReason(route: Route, nodes: ReadonlyMap<string, NodePlan>): DeleteReason | undefined {
  if (route.blackhole) return 'blackhole';
  const plan = route.targetNode === '' ? undefined : nodes.get(route.targetNode);
  if (plan === undefined) return 'unknown-node';
  const wanted = canonicalCidr(route.destinationCidr);
  const entry = plan.cidrs.find((c) => canonicalCidr(c.cidr) === wanted);
  if (entry === undefined) return 'cidr-not-assigned';
  return entry.action === 'update' ? 'addresses-changed' : undefined;
}

/**
 * Whether all of a node's routes exist after the creations: it has pod CIDRs, and each was kept
 * or its route (keyed by the node's spelling of the CIDR) was created in this pass.
 */
export function routesCreated(cidrs: readonly CidrAction[], created: ReadonlySet<string>): boolean {
  return cidrs.length > 0 && cidrs.every((c) => c.action === 'keep' || created.has(c.cidr));
}

/** The node condition the route controller owns. */
export const networkUnavailable = 'NetworkUnavailable';

/** What the NetworkUnavailable condition says. */
export interface NetworkCondition {
  readonly status: 'True' | 'False';
  readonly reason: 'RouteCreated' | 'NoRouteCreated';
  readonly message: string;
}

/** The condition for a node whose routes were (or were not all) created; upstream's wording. */
export function networkCondition(created: boolean): NetworkCondition {
  return created
    ? { status: 'False', reason: 'RouteCreated', message: 'RouteController created a route' }
    : { status: 'True', reason: 'NoRouteCreated', message: 'RouteController failed to create a route' };
}

/**
 * Whether the node's NetworkUnavailable condition already has `wanted`'s status and reason, so
 * nothing is written. Any other reason (a CNI's own, such as `CalicoIsUp`) is overwritten.
 */
export function conditionCurrent(node: V1Node, wanted: NetworkCondition): boolean {
  const current = node.status?.conditions?.find((c) => c.type === networkUnavailable);
  return current?.status === wanted.status && current.reason === wanted.reason;
}

/** A condition as the strategic merge patch sends it (times as RFC 3339, whole seconds). */
export interface ConditionPatch {
  readonly status: {
    readonly conditions: readonly [
      {
        readonly type: string;
        readonly status: string;
        readonly reason: string;
        readonly message: string;
        readonly lastTransitionTime: string;
        readonly lastHeartbeatTime: string;
      },
    ];
  };
}

/**
 * The strategic merge patch of `nodes/<name>/status` that sets the condition: conditions merge by
 * `type`, so the kubelet's and others' conditions stay as they are. Both times are `now`, as upstream.
 */
export function conditionPatch(condition: NetworkCondition, now: Date): ConditionPatch {
  const time = now.toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    status: {
      conditions: [{ type: networkUnavailable, ...condition, lastTransitionTime: time, lastHeartbeatTime: time }],
    },
  };
}

/** What a reconcile did for one node, for its report. */
export interface NodeOutcome {
  readonly hasPodCidrs: boolean;
  readonly routesCreated: number;
  readonly conditionSet: boolean;
  readonly failed: boolean;
}

/**
 * The report's word for a node: `failed` (a route or the condition could not be written),
 * `routes-created`, `no-pod-cidr` (its routes are deleted and the condition says no route),
 * `condition-updated`, or `unchanged`.
 */
export function nodeResult(outcome: NodeOutcome): string {
  if (outcome.failed) return 'failed';
  if (outcome.routesCreated > 0) return 'routes-created';
  if (!outcome.hasPodCidrs) return 'no-pod-cidr';
  return outcome.conditionSet ? 'condition-updated' : 'unchanged';
}
