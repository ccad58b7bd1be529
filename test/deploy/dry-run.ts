// A server-side dry run of manifests on the real API server (manifests.test.ts, helm.test.ts): each
// object POSTed with dryRun=All and fieldValidation=Strict through client-node's request layer.

import {
  CoreV1Api,
  HttpMethod,
  IsomorphicFetchHttpLibrary,
  RequestContext,
  type KubeConfig,
} from '@kubernetes/client-node';
import { uniqueName } from '../harness/cluster.ts';
import { identity, type KubeObject } from './kustomize.ts';

/** Creates `name` unless it exists: namespaced objects need their namespace, even for a dry run. */
export async function ensureNamespace(admin: KubeConfig, name: string): Promise<void> {
  await admin
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name } } })
    .catch((error: unknown) => {
      if ((error as { code?: number }).code !== 409) throw error;
    });
}

/** Dry-runs each object; what the API server refused, one line each (`Kind/ns/name: HTTP 400: ...`). */
export async function dryRunProblems(admin: KubeConfig, objects: readonly KubeObject[]): Promise<string[]> {
  const problems = await Promise.all(
    objects.map(async (object) => {
      // The Namespace exists for real (ensureNamespace): validate its definition under a fresh name.
      const body =
        object.kind === 'Namespace' ? { ...object, metadata: { ...object.metadata, name: uniqueName('ns') } } : object;
      const answer = await dryRunCreate(admin, body);
      return answer.status === 201 ? undefined : `${identity(object)}: HTTP ${answer.status}: ${answer.text}`;
    }),
  );
  return problems.filter((p) => p !== undefined);
}

/**
 * POSTs `object` as it is, with `dryRun=All&fieldValidation=Strict`: the API server validates it
 * (and runs admission) without storing it, and refuses unknown or duplicate fields. Not through
 * client-node's typed API, whose serializer would drop unknown fields before the server saw them.
 */
export async function dryRunCreate(
  kubeConfig: KubeConfig,
  object: KubeObject,
): Promise<{ status: number; text: string }> {
  const group = object.apiVersion.includes('/') ? `/apis/${object.apiVersion}` : `/api/${object.apiVersion}`;
  const namespace = object.metadata.namespace === undefined ? '' : `/namespaces/${object.metadata.namespace}`;
  // Every kind here pluralizes regularly (ConfigMap → configmaps, NetworkPolicy → networkpolicies).
  const kind = object.kind.toLowerCase();
  const resource = kind.endsWith('y') ? `${kind.slice(0, -1)}ies` : `${kind}s`;
  const url = new URL(`${kubeConfig.getCurrentCluster()?.server ?? ''}${group}${namespace}/${resource}`);
  url.searchParams.set('dryRun', 'All');
  url.searchParams.set('fieldValidation', 'Strict');
  const request = new RequestContext(url.toString(), HttpMethod.POST);
  request.setHeaderParam('Content-Type', 'application/json');
  request.setBody(JSON.stringify(object));
  await kubeConfig.applySecurityAuthentication(request);
  const response = await new IsomorphicFetchHttpLibrary().send(request).toPromise();
  return { status: response.httpStatusCode, text: await response.body.text() };
}
