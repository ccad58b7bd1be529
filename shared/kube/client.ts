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
  if (config.getCurrentCluster() === null) {
    throw new Error('no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a pod with a ServiceAccount');
  }
  return config;
}
