// G1/G2/G3: Nodes created with the uninitialized taint, initialized by cirrus through the relay.
// Per node: from the moment our create returned to the moment our watch sees the taint gone.
// API requests per node: the API server's apiserver_request_total before and after, minus ours.

import { deleteNodes, listVersion, nodeObject, uninitializedTaint, type Bench } from '../../test/harness/context.ts';
import { difference, percentile, sleep, until, type Counts, type KubeObject } from '../../test/harness/kube.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { watch } from '../compare/scenarios.ts';

export interface NodeRun {
  readonly mode: 'steady' | 'burst';
  readonly count: number;
  /** Creates per second (steady), or undefined for as fast as the API server accepts. */
  readonly ratePerSecond?: number;
}

const writeVerbs = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY']);

export async function nodeInit(bench: Bench, run: NodeRun, ceiling: number | undefined): Promise<ScenarioResult> {
  const { kube } = bench;
  const group = `init-${run.mode}`;
  const created = new Map<string, number>();
  const cleared = new Map<string, number>();
  const abort = new AbortController();
  const watching = watch(
    kube,
    { path: '/api/v1/nodes', resourceVersion: await listVersion(kube, '/api/v1/nodes') },
    ({ object }) => {
      const name = object.metadata.name;
      if (!name.startsWith(group) || cleared.has(name) || tainted(object)) return;
      cleared.set(name, performance.now());
    },
    abort.signal,
  );
  const before = await kube.requestCounters();
  const sentBefore = { ...kube.sent };
  const start = performance.now();
  const objects = Array.from({ length: run.count }, (_, i) => nodeObject(`${group}-${i}`, group, true));
  await kube.createAll('/api/v1/nodes', objects, {
    concurrency: run.ratePerSecond === undefined ? 32 : 8,
    ...(run.ratePerSecond === undefined ? {} : { ratePerSecond: run.ratePerSecond }),
    created: (name) => created.set(name, performance.now()),
  });
  const lastCreate = performance.now();
  await until(() => cleared.size >= run.count, 60_000 + run.count * 200, `${run.count} nodes initialized`);
  const lastCleared = Math.max(...cleared.values());
  await sleep(1_000); // Events and anything else the last syncs write
  const apiserver = difference(await kube.requestCounters(), before);
  const ours = difference(kube.sent, sentBefore);
  abort.abort();
  await watching;
  await deleteNodes(kube, group);
  await sleep(2_000); // let the deletions' deliveries pass before the next scenario
  const latencies = [...cleared].map(([name, at]) => at - (created.get(name) ?? at));
  const perSecond = run.count / ((lastCleared - start) / 1000);
  const cirrusWrites = writesOf(apiserver) - writesOf(ours);
  return {
    figures: figuresOf(run, {
      latencies,
      perSecond,
      drainMs: lastCleared - lastCreate,
      writesPerNode: cirrusWrites / run.count,
      readsPerNode: (readsOf(apiserver) - readsOf(ours)) / run.count,
      ceiling,
    }),
    detail: {
      apiserverRequests: apiserver,
      harnessRequests: ours,
      nodes: run.count,
      cloudLatencyMs: bench.cloud.latencyMs,
    },
  };
}

function tainted(node: KubeObject): boolean {
  const taints = (node.spec?.['taints'] ?? []) as { key?: string }[];
  return taints.some((t) => t.key === uninitializedTaint);
}

// Writes on nodes and events only: the API server's own background writes (leases, endpoints) are not cirrus's.
function writesOf(counts: Counts): number {
  return countOf(counts, (verb, resource) => writeVerbs.has(verb) && /^(nodes|events)/.test(resource));
}

// Reads of the objects cirrus works on (GET and LIST of nodes and services; watches excluded).
function readsOf(counts: Counts): number {
  return countOf(counts, (verb, resource) => (verb === 'GET' || verb === 'LIST') && /^(nodes|services)/.test(resource));
}

function countOf(counts: Counts, wanted: (verb: string, resource: string) => boolean): number {
  return Object.entries(counts)
    .filter(([key]) => wanted(key.split(' ')[0] ?? '', key.split(' ')[1] ?? ''))
    .reduce((sum, [, n]) => sum + n, 0);
}

interface Measured {
  readonly latencies: number[];
  readonly perSecond: number;
  readonly drainMs: number;
  readonly writesPerNode: number;
  readonly readsPerNode: number;
  readonly ceiling: number | undefined;
}

function figuresOf(run: NodeRun, m: Measured): Figure[] {
  const scenario = `node init, ${run.mode} (${run.count}${run.ratePerSecond === undefined ? ', burst' : ` at ${run.ratePerSecond}/s`})`;
  const p50 = percentile(m.latencies, 50);
  const p99 = percentile(m.latencies, 99);
  const figures: Figure[] = [
    {
      scenario,
      metric: 'create → taint removed p50',
      value: p50,
      unit: 'ms',
      ...(run.mode === 'steady' ? { goal: 'G1 ≤ 250 ms', met: p50 <= 250 } : {}),
    },
    {
      scenario,
      metric: 'create → taint removed p99',
      value: p99,
      unit: 'ms',
      ...(run.mode === 'steady' ? { goal: 'G1 ≤ 1000 ms', met: p99 <= 1000 } : {}),
    },
    {
      scenario,
      metric: 'nodes initialized per second',
      value: m.perSecond,
      unit: '/s',
      ...(m.ceiling === undefined
        ? {}
        : { note: `${((100 * m.perSecond) / m.ceiling).toFixed(0)} % of the PATCH ceiling` }),
    },
    {
      scenario,
      metric: 'API writes per node (nodes+events)',
      value: m.writesPerNode,
      unit: 'req',
      goal: 'G3 ≤ 2',
      met: m.writesPerNode <= 2,
    },
    { scenario, metric: 'API reads per node (GET/LIST nodes+services)', value: m.readsPerNode, unit: 'req' },
  ];
  if (run.mode === 'burst') {
    figures.push({
      scenario,
      metric: 'last create → last taint removed',
      value: m.drainMs / 1000,
      unit: 's',
      goal: 'G2 ≤ 15 s (1000 nodes)',
      met: m.drainMs <= 15_000,
    });
    if (m.ceiling !== undefined)
      figures.push({
        scenario,
        metric: 'init rate / PATCH ceiling',
        value: (100 * m.perSecond) / m.ceiling,
        unit: '%',
        goal: 'G2 ≥ 50 %',
        met: m.perSecond >= m.ceiling / 2,
      });
  }
  return figures;
}
