// The Kubernetes client configuration: --kubeconfig, else $KUBECONFIG, else the in-cluster
// ServiceAccount, else ~/.kube/config (client-node's loadFromDefault order after the first).

import { KubeConfig } from '@kubernetes/client-node';

/** Loads the client configuration; `path` is the --kubeconfig option. Throws naming the file on failure. */
export function loadKubeConfig(path: string | undefined): KubeConfig {
  const config = new KubeConfig();
  try {
    if (path === undefined) config.loadFromDefault();
    else config.loadFromFile(path);
  } catch (error) {
    throw new Error(`could not load kubeconfig ${path ?? '(default)'}: ${(error as Error).message}`, { cause: error });
  }
  // With no KUBECONFIG, no ~/.kube/config and no ServiceAccount, loadFromDefault makes up a cluster
  // at http://localhost:8080 that no client may use (plain HTTP without insecure-skip-tls-verify):
  // that is no cluster configured, and is said so here rather than on every request.
  if (config.getCurrentCluster() === null || (path === undefined && isClientNodePlaceholder(config))) {
    throw new Error(
      'no Kubernetes cluster configured (no --kubeconfig, KUBECONFIG unset, no ~/.kube/config, not in a pod): ' +
        'pass --kubeconfig <file>, set KUBECONFIG, or run in a pod with a ServiceAccount',
    );
  }
  return reuseConnections(config);
}

function isClientNodePlaceholder(config: KubeConfig): boolean {
  const cluster = config.getCurrentCluster();
  const user = config.getCurrentUser();
  return (
    cluster?.name === 'cluster' &&
    cluster.server === 'http://localhost:8080' &&
    config.getClusters().length === 1 &&
    user?.name === 'user' &&
    user.token === undefined &&
    user.certData === undefined &&
    user.certFile === undefined
  );
}

type CreateDispatcher = (cluster: unknown, agentOptions: Record<string, unknown>) => unknown;

// The agent options a dispatcher is built from (KubeConfig.createDispatcherOptions).
const tlsSettings = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

interface CachedDispatcher {
  readonly cluster: string;
  readonly settings: readonly unknown[];
  readonly dispatcher: unknown;
}

/**
 * Makes `config` reuse one connection pool per set of TLS settings. @kubernetes/client-node 2.0.1
 * builds a new undici agent for every request (KubeConfig.createDispatcher, called from
 * applySecurityAuthentication), so no connection is ever reused and every API call pays a TLS
 * handshake: 28 % of cirrus's CPU in the node benchmark. The agent is cached on the instance,
 * keyed by the settings it is built from, so rotated client certificates still get a new one.
 * The settings are compared as they are (certificates byte for byte), not encoded into a key:
 * this runs on every API call.
 */
export function reuseConnections(config: KubeConfig): KubeConfig {
  const target = config as unknown as { createDispatcher?: CreateDispatcher };
  const original = target.createDispatcher;
  if (typeof original !== 'function') return config;
  const cache: CachedDispatcher[] = [];
  target.createDispatcher = function cachedDispatcher(cluster, agentOptions) {
    const clusterText = JSON.stringify(cluster);
    const settings = tlsSettings.map((k) => agentOptions[k]);
    const found = cache.find(
      (c) => c.cluster === clusterText && c.settings.every((v, i) => sameSetting(v, settings[i])),
    );
    if (found !== undefined) return found.dispatcher;
    const dispatcher = original.call(this, cluster, agentOptions);
    cache.push({ cluster: clusterText, settings, dispatcher });
    return dispatcher;
  };
  return config;
}

function sameSetting(a: unknown, b: unknown): boolean {
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Buffer.isBuffer(a) || Buffer.isBuffer(b)) return false;
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
