// The static provider's preflight (CloudProvider.preflight): what service-lb's load balancers need
// of the cluster before the first Service is reconciled. Allocations are recorded in a ConfigMap
// (allocations.ts) in a namespace that only deployments (deploy/) and cirrus's own control planes
// create: against a cluster of one's own, without it every LoadBalancer Service would fail. The
// namespace is created when it is missing and the identity may; the ConfigMap is left to the
// first allocation (allocations.ts creates it), but the rights to read, patch — and, when it does
// not exist yet, create — it are checked now.

import { CoreV1Api } from '@kubernetes/client-node';
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
    const { made, problem: namespaceProblem } = await ensureNamespace(core, namespace, context);
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
        `${missing.map(formatAccess).join(', ')}: grant them (deploy/knative/static-provider/rbac.yaml is the Role` +
        `${exists ? '' : ', and the ConfigMaps allocations.yaml creates'})`,
    );
  }
  return { created, problems };
}

// Whether the namespace was made now; a problem when it is missing and stays so.
async function ensureNamespace(
  core: CoreV1Api,
  namespace: string,
  context: PreflightContext,
): Promise<{ made: boolean; problem?: string }> {
  const unreadable = await missingAccess(context.kubeConfig, [
    { group: '', resource: 'namespaces', verb: 'get', name: namespace },
  ]);
  if (unreadable.length > 0) return { made: false }; // cannot tell: the rights check on the ConfigMap says the rest
  const found = await core.readNamespace({ name: namespace }).then(
    () => true,
    (error: unknown) => {
      if (apiStatus(error) === 404) return false;
      throw error;
    },
  );
  if (found) return { made: false };
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
