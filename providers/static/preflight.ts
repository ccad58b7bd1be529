// The static provider's preflight (CloudProvider.preflight): what service-lb's load balancers need
// of the cluster before the first Service is reconciled. Allocations are recorded in a ConfigMap
// (allocations.ts) in a namespace that only deployments (deploy/) and cirrus's own control planes
// create: against a cluster of one's own, without it every LoadBalancer Service would fail. The
// namespace is created when it is missing and the identity may, and refused when it is being
// deleted (the API server creates nothing in it, and what is there goes with it); the ConfigMap is
// left to the first allocation (allocations.ts creates it), but the rights to read, patch — and,
// when it does not exist yet, create — it are checked now.

import { CoreV1Api, type V1Namespace } from '@kubernetes/client-node';
import type { PreflightContext, PreflightReport } from '../../shared/cloud/provider.ts';
import { apiMessage, apiStatus } from '../../shared/kube/api.ts';
import { formatAccess, missingAccess, type ApiAccess } from '../../shared/kube/access.ts';
import { PARTS, partName, partNames } from './allocations.ts';
import type { AllocationsLocation } from './pools.ts';

/** Checks (and creates when it may) the namespace of the allocations ConfigMap, and the rights on it. */
export async function allocationsPreflight(
  location: AllocationsLocation,
  context: PreflightContext,
): Promise<PreflightReport> {
  if (!context.loadBalancers) return { created: [], problems: [] };
  const { namespace, configMap, namespaceFrom } = location;
  const where = `ConfigMaps ${namespace}/${partName(configMap, 0)} to ${partName(configMap, PARTS - 1)}`;
  const core = context.kubeConfig.makeApiClient(CoreV1Api);
  const created: string[] = [];
  const problems: string[] = [];
  const state = await namespaceState(core, namespace, context);
  if (typeof state === 'object') {
    problems.push(
      `the static provider records load balancer addresses in ${where} (${namespaceFrom}), but namespace ` +
        `${namespace} is being deleted (Terminating since ${state.since}), and the API server creates nothing in a ` +
        `namespace being deleted: wait until it is gone (kubectl get namespace ${namespace}), or set ` +
        'loadBalancers.allocations.namespace in the cloud-config to another namespace. A control plane without a ' +
        "namespace controller, such as cirrus cluster's, never finishes the deletion: docs/kind.md says how to " +
        'remove the namespace there',
    );
    return { created, problems };
  }
  // The parts, and the single ConfigMap of earlier versions, read and moved into them (allocations.ts).
  const names = [configMap, ...partNames(configMap)];
  const found = await Promise.all(
    partNames(configMap).map((name) =>
      core.readNamespacedConfigMap({ name, namespace }).then(
        () => true,
        (error: unknown) => {
          if (apiStatus(error) === 404 || apiStatus(error) === 403) return false;
          throw error;
        },
      ),
    ),
  );
  const exists = found.every(Boolean);
  const wanted: ApiAccess[] = names.flatMap((name) => [
    { group: '', resource: 'configmaps', verb: 'get', namespace, name },
    { group: '', resource: 'configmaps', verb: 'patch', namespace, name },
  ]);
  if (!exists) {
    wanted.push({ group: '', resource: 'configmaps', verb: 'create', namespace });
    const { made, problem: namespaceProblem } =
      state === 'missing' ? await createNamespace(core, namespace, context) : { made: false };
    if (made) created.push(`namespace ${namespace}`);
    if (namespaceProblem !== undefined) {
      problems.push(
        `the static provider records load balancer addresses in ${where} (${namespaceFrom}), but ${namespaceProblem}: ` +
          `create it (kubectl create namespace ${namespace}), or set loadBalancers.allocations.namespace in the ` +
          'cloud-config to a namespace that exists',
      );
      return { created, problems };
    }
  }
  const missing = await missingAccess(context.kubeConfig, wanted);
  if (missing.length > 0) {
    problems.push(
      `the static provider records load balancer addresses in ${where} (${namespaceFrom}), but this identity may not ` +
        `${missing.map(formatAccess).join(', ')}: grant them (the Role of static-provider/rbac.yaml` +
        `${exists ? '' : ', and the ConfigMaps of allocations.yaml beside it'}: in deploy/standalone/ for cirrus start, ` +
        'in deploy/knative/ for cirrus serve service-lb)',
    );
  }
  return { created, problems };
}

/**
 * The allocations namespace as this identity sees it: missing, there, being deleted (since when),
 * or unknown when the identity may not read it (the rights check on the ConfigMaps says the rest).
 */
async function namespaceState(
  core: CoreV1Api,
  namespace: string,
  context: PreflightContext,
): Promise<'missing' | 'present' | 'unknown' | { readonly since: string }> {
  const unreadable = await missingAccess(context.kubeConfig, [
    { group: '', resource: 'namespaces', verb: 'get', name: namespace },
  ]);
  if (unreadable.length > 0) return 'unknown';
  const found = await core.readNamespace({ name: namespace }).then(
    (object: V1Namespace) => object,
    (error: unknown) => {
      if (apiStatus(error) === 404) return undefined;
      throw error;
    },
  );
  if (found === undefined) return 'missing';
  const deleted = found.metadata?.deletionTimestamp;
  if (deleted !== undefined || found.status?.phase === 'Terminating')
    return { since: deleted === undefined ? 'an unknown time' : new Date(deleted).toISOString() };
  return 'present';
}

// Creates the missing namespace when the identity may: whether it was made now; a problem when it stays missing.
async function createNamespace(
  core: CoreV1Api,
  namespace: string,
  context: PreflightContext,
): Promise<{ made: boolean; problem?: string }> {
  if (!context.mayCreate) return { made: false, problem: `namespace ${namespace} does not exist` };
  const denied = await missingAccess(context.kubeConfig, [{ group: '', resource: 'namespaces', verb: 'create' }]);
  if (denied.length > 0)
    return {
      made: false,
      problem: `namespace ${namespace} does not exist, and this identity may not create namespaces`,
    };
  try {
    await core.createNamespace({
      body: { metadata: { name: namespace, labels: { 'app.kubernetes.io/part-of': 'cirrus' } } },
    });
  } catch (error) {
    if (apiStatus(error) === 409) return { made: false };
    return {
      made: false,
      problem: `namespace ${namespace} does not exist, and creating it failed: ${apiMessage(error)}`,
    };
  }
  context.log.info({ namespace }, `created namespace ${namespace} for the static provider's load balancer allocations`);
  return { made: true };
}
