// Fixtures: a Node built from a name and tweaks, created on the test cluster; and a silent logger.

import type { CoreV1Api, V1Node, V1NodeCondition, V1Taint } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import type { FunctionDefinition } from '../../shared/host/function.ts';

/** A change to a Node fixture. */
export type NodeTweak = (node: V1Node) => void;

/** The taint a kubelet started with --cloud-provider=external puts on its Node. */
export const uninitializedTaint: V1Taint = {
  key: 'node.cloudprovider.kubernetes.io/uninitialized',
  value: 'true',
  effect: 'NoSchedule',
};

/** A Node named `name` with the tweaks applied in order. */
export function newNode(name: string, ...tweaks: NodeTweak[]): V1Node {
  const node: V1Node = { metadata: { name, labels: {}, annotations: {} }, spec: {}, status: {} };
  for (const tweak of tweaks) tweak(node);
  return node;
}

export const withTaints =
  (...taints: V1Taint[]): NodeTweak =>
  (node) => {
    node.spec = { ...node.spec, taints: [...(node.spec?.taints ?? []), ...taints] };
  };
export const uninitialized: NodeTweak = withTaints(uninitializedTaint);
export const withLabels =
  (labels: Record<string, string>): NodeTweak =>
  (node) => {
    node.metadata = { ...node.metadata, labels: { ...node.metadata?.labels, ...labels } };
  };
export const withAnnotations =
  (annotations: Record<string, string>): NodeTweak =>
  (node) => {
    node.metadata = { ...node.metadata, annotations: { ...node.metadata?.annotations, ...annotations } };
  };
export const withProviderId =
  (providerID: string): NodeTweak =>
  (node) => {
    node.spec = { ...node.spec, providerID };
  };
export const withAddresses =
  (...addresses: { type: string; address: string }[]): NodeTweak =>
  (node) => {
    node.status = { ...node.status, addresses };
  };
/** Ready condition status: 'True', 'False' or 'Unknown'. */
export const withReady =
  (status: string): NodeTweak =>
  (node) => {
    const condition: V1NodeCondition = {
      type: 'Ready',
      status,
      reason: 'Test',
      lastHeartbeatTime: new Date(),
      lastTransitionTime: new Date(),
    };
    node.status = { ...node.status, conditions: [condition] };
  };

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Creates `node` on the cluster, then writes its status (which create ignores). Returns it as stored. */
export async function createNode(core: CoreV1Api, node: V1Node): Promise<V1Node> {
  const name = node.metadata?.name ?? '';
  await core.createNode({ body: { ...node, status: {} } });
  if (node.status?.addresses || node.status?.conditions) {
    await core.patchNodeStatus({ name, body: { status: node.status } }, mergePatch);
  }
  return core.readNode({ name });
}

/** Sets the Ready condition of a stored node. */
export async function setReady(core: CoreV1Api, name: string, status: string): Promise<void> {
  const node = newNode(name, withReady(status));
  await core.patchNodeStatus({ name, body: { status: { conditions: node.status?.conditions } } }, mergePatch);
}

/**
 * The node's taints without those the API server's admission adds by itself (TaintNodesByCondition
 * puts node.kubernetes.io/not-ready on a node without a Ready condition).
 */
export function ownTaints(node: V1Node): V1Taint[] {
  return plain(node.spec?.taints ?? []).filter((t) => !t.key.startsWith('node.kubernetes.io/'));
}

/** The result word of a report's first object (what one reconcile did). */
export function firstResult(report: { objects: readonly { result: string }[] }): string | undefined {
  return report.objects[0]?.result;
}

/** The Events about `name` in `namespace` (Nodes' are in default), as `type/reason/message`, sorted. */
export async function eventsAbout(core: CoreV1Api, namespace: string, name: string): Promise<string[]> {
  const list = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
  // The API server's own (its ClusterIP repair loop's `ClusterIPNotAllocated`, written now and then
  // about a new Service) are not what a test of cirrus looks for.
  return list.items
    .filter((e) => e.reason !== 'ClusterIPNotAllocated')
    .map((e) => `${e.type ?? ''}/${e.reason ?? ''}/${e.message ?? ''}`)
    .sort();
}

/** A logger that writes nothing. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** client-node returns class instances; their JSON form compares with plain objects. */
export function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** A definition of function `name` (kind Node) whose reconciles do nothing and report no object: for tests of the host. */
export function noopDefinition(name: string): FunctionDefinition {
  return {
    name,
    kinds: ['Node'],
    reconcileOne: (_key, options) => Promise.resolve({ function: name, dryRun: options.dryRun, objects: [] }),
    reconcileAll: (options) => Promise.resolve({ function: name, dryRun: options.dryRun, objects: [] }),
  };
}
