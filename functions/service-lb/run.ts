// One service-lb reconcile's working state and what it writes: its provider calls (reported, and on
// a dry run only reported), its Events, the finalizer and the status with the sync record. The
// service controller's helpers of the same names (k8s.io/cloud-provider controllers/service/
// controller.go: processLoadBalancerDelete, addFinalizer, removeFinalizer, patchStatus).

import type { V1LoadBalancerStatus, V1ObjectReference, V1Service } from '@kubernetes/client-node';
import type { Core } from '../../shared/kube/core.ts';
import type { Logger } from 'pino';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import type { KeyedSerializer } from '../../shared/concurrency.ts';
import type { ClaimLedger } from '../../shared/kube/claims.ts';
import type { Change } from '../../shared/host/function.ts';
import { apiMessage, apiStatus, mergePatch, strategicMergePatch } from '../../shared/kube/api.ts';
import { eventFor, recordEvent, type EventSpec, type RecentEvents } from '../../shared/kube/events.ts';
import type { ServiceControllerMetrics } from './metrics.ts';
import type { Nodes } from './nodes.ts';
import { finalizer, hasFinalizer, loadBalancerStatusEqual, syncedAnnotation, type SyncRecord } from './predicates.ts';

/** What the service-lb reconcile works with. */
export interface ServiceLbDeps {
  readonly core: Core;
  readonly loadBalancer: LoadBalancer;
  readonly clusterName: string;
  /** `--load-balancer-class`: the class of the Services served (predicates.ts wantsLoadBalancer); undefined for none. */
  readonly loadBalancerClass?: string | undefined;
  /** Services handled at once by a pass over all of them. */
  readonly concurrency: number;
  /** One reconcile per Service at a time, whatever asked for it: two ensures at once could make two load balancers. */
  readonly serializer: KeyedSerializer;
  /** The claims this instance started from (shared/kube/claims.ts): a repeated one is read over. */
  readonly claims: ClaimLedger;
  /** The eligible nodes, listed only when the instance's last list is not known to be current. */
  readonly nodes: Nodes;
  /** Warnings this instance recorded lately: a failure retried again and again records its Event once a window. */
  readonly recentEvents?: RecentEvents;
  /** The service controller's series under upstream's names (./metrics.ts). */
  readonly metrics?: ServiceControllerMetrics;
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
  /** The claim came over a verified channel: the reconcile may start from it (ADR 0022). */
  readonly claimVerified?: boolean;
}

/** A provider call a reconcile made, by its inputs' fingerprints (and the ensure's status). */
export interface Applied {
  readonly spec: string;
  readonly nodes: string;
  readonly status?: V1LoadBalancerStatus;
}

// One reconcile's working state: the Service, the changes made so far (for the report).
export interface Run {
  readonly deps: ServiceLbDeps;
  readonly options: ServiceSyncOptions;
  readonly service: V1Service;
  readonly key: string;
  readonly changes: Change[];
  /**
   * The resourceVersion of a Service that is a claim, not a read (ADR 0022): the next write carries
   * it as a precondition; once one has succeeded the claim is confirmed and this is cleared.
   */
  unconfirmed?: string | undefined;
  /** The provider call this attempt made, for a retry after a 409 (`before`). */
  applied?: Applied;
  /** What an earlier attempt of this reconcile applied: a retry needing the same call skips it. */
  readonly before?: Applied | undefined;
}

/** A write refused because its precondition failed: the claim it was decided from is stale. */
export function isConflict(error: unknown): boolean {
  return apiStatus(error) === 409 || apiStatus((error as { cause?: unknown } | undefined)?.cause) === 409;
}

/** `Service/<namespace>/<name>`: a Service's key in reports and in the serializer. */
export function serviceKey(service: V1Service): string {
  return `Service/${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

/** The Service as the API server has it now; undefined when it is gone. */
export async function readService(core: Core, namespace: string, name: string): Promise<V1Service | undefined> {
  try {
    return await core.readNamespacedService({ namespace, name });
  } catch (error) {
    if (apiStatus(error) === 404) return undefined;
    throw error;
  }
}

// The Events around a load balancer's deletion, in upstream's words.
export const deleting = { type: 'Normal', reason: 'DeletingLoadBalancer', message: 'Deleting load balancer' } as const;
export const deleted = { type: 'Normal', reason: 'DeletedLoadBalancer', message: 'Deleted load balancer' } as const;

// The load balancer of a Service that is gone, deleted with its events: upstream's
// processLoadBalancerDelete (k8s.io/cloud-provider controllers/service/controller.go). The cleanup
// of a Service that is still there (./sync.ts deleteBranch) shares its steps, with the finalizer between them.
export async function processLoadBalancerDelete(run: Run): Promise<void> {
  await event(run, deleting);
  try {
    await ensureDeleted(run);
  } catch (error) {
    await event(run, {
      type: 'Warning',
      reason: 'DeleteLoadBalancerFailed',
      message: `Error deleting load balancer: ${(error as Error).message}`,
    });
    throw error;
  }
  await event(run, deleted);
}

export async function ensureDeleted(run: Run): Promise<void> {
  const { deps, service, options } = run;
  await cloud(run, 'ensureLoadBalancerDeleted', () =>
    deps.loadBalancer.ensureLoadBalancerDeleted(deps.clusterName, service, options.signal),
  );
}

// A mutating provider call: made, or on a dry run only reported.
export async function cloud<T>(run: Run, method: string, call: () => Promise<T>): Promise<T | undefined> {
  run.changes.push({ action: 'cloud', target: run.key, detail: { method } });
  return run.options.dryRun ? undefined : call();
}

function referenceTo(service: V1Service): V1ObjectReference {
  const metadata = service.metadata;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    name: metadata?.name ?? '',
    namespace: metadata?.namespace ?? '',
    uid: metadata?.uid ?? '',
  };
}

export async function event(run: Run, spec: Omit<EventSpec, 'component'>): Promise<void> {
  const reference = referenceTo(run.service);
  const body = eventFor(reference, { ...spec, component: 'service-controller' });
  run.changes.push({
    action: 'event',
    target: run.key,
    detail: { type: spec.type, reason: spec.reason, message: body.message },
  });
  if (run.options.dryRun) return;
  if (spec.type === 'Warning' && run.deps.recentEvents?.admit(body) === false) {
    run.options.log.debug({ key: run.key, reason: spec.reason }, 'same warning recorded lately; not recorded again');
    return;
  }
  await recordEvent(run.deps.core, body).catch((error: unknown) => {
    run.options.log.warn({ key: run.key, err: error }, 'event not recorded');
  });
}

// Finalizers are patched as upstream does: a strategic merge patch on services/status, which adds
// to (or deletes from) the list without replacing other controllers' finalizers.
export async function addFinalizer(run: Run): Promise<void> {
  if (hasFinalizer(run.service)) return;
  await patchServiceStatus(
    run,
    { metadata: { finalizers: [finalizer] } },
    strategicMergePatch,
    'failed to add load balancer cleanup finalizer',
  );
}

export async function removeFinalizer(run: Run): Promise<void> {
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
export async function patchStatus(run: Run, status: V1LoadBalancerStatus, record: SyncRecord | null): Promise<void> {
  const body = statusPatch(run.service, status, record);
  if (body === undefined) return;
  try {
    await patchServiceStatus(run, body, mergePatch, 'failed to update load balancer status');
  } catch (error) {
    if (apiStatus((error as Error).cause) !== 404) throw error;
  }
}

// The merge patch that brings the ingress and the record to what they should be, or undefined.
function statusPatch(service: V1Service, status: V1LoadBalancerStatus, record: SyncRecord | null): object | undefined {
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
  // A claim's first write holds only if the Service is still the version claimed (the API server
  // compares metadata.resourceVersion in a patch, on the status subresource too: 409 otherwise).
  const version = run.unconfirmed;
  const sent =
    version === undefined
      ? body
      : { ...body, metadata: { ...(body as { metadata?: object }).metadata, resourceVersion: version } };
  run.changes.push({ action: 'patch-status', target: run.key, detail: sent });
  try {
    await run.deps.core.patchNamespacedServiceStatus(
      run.options.dryRun ? { name, namespace, body: sent, dryRun: 'All' } : { name, namespace, body: sent },
      contentType,
    );
  } catch (error) {
    if (apiStatus(error) === 409) run.changes.pop(); // refused: not a change; the reconcile starts over
    throw new Error(`${failure}: ${apiMessage(error)}`, { cause: error });
  }
  run.unconfirmed = undefined;
}
