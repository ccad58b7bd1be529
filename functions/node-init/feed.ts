// node-init's feed (the cloud node controller's event handlers): a live Node that still carries
// the uninitialized taint is work, judged by the same predicate as the reconcile.

import type { V1Node } from '@kubernetes/client-node';
import type { Feed, WatchChange } from '../../shared/catalogue.ts';
import type { KubeObject } from '../../shared/kube/object.ts';
import { isUninitialized } from './labels.ts';

/** A live node still carrying the uninitialized taint: node-init has work to do. */
export function needsInitialization(change: WatchChange): boolean {
  // The raw JSON has client-node's V1Node shape for what the predicate reads (spec.taints).
  return change.type !== 'delete' && isUninitialized(change.object as unknown as V1Node);
}

/** Per-node events for Nodes that need initialization. */
export const nodeInitFeed: Feed = (change) =>
  change.resource.kind === 'Node' && needsInitialization(change) ? 'object' : undefined;

/**
 * The Nodes the periodic refresh rechecks (ADR 0031): every Node the relay knows. An initialized
 * one gets its addresses refreshed from the cloud (upstream's UpdateNodeStatus, k8s.io/cloud-provider
 * controllers/node/node_controller.go) and its labels reconciled; one still tainted is tried again
 * (its initialization), as the listing pass did.
 */
export const needsRefresh = (node: KubeObject): boolean => node.kind === 'Node';
