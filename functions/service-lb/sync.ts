// The service controller's reconcile (k8s.io/cloud-provider controllers/service/controller.go,
// syncService and syncLoadBalancerIfNeeded), one Service per call and without memory: what the Go
// controller caches (the last synced Service and node set) is a fingerprint recorded on the Service
// itself (annotation `syncedAnnotation`), written with the status after each successful sync. A
// Service whose spec and node set match its record costs one GET, and no cloud call: the node list
// comes from the instance's last one when the event says it is current (./nodes.ts), so a reconcile
// of one Service lists nothing. A verified claim (the relay's copy, ADR 0022) saves the GET: its
// first write carries its resourceVersion, and a 409 reads the Service and starts over without
// repeating a provider call made with the same inputs.

import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { findCause, ImplementedElsewhereError } from '../../shared/cloud/errors.ts';
import { mapLimit } from '../../shared/concurrency.ts';
import type { ObjectReport } from '../../shared/host/function.ts';
import { apiMessage } from '../../shared/kube/api.ts';
import { fromClaim } from '../../shared/kube/claims.ts';
import { releaseOrphans, vanished } from './orphans.ts';
import { dryRunResult } from './plan.ts';
import {
  hasFinalizer,
  needsCleanup,
  nodeNamesForMessage,
  nodesFingerprint,
  specFingerprint,
  syncRecord,
  type SyncRecord,
  wantsLoadBalancer,
} from './predicates.ts';
import {
  addFinalizer,
  cloud,
  deleted,
  deleting,
  ensureDeleted,
  event,
  isConflict,
  patchStatus,
  readService,
  removeFinalizer,
  serviceKey,
  type Applied,
  type Run,
  type ServiceLbDeps,
  type ServiceSyncOptions,
} from './run.ts';

/**
 * Reconciles the Service `namespace/name`. An event whose object has no load balancer to ensure
 * or clean up (an ApiServerSource sends every Service change) costs no request. A verified claim of
 * a Service whose load balancer is ensured for its spec is worked from (a node-set update, or
 * nothing), its first write conditional on its resourceVersion; a cleanup (it deletes), a full
 * ensure and anything else is decided on the Service as the API server has it.
 */
export async function syncService(
  deps: ServiceLbDeps,
  namespace: string,
  name: string,
  options: ServiceSyncOptions,
): Promise<ObjectReport> {
  const claimed = options.claimed as V1Service | undefined;
  if (
    claimed !== undefined &&
    !wantsLoadBalancer(claimed, deps.loadBalancerClass) &&
    !needsCleanup(claimed, deps.loadBalancerClass)
  )
    return { key: `Service/${namespace}/${name}`, result: 'ignored', changes: [] };
  const key = `Service/${namespace}/${name}`;
  return deps.serializer.run(key, (waited) =>
    fromClaim(deps.claims, key, { options, waited }, (claim) => {
      const start = claim as V1Service | undefined;
      if (start === undefined || !(inSync(start, deps.loadBalancerClass) || firstEnsure(start, deps.loadBalancerClass)))
        return readAndSync(deps, namespace, name, options);
      return syncClaimed(deps, start, options);
    }),
  );
}

// A claim is worked from when it shows the load balancer ensured for its spec (the record and the
// finalizer): what is left is a node-set update, or nothing. A cleanup deletes, and is decided on
// the Service as read; so is a full ensure, whose most frequent claim is stale in a way the
// relay cannot help: a queued event sent before the relay's watch has the status write of the
// reconcile before it (the record missing), which would ensure the load balancer twice.
function inSync(service: V1Service, loadBalancerClass: string | undefined): boolean {
  const record = syncRecord(service);
  return (
    !needsCleanup(service, loadBalancerClass) &&
    hasFinalizer(service) &&
    record?.spec === specFingerprint(service) &&
    record.class === loadBalancerClass
  );
}

// A claim of a Service that wants a load balancer and does not carry the finalizer yet: a first
// ensure. It is worked from, because its first step is the finalizer write, which carries the
// claim's resourceVersion and comes before any Event or provider call (./run.ts addFinalizer): a
// stale claim — such as the next event of a Service whose ensure has just added the finalizer — is
// refused there, before anything is done, and the Service is read. With the finalizer already on
// (a spec change of an ensured Service), no write would come before the provider's ensure, so that
// one is decided on a read (inSync above).
function firstEnsure(service: V1Service, loadBalancerClass: string | undefined): boolean {
  return (
    wantsLoadBalancer(service, loadBalancerClass) && !needsCleanup(service, loadBalancerClass) && !hasFinalizer(service)
  );
}

// A verified claim as the starting point. Its first write (the finalizer, else the status) carries
// its resourceVersion; refused (409), the Service is read and reconciled again, and a provider call
// this attempt made is not repeated when the Service read asks for the same one.
async function syncClaimed(
  deps: ServiceLbDeps,
  service: V1Service,
  options: ServiceSyncOptions,
): Promise<ObjectReport> {
  const nodes = (): Promise<readonly V1Node[]> => deps.nodes.nodes(options.nodeSet, options.signal, options.log);
  const run: Run = {
    deps,
    options,
    service,
    key: serviceKey(service),
    changes: [],
    unconfirmed: service.metadata?.resourceVersion,
  };
  try {
    return await syncRun(run, nodes);
  } catch (error) {
    if (!isConflict(error)) throw error;
    options.log.debug({ key: run.key }, 'the claim was stale: reading the Service');
    const { namespace = '', name = '' } = service.metadata ?? {};
    const report = await readAndSync(deps, namespace, name, { ...options, before: run.applied });
    return { ...report, changes: [...run.changes, ...report.changes] };
  }
}

// What an earlier attempt of the reconcile applied, when there was one (a stale claim's).
type Attempt = ServiceSyncOptions & { readonly before?: Applied | undefined };

async function readAndSync(
  deps: ServiceLbDeps,
  namespace: string,
  name: string,
  options: Attempt,
): Promise<ObjectReport> {
  const key = `Service/${namespace}/${name}`;
  const service = await readService(deps.core, namespace, name);
  if (service === undefined) return vanished(deps, key, options);
  // The node set is needed only when the load balancer is ensured, not for a cleanup.
  const nodes = (): Promise<readonly V1Node[]> => deps.nodes.nodes(options.nodeSet, options.signal, options.log);
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
      deps.nodes.nodes(undefined, options.signal, options.log),
    ]);
    const relevant = items.filter(
      (s) => wantsLoadBalancer(s, deps.loadBalancerClass) || needsCleanup(s, deps.loadBalancerClass),
    );
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

async function syncFetched(
  deps: ServiceLbDeps,
  service: V1Service,
  nodes: () => Promise<readonly V1Node[]>,
  options: Attempt,
): Promise<ObjectReport> {
  return syncRun({ deps, options, service, key: serviceKey(service), changes: [], before: options.before }, nodes);
}

async function syncRun(run: Run, nodes: () => Promise<readonly V1Node[]>): Promise<ObjectReport> {
  const { service } = run;
  const cleanup = needsCleanup(service, run.deps.loadBalancerClass);
  if (!cleanup && !wantsLoadBalancer(service, run.deps.loadBalancerClass))
    return { key: run.key, result: 'ignored', changes: [] };
  try {
    const result = cleanup ? await deleteBranch(run) : await ensureBranch(run, await nodes());
    return { key: run.key, result, changes: run.changes };
  } catch (error) {
    // A stale claim's refused write is no failure: the caller reads the Service and goes on.
    if (run.unconfirmed !== undefined && isConflict(error)) throw error;
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
    await event(run, deleting);
    await ensureDeleted(run).catch((error: unknown) => {
      if (findCause(error, ImplementedElsewhereError)) return;
      throw new Error(`failed to delete load balancer: ${(error as Error).message}`, { cause: error });
    });
  }
  await removeFinalizer(run);
  await event(run, deleted);
  await patchStatus(run, {}, null);
  return exists ? 'deleted' : 'cleaned-up';
}

async function ensureBranch(run: Run, nodes: readonly V1Node[]): Promise<string> {
  const spec = specFingerprint(run.service);
  const nodeSet = nodesFingerprint(nodes);
  const record = syncRecord(run.service);
  const next = recordOf(spec, nodeSet, run.deps.loadBalancerClass);
  if (record?.spec === spec && record.class === next.class && hasFinalizer(run.service)) {
    if (record.nodes === nodeSet) return 'unchanged';
    if (await hostsUpdated(run, nodes, next)) {
      await patchStatus(run, run.service.status?.loadBalancer ?? {}, next);
      return run.options.dryRun ? dryRunResult(run, nodes, 'hosts-updated') : 'hosts-updated';
    }
  }
  return ensureOnce(run, nodes, next);
}

// The record of a sync: the fingerprints, and the class it was made under when there is one.
function recordOf(spec: string, nodes: string, loadBalancerClass: string | undefined): SyncRecord {
  return loadBalancerClass === undefined ? { spec, nodes } : { spec, nodes, class: loadBalancerClass };
}

// The ensure, unless the attempt before made it with these inputs: then only what followed it.
async function ensureOnce(run: Run, nodes: readonly V1Node[], record: SyncRecord): Promise<string> {
  const ensured = madeBefore(run, record)?.status;
  return ensured === undefined ? ensure(run, nodes, record) : ensuredBefore(run, ensured, record);
}

// The call an earlier attempt of this reconcile (from a stale claim) made with these inputs.
function madeBefore(run: Run, record: SyncRecord): Applied | undefined {
  const { before } = run;
  return before?.spec === record.spec && before.nodes === record.nodes ? before : undefined;
}

// The node set applied: by the attempt before, or now (false: it failed, ensure in full).
async function hostsUpdated(run: Run, nodes: readonly V1Node[], record: SyncRecord): Promise<boolean> {
  if (madeBefore(run, record) !== undefined) return true;
  const { metrics } = run.deps;
  const update = (): Promise<boolean> => updateHosts(run, nodes);
  if (!(await (run.options.dryRun || metrics === undefined ? update() : metrics.hostUpdate(update)))) return false;
  run.applied = record;
  return true;
}

// The load balancer was ensured for this spec and node set by the attempt before (its Events
// recorded): what is left is the finalizer and the status.
async function ensuredBefore(run: Run, status: V1LoadBalancerStatus, record: SyncRecord): Promise<string> {
  await addFinalizer(run);
  await patchStatus(run, status, record);
  return 'ensured';
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

async function ensure(run: Run, nodes: readonly V1Node[], record: SyncRecord): Promise<string> {
  const { deps, service } = run;
  const ensuring = { type: 'Normal', reason: 'EnsuringLoadBalancer', message: 'Ensuring load balancer' } as const;
  // Upstream records the Event, then adds the finalizer. From a claim not yet confirmed the
  // finalizer write comes first: it is the write that confirms the claim (firstEnsure), and a
  // refused claim must have said nothing.
  const claimed = run.unconfirmed !== undefined;
  if (!claimed) await event(run, ensuring);
  await addFinalizer(run);
  if (claimed) await event(run, ensuring);
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
    // A dry run made no ensure: what it would do is the provider's plan (./plan.ts).
    if (run.options.dryRun) return await dryRunResult(run, nodes, 'ensured');
  } catch (error) {
    if (findCause(error, ImplementedElsewhereError)) {
      await patchStatus(run, service.status?.loadBalancer ?? {}, record);
      return 'implemented-elsewhere';
    }
    throw new Error(`failed to ensure load balancer: ${(error as Error).message}`, { cause: error });
  }
  if (status === undefined) throw new Error('service status returned by EnsureLoadBalancer is nil');
  run.applied = { ...record, status };
  await event(run, { type: 'Normal', reason: 'EnsuredLoadBalancer', message: 'Ensured load balancer' });
  await patchStatus(run, status, record);
  return 'ensured';
}
