// Node addresses: the `alpha.kubernetes.io/provided-node-ip` rules and change detection, as
// k8s.io/cloud-provider's node controller and component-helpers compute them (the annotation's IPs
// are read by shared/net/ip.ts). Pure functions.

import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { annotationProvidedNodeIp } from '../../shared/kube/well-known.ts';
import { canonicalNodeIp, parseNodeIpAnnotation } from '../../shared/net/ip.ts';

/**
 * The cloud's addresses filtered by the node IPs the kubelet was given: for each node IP, the
 * cloud addresses equal to it (their types are then "claimed"); then every address whose type was
 * not claimed. Throws when a node IP matches no cloud address.
 */
export function addressesForNodeIp(annotation: string, cloud: readonly V1NodeAddress[]): V1NodeAddress[] {
  const nodeIps = parseNodeIpAnnotation(annotation);
  const chosen: V1NodeAddress[] = [];
  const claimed = new Set<string>();
  for (const nodeIp of nodeIps) {
    const matches = cloud.filter((a) => canonicalNodeIp(a.address) === nodeIp);
    if (matches.length === 0)
      throw new Error(`failed to get node address from cloud provider that matches ip: ${nodeIp}`);
    for (const match of matches) {
      chosen.push(match);
      claimed.add(match.type);
    }
  }
  return [...chosen, ...cloud.filter((a) => !claimed.has(a.type))];
}

/** Whether two address lists differ (a pure reordering is no change). */
export function addressesChanged(current: readonly V1NodeAddress[], next: readonly V1NodeAddress[]): boolean {
  if (current.length !== next.length) return true;
  const byType = new Map(current.map((a) => [a.type, a.address]));
  return next.some((a) => byType.get(a.type) !== a.address);
}

/**
 * The addresses `node` should have given the cloud's, or undefined when nothing should be
 * written: no cloud addresses, or no change. Keeps the kubelet's Hostname when the cloud has
 * none; applies the provided-node-ip annotation (an invalid one throws).
 */
export function desiredAddresses(node: V1Node, cloud: readonly V1NodeAddress[]): V1NodeAddress[] | undefined {
  if (cloud.length === 0) return undefined;
  const current = node.status?.addresses ?? [];
  let next = cloud.map((a) => ({ type: a.type, address: a.address }));
  if (!next.some((a) => a.type === 'Hostname')) {
    next = [
      ...next,
      ...current.filter((a) => a.type === 'Hostname').map((a) => ({ type: a.type, address: a.address })),
    ];
  }
  const annotation = node.metadata?.annotations?.[annotationProvidedNodeIp];
  if (annotation !== undefined) next = addressesForNodeIp(annotation, next);
  return addressesChanged(current, next) ? next : undefined;
}
