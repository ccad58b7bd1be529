// The namespace cirrus runs in: where the allocations ConfigMap goes when the cloud-config names no
// namespace (loadBalancers.allocations.namespace), so that the functions need rights in their own
// namespace only. In a pod, the kubelet writes the pod's namespace next to its ServiceAccount
// token; outside one (`cirrus start` and `cirrus serve` on a workstation, AWS Lambda) it is
// cirrus-system, the namespace the deployments in deploy/ use.

import { readFile } from 'node:fs/promises';
import { dnsLabelProblem } from './syntax.ts';

/** Where the kubelet puts the pod's namespace, with the ServiceAccount's token. */
export const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The namespace of cirrus's deployments (deploy/), taken when cirrus does not run in a pod. */
export const DEFAULT_NAMESPACE = 'cirrus-system';

/** A namespace, and where it came from (for messages). */
export interface DeploymentNamespace {
  readonly namespace: string;
  readonly from: string;
}

/**
 * The namespace in `file` (the pod's, by default), or {@link DEFAULT_NAMESPACE} when there is no
 * such file. Throws an Error naming the file when it cannot be read or holds no namespace name.
 */
export async function deploymentNamespace(file = SERVICE_ACCOUNT_NAMESPACE_FILE): Promise<DeploymentNamespace> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      return { namespace: DEFAULT_NAMESPACE, from: `the default outside a pod, as there is no ${file}` };
    }
    throw new Error(`could not read ${file}, the namespace cirrus runs in: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const namespace = text.trim();
  const problem = dnsLabelProblem(namespace);
  if (problem !== undefined) {
    throw new Error(
      `${file} holds ${JSON.stringify(namespace)}, which is no namespace name: a namespace name ${problem}`,
    );
  }
  return { namespace, from: `the namespace cirrus runs in, read from ${file}` };
}
