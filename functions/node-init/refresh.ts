// node-init's periodic work, one Node at a time (ADR 0031): the cloud node controller's
// UpdateNodeStatus (k8s.io/cloud-provider controllers/node/node_controller.go: updateNodeAddress,
// then reconcileNodeLabels) for the Node a relay's recheck names. The relay sends every Node it
// knows once per --node-status-update-frequency, spread over the period, each carrying its copy of
// the Node (addresses included), so nothing is listed: the cloud is asked for the Node's
// addresses, and the Node is written only when they (or its GA labels) differ from the copy's.
//
// Every write is conditional on the resourceVersion of the Node it was decided on: the relay's
// copy (a verified claim, ADR 0022), or, after a 409 or without a verified claim, the Node as read.
// A stale copy therefore meets a 409 and is read again; nothing is written blind.

import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { nodeAddresses } from '../../shared/cloud/instances.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import type { Change, ObjectReport } from '../../shared/host/function.ts';
import { apiMessage, apiStatus, mergePatch, retryOnConflict } from '../../shared/kube/api.ts';
import { fromClaim } from '../../shared/kube/claims.ts';
import { readNode } from '../../shared/kube/nodes.ts';
import { desiredAddresses } from './addresses.ts';
import { isUninitialized, labelReconcile } from './labels.ts';
import { syncFetched, type NodeInitDeps, type SyncOptions } from './sync.ts';

/**
 * The periodic refresh of the Node called `name`, from the recheck's claim when it is verified. A
 * Node whose addresses and labels are as the cloud and its beta labels say costs one cloud call
 * and no API request. A Node still tainted is initialized (tried again, as an event would). A
 * failure is reported, not retried: the next period tries again, as upstream's pass does.
 */
export async function refreshNode(deps: NodeInitDeps, name: string, options: SyncOptions): Promise<ObjectReport> {
  const key = `Node/${name}`;
  try {
    return await deps.serializer.run(key, async (waited) =>
      fromClaim(deps.claims, key, { options, waited }, async (claim) => {
        const reread = (): Promise<ObjectReport> => readAndRefresh(deps, name, options);
        if (claim === undefined) return reread();
        return refreshFrom(deps, claim as unknown as V1Node, options).catch((error: unknown) => {
          if (apiStatus(error) === 409) return reread();
          throw error;
        });
      }),
    );
  } catch (error) {
    if (options.signal?.aborted === true) throw error;
    // Deleted since the copy (or the read): nothing to refresh; its delete is an event of its own.
    if (apiStatus(error) === 404) return { key, result: 'not-found', changes: [] };
    options.log.warn({ key, err: error }, 'node not refreshed');
    return { key, result: 'failed', changes: [], error: apiMessage(error) };
  }
}

async function readAndRefresh(deps: NodeInitDeps, name: string, options: SyncOptions): Promise<ObjectReport> {
  return retryOnConflict(async () => {
    const node = await readNode(deps.core, name);
    if (node === undefined) return { key: `Node/${name}`, result: 'not-found', changes: [] };
    return refreshFrom(deps, node, options);
  });
}

// The refresh decided on `node`, each write conditional on its resourceVersion.
async function refreshFrom(deps: NodeInitDeps, node: V1Node, options: SyncOptions): Promise<ObjectReport> {
  const key = `Node/${node.metadata?.name ?? ''}`;
  // Another provider's Node, or nobody's: its own instance (or its own event) sees to it.
  const choice = deps.ownership.choose(deps.fleet, node, options.log);
  if (choice.provider === undefined)
    return { key, result: choice.nobody ? 'no-provider' : 'other-provider', changes: [] };
  if (isUninitialized(node)) return syncFetched(deps, node, options, true);
  const addresses = await cloudAddresses(choice.cloud, node, options);
  const changes = await write(deps, { node, addresses, labels: labelReconcile(node) }, options);
  if (changes.length === 0) return { key, result: 'unchanged', changes };
  return { key, result: addresses === undefined ? 'labels-reconciled' : 'addresses-updated', changes };
}

// The addresses (status), then the labels, each write conditional on the version the one before
// it made.
async function write(
  deps: NodeInitDeps,
  { node, addresses, labels }: { node: V1Node; addresses: V1NodeAddress[] | undefined; labels: Record<string, string> },
  options: SyncOptions,
): Promise<Change[]> {
  const changes: Change[] = [];
  let version = node.metadata?.resourceVersion;
  if (addresses !== undefined) {
    const written = await patch(deps, { node, version, status: true }, { status: { addresses } }, options);
    changes.push(written.change);
    version = written.version;
  }
  if (Object.keys(labels).length > 0)
    changes.push((await patch(deps, { node, version, status: false }, { metadata: { labels } }, options)).change);
  return changes;
}

// The addresses the Node should have, as the cloud says (undefined: none, or no change).
async function cloudAddresses(
  cloud: CloudProvider,
  node: V1Node,
  options: SyncOptions,
): Promise<V1NodeAddress[] | undefined> {
  const fromCloud = await nodeAddresses(cloud, node, options.signal);
  return fromCloud && desiredAddresses(node, fromCloud);
}

// One merge patch of the Node (or its status), holding only if the Node is still `version`; the
// version it made (the next write's precondition).
async function patch(
  deps: NodeInitDeps,
  { node, version, status }: { node: V1Node; version: string | undefined; status: boolean },
  body: { metadata?: { labels: Record<string, string> }; status?: { addresses: V1NodeAddress[] } },
  options: SyncOptions,
): Promise<{ change: Change; version: string | undefined }> {
  const name = node.metadata?.name ?? '';
  const conditional = { ...body, metadata: { ...body.metadata, resourceVersion: version } };
  const param = options.dryRun ? { name, body: conditional, dryRun: 'All' } : { name, body: conditional };
  const written = await (status
    ? deps.core.patchNodeStatus(param, mergePatch)
    : deps.core.patchNode(param, mergePatch));
  const change = { action: status ? 'patch-status' : 'patch', target: `Node/${name}`, detail: conditional };
  return { change, version: written.metadata?.resourceVersion ?? version };
}
