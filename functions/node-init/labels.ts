// What node initialization writes, computed without side effects: the labels from instance
// metadata, the provider ID, the taints that remain; and the beta-to-GA label reconcile of
// initialized nodes.

import type { V1Node, V1Taint } from '@kubernetes/client-node';
import type { InstanceMetadata } from '../../shared/cloud/provider.ts';
import {
  annotationProvidedNodeIp,
  labelInstanceType,
  labelInstanceTypeBeta,
  labelRegion,
  labelRegionBeta,
  labelZone,
  labelZoneBeta,
  reservedLabelDomain,
  taintUninitialized,
} from '../../shared/kube/well-known.ts';
import { addressesForNodeIp } from './addresses.ts';

/** Whether the node still waits for the cloud node controller. */
export function isUninitialized(node: V1Node): boolean {
  return (node.spec?.taints ?? []).some((t) => t.key === taintUninitialized);
}

/** The labels initialization sets: topology and instance type (both keys, overwriting) and new additional labels. */
export function initializationLabels(node: V1Node, metadata: InstanceMetadata): Record<string, string> {
  const existing = node.metadata?.labels ?? {};
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata.additionalLabels)) {
    if (reservedLabelDomain.test(key) || key in existing) continue;
    labels[key] = value;
  }
  const pairs: [string, string, string][] = [
    [metadata.instanceType, labelInstanceTypeBeta, labelInstanceType],
    [metadata.zone, labelZoneBeta, labelZone],
    [metadata.region, labelRegionBeta, labelRegion],
  ];
  for (const [value, beta, ga] of pairs) {
    if (value === '') continue;
    labels[beta] = value;
    labels[ga] = value;
  }
  return labels;
}

/** A merge patch of the node's labels, provider ID and taints; `metadata.resourceVersion` makes it conditional. */
export interface NodePatch {
  metadata: { resourceVersion?: string; labels?: Record<string, string> };
  spec?: { providerID?: string; taints?: V1Taint[] };
}

/**
 * The single patch that initializes `node`: provider ID (only when the node has none), labels,
 * and every uninitialized taint removed, conditional on the node's resourceVersion. Throws when
 * the provided-node-ip annotation does not match the cloud's addresses.
 */
export function initializationPatch(node: V1Node, metadata: InstanceMetadata): NodePatch {
  checkProvidedNodeIp(node, metadata);
  const spec: NonNullable<NodePatch['spec']> = {
    taints: (node.spec?.taints ?? []).filter((t) => t.key !== taintUninitialized).map((t) => ({ ...t })),
  };
  if (!node.spec?.providerID && metadata.providerId !== '') spec.providerID = metadata.providerId;
  const patch: NodePatch = { metadata: { labels: initializationLabels(node, metadata) }, spec };
  if (node.metadata?.resourceVersion !== undefined) patch.metadata.resourceVersion = node.metadata.resourceVersion;
  return patch;
}

// The annotation must match the cloud's addresses before anything is written (no write here).
function checkProvidedNodeIp(node: V1Node, metadata: InstanceMetadata): void {
  const annotation = node.metadata?.annotations?.[annotationProvidedNodeIp];
  if (annotation === undefined) return;
  try {
    addressesForNodeIp(annotation, metadata.nodeAddresses);
  } catch (error) {
    const name = node.metadata?.name ?? '';
    throw new Error(
      `failed to get node modifiers from cloud provider: provided node ip for node "${name}" is not valid: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** `node` as it will be after `patch` (for computing the status write that follows). */
export function applyPatch(node: V1Node, patch: NodePatch): V1Node {
  return {
    ...node,
    metadata: { ...node.metadata, labels: { ...node.metadata?.labels, ...patch.metadata.labels } },
    spec: { ...node.spec, ...patch.spec },
  };
}

const betaToGa: [string, string][] = [
  [labelZoneBeta, labelZone],
  [labelRegionBeta, labelRegion],
  [labelInstanceTypeBeta, labelInstanceType],
];

/** For an initialized node: the GA labels to set so they equal their beta labels (empty when in step). */
export function labelReconcile(node: V1Node): Record<string, string> {
  const labels = node.metadata?.labels ?? {};
  const changes: Record<string, string> = {};
  for (const [beta, ga] of betaToGa) {
    const value = labels[beta];
    if (value !== undefined && labels[ga] !== value) changes[ga] = value;
  }
  return changes;
}
