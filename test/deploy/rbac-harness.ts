// What rbac.test.ts needs to prove deploy/knative's RBAC on the real API server: the manifests'
// RBAC objects moved into a test namespace, each permission they grant as a removable unit, a
// ServiceAccount kubeconfig whose API clients record every refused request, and a wait for the
// API server's authorizer to see a change.

import {
  AuthorizationV1Api,
  createConfiguration,
  IsomorphicFetchHttpLibrary,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  ServerConfiguration,
  type ApiConstructor,
  type ApiType,
  type HttpLibrary,
} from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeObject } from './kustomize.ts';

/** One RBAC rule, as the manifests write it. */
export interface Rule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames?: readonly string[];
}

/** One verb on one resource, granted by one Role or ClusterRole: the unit a minimality check removes. */
export interface Permission {
  /** The granting object, `ClusterRole//name` or `Role/namespace/name` (after localization). */
  readonly role: string;
  readonly apiGroup: string;
  /** `nodes`, or `nodes/status` for a subresource. */
  readonly resource: string;
  readonly verb: string;
  /** Set when the rule names its objects. */
  readonly resourceName?: string | undefined;
  /** For a Role, its namespace: where the permission holds. */
  readonly namespace?: string | undefined;
}

/** Whether `a` and `b` grant the same thing (permissions are compared by value). */
export function samePermission(a: Permission, b: Permission): boolean {
  return (
    a.role === b.role &&
    a.apiGroup === b.apiGroup &&
    a.resource === b.resource &&
    a.verb === b.verb &&
    a.resourceName === b.resourceName &&
    a.namespace === b.namespace
  );
}

/** `nodes/status patch (ClusterRole cirrus-node-init-…)`. */
export function describePermission(p: Permission): string {
  const name = p.resourceName === undefined ? '' : ` ${p.resourceName}`;
  const where = p.namespace === undefined ? '' : ` in ${p.namespace}`;
  return `${p.verb} ${p.resource}${name}${where} (${p.role.split('/')[0] ?? ''})`;
}

/** Where the manifests' objects go in a test: a namespace of its own, and names that cannot collide. */
export interface Placement {
  /** Replaces cirrus-system, the deployment's namespace (the static provider's ConfigMap's too). */
  readonly namespace: string;
  /** Appended to the names of roles and bindings (cluster-scoped, or in the shared `default`). */
  readonly suffix: string;
}

// `default` stays: Events about Nodes go there whatever the deployment's namespace. Any other
// namespace stays too, so that a Role placed outside the deployment's namespace is tested there.
function placedNamespace(namespace: string | undefined, placement: Placement): string | undefined {
  return namespace === 'cirrus-system' ? placement.namespace : namespace;
}

// The objects the code finds by name keep it: ServiceAccounts, and ConfigMaps (the static provider's).
const KEPT_NAMES: ReadonlySet<string> = new Set(['ServiceAccount', 'ConfigMap']);

/** The manifests' RBAC objects as a test applies them (see {@link Placement}). */
export function localize(objects: readonly KubeObject[], placement: Placement): KubeObject[] {
  return objects.map((object) => {
    const namespace = placedNamespace(object.metadata.namespace, placement);
    const renamed = KEPT_NAMES.has(object.kind) ? object.metadata.name : `${object.metadata.name}-${placement.suffix}`;
    const metadata = { ...object.metadata, name: renamed, ...(namespace === undefined ? {} : { namespace }) };
    if (!object.kind.endsWith('Binding')) return { ...object, metadata };
    const roleRef = object['roleRef'] as { name: string };
    const subjects = (object['subjects'] as { namespace?: string }[]).map((s) => ({
      ...s,
      namespace: placedNamespace(s.namespace, placement),
    }));
    return { ...object, metadata, roleRef: { ...roleRef, name: `${roleRef.name}-${placement.suffix}` }, subjects };
  });
}

function roleId(role: KubeObject): string {
  return `${role.kind}/${role.metadata.namespace ?? ''}/${role.metadata.name}`;
}

/** Every permission the Roles and ClusterRoles among `objects` grant, one per verb, resource and name. */
export function permissionsOf(objects: readonly KubeObject[]): Permission[] {
  return objects
    .filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole')
    .flatMap((role) =>
      (role['rules'] as Rule[]).flatMap((rule) =>
        rule.apiGroups.flatMap((apiGroup) =>
          rule.resources.flatMap((resource) =>
            rule.verbs.flatMap((verb) =>
              (rule.resourceNames ?? [undefined]).map((resourceName): Permission => ({
                role: roleId(role),
                apiGroup,
                resource,
                verb,
                resourceName,
                namespace: role.metadata.namespace,
              })),
            ),
          ),
        ),
      ),
    );
}

/**
 * `role` without `removed`: the rules that grant it are split so that everything else they grant
 * stays (the same verbs on the other resources, the other verbs on this one).
 */
export function withoutPermission(role: KubeObject, removed: Permission): KubeObject {
  if (roleId(role) !== removed.role) return role;
  const rules = (role['rules'] as Rule[]).flatMap((rule) =>
    grants(rule, removed) ? splitWithout(rule, removed) : [rule],
  );
  return { ...role, rules };
}

function grants(rule: Rule, p: Permission): boolean {
  const named =
    p.resourceName === undefined
      ? rule.resourceNames === undefined
      : rule.resourceNames?.includes(p.resourceName) === true;
  return (
    named && rule.apiGroups.includes(p.apiGroup) && rule.resources.includes(p.resource) && rule.verbs.includes(p.verb)
  );
}

// The rule's grants but `removed`: the other resources, the other verbs, the other names.
function splitWithout(rule: Rule, removed: Permission): Rule[] {
  const resources = rule.resources.filter((r) => r !== removed.resource);
  const verbs = rule.verbs.filter((v) => v !== removed.verb);
  const names = rule.resourceNames?.filter((n) => n !== removed.resourceName) ?? [];
  return [
    ...(resources.length > 0 ? [{ ...rule, resources }] : []),
    ...(verbs.length > 0 ? [{ ...rule, resources: [removed.resource], verbs }] : []),
    ...(names.length > 0
      ? [{ ...rule, resources: [removed.resource], verbs: [removed.verb], resourceNames: names }]
      : []),
  ];
}

/** Creates or updates `objects` by server-side apply, as one field manager (so a rule removed is removed). */
export async function apply(admin: KubeConfig, objects: readonly KubeObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(admin);
  for (const object of objects) {
    await api.patch(object, undefined, undefined, 'cirrus-rbac-test', true, PatchStrategy.ServerSideApply);
  }
}

/** Deletes `objects`, ignoring those already gone. */
export async function remove(admin: KubeConfig, objects: readonly KubeObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(admin);
  await Promise.all(
    objects.map(async (object) =>
      api.delete(object).catch((error: unknown) => {
        if ((error as { code?: number }).code !== 404) throw error;
      }),
    ),
  );
}

/**
 * Waits until the API server's authorizer answers as `expected` for each permission (a
 * SelfSubjectAccessReview as the ServiceAccount): RBAC changes reach it through an informer, a
 * moment after the write. Throws after `timeoutMs` naming what still differs.
 */
export async function awaitAccess(
  account: KubeConfig,
  expected: ReadonlyMap<Permission, boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const api = account.makeApiClient(AuthorizationV1Api);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answers = await Promise.all(
      [...expected].map(async ([permission, allowed]) =>
        (await allows(api, permission)) === allowed ? undefined : permission,
      ),
    );
    const wrong = answers.filter((p) => p !== undefined);
    if (wrong.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`RBAC did not settle within ${timeoutMs} ms: ${wrong.map(describePermission).join('; ')}`);
    await sleep(50);
  }
}

async function allows(api: AuthorizationV1Api, permission: Permission): Promise<boolean> {
  const [resource, subresource] = permission.resource.split('/');
  const review = await api.createSelfSubjectAccessReview({
    body: {
      spec: {
        resourceAttributes: {
          group: permission.apiGroup,
          resource: resource ?? '',
          verb: permission.verb,
          ...(subresource === undefined ? {} : { subresource }),
          ...(permission.namespace === undefined ? {} : { namespace: permission.namespace }),
          ...(permission.resourceName === undefined ? {} : { name: permission.resourceName }),
        },
      },
    },
  });
  return review.status?.allowed === true;
}

/**
 * A request as the refusal records name it: `PATCH /api/v1/nodes/worker-1/status`, with `?watch`
 * appended for a watch.
 */
export type RequestLine = string;

const methods: Readonly<Record<string, string>> = {
  get: 'GET',
  list: 'GET',
  watch: 'GET',
  create: 'POST',
  patch: 'PATCH',
  update: 'PUT',
  delete: 'DELETE',
};

/** Whether a refused request is one that `permission` would have allowed. */
export function refusedFor(line: RequestLine, permission: Permission): boolean {
  const [base = '', sub] = permission.resource.split('/');
  const named = ['get', 'patch', 'update', 'delete'].includes(permission.verb) || sub !== undefined;
  const path = named ? `/${base}/[^/?]+${sub === undefined ? '' : `/${sub}`}` : `/${base}`;
  const query = permission.verb === 'watch' ? '\\?watch' : '';
  return new RegExp(`^${methods[permission.verb] ?? '?'} \\S*${path}${query}$`).test(line);
}

/**
 * A ServiceAccount's client configuration whose API clients record every request the API server
 * refuses (403) and, when a selector is given, add it to LISTs of Nodes and Services: the shared
 * test cluster holds other test files' objects, which a periodic pass must not touch.
 */
export class RecordingKubeConfig extends KubeConfig {
  /** Refused requests, in order. */
  readonly refused: RequestLine[] = [];
  readonly #http: HttpLibrary;

  constructor(from: KubeConfig, labelSelector?: string) {
    super();
    this.loadFromOptions({
      clusters: from.clusters,
      users: from.users,
      contexts: from.contexts,
      currentContext: from.currentContext,
    });
    const inner = new IsomorphicFetchHttpLibrary();
    this.#http = {
      send: (request) => {
        const url = new URL(request.getUrl());
        if (
          labelSelector !== undefined &&
          request.getHttpMethod() === 'GET' &&
          /^\/api\/v1\/(nodes|services)$/.test(url.pathname)
        ) {
          request.setQueryParam('labelSelector', labelSelector);
        }
        return inner.send(request).pipe((response) => {
          if (response.httpStatusCode === 403)
            this.refused.push(
              `${request.getHttpMethod()} ${url.pathname}${url.searchParams.has('watch') ? '?watch' : ''}`,
            );
          return response;
        });
      },
    };
  }

  override makeApiClient<T extends ApiType>(apiClientType: ApiConstructor<T>): T {
    const cluster = this.getCurrentCluster();
    if (cluster === null) throw new Error('no current cluster');
    return new apiClientType(
      createConfiguration({
        baseServer: new ServerConfiguration(cluster.server, {}),
        authMethods: { default: this },
        httpApi: this.#http,
      }),
    );
  }
}
