// The start-up checks of the commands that act on a cluster (`cirrus start`, `serve`, `relay`,
// `conformance` with a kubeconfig): before anything runs, the API server is reached with one
// cheap authenticated request and a short timeout, the rights the selected functions (and the
// relay) will use are asked for with SelfSubjectAccessReviews, and the provider checks what it
// needs (CloudProvider.preflight: the static provider's allocations namespace). A failure stops
// the command with exit status 1 and one message naming the cluster tried, the cause and the fix,
// instead of a process that serves, answers /readyz and fails every object.
//
// Not on the AWS Lambda entry (app/lambda): its cold start reaches no cluster today, and a check
// there would add a round trip to every cold start; a Lambda that cannot reach its cluster fails
// its first reconcile with the same API error, which its logs show.

import { AuthorizationV1Api, VersionApi, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { FunctionEntry } from '../../shared/catalogue.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { apiMessage, apiStatus } from '../../shared/kube/api.ts';
import { formatAccess, missingAccess, type ApiAccess } from '../../shared/kube/access.ts';

/** A start-up check failed: the message says what was tried, why it failed and what to do. */
export class PreflightError extends Error {
  override readonly name = 'PreflightError';
}

/** How long the first request may take before the cluster counts as unreachable. */
export const reachTimeoutMs = 3_000;

/** Where the kubeconfig comes from, for messages: --kubeconfig, KUBECONFIG, the pod's ServiceAccount, ~/.kube/config. */
export function kubeconfigSource(path: string | undefined, env: Readonly<Record<string, string | undefined>>): string {
  if (path !== undefined) return `--kubeconfig ${path}`;
  if (env['KUBECONFIG']) return `KUBECONFIG=${env['KUBECONFIG']}`;
  if (env['KUBERNETES_SERVICE_HOST']) return "this pod's ServiceAccount";
  return '~/.kube/config';
}

/**
 * Reaches the API server of `kubeConfig` with GET /version (answered only to accepted credentials
 * when credentials are sent) within `timeoutMs`; resolves with its version. Throws PreflightError
 * naming the server, `source`, the cause (refused, no such host, TLS, rejected credentials, bad
 * URL, no answer) and the fix.
 */
export async function checkReachable(
  kubeConfig: KubeConfig,
  source: string,
  timeoutMs = reachTimeoutMs,
): Promise<string> {
  const server = kubeConfig.getCurrentCluster()?.server ?? '(no server)';
  const tried = `the API server ${server} (${source}, context ${kubeConfig.getCurrentContext() || '(none)'})`;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`no answer within ${timeoutMs / 1000} s`));
    }, timeoutMs);
  });
  try {
    const version = await Promise.race([kubeConfig.makeApiClient(VersionApi).getCode(), timeout]);
    return version.gitVersion;
  } catch (error) {
    throw new PreflightError(`cannot reach ${tried}: ${unreachableCause(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

const fixTarget = 'point --kubeconfig or KUBECONFIG at a cluster that runs (kubectl cluster-info says whether it does)';

// The cause of a failed first request, and its fix, in words: the first rule that matches.
function unreachableCause(error: unknown): string {
  const status = apiStatus(error);
  if (status === 401) {
    return (
      "401 Unauthorized: the API server does not accept the credentials of the kubeconfig's user " +
      '(an expired token or client certificate, or one of another cluster); get a fresh kubeconfig'
    );
  }
  if (status !== undefined) return `${apiMessage(error)}; check that the URL is the API server's`;
  const err = error as Error & { code?: string; cause?: Error & { code?: string } };
  const code = err.cause?.code ?? err.code ?? '';
  const detail = err.cause?.message ?? err.message;
  const rule = causes.find((c) => c.codes.test(code) || c.messages.test(detail));
  return rule === undefined ? `${detail}${code === '' ? '' : ` (${code})`}; ${fixTarget}` : rule.say(detail);
}

const never = /$^/;

const causes: readonly { codes: RegExp; messages: RegExp; say: (detail: string) => string }[] = [
  {
    codes: /^ECONNREFUSED$/,
    messages: never,
    say: (d) => `connection refused (${d}): nothing listens there; start the cluster, or ${fixTarget}`,
  },
  { codes: /^(ENOTFOUND|EAI_AGAIN)$/, messages: never, say: (d) => `no such host (${d}); ${fixTarget}` },
  {
    codes: /^(ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)$/,
    messages: /no answer within/,
    say: (d) => `${d}: the host does not answer (a firewall, a VPN, a stopped machine?); ${fixTarget}`,
  },
  {
    codes: /^ERR_INVALID_URL$/,
    messages: /bad port|invalid url/i,
    say: (d) => `the server URL is not usable (${d}); fix the cluster's server: in the kubeconfig`,
  },
  {
    codes: never,
    messages: /HTTP protocol is not allowed/,
    say: () =>
      'the server URL is http://, which the client refuses without insecure-skip-tls-verify: use the https:// URL of the API server',
  },
  {
    codes: /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED|ERR_OSSL)/,
    messages: /certificate|TLS|SSL/i,
    say: (d) =>
      `TLS failed (${d}): the kubeconfig's certificate-authority(-data) does not match the server's certificate, ` +
      "or the URL is not the API server's",
  },
];

/** Who needs which rights: a function, the relay, the provider. */
export interface AccessNeed {
  readonly who: string;
  readonly access: readonly ApiAccess[];
}

/**
 * The relay's rights (deploy/knative/relay/rbac.yaml): its watches of the kinds its destinations
 * read (`Node`, `Service`) and, when it elects, its Lease.
 */
export function relayAccess(
  lease: { namespace: string; name: string } | false,
  kinds: Iterable<string> = ['Node', 'Service'],
): AccessNeed {
  const resources = [...new Set(kinds)].map((kind) => `${kind.toLowerCase()}s`);
  const watches = resources.flatMap((resource) => ['list', 'watch'].map((verb) => ({ group: '', resource, verb })));
  const leases =
    lease === false
      ? []
      : [
          ...['get', 'update'].map((verb) => ({
            group: 'coordination.k8s.io',
            resource: 'leases',
            verb,
            namespace: lease.namespace,
            name: lease.name,
          })),
          { group: 'coordination.k8s.io', resource: 'leases', verb: 'create', namespace: lease.namespace },
        ];
  return { who: 'the relay', access: [...watches, ...leases] };
}

/** Whether one of `entries` uses the provider's load balancers: the function whose objects are Services. */
export function usesLoadBalancers(entries: readonly FunctionEntry[]): boolean {
  return entries.some((e) => e.target.kind === 'Service');
}

/** The functions' rights, from the catalogue. */
export function functionAccess(entries: readonly FunctionEntry[]): AccessNeed[] {
  return entries.map((entry) => ({ who: entry.name, access: entry.access }));
}

/**
 * Where the deployment each command runs in holds the Roles that grant what checkAccess checks, for
 * its message: `cirrus start` is the classic deployment's one process, `serve` and `relay` the
 * Knative deployment's parts.
 */
export const grantedBy = {
  start: 'deploy/standalone/ccm/rbac.yaml holds the ClusterRole of cirrus start',
  relay: "deploy/knative/relay/rbac.yaml holds the relay's Roles",
  serve: (name: string): string => `deploy/knative/${name}/rbac/ holds the function's Roles`,
} as const;

/**
 * Asks the API server whether the kubeconfig's identity has every right of `needs`; throws
 * PreflightError listing the missing ones by who needs them, and where they are granted (`roles`,
 * one of grantedBy's).
 */
export async function checkAccess(
  kubeConfig: KubeConfig,
  source: string,
  needs: readonly AccessNeed[],
  roles: string,
): Promise<void> {
  const all = needs.flatMap((need) => need.access);
  let missing: ApiAccess[];
  try {
    missing = await missingAccess(kubeConfig, all);
  } catch (error) {
    const status = apiStatus(error);
    const who = status === 403 ? ' (an anonymous user: the kubeconfig has no credentials the API server accepts)' : '';
    throw new PreflightError(
      `the API server refused to say what the kubeconfig's user (${source}) may do: ${apiMessage(error)}${who}`,
      { cause: error },
    );
  }
  missing = await withoutNamedGrants(kubeConfig, missing);
  if (missing.length === 0) return;
  const lacking = new Set(missing.map(formatAccess));
  const lines = needs.flatMap((need) => {
    const wanting = [...new Set(need.access.map(formatAccess))].filter((a) => lacking.has(a));
    return wanting.length === 0 ? [] : [`  ${need.who}: ${wanting.join(', ')}`];
  });
  throw new PreflightError(
    `the kubeconfig's user (${source}) lacks rights that will be used:\n${lines.join('\n')}\n` +
      `grant them (${roles}), or use a kubeconfig that has them`,
  );
}

// A right granted on named objects only (`resourceNames`) is one an operator scoped on purpose
// (to the Nodes cirrus may delete, say): SelfSubjectAccessReview denies it without a name, so the
// rules the identity has are asked for once, and such a right counts as granted.
async function withoutNamedGrants(kubeConfig: KubeConfig, missing: ApiAccess[]): Promise<ApiAccess[]> {
  if (missing.length === 0) return missing;
  const review = await kubeConfig
    .makeApiClient(AuthorizationV1Api)
    .createSelfSubjectRulesReview({ body: { spec: { namespace: 'default' } } })
    .catch(() => undefined);
  const rules = review?.status?.resourceRules ?? [];
  const named = (access: ApiAccess): boolean =>
    rules.some(
      (rule) =>
        (rule.resourceNames ?? []).length > 0 &&
        rule.verbs.some((v) => v === access.verb || v === '*') &&
        (rule.apiGroups ?? []).some((g) => g === access.group || g === '*') &&
        (rule.resources ?? []).some((r) => r === access.resource || r === '*'),
    );
  return missing.filter((access) => access.name !== undefined || !named(access));
}

/** Runs the provider's own preflight, when it has one (it logs what it creates); throws PreflightError with its problems. */
export async function checkProvider(
  cloud: CloudProvider,
  context: {
    kubeConfig: KubeConfig;
    loadBalancers: boolean;
    mayCreate: boolean;
    log: Logger;
    signal: AbortSignal;
  },
): Promise<void> {
  if (cloud.preflight === undefined) return;
  const report = await cloud.preflight(context);
  if (report.problems.length > 0) throw new PreflightError(report.problems.join('\n'));
}
