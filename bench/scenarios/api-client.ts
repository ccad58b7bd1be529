// The CPU one core/v1 call costs cirrus's process, two ways over the same connection pool (ADR
// 0023): client-node's CoreV1Api (its request pipeline, undici's fetch, ObjectSerializer's model
// classes) and LeanCore (shared/kube/core.ts: the same KubeConfig authentication and undici
// dispatcher, JSON.parse/JSON.stringify). One call in flight at a time; the two clients take turns
// in rounds so that drift on a shared machine falls on both; the figure is the median round's
// process CPU (user + system) per call.

import { CoreV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { mergePatch, strategicMergePatch } from '../../shared/kube/api.ts';
import { LeanCore, type Core } from '../../shared/kube/core.ts';
import { eventFor } from '../../shared/kube/events.ts';
import { deleteNodes, type Bench } from '../../test/harness/context.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';

const group = 'api-client';
const namespace = 'default';
const nodeCount = 20;
const service = 'bench-api-client';

type Op = (core: Core, i: number) => Promise<unknown>;

// The calls of the functions' hot path, each as a reconcile makes it.
const ops: Record<string, Op> = {
  readNode: (core, i) => core.readNode({ name: nodeName(i) }),
  patchNode: (core, i) =>
    core.patchNode(
      { name: nodeName(i), body: { metadata: { labels: { 'bench.cirrus/seq': String(i) } } } },
      mergePatch,
    ),
  patchNodeStatus: (core, i) => {
    const time = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const condition = { type: 'NetworkUnavailable', status: 'False', reason: 'RouteCreated', message: `seq ${i}` };
    const body = { status: { conditions: [{ ...condition, lastTransitionTime: time, lastHeartbeatTime: time }] } };
    return core.patchNodeStatus({ name: nodeName(i), body }, strategicMergePatch);
  },
  createNamespacedEvent: (core, i) => {
    const reference = { apiVersion: 'v1', kind: 'Node', name: nodeName(i), uid: '' };
    const spec = { type: 'Normal', reason: 'Synced', message: 'Node synced successfully', component: 'bench' } as const;
    return core.createNamespacedEvent({ namespace, body: eventFor(reference, spec) });
  },
  readNamespacedService: (core) => core.readNamespacedService({ namespace, name: service }),
  patchNamespacedServiceStatus: (core, i) =>
    core.patchNamespacedServiceStatus(
      {
        namespace,
        name: service,
        body: { status: { loadBalancer: { ingress: [{ ip: `192.0.2.${(i % 250) + 1}` }] } } },
      },
      mergePatch,
    ),
};

/** The calls one reconcile makes on the hot path, for the per-reconcile figures. */
const reconciles: Record<string, readonly string[]> = {
  // node-init of a new node: read, initialization patch, addresses, the Synced Event.
  'node-init (initialize a node)': ['readNode', 'patchNode', 'patchNodeStatus', 'createNamespacedEvent'],
  // service-lb of a new Service: read, finalizer, two Events, the ingress.
  'service-lb (ensure a new load balancer)': [
    'readNamespacedService',
    'patchNamespacedServiceStatus',
    'createNamespacedEvent',
    'createNamespacedEvent',
    'patchNamespacedServiceStatus',
  ],
};

export async function apiClient(bench: Bench): Promise<ScenarioResult> {
  const calls = bench.full ? 1000 : 200;
  const rounds = bench.full ? 7 : 5;
  const clients: Record<string, Core> = {
    'client-node': bench.kubeConfig.makeApiClient(CoreV1Api),
    lean: new LeanCore(bench.kubeConfig),
  };
  await setUp(bench.kubeConfig);
  const figures: Figure[] = [];
  const detail: Record<string, number> = { calls, rounds };
  const perCall: Record<string, Record<string, number>> = { 'client-node': {}, lean: {} };
  try {
    for (const [name, op] of Object.entries(ops)) {
      const cpu = await measure(clients, op, calls, rounds);
      for (const [client, micros] of Object.entries(cpu)) {
        (perCall[client] ?? {})[name] = micros;
        detail[`${name} ${client} µs`] = micros;
        figures.push({ scenario: group, metric: `${name} CPU per call, ${client}`, value: micros, unit: 'µs' });
      }
      const saved = 1 - (cpu['lean'] ?? 0) / (cpu['client-node'] ?? 1);
      figures.push({ scenario: group, metric: `${name}: lean saves`, value: saved * 100, unit: '%' });
    }
    for (const [reconcile, names] of Object.entries(reconciles)) {
      const total = (client: string): number => names.reduce((sum, n) => sum + (perCall[client]?.[n] ?? 0), 0);
      const note = names.join(' + ');
      figures.push({
        scenario: group,
        metric: `${reconcile}, client-node`,
        value: total('client-node'),
        unit: 'µs',
        note,
      });
      figures.push({ scenario: group, metric: `${reconcile}, lean`, value: total('lean'), unit: 'µs', note });
    }
  } finally {
    await tearDown(bench);
  }
  return { figures, detail };
}

// Rounds of `calls` sequential calls, the clients alternating; a warm-up round each first.
async function measure(
  clients: Record<string, Core>,
  op: Op,
  calls: number,
  rounds: number,
): Promise<Record<string, number>> {
  const samples: Record<string, number[]> = {};
  for (let round = -1; round < rounds; round += 1) {
    for (const [client, core] of Object.entries(clients)) {
      const start = process.cpuUsage();
      for (let i = 0; i < calls; i += 1) await op(core, i);
      const used = process.cpuUsage(start);
      if (round >= 0) (samples[client] ??= []).push((used.user + used.system) / calls);
    }
  }
  return Object.fromEntries(Object.entries(samples).map(([client, values]) => [client, median(values)]));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function nodeName(i: number): string {
  return `${group}-${i % nodeCount}`;
}

// Nodes as a kubelet registers them (conditions, addresses, capacity, node info, images), so that
// what is parsed and walked per call has a real Node's size; one LoadBalancer Service.
async function setUp(kubeConfig: KubeConfig): Promise<void> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  for (let i = 0; i < nodeCount; i += 1) {
    const name = nodeName(i);
    await core.createNode({ body: { metadata: { name, labels: { 'bench.cirrus/group': group } } } });
    await core.patchNodeStatus({ name, body: kubeletStatus(i) }, mergePatch);
  }
  await core.deleteNamespacedService({ namespace, name: service }).catch(() => undefined);
  await core.createNamespacedService({
    namespace,
    body: {
      metadata: { name: service, labels: { 'bench.cirrus/group': group } },
      spec: {
        type: 'LoadBalancer',
        ports: [
          { name: 'http', port: 80, protocol: 'TCP' },
          { name: 'https', port: 443, protocol: 'TCP' },
        ],
      },
    },
  });
}

async function tearDown(bench: Bench): Promise<void> {
  await deleteNodes(bench.kube, group);
  await bench.kube.call('DELETE', `/api/v1/namespaces/${namespace}/services/${service}`);
  await bench.kube.call('DELETE', `/api/v1/namespaces/${namespace}/events?fieldSelector=source%3Dbench`);
}

function kubeletStatus(i: number): { status: NonNullable<V1Node['status']> } {
  const time = new Date();
  const condition = (type: string, status: string, reason: string): Record<string, unknown> => ({
    type,
    status,
    reason,
    message: `kubelet says ${reason}`,
    lastHeartbeatTime: time,
    lastTransitionTime: time,
  });
  const resources = { cpu: '4', memory: '16318008Ki', pods: '110', 'ephemeral-storage': '101445540Ki' };
  const status = {
    conditions: [
      condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory'),
      condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure'),
      condition('PIDPressure', 'False', 'KubeletHasSufficientPID'),
      condition('Ready', 'True', 'KubeletReady'),
    ],
    addresses: [
      { type: 'InternalIP', address: `10.0.${Math.floor(i / 250)}.${(i % 250) + 1}` },
      { type: 'Hostname', address: nodeName(i) },
    ],
    capacity: resources,
    allocatable: resources,
    daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
    nodeInfo: {
      machineID: 'ec2a1b2c3d4e5f60718293a4b5c6d7e8',
      systemUUID: 'ec2a1b2c-3d4e-5f60-7182-93a4b5c6d7e8',
      bootID: '6f1c7a52-1f0e-4b7e-9d3c-2a7b8c9d0e1f',
      kernelVersion: '6.8.0-1021-aws',
      osImage: 'Ubuntu 24.04.1 LTS',
      containerRuntimeVersion: 'containerd://1.7.24',
      kubeletVersion: 'v1.36.0',
      kubeProxyVersion: 'v1.36.0',
      operatingSystem: 'linux',
      architecture: 'amd64',
    },
    images: Array.from({ length: 12 }, (_, n) => ({
      names: [`registry.k8s.io/image-${n}@sha256:${'0'.repeat(63)}${n % 10}`, `registry.k8s.io/image-${n}:v1.${n}.0`],
      sizeBytes: 10_000_000 + n * 1_000_000,
    })),
  };
  return { status: status as unknown as NonNullable<V1Node['status']> };
}
