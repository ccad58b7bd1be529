// The load balancers whose Service is gone: the one a delete event names (vanished), and those the
// provider lists that no Service has any more (releaseOrphans). A delete event's object and the
// provider's list are claims: the API server's answer decides what is deleted.

import type { V1Service } from '@kubernetes/client-node';
import type { Core } from '../../shared/kube/core.ts';
import type { OwnedLoadBalancer } from '../../shared/cloud/provider.ts';
import { mapLimit } from '../../shared/concurrency.ts';
import type { ObjectReport } from '../../shared/host/function.ts';
import { wantsLoadBalancer } from './predicates.ts';
import {
  processLoadBalancerDelete,
  readService,
  serviceKey,
  type Run,
  type ServiceLbDeps,
  type ServiceSyncOptions,
} from './run.ts';

/**
 * The load balancers the provider lists (when it can: `listLoadBalancers` is optional) whose
 * Service is not among `listed` and, read again from the API server, is gone or has another uid:
 * each is deleted with ensureLoadBalancerDeleted. They are what cleanup never reached — a Service
 * whose finalizer was removed by hand, or one deleted before its finalizer was set, while no
 * delete event reached service-lb. The list is a claim; only the API server's answer deletes.
 */
export async function releaseOrphans(
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
  await processLoadBalancerDelete(run);
  const why = current === undefined ? 'the Service is gone' : `the Service now has uid ${current.metadata?.uid ?? ''}`;
  return { key, result: 'orphan-deleted', changes: run.changes, note: `load balancer ${lb.name} (uid ${uid}): ${why}` };
}

/**
 * A Service that is gone. With a finalizer that cannot happen before cleanup; without one (removed
 * by hand, or never added), a delete event's last known object still lets its load balancer go.
 */
export async function vanished(deps: ServiceLbDeps, key: string, options: ServiceSyncOptions): Promise<ObjectReport> {
  const last = options.lastKnown as V1Service | undefined;
  if (last?.kind !== 'Service' || !wantsLoadBalancer(last, deps.loadBalancerClass) || serviceKey(last) !== key)
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
  await processLoadBalancerDelete(run);
  return { key, result: 'deleted', changes: run.changes };
}

// The live Service carrying `uid`, if any. A delete event's object is a claim, and a provider may
// name its load balancer by the uid alone (upstream's default name is "a" + the uid), so before
// deleting on such a claim, the API server is asked. One LIST, served from its watch cache, only on
// this rare path (a Service deleted without cirrus's finalizer).
async function liveServiceWithUid(core: Core, uid: string | undefined): Promise<string | undefined> {
  if (uid === undefined || uid === '') return 'Service (the event has no uid)';
  const { items } = await core.listServiceForAllNamespaces({ resourceVersion: '0' });
  const owner = items.find((service) => service.metadata?.uid === uid);
  return owner === undefined ? undefined : serviceKey(owner);
}
