// What an identity may do in the cluster, asked of the API server itself with
// SelfSubjectAccessReviews (authorization.k8s.io/v1): the preflight of the commands that act on a
// cluster (app/cli/preflight.ts) and of providers (CloudProvider.preflight) check with it that
// the rights they will use are granted, before any object fails for want of one.

import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';

/** One right: a verb on a resource (`nodes`, `services/status`), in a namespace and on one object where given. */
export interface ApiAccess {
  /** The API group; '' for the core group. */
  readonly group: string;
  /** The resource, with its subresource after a slash (`nodes/status`). */
  readonly resource: string;
  readonly verb: string;
  /** Undefined: cluster-wide (every namespace, for a namespaced resource). */
  readonly namespace?: string;
  readonly name?: string;
}

/** `access` as kubectl auth can-i says it: `patch nodes/status`, `get configmaps/cirrus-lb-ipam in cirrus-system`. */
export function formatAccess(access: ApiAccess): string {
  const resource = access.group === '' ? access.resource : `${access.resource}.${access.group}`;
  const [base, sub] = resource.split('/');
  const named =
    access.name === undefined ? resource : sub === undefined ? `${base}/${access.name}` : `${resource} ${access.name}`;
  return `${access.verb} ${named}${access.namespace === undefined ? '' : ` in ${access.namespace}`}`;
}

/**
 * The rights of `wanted` that the API server says the kubeconfig's identity lacks, one review each
 * (in parallel; duplicates asked once). Throws what the API server answered when it refuses the
 * reviews themselves (403 for an anonymous user, 401 for rejected credentials).
 */
export async function missingAccess(kubeConfig: KubeConfig, wanted: readonly ApiAccess[]): Promise<ApiAccess[]> {
  const api = kubeConfig.makeApiClient(AuthorizationV1Api);
  const unique = [...new Map(wanted.map((a) => [formatAccess(a), a])).values()];
  const allowed = await Promise.all(
    unique.map(async (access) => {
      const [resource = access.resource, subresource] = access.resource.split('/');
      const review = await api.createSelfSubjectAccessReview({
        body: {
          spec: {
            resourceAttributes: {
              group: access.group,
              resource,
              ...(subresource === undefined ? {} : { subresource }),
              verb: access.verb,
              ...(access.namespace === undefined ? {} : { namespace: access.namespace }),
              ...(access.name === undefined ? {} : { name: access.name }),
            },
          },
        },
      });
      return review.status?.allowed === true;
    }),
  );
  return unique.filter((_, i) => !allowed[i]);
}
