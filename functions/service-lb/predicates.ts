// The service controller's decisions (k8s.io/cloud-provider controllers/service/controller.go:
// wantsLoadBalancer, needsCleanup, needsUpdate, the node predicates), as pure functions, and
// the record cirrus keeps on a Service in place of the Go controller's in-memory cache: a
// fingerprint of what the last successful sync saw.

import { createHash } from 'node:crypto';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';

/** Added before the first cloud call, removed only after the load balancer is deleted. */
export const finalizer = 'service.kubernetes.io/load-balancer-cleanup';
/** The cluster autoscaler's taint on nodes it is about to delete. */
export const toBeDeletedTaint = 'ToBeDeletedByClusterAutoscaler';
/** Nodes labelled so (true) stay out of every load balancer. */
export const excludeLabel = 'node.kubernetes.io/exclude-from-external-load-balancers';
/** cirrus's record of the last successful sync (JSON `{spec, nodes}` fingerprints). */
export const syncedAnnotation = 'service-lb.cirrus-ccm.dev/synced';

/**
 * Type LoadBalancer, of the class this service-lb serves (`--load-balancer-class`): with none
 * given, Services without a class, as upstream's wantsLoadBalancer (a class means another
 * controller owns the Service); with one, only Services of that class.
 */
export function wantsLoadBalancer(service: V1Service, loadBalancerClass?: string): boolean {
  return service.spec?.type === 'LoadBalancer' && classMatches(service, loadBalancerClass);
}

function classMatches(service: V1Service, loadBalancerClass: string | undefined): boolean {
  const own = service.spec?.loadBalancerClass;
  return loadBalancerClass === undefined ? own == null : own === loadBalancerClass;
}

export function hasFinalizer(service: V1Service): boolean {
  return (service.metadata?.finalizers ?? []).includes(finalizer);
}

/**
 * Whether the Service's load balancer must be deleted by this service-lb: it is ours, and is being
 * deleted or no longer wants one. Ours: of the class served here (`--load-balancer-class`, none by
 * default) and carrying the cleanup finalizer or cirrus's sync record; or, of another class or none
 * (the type changed, or the class with it), carrying a sync record made under the class served here
 * (the record names it; none when absent). The finalizer's name is upstream's, shared by every
 * controller that follows it, so a finalizer without a record counts only on a Service of the class
 * served — without a class for a service-lb with none, as upstream's needsCleanup.
 */
export function needsCleanup(service: V1Service, loadBalancerClass?: string): boolean {
  if (!isOurs(service, loadBalancerClass)) return false;
  return service.metadata?.deletionTimestamp != null || !wantsLoadBalancer(service, loadBalancerClass);
}

function isOurs(service: V1Service, loadBalancerClass: string | undefined): boolean {
  const recorded = service.metadata?.annotations?.[syncedAnnotation] !== undefined;
  if (!hasFinalizer(service) && !recorded) return false;
  if (classMatches(service, loadBalancerClass)) return true;
  // A damaged record names no class: it counts as made without one.
  return recorded && syncRecord(service)?.class === loadBalancerClass;
}

// Go's strconv.ParseBool.
function parseBool(value: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return undefined;
}

/** A node takes part in load balancers unless labelled excluded (any value but a false one), being deleted, or tainted for deletion. */
export function inLoadBalancers(node: V1Node): boolean {
  const label = node.metadata?.labels?.[excludeLabel];
  if (label !== undefined && parseBool(label) !== false) return false;
  if (node.metadata?.deletionTimestamp != null) return false;
  return !(node.spec?.taints ?? []).some((t) => t.key === toBeDeletedTaint);
}

function fingerprint(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);
}

/**
 * A fingerprint of what decides whether the load balancer must be ensured again — the fields the
 * Go controller's needsUpdate compares: ports, source ranges, session affinity, the requested IP,
 * external IPs, annotations (but cirrus's own), UID, traffic policy, health check port and the
 * number of IP families.
 */
export function specFingerprint(service: V1Service): string {
  const spec = service.spec ?? {};
  const annotations = Object.entries(service.metadata?.annotations ?? {})
    .filter(([key]) => key !== syncedAnnotation)
    .sort(([a], [b]) => a.localeCompare(b));
  // JSON.stringify leaves out undefined members: absent and unset fields fingerprint alike,
  // while null and [] (source ranges) stay distinct, as in the Go comparison.
  return fingerprint({
    wants: wantsLoadBalancer(service),
    sourceRanges: spec.loadBalancerSourceRanges,
    ports: spec.ports?.map((p) => [p.name, p.protocol, p.port, p.nodePort, p.targetPort, p.appProtocol]),
    sessionAffinity: spec.sessionAffinity,
    sessionAffinityConfig: spec.sessionAffinityConfig,
    loadBalancerIp: spec.loadBalancerIP,
    externalIps: spec.externalIPs,
    annotations,
    uid: service.metadata?.uid,
    // Absent (left out by JSON.stringify) without a class: classless Services keep their fingerprint.
    loadBalancerClass: spec.loadBalancerClass ?? undefined,
    externalTrafficPolicy: spec.externalTrafficPolicy,
    healthCheckNodePort: spec.healthCheckNodePort,
    ipFamilies: spec.ipFamilies?.length,
  });
}

/** A fingerprint of a node set as load balancers see it: names and provider IDs, order aside. */
export function nodesFingerprint(nodes: readonly V1Node[]): string {
  return fingerprint(
    nodes
      .map((n) => [n.metadata?.name ?? '', n.spec?.providerID ?? ''])
      .sort(([a = ''], [b = '']) => a.localeCompare(b)),
  );
}

/**
 * Which versions of the nodes a load balancer should have, out of all of `nodes`: their names and
 * resourceVersions. Equal digests mean the same eligible nodes, unchanged in any field. The relay
 * sends it with every service-lb event (computed over its watch of Nodes); the function keeps the
 * node list it last read under its digest, and reads the nodes again only when the two differ.
 */
export function nodeListDigest(nodes: Iterable<V1Node>): string {
  return fingerprint(
    Array.from(nodes)
      .filter(inLoadBalancers)
      .map((n) => [n.metadata?.name ?? '', n.metadata?.resourceVersion ?? ''])
      .sort(([a = ''], [b = '']) => (a < b ? -1 : a > b ? 1 : 0)),
  );
}

/** What the last successful sync saw. */
export interface SyncRecord {
  readonly spec: string;
  readonly nodes: string;
  /** The `--load-balancer-class` of the service-lb that made it; absent for none. */
  readonly class?: string;
}

/** The Service's sync record, or undefined when it has none (or a damaged one: then it syncs again). */
export function syncRecord(service: V1Service): SyncRecord | undefined {
  const text = service.metadata?.annotations?.[syncedAnnotation];
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<Record<keyof SyncRecord, unknown>>;
    if (typeof value.spec !== 'string' || typeof value.nodes !== 'string') return undefined;
    if (value.class !== undefined && typeof value.class !== 'string') return undefined;
    return { spec: value.spec, nodes: value.nodes, ...(value.class === undefined ? {} : { class: value.class }) };
  } catch {
    return undefined;
  }
}

/**
 * Load balancer statuses are equal when their ingress lists are (IP, hostname, ipMode, ports), nil
 * and empty alike. An IP without ipMode counts as `VIP`, the API server's default for it.
 */
export function loadBalancerStatusEqual(
  a: V1LoadBalancerStatus | undefined,
  b: V1LoadBalancerStatus | undefined,
): boolean {
  const norm = (status: V1LoadBalancerStatus | undefined): unknown =>
    (status?.ingress ?? []).map((i) => [
      i.ip ?? '',
      i.hostname ?? '',
      i.ipMode ?? (i.ip ? 'VIP' : ''),
      (i.ports ?? []).map((p) => [p.port, p.protocol, p.error ?? '']),
    ]);
  return JSON.stringify(norm(a)) === JSON.stringify(norm(b));
}

/** Node names for an event message: the first 20, then how many more. */
export function nodeNamesForMessage(nodes: readonly V1Node[]): string {
  const names = nodes.map((n) => n.metadata?.name ?? '');
  const shown = names.slice(0, 20);
  if (names.length > 20) shown.push(`<${names.length - 20} more>`);
  return `[${shown.join(' ')}]`;
}
