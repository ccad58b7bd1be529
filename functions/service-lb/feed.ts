// service-lb's feed (the service controller's event handlers): per-Service events for Services
// that have or had a load balancer, and one coalesced `reconcile.all` when a node change can
// change load balancers' node sets (a node added or deleted; its exclude label, providerID,
// deletionTimestamp or ToBeDeletedByClusterAutoscaler taint changed — upstream's
// shouldSyncUpdatedNode and stable node predicates — or, in a hybrid cluster, its provider label,
// which moves it from one provider's node sets to another's: ADR 0026).

import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { Feed, WatchChange } from '../../shared/catalogue.ts';
import { providerLabel } from '../../shared/cloud/ownership.ts';
import type { KubeObject } from '../../shared/kube/object.ts';
import {
  finalizer,
  hasFinalizer,
  inLoadBalancers,
  nodeListDigest,
  specFingerprint,
  syncedAnnotation,
} from './predicates.ts';

// The predicates are typed for client-node's V1Node; they read only labels, taints and
// deletionTimestamp (for presence), which the raw JSON has in the same shape.
function asNode(object: KubeObject): V1Node {
  return object as unknown as V1Node;
}

function providerId(node: KubeObject | undefined): string | undefined {
  return (node?.['spec'] as { providerID?: string } | undefined)?.providerID;
}

/**
 * A node change after which a load balancer's node set may differ: a node added or deleted, or
 * one whose membership (exclude label, deletionTimestamp, ToBeDeletedByClusterAutoscaler taint)
 * or providerID changed.
 */
export function nodeSetMayChange(change: WatchChange): boolean {
  if (change.type !== 'update' || change.previous === undefined) return true;
  return (
    inLoadBalancers(asNode(change.previous)) !== inLoadBalancers(asNode(change.object)) ||
    providerId(change.previous) !== providerId(change.object) ||
    change.previous.metadata?.labels?.[providerLabel] !== change.object.metadata?.labels?.[providerLabel]
  );
}

/**
 * A Service service-lb must hear about: of type LoadBalancer, or carrying cirrus's finalizer or
 * sync record (a load balancer may exist that must go). Other Services are no work for it.
 */
export function involvesLoadBalancer(service: KubeObject | undefined): boolean {
  if (service === undefined) return false;
  const type = (service['spec'] as { type?: string } | undefined)?.type;
  const metadata = service.metadata;
  return (
    type === 'LoadBalancer' ||
    (metadata?.finalizers ?? []).includes(finalizer) ||
    metadata?.annotations?.[syncedAnnotation] !== undefined
  );
}

/**
 * Whether a Service change can change what its reconcile does: anything but an update that leaves
 * the spec fingerprint and the deletion timestamp as they were and does not matter through cirrus's
 * finalizer — such as the echo of service-lb's own status and sync-record write, or of the
 * finalizer it adds before an ensure (upstream's informer filters updates the same way: `needsUpdate`
 * or `needsCleanup` of the new Service, k8s.io/cloud-provider controllers/service/controller.go,
 * the UpdateFunc of `New`). A change without a previous state (an add, a fan-out) always can.
 */
export function serviceChangeMatters(change: WatchChange): boolean {
  if (change.type !== 'update' || change.previous === undefined) return true;
  return (
    decisionInputs(change.previous) !== decisionInputs(change.object) ||
    finalizerChangeMatters(change.previous, change.object)
  );
}

function decisionInputs(object: KubeObject): string {
  const service = object as unknown as V1Service;
  return JSON.stringify([specFingerprint(service), service.metadata?.deletionTimestamp ?? null]);
}

// cirrus's finalizer removed (put it back, or the cleanup that removed it is over), or added to a
// Service that does not want a load balancer (a cleanup: upstream's needsCleanup). Added to a
// load-balanced Service, it is the echo of service-lb's own write before an ensure: no work. Other
// controllers' finalizers are none of service-lb's business.
function finalizerChangeMatters(previous: KubeObject, current: KubeObject): boolean {
  const had = hasFinalizer(previous as unknown as V1Service);
  const has = hasFinalizer(current as unknown as V1Service);
  if (had === has) return false;
  return had || (current['spec'] as { type?: string } | undefined)?.type !== 'LoadBalancer';
}

/** Service events for load-balanced Services; a `reconcile.all` when the node set may have changed. */
export const serviceLbFeed: Feed = (change) => {
  if (change.resource.kind === 'Node') return nodeSetMayChange(change) ? 'all' : undefined;
  if (!involvesLoadBalancer(change.object) && !involvesLoadBalancer(change.previous)) return undefined;
  return serviceChangeMatters(change) ? 'object' : undefined;
};

/** The digest of the load balancers' nodes over the relay's Nodes (the `cirrusnodeset` extension). */
export function serviceLbNodeSet(nodes: Iterable<KubeObject>): string {
  return nodeListDigest(Array.from(nodes, asNode));
}
