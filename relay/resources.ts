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
  /** The new state; for `delete`, the last known one. */
  readonly object: KubeObject;
  /** The state before this change, when the relay knew one. */
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

export const nodes: ResourceType = {
  resource: 'nodes',
  kind: 'Node',
  apiVersion: 'v1',
  namespaced: false,
  path: '/api/v1/nodes',
  tombstoneSpec: ['providerID'],
  needsTombstone: () => true,
};
export const services: ResourceType = {
  resource: 'services',
  kind: 'Service',
  apiVersion: 'v1',
  namespaced: true,
  path: '/api/v1/services',
  tombstoneSpec: ['type', 'loadBalancerClass'],
  needsTombstone: hadLoadBalancer,
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
