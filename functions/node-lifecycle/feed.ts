// node-lifecycle's feed and the node predicates its reconcile decides with, in one place so that
// what reaches the function and what the function acts on cannot drift apart.

import type { V1Node } from '@kubernetes/client-node';
import type { Feed, WatchChange } from '../../shared/catalogue.ts';
import { taintShutdown } from '../../shared/kube/well-known.ts';

/** The status of the node's Ready condition: True, False, or Unknown (also when absent), as the Go controller reads it. */
export function readyStatus(node: V1Node): string {
  return node.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'Unknown';
}

/** Whether the node carries cirrus's (and upstream's) shutdown taint, `NoSchedule`. */
export function hasShutdownTaint(node: V1Node): boolean {
  return (node.spec?.taints ?? []).some((t) => t.key === taintShutdown && t.effect === 'NoSchedule');
}

/** A live node that is not Ready, or Ready with the shutdown taint still on: node-lifecycle has work to do. */
export function needsLifecycleCheck(change: WatchChange): boolean {
  if (change.type === 'delete') return false;
  // The raw JSON has client-node's V1Node shape for what the predicates read (conditions, taints).
  const node = change.object as unknown as V1Node;
  return readyStatus(node) !== 'True' || hasShutdownTaint(node);
}

/** Per-node events for Nodes that need a lifecycle check. */
export const nodeLifecycleFeed: Feed = (change) =>
  change.resource.kind === 'Node' && needsLifecycleCheck(change) ? 'object' : undefined;
