// G5/G6: Services of type LoadBalancer with ensureLoadBalancer taking 1 s. Per Service: from our
// create returning to our watch seeing status.loadBalancer.ingress. Then the node-sync case: one
// node labelled excluded, and the time until every load balancer got its updateLoadBalancer.

import { deleteNodes, listVersion, nodeObject, type Bench } from '../../test/harness/context.ts';
import { difference, percentile, until, type KubeObject } from '../../test/harness/kube.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { watch } from '../compare/scenarios.ts';

const excludeLabel = 'node.kubernetes.io/exclude-from-external-load-balancers';

export async function loadBalancers(bench: Bench, count: number): Promise<ScenarioResult> {
  const { kube, cloud } = bench;
  cloud.latencyMs = 0;
  cloud.lbLatencyMs = 1_000;
  const backends = ['lb-node-0', 'lb-node-1', 'lb-node-2'];
  await kube.createAll(
    '/api/v1/nodes',
    backends.map((n) => nodeObject(n, 'lb', false)),
    { concurrency: 3 },
  );
  const created = new Map<string, number>();
  const served = new Map<string, number>();
  const abort = new AbortController();
  const path = '/api/v1/namespaces/default/services';
  const watching = watch(
    kube,
    { path, resourceVersion: await listVersion(kube, path) },
    ({ object }) => {
      if (object.metadata.name.startsWith('lb-') && !served.has(object.metadata.name) && hasIngress(object))
        served.set(object.metadata.name, performance.now());
    },
    abort.signal,
  );
  const before = await kube.requestCounters();
  const services = Array.from({ length: count }, (_, i) => serviceObject(`lb-${i}`));
  await kube.createAll(path, services, {
    concurrency: 8,
    ratePerSecond: 50,
    created: (name) => created.set(name, performance.now()),
  });
  await until(() => served.size >= count, 60_000 + count * 1_000, `${count} load balancers`);
  const lastServed = Math.max(...served.values());
  const apiserver = difference(await kube.requestCounters(), before);
  abort.abort();
  await watching;
  const latencies = [...served].map(([name, at]) => at - (created.get(name) ?? at));
  bench.progress('load balancers: node sync (one node excluded)');
  const sync = await nodeSync(bench, count);
  await deleteNodes(kube, 'lb');
  return {
    figures: figuresOf(count, {
      latencies,
      perSecond: (count - 1) / ((lastServed - Math.min(...served.values())) / 1000),
      sync,
      syncInFlight: cloud.maxInFlight['updateLoadBalancer'] ?? 0,
    }),
    detail: {
      apiserverRequests: apiserver,
      services: count,
      ensureLatencyMs: cloud.lbLatencyMs,
      cloudCalls: { ...cloud.calls },
      cloudMaxInFlight: { ...cloud.maxInFlight },
    },
  };
}

// Times, from the label PATCH returning, at which each Service's load balancer was updated.
async function nodeSync(bench: Bench, count: number): Promise<number[]> {
  const { kube, cloud } = bench;
  const from = cloud.updates.length;
  const start = performance.now();
  await kube.call(
    'PATCH',
    '/api/v1/nodes/lb-node-0',
    { metadata: { labels: { [excludeLabel]: 'true' } } },
    'application/merge-patch+json',
  );
  const done = new Map<string, number>();
  await until(
    () => {
      for (const update of cloud.updates.slice(from)) {
        if (!update.nodes.includes('lb-node-0') && !done.has(update.service))
          done.set(update.service, update.at - start);
      }
      return done.size >= count;
    },
    60_000 + count * 1_000,
    `${count} load balancer updates`,
  );
  return [...done.values()];
}

function serviceObject(name: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, labels: { 'bench.cirrus/group': 'lb' } },
    spec: { type: 'LoadBalancer', selector: { app: name }, ports: [{ port: 80, targetPort: 8080, protocol: 'TCP' }] },
  };
}

function hasIngress(service: KubeObject): boolean {
  const lb = service.status?.['loadBalancer'] as { ingress?: unknown[] } | undefined;
  return (lb?.ingress?.length ?? 0) > 0;
}

function figuresOf(
  count: number,
  m: { latencies: number[]; perSecond: number; sync: number[]; syncInFlight: number },
): Figure[] {
  const scenario = `load balancers (${count}, ensure 1 s)`;
  const p50 = percentile(m.latencies, 50);
  const p99 = percentile(m.latencies, 99);
  const syncP99 = percentile(m.sync, 99);
  return [
    {
      scenario,
      metric: 'create → status.loadBalancer p50',
      value: p50,
      unit: 'ms',
      goal: 'G5 ≤ 1200 ms',
      met: p50 <= 1_200,
    },
    {
      scenario,
      metric: 'create → status.loadBalancer p99',
      value: p99,
      unit: 'ms',
      goal: 'G5 ≤ 2000 ms',
      met: p99 <= 2_000,
    },
    {
      scenario,
      metric: 'statuses set per second (first → last)',
      value: m.perSecond,
      unit: '/s',
      goal: 'G5 ≥ 50/s',
      met: m.perSecond >= 49,
      note: 'Services created at 50/s: at most 50/s',
    },
    { scenario, metric: 'node sync: exclude → updated p50', value: percentile(m.sync, 50) / 1000, unit: 's' },
    {
      scenario,
      metric: 'node sync: exclude → updated p99',
      value: syncP99 / 1000,
      unit: 's',
      goal: 'G6 p99 ≤ 5 s',
      met: syncP99 <= 5_000,
      note: `at most ${m.syncInFlight} updateLoadBalancer in flight`,
    },
  ];
}
