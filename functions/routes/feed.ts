// routes' feed and node-set digest (KEP-5237, watch-based route reconciliation, ADR 0030). A pass
// runs on a Node change that may change routes — a node added or deleted; its pod CIDR(s), provider
// ID, or what decides its provider in a hybrid cluster (ADR 0026) changed — and each such change
// reaches routes as the Node's own event, carrying the Node, so that the function's copy of the
// Node side learns it without a LIST. The relay sends, with every routes event, the digest of the
// route view of every Node it knows (`cirrusnodeset`): the function reads the Nodes only when its
// copy's digest is not that one. The view also holds the NetworkUnavailable condition the pass
// writes (status and reason: what it compares), which is in the digest but sends no event: the
// pass's own writes are learnt from the API server's answers, anybody else's by a digest that
// differs at the next event or drift check, which then lists.
//
// Upstream's filter (k8s.io/cloud-provider controllers/route/route_controller.go,
// handleNodeUpdate) is add, delete, spec.podCIDRs and status.addresses. The relay keeps no Node
// addresses (relay/resources.ts `retained`), so an address change is not seen here: a provider
// that compares addresses (a listed route with enableNodeAddresses) gets a LIST every pass instead
// (functions/routes/nodes.ts).

import { createHash } from 'node:crypto';
import type { Feed, WatchChange } from '../../shared/catalogue.ts';
import { platformAnnotation, providerLabel, talosPlatformLabel } from '../../shared/cloud/ownership.ts';
import type { KubeObject } from '../../shared/kube/object.ts';

/** The NetworkUnavailable condition's type (the condition the route controller owns). */
const networkUnavailableType = 'NetworkUnavailable';

interface NodeShape {
  readonly spec?: { readonly providerID?: string; readonly podCIDR?: string; readonly podCIDRs?: readonly string[] };
  readonly status?: { readonly conditions?: readonly { type?: string; status?: string; reason?: string }[] };
}

/**
 * What a routes pass reads of a Node that can change without an event to routes: name, UID,
 * provider ID, the labels and annotation that decide its provider, pod CIDR(s) — and, last, the
 * NetworkUnavailable condition's status and reason. Every part the relay keeps (ADR 0024).
 */
export function routeView(node: KubeObject): readonly unknown[] {
  const { spec } = node as NodeShape;
  return [...identity(node), spec?.podCIDR ?? '', spec?.podCIDRs ?? [], networkCondition(node)];
}

// Name, UID, provider ID and the provider markers (shared/cloud/ownership.ts `nodeOwner`).
function identity(node: KubeObject): readonly unknown[] {
  const metadata = node.metadata ?? {};
  const labels = metadata.labels ?? {};
  const markers = [labels[providerLabel], labels[talosPlatformLabel], metadata.annotations?.[platformAnnotation]];
  return [
    metadata.name ?? '',
    metadata.uid ?? '',
    (node as NodeShape).spec?.providerID ?? '',
    ...markers.map((marker) => marker ?? null),
  ];
}

function networkCondition(node: KubeObject): readonly string[] | null {
  const condition = (node as NodeShape).status?.conditions?.find((c) => c.type === networkUnavailableType);
  return condition === undefined ? null : [condition.status ?? '', condition.reason ?? ''];
}

// The view without the condition: what, when it changes, starts a pass.
function triggerView(node: KubeObject | undefined): string {
  return node === undefined ? '' : JSON.stringify(routeView(node).slice(0, -1));
}

/**
 * A node change that may change routes: a node added or deleted, or its route view (but the
 * condition, which the pass itself writes) changed — pod CIDR(s), provider ID, provider label.
 */
export function routesMayChange(change: WatchChange): boolean {
  if (change.type !== 'update' || change.previous === undefined) return true;
  return triggerView(change.previous) !== triggerView(change.object);
}

/** The Node's own event for node changes that may change routes: its data feeds the function's copy. */
export const routesFeed: Feed = (change) =>
  change.resource.kind === 'Node' && routesMayChange(change) ? 'object' : undefined;

/**
 * The digest of the Nodes' route views (the `cirrusnodeset` extension on routes' events): the
 * relay computes it over its watch, the function over its copy, with this one function.
 */
export function routesNodeSet(nodes: Iterable<KubeObject>): string {
  const views = Array.from(nodes, (node) => JSON.stringify(routeView(node))).sort();
  return createHash('sha256').update(views.join('\n')).digest('hex').slice(0, 16);
}
