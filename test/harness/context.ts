// What every scenario gets.

import type { KubeConfig } from '@kubernetes/client-node';
import type { BenchCloud } from './cloud.ts';
import type { Kube, KubeObject } from './kube.ts';

export interface Bench {
  readonly kube: Kube;
  readonly kubeConfig: KubeConfig;
  readonly cloud: BenchCloud;
  /** Full sizes (--full) instead of the short defaults. */
  readonly full: boolean;
  readonly progress: (line: string) => void;
}

export const uninitializedTaint = 'node.cloudprovider.kubernetes.io/uninitialized';

/** A Node as a kubelet registers it, optionally with the uninitialized taint. */
export function nodeObject(name: string, group: string, tainted: boolean): KubeObject {
  const taints = tainted ? [{ key: uninitializedTaint, value: 'true', effect: 'NoSchedule' }] : [];
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'bench.cirrus/group': group } },
    spec: { taints },
  };
}

/** Deletes every Node of a group (one DELETE collection). */
export async function deleteNodes(kube: Kube, group: string): Promise<void> {
  await kube.call('DELETE', `/api/v1/nodes?labelSelector=bench.cirrus%2Fgroup%3D${group}`);
}

/** The current resourceVersion of a collection, to watch from. */
export async function listVersion(kube: Kube, path: string): Promise<string> {
  const list = await kube.call<{ metadata: { resourceVersion: string } }>('GET', `${path}?limit=1`);
  return list.metadata.resourceVersion;
}
