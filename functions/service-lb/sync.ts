// The service controller's reconcile (k8s.io/cloud-provider controllers/service, ccm-behaviour §4),
// one Service per call and without memory: what the Go controller caches (the last synced Service
// and node set) is a fingerprint recorded on the Service itself (annotation `syncedAnnotation`),
// written with the status after each successful sync. A Service whose spec and node set match its
// record costs one GET, and no cloud call: the node list comes from the instance's last one when
// the event says it is current (./nodes.ts), so a reconcile of one Service lists nothing.

import type { CoreV1Api, V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { findCause, ImplementedElsewhereError } from '../../shared/cloud/errors.ts';
import type { LoadBalancer, OwnedLoadBalancer } from '../../shared/cloud/provider.ts';
import { mapLimit, type KeyedSerializer } from '../../shared/concurrency.ts';
import type { Change, ObjectReport } from '../../shared/host/function.ts';
import { apiMessage, apiStatus, mergePatch } from '../../shared/kube/api.ts';
import { eventFor, recordEvent, type EventSpec } from '../../shared/kube/events.ts';
import type { NodeLister } from './nodes.ts';
import {
  finalizer,
  hasFinalizer,
  loadBalancerStatusEqual,
  needsCleanup,
  nodeNamesForMessage,
  nodesFingerprint,
  specFingerprint,
  syncedAnnotation,
  syncRecord,
  wantsLoadBalancer,
} from './predicates.ts';

/** What the service-lb reconcile works with. */
export interface ServiceLbDeps {
  readonly core: CoreV1Api;
  readonly loadBalancer: LoadBalancer;
  readonly clusterName: string;
  /** Services handled at once by a pass over all of them. */
  readonly concurrency: number;
  /** One reconcile per Service at a time, whatever asked for it: two ensures at once could make two load balancers. */
  readonly serializer: KeyedSerializer;
  /** The eligible nodes, listed only when the instance's last list is not known to be current. */
  readonly nodes: NodeLister;
}

/** How one reconcile runs. */
export interface ServiceSyncOptions {
  readonly dryRun: boolean;
  readonly log: Logger;
  readonly signal?: AbortSignal;
  /** A delete event's last known object. */
  readonly lastKnown?: unknown;
  /** The event's digest of the current node list (`cirrusnodeset`), when it has one. */
  readonly nodeSet?: string;
  /** An add or update event's object (a claim, see ReconcileOptions). */
  readonly claimed?: unknown;
}

const strategicMergePatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

// One reconcile's working state: the Service, the changes made so far (for the report).
interface Run {
  readonly deps: ServiceLbDeps;
  readonly options: ServiceSyncOptions;
  readonly service: V1Service;
  readonly key: string;
  readonly changes: Change[];
}

/**
 * Reconciles the Service `namespace/name`. An event whose object has no load balancer to ensure
 * or clean up (an ApiServerSource sends every Service change) costs no request; anything else is
 * decided on the Service as the API server has it.
 */
export async function syncService(
  deps: ServiceLbDeps,
  namespace: string,
  name: string,
  options: ServiceSyncOptions,
): Promise<ObjectReport> {
  const claimed = options.claimed as V1Service | undefined;
  if (claimed !== undefined && !wantsLoadBalancer(claimed) && !needsCleanup(claimed))
    return { key: `Service/${namespace}/${name}`, result: 'ignored', changes: [] };
  return deps.serializer.run(`Service/${namespace}/${name}`, () => readAndSync(deps, namespace, name, options));
}

async function readAndSync(
  deps: ServiceLbDeps,
  namespace: string,
  name: string,
  options: ServiceSyncOptions,
): Promise<ObjectReport> {
  const key = `Service/${namespace}/${name}`;
  const service = await readService(deps.core, namespace, name);
  if (service === undefined) return vanished(deps, key, options);
  // The node set is needed only when the load balancer is ensured, not for a cleanup.
  const nodes = (): Promise<readonly V1Node[]> => deps.nodes.nodes(options.nodeSet, options.signal);
  const sync = (): Promise<ObjectReport> => syncFetched(deps, service, nodes, options);
  // A delete event is a claim. The API server says a Service of that name is there: if it is the
  // one the event names, the level-triggered reconcile does what it needs and nothing the event
  // asked for; if it has another uid, the event's incarnation is gone and is cleaned up first.
  const claimed = (options.lastKnown as V1Service | undefined)?.metadata?.uid;
  if (options.lastKnown === undefined) return sync();
  if (claimed === service.metadata?.uid) {
    return { ...(await sync()), note: `delete event not acted on: the Service exists (uid ${String(claimed)})` };
  }
  const gone = await vanished(deps, key, options);
  const live = await sync();
  return {
    ...live,
    changes: [...gone.changes, ...live.changes],
    note: `the deleted incarnation (uid ${String(claimed)}): ${gone.result}`,
  };
}

/**
 * Every Service that wants a load balancer or has one to clean up, against one listing of the
 * nodes: the periodic pass and the "nodes changed" trigger. Only Services whose spec or node set
 * changed since their last sync cost a cloud call. Failures are reported per Service.
 */
export async function syncAllServices(deps: ServiceLbDeps, options: ServiceSyncOptions): Promise<ObjectReport[]> {
  // The pass begins before the list: a reconcile of a Service that runs after the list was read
  // makes the listed copy stale, even when it has finished by the time the pass reaches it.
  return deps.serializer.pass(async (run) => {
    const [{ items }, nodes] = await Promise.all([
      deps.core.listServiceForAllNamespaces(),
      deps.nodes.nodes(undefined, options.signal),
    ]);
    const relevant = items.filter((s) => wantsLoadBalancer(s) || needsCleanup(s));
    const reports = await mapLimit(relevant, deps.concurrency, async (service) => {
      try {
        // The listed Service is fresh enough unless another reconcile of it ran since the list.
        return await run(serviceKey(service), (stale) =>
          stale
            ? readAndSync(deps, service.metadata?.namespace ?? '', service.metadata?.name ?? '', options)
            : syncFetched(deps, service, () => Promise.resolve(nodes), options),
        );
      } catch (error) {
        const key = serviceKey(service);
        options.log.warn({ key, err: error }, 'service not reconciled');
        return { key, result: 'failed', changes: [], error: apiMessage(error) };
      }
    });
    return [...reports, ...(await releaseOrphans(deps, items, options))];
  });
}

/**
 * The load balancers the provider lists (when it can: `listLoadBalancers` is optional) whose
 * Service is not among `listed` and, read again from the API server, is gone or has another uid:
 * each is deleted with ensureLoadBalancerDeleted. They are what cleanup never reached — a Service
 * whose finalizer was removed by hand, or one deleted before its finalizer was set, while no
 * delete event reached service-lb. The list is a claim; only the API server's answer deletes.
 */
async function releaseOrphans(
  deps: ServiceLbDeps,
  listed: readonly V1Service[],
  options: ServiceSyncOptions,
): Promise<ObjectReport[]> {
  const { loadBalancer } = deps;
  if (loadBalancer.listLoadBalancers === undefined) return [];
  let owned: OwnedLoadBalancer[];
  try {
    owned = await loadBalancer.listLoadBalancers(deps.clusterName, options.signal);
  } catch (error) {
    options.log.warn({ err: error }, 'could not list the load balancers to release those without a Service');
    return [{ key: 'LoadBalancers', result: 'failed', changes: [], error: (error as Error).message }];
  }
  const live = new Set(listed.map((service) => service.metadata?.uid ?? ''));
  const suspects = owned.filter((lb) => lb.service.uid !== '' && !live.has(lb.service.uid));
  const reports = await mapLimit(suspects, deps.concurrency, async (lb) => {
    const key = `Service/${lb.service.namespace}/${lb.service.name}`;
    try {
      return await deps.serializer.run(key, () => releaseOrphan(deps, lb, key, options));
    } catch (error) {
      options.log.warn({ key, loadBalancer: lb.name, err: error }, 'load balancer without a Service not released');
      return { key, result: 'failed', changes: [], error: (error as Error).message };
    }
  });
  return reports.filter((report): report is ObjectReport => report !== undefined);
}

// Deletes `lb` unless the API server has its Service (same namespace, name and uid); undefined
// when it does (created after the list was taken: nothing to report).
async function releaseOrphan(
  deps: ServiceLbDeps,
  lb: OwnedLoadBalancer,
  key: string,
  options: ServiceSyncOptions,
): Promise<ObjectReport | undefined> {
  const { namespace, name, uid } = lb.service;
  const current = await readService(deps.core, namespace, name);
  if (current?.metadata?.uid === uid) return undefined;
  // The Service as the provider recorded it: all that ensureLoadBalancerDeleted needs to find it.
  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { namespace, name, uid },
    spec: { type: 'LoadBalancer' },
  };
  const run: Run = { deps, options, service, key, changes: [] };
  await event(run, { type: 'Normal', reason: 'DeletingLoadBalancer', message: 'Deleting load balancer' });
  try {
    await cloud(run, 'ensureLoadBalancerDeleted', () =>
      deps.loadBalancer.ensureLoadBalancerDeleted(deps.clusterName, service, options.signal),
    );
  } catch (error) {
    await event(run, {
      type: 'Warning',
      reason: 'DeleteLoadBalancerFailed',
      message: `Error deleting load balancer: ${(error as Error).message}`,
    });
    throw error;
  }
  await event(run, { type: 'Normal', reason: 'DeletedLoadBalancer', message: 'Deleted load balancer' });
  const why = current === undefined ? 'the Service is gone' : `the Service now has uid ${current.metadata?.uid ?? ''}`;
  return { key, result: 'orphan-deleted', changes: run.changes, note: `load balancer ${lb.name} (uid ${uid}): ${why}` };
}

function serviceKey(service: V1Service): string {
  return `Service/${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

async function readService(core: CoreV1Api, namespace: string, name: string): Promise<V1Service | undefined> {
  try {
    return await core.readNamespacedService({ namespace, name });
  } catch (error) {
    if (apiStatus(error) === 404) return undefined;
    throw error;
  }
}

async function syncFetched(
  deps: ServiceLbDeps,
  service: V1Service,
  nodes: () => Promise<readonly V1Node[]>,
  options: ServiceSyncOptions,
): Promise<ObjectReport> {
  const run: Run = { deps, options, service, key: serviceKey(service), changes: [] };
  const cleanup = needsCleanup(service);
  if (!cleanup && !wantsLoadBalancer(service)) return { key: run.key, result: 'ignored', changes: [] };
  try {
    const result = cleanup ? await deleteBranch(run) : await ensureBranch(run, await nodes());
    return { key: run.key, result, changes: run.changes };
  } catch (error) {
    await event(run, {
      type: 'Warning',
      reason: 'SyncLoadBalancerFailed',
      message: `Error syncing load balancer: ${(error as Error).message}`,
    });
    throw error;
  }
}

async function deleteBranch(run: Run): Promise<string> {
  const { deps, service } = run;
  let exists: boolean;
  try {
    exists = (await deps.loadBalancer.getLoadBalancer(deps.clusterName, service, run.options.signal)) !== undefined;
  } catch (error) {
    throw new Error(`failed to check if load balancer exists before cleanup: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (exists) {
    await event(run, { type: 'Normal', reason: 'DeletingLoadBalancer', message: 'Deleting load balancer' });
    await cloud(run, 'ensureLoadBalancerDeleted', () =>
      deps.loadBalancer.ensureLoadBalancerDeleted(deps.clusterName, service, run.options.signal),
    ).catch((error: unknown) => {
      if (findCause(error, ImplementedElsewhereError)) return;
      throw new Error(`failed to delete load balancer: ${(error as Error).message}`, { cause: error });
    });
  }
  await removeFinalizer(run);
  await event(run, { type: 'Normal', reason: 'DeletedLoadBalancer', message: 'Deleted load balancer' });
  await patchStatus(run, {}, null);
  return exists ? 'deleted' : 'cleaned-up';
}

async function ensureBranch(run: Run, nodes: readonly V1Node[]): Promise<string> {
  const spec = specFingerprint(run.service);
  const nodeSet = nodesFingerprint(nodes);
  const record = syncRecord(run.service);
  if (record?.spec === spec && hasFinalizer(run.service)) {
    if (record.nodes === nodeSet) return 'unchanged';
    if (await updateHosts(run, nodes)) {
      await patchStatus(run, run.service.status?.loadBalancer ?? {}, { spec, nodes: nodeSet });
      return 'hosts-updated';
    }
  }
  return ensure(run, nodes, { spec, nodes: nodeSet });
}

// UpdateLoadBalancer for a changed node set. False when it failed and the load balancer exists:
// then, as upstream, the Service is ensured in full (here, at once).
async function updateHosts(run: Run, nodes: readonly V1Node[]): Promise<boolean> {
  const { deps, service } = run;
  try {
    await cloud(run, 'updateLoadBalancer', () =>
      deps.loadBalancer.updateLoadBalancer(deps.clusterName, service, nodes, run.options.signal),
    );
  } catch (error) {
    if (findCause(error, ImplementedElsewhereError)) return true;
    const exists = await deps.loadBalancer.getLoadBalancer(deps.clusterName, service, run.options.signal).then(
      (s) => s !== undefined,
      () => true,
    );
    if (!exists) return true;
    const message = `Error updating load balancer with new hosts ${nodeNamesForMessage(nodes)} [node names limited, total number of nodes: ${nodes.length}], error: ${(error as Error).message}`;
    await event(run, { type: 'Warning', reason: 'UpdateLoadBalancerFailed', message });
    return false;
  }
  if (nodes.length === 0)
    await event(run, {
      type: 'Warning',
      reason: 'UnAvailableLoadBalancer',
      message: 'There are no available nodes for LoadBalancer',
    });
  else
    await event(run, {
      type: 'Normal',
      reason: 'UpdatedLoadBalancer',
      message: 'Updated load balancer with new hosts',
    });
  return true;
}

async function ensure(run: Run, nodes: readonly V1Node[], record: { spec: string; nodes: string }): Promise<string> {
  const { deps, service } = run;
  await event(run, { type: 'Normal', reason: 'EnsuringLoadBalancer', message: 'Ensuring load balancer' });
  await addFinalizer(run);
  if (nodes.length === 0)
    await event(run, {
      type: 'Warning',
      reason: 'UnAvailableLoadBalancer',
      message: 'There are no available nodes for LoadBalancer',
    });
  let status: V1LoadBalancerStatus | undefined;
  try {
    status = await cloud(run, 'ensureLoadBalancer', () =>
      deps.loadBalancer.ensureLoadBalancer(deps.clusterName, service, nodes, run.options.signal),
    );
  } catch (error) {
    if (findCause(error, ImplementedElsewhereError)) {
      await patchStatus(run, service.status?.loadBalancer ?? {}, record);
      return 'implemented-elsewhere';
    }
    throw new Error(`failed to ensure load balancer: ${(error as Error).message}`, { cause: error });
  }
  if (run.options.dryRun) return 'ensured';
  if (status === undefined) throw new Error('service status returned by EnsureLoadBalancer is nil');
  await event(run, { type: 'Normal', reason: 'EnsuredLoadBalancer', message: 'Ensured load balancer' });
  await patchStatus(run, status, record);
  return 'ensured';
}

// A mutating provider call: made, or on a dry run only reported.
async function cloud<T>(run: Run, method: string, call: () => Promise<T>): Promise<T | undefined> {
  run.changes.push({ action: 'cloud', target: run.key, detail: { method } });
  return run.options.dryRun ? undefined : call();
}

async function event(run: Run, spec: Omit<EventSpec, 'component'>): Promise<void> {
  const metadata = run.service.metadata;
  const reference = {
    apiVersion: 'v1',
    kind: 'Service',
    name: metadata?.name ?? '',
    namespace: metadata?.namespace ?? '',
    uid: metadata?.uid ?? '',
  };
  const body = eventFor(reference, { ...spec, component: 'service-controller' });
  run.changes.push({
    action: 'event',
    target: run.key,
    detail: { type: spec.type, reason: spec.reason, message: spec.message },
  });
  if (run.options.dryRun) return;
  await recordEvent(run.deps.core, body).catch((error: unknown) => {
    run.options.log.warn({ key: run.key, err: error }, 'event not recorded');
  });
}

// Finalizers are patched as upstream does: a strategic merge patch on services/status, which adds
// to (or deletes from) the list without replacing other controllers' finalizers.
async function addFinalizer(run: Run): Promise<void> {
  if (hasFinalizer(run.service)) return;
  await patchServiceStatus(
    run,
    { metadata: { finalizers: [finalizer] } },
    strategicMergePatch,
    'failed to add load balancer cleanup finalizer',
  );
}

async function removeFinalizer(run: Run): Promise<void> {
  if (!hasFinalizer(run.service)) return;
  await patchServiceStatus(
    run,
    { metadata: { '$deleteFromPrimitiveList/finalizers': [finalizer] } },
    strategicMergePatch,
    'failed to remove load balancer cleanup finalizer',
  );
}

// The ingress and the sync record in one merge patch; skipped when neither changed. `record` null
// removes it (after cleanup). A Service gone meanwhile (its finalizer just removed) is no error.
async function patchStatus(
  run: Run,
  status: V1LoadBalancerStatus,
  record: { spec: string; nodes: string } | null,
): Promise<void> {
  const body = statusPatch(run.service, status, record);
  if (body === undefined) return;
  try {
    await patchServiceStatus(run, body, mergePatch, 'failed to update load balancer status');
  } catch (error) {
    if (apiStatus((error as Error).cause) !== 404) throw error;
  }
}

// The merge patch that brings the ingress and the record to what they should be, or undefined.
function statusPatch(
  service: V1Service,
  status: V1LoadBalancerStatus,
  record: { spec: string; nodes: string } | null,
): object | undefined {
  const current = recordText(service);
  const next = record === null ? null : JSON.stringify(record);
  const statusChanged = !loadBalancerStatusEqual(service.status?.loadBalancer, status);
  if (!statusChanged && current === next) return undefined;
  const patch: { metadata?: object; status?: object } = {};
  if (current !== next) patch.metadata = { annotations: { [syncedAnnotation]: next } };
  if (statusChanged) patch.status = { loadBalancer: { ingress: nonEmpty(status.ingress) } };
  return patch;
}

function recordText(service: V1Service): string | null {
  return service.metadata?.annotations?.[syncedAnnotation] ?? null;
}

// A merge patch removes the list with null; an empty list would be stored as one.
function nonEmpty<T>(list: T[] | undefined): T[] | null {
  return list !== undefined && list.length > 0 ? list : null;
}

async function patchServiceStatus(
  run: Run,
  body: object,
  contentType: typeof mergePatch,
  failure: string,
): Promise<void> {
  const name = run.service.metadata?.name ?? '';
  const namespace = run.service.metadata?.namespace ?? '';
  run.changes.push({ action: 'patch-status', target: run.key, detail: body });
  try {
    await run.deps.core.patchNamespacedServiceStatus(
      run.options.dryRun ? { name, namespace, body, dryRun: 'All' } : { name, namespace, body },
      contentType,
    );
  } catch (error) {
    throw new Error(`${failure}: ${apiMessage(error)}`, { cause: error });
  }
}

/**
 * A Service that is gone. With a finalizer that cannot happen before cleanup; without one (removed
 * by hand, or never added), a delete event's last known object still lets its load balancer go.
 */
async function vanished(deps: ServiceLbDeps, key: string, options: ServiceSyncOptions): Promise<ObjectReport> {
  const last = options.lastKnown as V1Service | undefined;
  if (last?.kind !== 'Service' || !wantsLoadBalancer(last) || serviceKey(last) !== key)
    return { key, result: 'not-found', changes: [] };
  if ((await deps.loadBalancer.getLoadBalancer(deps.clusterName, last, options.signal)) === undefined)
    return { key, result: 'not-found', changes: [] };
  const owner = await liveServiceWithUid(deps.core, last.metadata?.uid);
  if (owner !== undefined) {
    // A forged (or confused) delete: the load balancer belongs to a Service that exists.
    return {
      key,
      result: 'not-found',
      changes: [],
      note: `delete event not acted on: its uid belongs to the live ${owner}`,
    };
  }
  const run: Run = { deps, options, service: last, key, changes: [] };
  await event(run, { type: 'Normal', reason: 'DeletingLoadBalancer', message: 'Deleting load balancer' });
  try {
    await cloud(run, 'ensureLoadBalancerDeleted', () =>
      deps.loadBalancer.ensureLoadBalancerDeleted(deps.clusterName, last, options.signal),
    );
  } catch (error) {
    await event(run, {
      type: 'Warning',
      reason: 'DeleteLoadBalancerFailed',
      message: `Error deleting load balancer: ${(error as Error).message}`,
    });
    throw error;
  }
  await event(run, { type: 'Normal', reason: 'DeletedLoadBalancer', message: 'Deleted load balancer' });
  return { key, result: 'deleted', changes: run.changes };
}

// The live Service carrying `uid`, if any. A delete event's object is a claim, and a provider may
// name its load balancer by the uid alone (upstream's default name is "a" + the uid), so before
// deleting on such a claim, the API server is asked. One LIST, served from its watch cache, only on
// this rare path (a Service deleted without cirrus's finalizer).
async function liveServiceWithUid(core: CoreV1Api, uid: string | undefined): Promise<string | undefined> {
  if (uid === undefined || uid === '') return 'Service (the event has no uid)';
  const { items } = await core.listServiceForAllNamespaces({ resourceVersion: '0' });
  const owner = items.find((service) => service.metadata?.uid === uid);
  return owner === undefined ? undefined : serviceKey(owner);
}
