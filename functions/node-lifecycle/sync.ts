// The cloud node lifecycle controller's reconcile (k8s.io/cloud-provider
// controllers/nodelifecycle/node_lifecycle_controller.go, MonitorNodes): a Ready node loses the
// shutdown taint; a node that is not Ready is deleted when its instance is gone, or gets the
// shutdown taint while its instance is shut down.

import type { V1Node, V1Taint } from '@kubernetes/client-node';
import type { Core } from '../../shared/kube/core.ts';
import type { Logger } from 'pino';
import { instanceExists, instanceShutdown } from '../../shared/cloud/instances.ts';
import type { Fleet } from '../../shared/cloud/fleet.ts';
import type { OwnershipCheck } from '../../shared/cloud/skips.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { mapLimit, type KeyedSerializer } from '../../shared/concurrency.ts';
import type { Change, ObjectReport } from '../../shared/host/function.ts';
import { apiMessage, apiStatus, mergePatch, retryOnConflict } from '../../shared/kube/api.ts';
import { fromClaim, type ClaimLedger } from '../../shared/kube/claims.ts';
import { readNode, nodeReference } from '../../shared/kube/nodes.ts';
import { eventFor, recordEvent, type EventSpec } from '../../shared/kube/events.ts';
import { taintShutdown } from '../../shared/kube/well-known.ts';
import { hasShutdownTaint, readyStatus } from './feed.ts';
import { Repeats } from '../../shared/repeats.ts';

/** What the node-lifecycle reconcile works with. */
export interface NodeLifecycleDeps {
  readonly core: Core;
  /** The providers it acts for: a Node is checked against its own, and never by another (shared/cloud/fleet.ts). */
  readonly fleet: Fleet;
  /** The ownership check: another provider's or CCM's Node is skipped, counted and logged (shared/cloud/skips.ts). */
  readonly ownership: OwnershipCheck;
  /** Nodes handled at once by the periodic pass. */
  readonly concurrency: number;
  /** One reconcile per node at a time, whatever asked for it. */
  readonly serializer: KeyedSerializer;
  /** The claims this instance started from (shared/kube/claims.ts): a repeated one is read over. */
  readonly claims: ClaimLedger;
}

/** How one reconcile runs. */
export interface MonitorOptions {
  readonly dryRun: boolean;
  readonly log: Logger;
  readonly signal?: AbortSignal;
  /** An event's object (a claim, see ReconcileOptions): when it shows nothing to write, the node is not read. */
  readonly claimed?: unknown;
  /** The claim came over a verified channel: a taint write may start from it (ADR 0022). */
  readonly claimVerified?: boolean;
}

const component = 'cloud-node-lifecycle-controller';
const shutdownTaint: V1Taint = { key: taintShutdown, effect: 'NoSchedule' };

/**
 * Reconciles the node called `name`. An event's object is enough to decide that nothing is to be
 * written — Ready without the shutdown taint; not Ready, and its instance exists and is not shut
 * down (or already tainted) — as the Go controller decides from its informer's copy. A verified
 * claim is also enough for a taint change, whose patch carries the claim's resourceVersion (a 409
 * reads the node and starts over); a delete, and a taint change decided from any other claim, is
 * decided again on the node as the API server has it.
 */
export async function monitorNode(
  deps: NodeLifecycleDeps,
  name: string,
  options: MonitorOptions,
): Promise<ObjectReport> {
  const key = `Node/${name}`;
  return deps.serializer.run(key, async (waited) =>
    fromClaim(deps.claims, key, { options, waited }, async (claim) => {
      const start = claim as V1Node | undefined;
      if (start !== undefined) return monitorClaimed(deps, start, options);
      const claimed = options.claimed as V1Node | undefined;
      const quiet = claimed === undefined ? undefined : await nothingToWrite(deps, claimed, options);
      return quiet ?? readAndMonitor(deps, name, options);
    }),
  );
}

// A verified claim as the starting point: taint patches carry its resourceVersion already
// (patchTaints); a node to delete is read first, as a delete is acted on only once the API server
// confirms the node as it is. A 409 means the claim was stale: read the node and start over.
async function monitorClaimed(deps: NodeLifecycleDeps, node: V1Node, options: MonitorOptions): Promise<ObjectReport> {
  const name = node.metadata?.name ?? '';
  const reread = (): Promise<ObjectReport> => readAndMonitor(deps, name, options);
  return monitorFetched(deps, node, options, reread).catch((error: unknown) => {
    if (apiStatus(error) === 409) return reread();
    throw error;
  });
}

// The report for a node that needs no write, judged from `node` (the cloud asked as for any
// node); undefined when a write may be needed.
async function nothingToWrite(
  deps: NodeLifecycleDeps,
  node: V1Node,
  options: MonitorOptions,
): Promise<ObjectReport | undefined> {
  const key = `Node/${node.metadata?.name ?? ''}`;
  const choice = deps.ownership.choose(deps.fleet, node, options.log);
  if (choice.provider === undefined) return notMine(key, choice);
  if (readyStatus(node) === 'True') return hasShutdownTaint(node) ? undefined : { key, result: 'ready', changes: [] };
  if (!(await instanceExists(choice.cloud, node, options.signal))) return undefined;
  if (!(await instanceShutdown(choice.cloud, node, options.signal))) return { key, result: 'not-ready', changes: [] };
  return hasShutdownTaint(node) ? { key, result: 'shutdown', changes: [] } : undefined;
}

async function readAndMonitor(deps: NodeLifecycleDeps, name: string, options: MonitorOptions): Promise<ObjectReport> {
  return retryOnConflict(
    async () => {
      const node = await readNode(deps.core, name);
      if (node === undefined) return { key: `Node/${name}`, result: 'not-found', changes: [] };
      return monitorFetched(deps, node, options);
    },
    5,
    100,
  );
}

// `deleteFromRead`: given for a node that is not confirmed by a read (a claim), and called instead of
// deleting it.
async function monitorFetched(
  deps: NodeLifecycleDeps,
  node: V1Node,
  options: MonitorOptions,
  deleteFromRead?: () => Promise<ObjectReport>,
): Promise<ObjectReport> {
  const key = `Node/${node.metadata?.name ?? ''}`;
  // Another provider's Node (or nobody's) is never checked, tainted, untainted or deleted here.
  const choice = deps.ownership.choose(deps.fleet, node, options.log);
  if (choice.provider === undefined) return notMine(key, choice);
  if (readyStatus(node) === 'True') return untaintReady(deps, node, options);
  const cloud = choice.cloud;
  if (!(await instanceExists(cloud, node, options.signal)))
    return deleteFromRead === undefined ? deleteNode(deps, node, options) : deleteFromRead();
  return taintIfShutdown(deps, { cloud, node }, options);
}

// A node that is not Ready and whose instance exists: tainted while the instance is shut down.
async function taintIfShutdown(
  deps: NodeLifecycleDeps,
  { cloud, node }: { readonly cloud: CloudProvider; readonly node: V1Node },
  options: MonitorOptions,
): Promise<ObjectReport> {
  const key = `Node/${node.metadata?.name ?? ''}`;
  if (!(await instanceShutdown(cloud, node, options.signal))) return { key, result: 'not-ready', changes: [] };
  if (hasShutdownTaint(node)) return { key, result: 'shutdown', changes: [] };
  const taints = [...(node.spec?.taints ?? []), shutdownTaint];
  return { key, result: 'shutdown-tainted', changes: [await patchTaints(deps.core, node, taints, options)] };
}

// A Ready node is never checked against the cloud; it only loses the shutdown taint.
async function untaintReady(deps: NodeLifecycleDeps, node: V1Node, options: MonitorOptions): Promise<ObjectReport> {
  const key = `Node/${node.metadata?.name ?? ''}`;
  if (!hasShutdownTaint(node)) return { key, result: 'ready', changes: [] };
  const taints = (node.spec?.taints ?? []).filter((t) => !(t.key === taintShutdown && t.effect === 'NoSchedule'));
  return { key, result: 'shutdown-taint-removed', changes: [await patchTaints(deps.core, node, taints, options)] };
}

// The taint list is replaced whole; the resourceVersion makes a concurrent change a 409.
async function patchTaints(core: Core, node: V1Node, taints: V1Taint[], options: MonitorOptions): Promise<Change> {
  const name = node.metadata?.name ?? '';
  const body = { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints } };
  await core.patchNode(options.dryRun ? { name, body, dryRun: 'All' } : { name, body }, mergePatch);
  return { action: 'patch', target: `Node/${name}`, detail: body };
}

async function deleteNode(deps: NodeLifecycleDeps, node: V1Node, options: MonitorOptions): Promise<ObjectReport> {
  const name = node.metadata?.name ?? '';
  const key = `Node/${name}`;
  const deleting = event(node, {
    type: 'Normal',
    reason: 'DeletingNode',
    message: `Deleting node ${name} because it does not exist in the cloud provider`,
  });
  // The uid precondition keeps a node re-created under the same name from being deleted.
  const body = { preconditions: { uid: node.metadata?.uid ?? '' } };
  const changes: Change[] = [
    {
      action: 'event',
      target: key,
      detail: { type: deleting.type, reason: deleting.reason, message: deleting.message },
    },
    { action: 'delete', target: key, detail: body },
  ];
  if (options.dryRun) {
    // With a request body the API server reads every delete option from it, dryRun included.
    await deps.core.deleteNode({ name, body: { ...body, dryRun: ['All'] } });
    return { key, result: 'deleted', changes };
  }
  await recordEvent(deps.core, deleting).catch((error: unknown) => {
    options.log.warn({ key, err: error }, 'event not recorded');
  });
  try {
    await deps.core.deleteNode({ name, body });
  } catch (error) {
    if (apiStatus(error) === 404) return { key, result: 'not-found', changes: changes.slice(0, 1) };
    const failed = event(node, {
      type: 'Warning',
      reason: 'DeletingNodeFailed',
      message: `Failed deleting node ${name}: ${apiMessage(error)}`,
    });
    await recordEvent(deps.core, failed).catch(() => undefined);
    throw error;
  }
  return { key, result: 'deleted', changes };
}

// The report for a Node this instance leaves alone: another provider's, or nobody's.
function notMine(key: string, choice: { readonly nobody: boolean }): ObjectReport {
  return { key, result: choice.nobody ? 'no-provider' : 'other-provider', changes: [] };
}

function event(node: V1Node, spec: Omit<EventSpec, 'component'>): ReturnType<typeof eventFor> {
  return eventFor(nodeReference(node), { ...spec, component });
}

// A pass's failures of one kind (the cloud's endpoint down fails every Node alike), logged once a
// minute with a count rather than once per Node per pass (shared/repeats.ts).
const failures = new Repeats({ intervalMs: 60_000 });

/** The periodic pass (and a manual "all"): every node, `concurrency` at a time; failures are reported per node. */
export async function monitorAllNodes(deps: NodeLifecycleDeps, options: MonitorOptions): Promise<ObjectReport[]> {
  // The pass begins before the list (see node-init's syncAllNodes).
  return deps.serializer.pass(async (run) => {
    const { items } = await deps.core.listNode();
    // Only the Nodes of the providers this instance serves: no other is ever checked or deleted.
    const mine = items.filter((node) => deps.ownership.choose(deps.fleet, node, options.log).provider !== undefined);
    return mapLimit(mine, deps.concurrency, async (node) => {
      const name = node.metadata?.name ?? '';
      const key = `Node/${name}`;
      try {
        // The listed node is fresh enough unless another reconcile of it ran since the pass began:
        // that one asked the cloud about it within this period (an event's check, or a retry of
        // one), so the pass leaves it to it rather than read it and ask again. The next pass, or the
        // node's next change of what a check reads, checks it anew.
        return await run(key, (stale) =>
          stale
            ? Promise.resolve({ key, result: 'checked-meanwhile', changes: [] })
            : monitorFetched(deps, node, options).catch((error: unknown) => {
                if (apiStatus(error) === 409) return readAndMonitor(deps, name, options);
                throw error;
              }),
        );
      } catch (error) {
        failures.warn(options.log, { key, err: error }, 'node not reconciled');
        return { key, result: 'failed', changes: [], error: apiMessage(error) };
      }
    });
  });
}
