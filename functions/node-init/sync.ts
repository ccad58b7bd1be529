// The cloud node controller's reconcile, one node per call (k8s.io/cloud-provider
// controllers/node/node_controller.go, syncNode and UpdateNodeStatus): initialize a tainted node
// from its instance metadata, or keep an initialized node's GA labels equal to their beta labels;
// and the pass over every node that refreshes the initialized ones' addresses (a manual `--all`;
// the periodic refresh is one recheck per node from the relay, ./refresh.ts).
//
// Writes are conditional where they replace a list: the initialization patch carries the node's
// resourceVersion, so a concurrent writer makes it fail with 409 and the node is read again. A
// verified claim (the relay's copy, ADR 0022) is the starting point instead of a GET: every write
// decided from it carries its resourceVersion, and a 409 reads the node and starts over.

import type { CoreV1Event, V1Node, V1NodeAddress } from '@kubernetes/client-node';
import type { Core } from '../../shared/kube/core.ts';
import type { Logger } from 'pino';
import type { Histogram } from 'prom-client';
import { instanceMetadata, nodeAddresses } from '../../shared/cloud/instances.ts';
import { chooseForNode, type Fleet } from '../../shared/cloud/fleet.ts';
import type { OwnershipCheck } from '../../shared/cloud/skips.ts';
import { providerIdScheme } from '../../shared/cloud/ownership.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { mapLimit, type KeyedSerializer } from '../../shared/concurrency.ts';
import type { Change, ObjectReport } from '../../shared/host/function.ts';
import { apiMessage, apiStatus, mergePatch, retryOnConflict } from '../../shared/kube/api.ts';
import { fromClaim, type ClaimLedger } from '../../shared/kube/claims.ts';
import { readNode, nodeReference } from '../../shared/kube/nodes.ts';
import { eventFor, recordEvent } from '../../shared/kube/events.ts';
import { desiredAddresses } from './addresses.ts';
import { applyPatch, initializationPatch, isUninitialized, labelReconcile, type NodePatch } from './labels.ts';
import { Repeats } from '../../shared/repeats.ts';

/** What the node-init reconcile works with. */
export interface NodeInitDeps {
  readonly core: Core;
  /** The providers it acts for: each Node is initialized by its own (shared/cloud/fleet.ts). */
  readonly fleet: Fleet;
  /** The ownership check: another provider's or CCM's Node is skipped, counted and logged (shared/cloud/skips.ts). */
  readonly ownership: OwnershipCheck;
  /** Nodes handled at once by the periodic pass. */
  readonly concurrency: number;
  /** One reconcile per node at a time, whatever asked for it. */
  readonly serializer: KeyedSerializer;
  /** The claims this instance started from (shared/kube/claims.ts): a repeated one is read over. */
  readonly claims: ClaimLedger;
  /** `node_controller_cloud_provider_taint_removal_delay_seconds`: creation to the initialization patch. */
  readonly taintRemovalDelay?: Histogram;
  /** `node_controller_initial_node_sync_delay_seconds`: creation to the end of the initialization (its Event and addresses written or tried). */
  readonly initialSyncDelay?: Histogram;
}

/** How one reconcile runs. */
export interface SyncOptions {
  readonly dryRun: boolean;
  readonly log: Logger;
  readonly signal?: AbortSignal;
  /** An event's object (a claim, see ReconcileOptions): when it shows nothing to do, the node is not read. */
  readonly claimed?: unknown;
  /** The claim came over a verified channel: writes may start from it (ADR 0022). */
  readonly claimVerified?: boolean;
}

const component = 'cloud-node-controller';

/**
 * Reconciles the node called `name`: initialize it, or reconcile its labels. An event whose object
 * is initialized with consistent labels (an ApiServerSource sends every Node change) costs no
 * request. A verified claim is written from, each write conditional on its resourceVersion;
 * anything else is decided on the node as the API server has it.
 */
export async function syncNode(deps: NodeInitDeps, name: string, options: SyncOptions): Promise<ObjectReport> {
  const claimed = options.claimed as V1Node | undefined;
  if (claimed !== undefined && !isUninitialized(claimed) && Object.keys(labelReconcile(claimed)).length === 0)
    return { key: `Node/${name}`, result: 'unchanged', changes: [] };
  // Another instance's Node, as the event shows it: no read (a provider ID, once set, never changes).
  if (claimed?.spec?.providerID) {
    const choice = chooseForNode(deps.fleet, claimed);
    if (choice.provider === undefined && !choice.nobody) {
      deps.ownership.record(claimed, choice, options.log);
      return { key: `Node/${name}`, result: 'other-provider', changes: [] };
    }
  }
  const key = `Node/${name}`;
  return deps.serializer.run(key, async (waited) =>
    fromClaim(deps.claims, key, { options, waited }, async (claim) => {
      const start = claim as V1Node | undefined;
      if (start === undefined) return readAndSync(deps, name, options);
      // The claim was stale (someone wrote the node since the relay saw it): read it and start over.
      return syncFetched(deps, start, options, true).catch((error: unknown) => {
        if (apiStatus(error) === 409) return readAndSync(deps, name, options);
        throw error;
      });
    }),
  );
}

async function readAndSync(deps: NodeInitDeps, name: string, options: SyncOptions): Promise<ObjectReport> {
  // A 409 means another writer changed the node between our read and our write: read it again.
  return retryOnConflict(async () => {
    const node = await readNode(deps.core, name);
    if (node === undefined) return { key: `Node/${name}`, result: 'not-found', changes: [] };
    return syncFetched(deps, node, options);
  });
}

/**
 * Initializes `node` or reconciles its labels. `claimed`: `node` is an unconfirmed claim, so the
 * label patch carries its resourceVersion too (the initialization patch always does).
 */
export async function syncFetched(
  deps: NodeInitDeps,
  node: V1Node,
  options: SyncOptions,
  claimed = false,
): Promise<ObjectReport> {
  const choice = deps.ownership.choose(deps.fleet, node, options.log);
  if (choice.provider === undefined) return leftAlone(deps, node, choice, options);
  try {
    return await (isUninitialized(node)
      ? initialize(deps, choice, node, options)
      : reconcileLabels(deps, node, options, claimed));
  } catch (error) {
    // Only the node's own patch can answer 404 (the follow-up writes' failures are caught, the
    // cloud's are wrapped): the node was deleted after it was read, and there is nothing to do.
    if (apiStatus(error) === 404) return { key: `Node/${node.metadata?.name ?? ''}`, result: 'not-found', changes: [] };
    throw error;
  }
}

async function initialize(
  deps: NodeInitDeps,
  { provider, cloud }: { readonly provider: string; readonly cloud: CloudProvider },
  node: V1Node,
  options: SyncOptions,
): Promise<ObjectReport> {
  const name = node.metadata?.name ?? '';
  const key = `Node/${name}`;
  let metadata;
  try {
    metadata = await instanceMetadata(cloud, node, options.signal);
  } catch (error) {
    throw new Error(`failed to get instance metadata for node ${name}: ${(error as Error).message}`, { cause: error });
  }
  if (metadata === undefined) {
    options.log.info({ node: name }, 'the cloud has no metadata for the node yet; it stays tainted');
    return { key, result: 'no-metadata', changes: [] };
  }
  ownProviderId(provider, node, metadata.providerId);
  const patch = initializationPatch(node, metadata);
  // Addresses follow the initialization (they are status); computed for the node as patched.
  const addresses = desiredAddresses(applyPatch(node, patch), metadata.nodeAddresses);
  const event = eventFor(nodeReference(node), {
    type: 'Normal',
    reason: 'Synced',
    message: 'Node synced successfully',
    component,
  });
  const changes: Change[] = [{ action: 'patch', target: key, detail: patch }];
  if (addresses) changes.push({ action: 'patch-status', target: key, detail: { status: { addresses } } });
  changes.push({
    action: 'event',
    target: key,
    detail: { type: event.type, reason: event.reason, message: event.message },
  });
  if (options.dryRun) {
    // The API server validates the patch (and admission runs) without persisting it.
    await deps.core.patchNode({ name, body: patch, dryRun: 'All' }, mergePatch);
    return { key, result: 'initialized', changes };
  }
  await deps.core.patchNode({ name, body: patch }, mergePatch);
  deps.taintRemovalDelay?.observe(secondsSinceCreation(node));
  const error = await afterInitialization(deps, { name, addresses, event }, options.log);
  // Upstream observes it once the Event is recorded, whatever became of the address update.
  deps.initialSyncDelay?.observe(secondsSinceCreation(node));
  return error === undefined ? { key, result: 'initialized', changes } : { key, result: 'initialized', changes, error };
}

// The provider ID written names the Node's owner from then on (its scheme, ADR 0026), with one
// provider as with several: one of another scheme — a static inventory entry with
// `providerID: aws:///…` — would hand the Node to another provider, or to another CCM, and every
// function would leave it alone. Refused; the Node stays tainted until the provider answers one of
// its own (the inventory is fixed).
function ownProviderId(provider: string, node: V1Node, answered: string): void {
  const providerId = node.spec?.providerID || answered;
  if (providerIdScheme(providerId) === provider) return;
  throw new Error(
    `provider ${provider} answered provider ID "${providerId}" for node ${node.metadata?.name ?? ''}, which is not ` +
      `${provider}://…: written, it would make the Node another provider's (or nobody's); it stays tainted`,
  );
}

// The status write and the event: their failures are logged and reported, not retried (upstream
// logs them too); the periodic pass converges the addresses. They follow the conditional patch,
// which confirmed that the node they are computed from (read or claimed) was the current one, and
// carry no precondition, as upstream's: the kubelet writes the status too, and a 409 here would
// leave the addresses to the next pass.
async function afterInitialization(
  deps: NodeInitDeps,
  work: { name: string; addresses: V1NodeAddress[] | undefined; event: ReturnType<typeof eventFor> },
  log: Logger,
): Promise<string | undefined> {
  const problems: string[] = [];
  if (work.addresses) {
    await patchAddresses(deps.core, work.name, work.addresses).catch((error: unknown) => {
      problems.push(`addresses not updated: ${apiMessage(error)}`);
    });
  }
  await recordEvent(deps.core, work.event).catch((error: unknown) => {
    problems.push(`event not recorded: ${apiMessage(error)}`);
  });
  if (problems.length === 0) return undefined;
  log.warn({ node: work.name, problems }, 'node initialized, but not all follow-up writes succeeded');
  return problems.join('; ');
}

async function patchAddresses(core: Core, name: string, addresses: V1NodeAddress[]): Promise<void> {
  // A merge patch replaces the list whole, as Kubernetes recommends for status.addresses.
  await core.patchNodeStatus({ name, body: { status: { addresses } } }, mergePatch);
}

async function reconcileLabels(
  deps: NodeInitDeps,
  node: V1Node,
  options: SyncOptions,
  claimed: boolean,
): Promise<ObjectReport> {
  const name = node.metadata?.name ?? '';
  const key = `Node/${name}`;
  const labels = labelReconcile(node);
  if (Object.keys(labels).length === 0) return { key, result: 'unchanged', changes: [] };
  // Read labels are written as upstream writes them, without a precondition; a claim's are not
  // known to be current, so its patch holds only if the node is still the version claimed.
  const version = claimed ? node.metadata?.resourceVersion : undefined;
  const patch: NodePatch = { metadata: version === undefined ? { labels } : { resourceVersion: version, labels } };
  const changes = [{ action: 'patch', target: key, detail: patch }];
  await deps.core.patchNode(options.dryRun ? { name, body: patch, dryRun: 'All' } : { name, body: patch }, mergePatch);
  return { key, result: 'labels-reconciled', changes };
}

// A pass's failures of one kind (the cloud's endpoint down fails every Node alike), logged once a
// minute with a count rather than once per Node per pass (shared/repeats.ts).
const failures = new Repeats({ intervalMs: 60_000 });

/**
 * The periodic pass (and a manual "all"): every node is reconciled as an event would; every
 * initialized node also gets its addresses from the cloud, written only when they changed. One
 * node's failure is reported and does not stop the others.
 */
export async function syncAllNodes(deps: NodeInitDeps, options: SyncOptions): Promise<ObjectReport[]> {
  // The pass begins before the list: a reconcile of a node that ran after the list makes the
  // listed copy stale, even when it has finished by the time the pass reaches the node.
  return deps.serializer.pass(async (run) => {
    const { items } = await deps.core.listNode();
    // Only this instance's Nodes: another instance passes over its own, and a Node nobody owns got
    // its Event from its own event (a pass would only ask to write it again).
    const mine = items.filter((node) => deps.ownership.choose(deps.fleet, node, options.log).provider !== undefined);
    return mapLimit(mine, deps.concurrency, async (listed) => {
      const name = listed.metadata?.name ?? '';
      const key = `Node/${name}`;
      try {
        return await run(key, async (stale) => {
          // The listed node is fresh enough for a first try, unless another reconcile of it ran
          // since the list; on a conflict, read it again.
          const node = stale ? await readNode(deps.core, name) : listed;
          if (node === undefined) return { key, result: 'not-found', changes: [] };
          const report = await syncFetched(deps, node, options).catch((error: unknown) => {
            if (apiStatus(error) === 409) return readAndSync(deps, name, options);
            throw error;
          });
          const choice = chooseForNode(deps.fleet, node);
          if (report.result === 'not-found' || isUninitialized(node) || choice.provider === undefined) return report;
          return await refreshAddresses(deps, { cloud: choice.cloud, node }, report, options);
        });
      } catch (error) {
        failures.warn(options.log, { key, err: error }, 'node not reconciled');
        return { key, result: 'failed', changes: [], error: apiMessage(error) };
      }
    });
  });
}

async function refreshAddresses(
  deps: NodeInitDeps,
  { cloud, node }: { readonly cloud: CloudProvider; readonly node: V1Node },
  report: ObjectReport,
  options: SyncOptions,
): Promise<ObjectReport> {
  const cloudAddresses = await nodeAddresses(cloud, node, options.signal);
  const addresses = cloudAddresses && desiredAddresses(node, cloudAddresses);
  if (!addresses) return report;
  const name = node.metadata?.name ?? '';
  const change = { action: 'patch-status', target: report.key, detail: { status: { addresses } } };
  if (!options.dryRun) await patchAddresses(deps.core, name, addresses);
  const result = report.result === 'unchanged' ? 'addresses-updated' : report.result;
  return { ...report, result, changes: [...report.changes, change] };
}

function secondsSinceCreation(node: V1Node): number {
  const created = node.metadata?.creationTimestamp;
  return created ? Math.max(0, (Date.now() - new Date(created).getTime()) / 1000) : 0;
}

/**
 * A Node this instance does not act for. One that another provider owns is its business; one that
 * no provider owns stays tainted, and gets one Warning Event saying why (its name is the Node's
 * UID's, so every instance and every retry writes the same one and the API server keeps the first).
 */
async function leftAlone(
  deps: NodeInitDeps,
  node: V1Node,
  choice: { readonly why: string; readonly nobody: boolean },
  options: SyncOptions,
): Promise<ObjectReport> {
  const name = node.metadata?.name ?? '';
  const key = `Node/${name}`;
  if (!choice.nobody) return { key, result: 'other-provider', changes: [] };
  const event = eventFor(nodeReference(node), {
    type: 'Warning',
    reason: 'NoCloudProvider',
    message: `Node ${name} is left alone: ${choice.why}`,
    component,
  });
  const once: CoreV1Event = {
    ...event,
    metadata: { name: `${name}.${node.metadata?.uid ?? 'unknown'}.no-cloud-provider`, namespace: 'default' },
  };
  const changes: Change[] = [
    { action: 'event', target: key, detail: { type: once.type, reason: once.reason, message: once.message } },
  ];
  if (options.dryRun) return { key, result: 'no-provider', changes };
  options.log.warn({ node: name }, once.message ?? '');
  const error = await recordEvent(deps.core, once).then(
    () => undefined,
    (failure: unknown) => (apiStatus(failure) === 409 ? undefined : `event not recorded: ${apiMessage(failure)}`),
  );
  return error === undefined ? { key, result: 'no-provider', changes } : { key, result: 'no-provider', changes, error };
}
