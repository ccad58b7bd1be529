// node-lifecycle's feed and the node predicates its reconcile decides with, in one place so that
// what reaches the function and what the function acts on cannot drift apart.

import type { V1Node } from '@kubernetes/client-node';
import type { Feed, WatchChange } from '../../shared/catalogue.ts';
import { providerLabel } from '../../shared/cloud/ownership.ts';
import { taintShutdown } from '../../shared/kube/well-known.ts';

/** The status of the node's Ready condition: True, False, or Unknown (also when absent), as the Go controller reads it. */
export function readyStatus(node: V1Node): string {
  return node.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'Unknown';
}

/** Whether the node carries cirrus's (and upstream's) shutdown taint, `NoSchedule`. */
export function hasShutdownTaint(node: V1Node): boolean {
  return (node.spec?.taints ?? []).some((t) => t.key === taintShutdown && t.effect === 'NoSchedule');
}

/**
 * A live node that is not Ready, or Ready with the shutdown taint still on: node-lifecycle has work
 * to do — when it appears so, or when what the check decides on changed (the Ready condition's
 * status, the shutdown taint, the provider ID, the provider label). Other updates of a node that
 * stays not Ready (node-init's writes, a status report, a label) bring nothing new to check:
 * the periodic pass checks every such node again (every 5 s by default, upstream's
 * CloudNodeLifecycleController checks only there).
 */
export function needsLifecycleCheck(change: WatchChange): boolean {
  if (change.type === 'delete') return false;
  // The raw JSON has client-node's V1Node shape for what the predicates read (conditions, taints).
  const node = change.object as unknown as V1Node;
  if (readyStatus(node) === 'True' && !hasShutdownTaint(node)) return false;
  if (change.type !== 'update' || change.previous === undefined) return true;
  // The relay keeps a Node's Ready condition (relay/resources.ts retained): previous has it.
  return checkInputs(change.previous as unknown as V1Node) !== checkInputs(node);
}

// What a lifecycle check decides on, as one string to compare.
function checkInputs(node: V1Node): string {
  return JSON.stringify([
    readyStatus(node),
    hasShutdownTaint(node),
    node.spec?.providerID ?? null,
    node.metadata?.labels?.[providerLabel] ?? null,
  ]);
}

/** Per-node events for Nodes that need a lifecycle check. */
export const nodeLifecycleFeed: Feed = (change) =>
  change.resource.kind === 'Node' && needsLifecycleCheck(change) ? 'object' : undefined;
