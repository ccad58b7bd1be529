// The Kubernetes objects the relay watches, as the raw JSON the API server sends: the relay passes
// them on to the functions and never needs client-node's typed classes (whose deserialization
// costs ~0.1 ms per Node and turns timestamps into Dates).

import type { WatchChange } from '../shared/catalogue.ts';
import type { KubeObject } from '../shared/kube/object.ts';
import { formatKey } from '../shared/wire/keys.ts';

export type { KubeObject, ObjectMeta } from '../shared/kube/object.ts';

/** One object change, after diffing against what the relay knew: what a feed reads, and where it came from. */
export interface ResourceChange extends WatchChange {
  readonly resource: ResourceType;
  /** `Node/worker-1`, `Service/default/web`. */
  readonly key: string;
  /**
   * The new state, whole; for `delete`, the last known one: the watch's whole object, or, for a
   * delete a LIST found, what the relay kept (or the cursor recorded) of it.
   */
  readonly object: KubeObject;
  /** What the relay kept of the state before this change (the resource's `retain`), when it knew one. */
  readonly previous?: KubeObject | undefined;
  /** When the relay saw the change (its clock's now()). */
  readonly observedAt: number;
}

/** A kind the relay watches. */
export interface ResourceType {
  /** The name used in metrics and logs, e.g. `nodes`. */
  readonly resource: 'nodes' | 'services';
  readonly kind: 'Node' | 'Service';
  readonly apiVersion: 'v1';
  readonly namespaced: boolean;
  /** The collection path, across all namespaces, for LIST and WATCH. */
  readonly path: string;
  /**
   * The `spec` fields the known-keys cursor (./cursor.ts) records per object, so that a delete it
   * delivers after a take-over carries what a function decides on: a Service's type and class
   * (service-lb releases the load balancer of a `LoadBalancer` Service), a Node's providerID.
   */
  readonly tombstoneSpec: readonly string[];
  /**
   * Whether a function needs the object's delete, so that the cursor records it: every Node; a
   * Service of type LoadBalancer or that had a load balancer (an ingress in its status, or the
   * load-balancer-cleanup finalizer: k8s.io/cloud-provider controllers/service/controller.go,
   * wantsLoadBalancer and needsCleanup). Other Services' deletes need nothing from any function.
   */
  readonly needsTombstone: (object: KubeObject) => boolean;
  /**
   * What the relay keeps of a delivered object (of its normalized form) until its next change: see
   * {@link retained}. The change itself, while it waits in the delivery queue, carries the whole
   * object.
   */
  readonly retain: (object: KubeObject) => KubeObject;
  /**
   * Whether what the relay keeps of an object (`retain`) holds all a function decides on, so that a
   * delivery may carry the kept copy, when it is newer, in place of the queued change's (leader.ts
   * `#latest`): a Service's (no function reads its status.conditions); not a Node's, whose status
   * (conditions, addresses) node-lifecycle and node-init read.
   */
  readonly retainedIsClaim: boolean;
}

/** The finalizer the service controller (and cirrus's service-lb) puts on a Service with a load balancer. */
export const loadBalancerCleanupFinalizer = 'service.kubernetes.io/load-balancer-cleanup';

function hadLoadBalancer(service: KubeObject): boolean {
  const type = (service['spec'] as { type?: unknown } | undefined)?.type;
  const status = service['status'] as { loadBalancer?: { ingress?: unknown[] } } | undefined;
  return (
    type === 'LoadBalancer' ||
    (status?.loadBalancer?.ingress ?? []).length > 0 ||
    (service.metadata?.finalizers ?? []).includes(loadBalancerCleanupFinalizer)
  );
}

/**
 * What the relay keeps of an object between its changes (ADR 0024): its metadata (without
 * managedFields) and spec, and of its status only a Service's `loadBalancer`, a Node's Ready
 * condition's status, its NetworkUnavailable condition's status and reason, and its addresses —
 * not the rest of a Node's status (other conditions, capacity, the kubelet's images list: most of a
 * Node's bytes, rewritten every heartbeat). The kept state is what every reader of the relay's store
 * needs:
 *
 * - change detection: the `previous` state the functions' feeds compare (functions/<step>/feed.ts:
 *   a Node's labels, taints, deletionTimestamp, providerID, podCIDR(s) and whether it is Ready; a
 *   Service's spec, annotations, finalizers and deletionTimestamp);
 * - the periodic rechecks (routing.ts `periodicFor`, ADR 0029 and 0031): node-lifecycle's claim
 *   (Ready, the shutdown taint) and node-init's address refresh (the addresses it compares with the
 *   cloud's, the provided-node-ip annotation, the labels);
 * - the fan-out (routing.ts `fanOut`): the Services a node-set change sends service-lb, whose
 *   feed reads their type, class, finalizers and sync record, and whose claim (shared/host) the
 *   same fields and status.loadBalancer;
 * - the node-set digests (service-lb's `nodeListDigest`: names, resourceVersions, the exclude label,
 *   deletionTimestamp, the autoscaler's taint; routes' `routesNodeSet`: names, UIDs, provider IDs
 *   and labels, pod CIDRs, the NetworkUnavailable condition);
 * - the diff of a LIST (resourceVersion, uid) and the deletes it finds, whose data is this state: the
 *   cursor's tombstone fields (`tombstoneSpec`), what `needsTombstone` reads (a Service's
 *   status.loadBalancer.ingress), and what a function decides a delete on (service-lb's
 *   `lastKnown`: kind, uid, type, class, annotations).
 */
export function retained(object: KubeObject): KubeObject {
  const { status, ...kept } = object;
  if (status === undefined) return object;
  if (object.kind !== 'Service') return withAddresses(withReady(kept, status), status);
  const { loadBalancer, ...rest } = status as { loadBalancer?: unknown };
  // Nothing to drop (a Service's status is mostly its load balancer alone): the object itself, not a copy.
  if (Object.keys(rest).length === 0) return object;
  return loadBalancer === undefined ? kept : { ...kept, status: { loadBalancer } };
}

// A Node's Ready condition, reduced to its type and status (node-lifecycle's feed compares it), and
// its NetworkUnavailable condition's status and reason (routes' node-set digest covers them: ADR 0030).
function withReady(kept: KubeObject, status: unknown): KubeObject {
  const conditions = (status as { conditions?: { type?: string; status?: string; reason?: string }[] }).conditions;
  const ready = conditions?.find((c) => c.type === 'Ready');
  const network = conditions?.find((c) => c.type === 'NetworkUnavailable');
  const keptConditions = [
    ...(ready === undefined ? [] : [{ type: 'Ready', status: ready.status }]),
    ...(network === undefined ? [] : [{ type: 'NetworkUnavailable', status: network.status, reason: network.reason }]),
  ];
  return keptConditions.length === 0 ? kept : { ...kept, status: { conditions: keptConditions } };
}

// A Node's addresses, as they are (node-init's periodic refresh compares them with the cloud's and
// writes only when they differ, ADR 0031): a few short entries, changed only when the cloud's do.
function withAddresses(kept: KubeObject, status: unknown): KubeObject {
  const { addresses } = status as { addresses?: unknown };
  if (addresses === undefined) return kept;
  return { ...kept, status: { ...(kept['status'] as object | undefined), addresses } };
}

export const nodes: ResourceType = {
  resource: 'nodes',
  kind: 'Node',
  apiVersion: 'v1',
  namespaced: false,
  path: '/api/v1/nodes',
  tombstoneSpec: ['providerID'],
  needsTombstone: () => true,
  retain: retained,
  retainedIsClaim: false,
};
export const services: ResourceType = {
  resource: 'services',
  kind: 'Service',
  apiVersion: 'v1',
  namespaced: true,
  path: '/api/v1/services',
  tombstoneSpec: ['type', 'loadBalancerClass'],
  needsTombstone: hadLoadBalancer,
  retain: retained,
  retainedIsClaim: true,
};

/** Every kind the relay watches. */
export const watchedResources: readonly ResourceType[] = [nodes, services];

/**
 * The object's key, as the wire contract formats it (shared/wire/keys.ts `formatKey`):
 * `Node/worker-1`, `Service/default/web`. Undefined when the object has no name (or, for a
 * namespaced kind, no namespace), which the API server never sends.
 */
export function objectKey(type: ResourceType, object: KubeObject): string | undefined {
  const name = object.metadata?.name;
  if (name === undefined || name === '') return undefined;
  if (!type.namespaced) return formatKey({ kind: type.kind, name });
  const namespace = object.metadata?.namespace;
  return namespace === undefined || namespace === '' ? undefined : formatKey({ kind: type.kind, name, namespace });
}

/**
 * The object as the relay keeps and sends it: `kind` and `apiVersion` set (LIST items come without
 * them) and `metadata.managedFields` left out — server-side apply's bookkeeping, often half of a
 * Node's bytes, which no handler reads (a handler that wants it re-reads the object).
 */
export function normalize(type: ResourceType, object: KubeObject): KubeObject {
  const metadata = Object.fromEntries(
    Object.entries(object.metadata ?? {}).filter(([field]) => field !== 'managedFields'),
  );
  return { ...object, apiVersion: type.apiVersion, kind: type.kind, metadata };
}

/** The object's resourceVersion, '' when it has none. */
export function resourceVersionOf(object: KubeObject | undefined): string {
  return object?.metadata?.resourceVersion ?? '';
}
