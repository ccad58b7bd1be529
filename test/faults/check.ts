// Whether a row's objects reached their final state, read from the API server and the chaos
// cloud's file. A final state is lost when it is not reached by the deadline:
//
// - a Node that exists: the uninitialized taint gone and spec.providerID fake://<name>;
// - a Service that exists: cirrus's finalizer, an ingress IP in its status, and a load balancer
//   in the cloud with its uid and ports and every live Node;
// - a Service that was deleted: gone from the API server (not stuck on the finalizer) and from
//   the cloud;
// - a load balancer in the cloud whose Service is gone counts as lost too (leaked).

import { readFile } from 'node:fs/promises';
import { sleep, type Kube, type KubeObject } from '../harness/kube.ts';
import { uninitializedTaint } from '../harness/context.ts';
import { namespace, rowLabel, type Expected } from './workload.ts';
import { parseRecords, replay, type CloudLb, type CloudRecord, type Replayed } from './records.ts';

const finalizer = 'service.kubernetes.io/load-balancer-cleanup';

export interface Verdict {
  /** What is not (yet) as it must be, one line per object. */
  readonly wrong: string[];
  readonly cloud: Replayed;
}

export async function readCloud(file: string): Promise<CloudRecord[]> {
  return parseRecords(await readFile(file, 'utf8').catch(() => ''));
}

export async function verdict(kube: Kube, expected: Expected, cloudLog: string): Promise<Verdict> {
  const selector = `labelSelector=${encodeURIComponent(`${rowLabel}=${expected.row}`)}`;
  const [nodeList, serviceList, records] = await Promise.all([
    kube.call<{ items: KubeObject[] }>('GET', `/api/v1/nodes?${selector}`),
    kube.call<{ items: KubeObject[] }>('GET', `/api/v1/namespaces/${namespace}/services?${selector}`),
    readCloud(cloudLog),
  ]);
  const cloud = replay(records);
  const nodes = new Map(nodeList.items.map((n) => [n.metadata.name, n]));
  const liveNodes = nodeList.items.map((n) => n.metadata.name).sort();
  const services = new Map(serviceList.items.map((s) => [s.metadata.name, s]));
  const wrong = [
    ...[...expected.nodes].flatMap(([name, exists]) => nodeWrong(name, exists, nodes.get(name))),
    ...[...expected.services].flatMap(([name, ports]) =>
      serviceWrong(name, ports, services.get(name), { lb: cloud.lbs.get(`${namespace}/${name}`), liveNodes }),
    ),
  ];
  // A load balancer in the cloud whose Service is neither expected nor reported above: leaked.
  for (const key of cloud.lbs.keys()) {
    const name = key.slice(namespace.length + 1);
    if (!services.has(name) && !expected.services.has(name)) wrong.push(`load balancer ${key}: its Service is gone`);
  }
  return { wrong, cloud };
}

function nodeWrong(name: string, exists: boolean, node: KubeObject | undefined): string[] {
  if (!exists) return node === undefined ? [] : [`Node ${name}: still exists`];
  if (node === undefined) return [`Node ${name}: missing`];
  const taints = (node.spec?.['taints'] as { key: string }[] | undefined) ?? [];
  if (taints.some((t) => t.key === uninitializedTaint)) return [`Node ${name}: not initialized`];
  return node.spec?.['providerID'] === `fake://${name}` ? [] : [`Node ${name}: providerID not set`];
}

function serviceWrong(
  name: string,
  ports: readonly string[] | undefined,
  service: KubeObject | undefined,
  cloud: { lb: CloudLb | undefined; liveNodes: readonly string[] },
): string[] {
  if (ports === undefined) return goneWrong(name, service, cloud.lb);
  if (service === undefined) return [`Service ${name}: missing`];
  const finalizers = (service.metadata['finalizers'] as string[] | undefined) ?? [];
  const ingress = (service.status?.['loadBalancer'] as { ingress?: { ip?: string }[] } | undefined)?.ingress;
  const problems = [
    finalizers.includes(finalizer) ? undefined : 'no finalizer',
    ingress?.[0]?.ip === undefined ? 'no ingress in its status' : undefined,
    lbMismatch(cloud.lb, String(service.metadata['uid']), ports, cloud.liveNodes),
  ];
  return problems.flatMap((p) => (p === undefined ? [] : [`Service ${name}: ${p}`]));
}

function goneWrong(name: string, service: KubeObject | undefined, lb: CloudLb | undefined): string[] {
  const wrong: string[] = [];
  if (service !== undefined)
    wrong.push(`Service ${name}: ${service.metadata['deletionTimestamp'] ? 'stuck on its finalizer' : 'exists'}`);
  if (lb !== undefined) wrong.push(`Service ${name}: deleted, its load balancer is not`);
  return wrong;
}

function lbMismatch(
  lb: CloudLb | undefined,
  uid: string,
  ports: readonly string[],
  liveNodes: readonly string[],
): string | undefined {
  if (lb === undefined) return 'no load balancer';
  if (lb.uid !== uid) return 'load balancer of another uid';
  if (lb.ports.join() !== ports.join()) return `load balancer ports ${lb.ports.join()}`;
  if (lb.nodes.join() !== liveNodes.join())
    return `load balancer has ${lb.nodes.length} nodes, ${liveNodes.length} live`;
  return undefined;
}

/** Polls verdict() until nothing is wrong or `timeoutMs` passed; the time it took and the last verdict. */
export async function converge(
  kube: Kube,
  expected: Expected,
  cloudLog: string,
  timeoutMs: number,
): Promise<{ ms: number; verdict: Verdict }> {
  const started = performance.now();
  for (;;) {
    const v = await verdict(kube, expected, cloudLog);
    const ms = performance.now() - started;
    if (v.wrong.length === 0 || ms > timeoutMs) return { ms, verdict: v };
    await sleep(500);
  }
}
