// The relay's memory (issue 30 item 4, ADR 0024): heap bytes per Node and per Service that the
// relay's store of known objects holds, for realistic objects (test/harness/realistic.ts: a Node as
// a kubelet reports it, 50 images; a LoadBalancer Service with its ingress), before and after the
// store kept only what its readers need.
//
// - Through the API server (1,000 of each): the objects are created, then one ResourceWatch per
//   kind LISTs them through the real code path and is stopped; what it keeps is measured. "Whole"
//   is what the store kept before (each listed object normalized, relay/resources.ts `normalize`),
//   measured over the same LIST.
// - A direct feed (1,000 and 5,000 of each, no API server): the objects, as JSON parsed like a LIST
//   page, go through the relist diff (relay/list.ts `diffListed`, what the store is after a LIST);
//   "whole" is the same diff keeping each normalized object, as before.
//
// Heap used after a full collection (gc exposed at run time) while the store is reachable, less the
// heap used once it is let go. Only the store's own objects count: strings and shapes it shares
// with the rest of the process (property names, short interned values) do not.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createLogger } from '../../app/log.ts';
import { diffListed, listAll } from '../../relay/list.ts';
import { createRelayMetrics } from '../../relay/metrics.ts';
import { normalize, nodes, services, type KubeObject, type ResourceType } from '../../relay/resources.ts';
import { defaultWatchSettings, ResourceWatch } from '../../relay/watch.ts';
import type { Bench } from '../../test/harness/context.ts';
import type { KubeObject as HarnessObject } from '../../test/harness/kube.ts';
import { until } from '../../test/harness/kube.ts';
import { realisticNode, realisticService } from '../../test/harness/realistic.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';

const namespace = 'relay-memory';
const group = 'relay-memory';

// A full collection, with or without --expose-gc on the command line.
const collect: () => void = (() => {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed !== undefined) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

function heapUsed(): number {
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}

// Heap bytes per object of a store: the heap used while it is reachable, less the heap used once
// it is let go (so that whatever else the process made meanwhile does not count).
function bytesPerObject(build: () => { store: unknown; size: number }): number {
  const holder: { built?: { store: unknown; size: number } } = { built: build() };
  const size = holder.built?.size ?? 0;
  if (size === 0) throw new Error('relay-memory: an empty store');
  const alive = heapUsed();
  delete holder.built;
  const released = heapUsed();
  return Math.round((alive - released) / size);
}

const retainWhole = (type: ResourceType): ResourceType => ({ ...type, retain: (object) => object });

// A LIST's items, as the relist diff gets them: JSON parsed, one string per value.
function parsedItems(count: number, make: (i: number) => KubeObject): KubeObject[] {
  return JSON.parse(JSON.stringify(Array.from({ length: count }, (_, i) => make(i)))) as KubeObject[];
}

// What the store holds after a LIST of `count` objects, fed directly (no API server).
function directFeed(type: ResourceType, count: number, make: (i: number) => KubeObject): number {
  return bytesPerObject(() => {
    const items = parsedItems(count, (i) => {
      const object = make(i);
      return {
        ...object,
        metadata: {
          ...object.metadata,
          uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
          resourceVersion: String(1000 + i),
        },
      };
    });
    const { next } = diffListed(
      type,
      { items, resourceVersion: '1' },
      { known: new Map(), seed: undefined, observedAt: 0 },
    );
    return { store: next, size: next.size };
  });
}

// What one ResourceWatch keeps after its LIST through the API server (stopped once it has listed),
// and what the same LIST kept whole would take.
async function throughWatch(bench: Bench, type: ResourceType): Promise<{ kept: number; whole: number; size: number }> {
  const abort = new AbortController();
  // Made outside the watch, so that what is let go below is the watch and its store alone.
  const deps = {
    kubeConfig: bench.kubeConfig,
    settings: defaultWatchSettings,
    onChange: () => undefined,
    metrics: createRelayMetrics({ processMetrics: false, gauges: () => undefined }),
    log: createLogger({ name: 'relay-memory', level: 'warn' }),
  };
  let watch: ResourceWatch | undefined = new ResourceWatch(type, deps);
  const running = watch.run(abort.signal);
  await until(() => watch?.listed === true, 120_000, `the LIST of ${type.resource}`);
  abort.abort();
  await running;
  const size = watch.size;
  const alive = heapUsed();
  watch = undefined;
  const kept = Math.round((alive - heapUsed()) / size);
  deps.log.debug({ resource: type.resource, size, kept }, 'measured');
  // The same LIST, kept whole (normalized), as the store kept it before.
  const listed = await listAll(bench.kubeConfig, type, {
    pageSize: defaultWatchSettings.listPageSize,
    timeoutMs: 60_000,
    signal: new AbortController().signal,
  });
  const text = JSON.stringify(listed);
  const whole = bytesPerObject(() => {
    const { next } = diffListed(retainWhole(type), JSON.parse(text) as typeof listed, {
      known: new Map(),
      seed: undefined,
      observedAt: 0,
    });
    return { store: next, size: next.size };
  });
  return { kept, whole, size };
}

async function createObjects(bench: Bench, count: number): Promise<void> {
  const { kube } = bench;
  await kube.call('POST', '/api/v1/namespaces', { metadata: { name: namespace } }).catch(() => undefined);
  const nodeObjects = Array.from({ length: count }, (_, i) => realisticNode(group, i) as unknown as HarnessObject);
  await kube.createAll('/api/v1/nodes', nodeObjects, { concurrency: 16 });
  const serviceObjects = Array.from({ length: count }, (_, i) => realisticService(namespace, group, i));
  await kube.createAll(`/api/v1/namespaces/${namespace}/services`, serviceObjects as unknown as HarnessObject[], {
    concurrency: 16,
  });
  // A Service's status is not taken on create: its load balancer's ingress, as a provider writes it.
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const service = serviceObjects[next++];
      if (service === undefined) return;
      await kube.call(
        'PATCH',
        `/api/v1/namespaces/${namespace}/services/${service.metadata?.name ?? ''}/status`,
        { status: service['status'] },
        'application/merge-patch+json',
      );
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

async function deleteObjects(bench: Bench): Promise<void> {
  await bench.kube.call('DELETE', `/api/v1/nodes?labelSelector=relay-memory.cirrus%2Fgroup%3D${group}`);
  await bench.kube.call('DELETE', `/api/v1/namespaces/${namespace}`).catch(() => undefined);
}

function figures(kind: string, count: number, how: string, measured: { whole: number; kept: number }): Figure[] {
  const base = { scenario: 'relay-memory', unit: 'B' };
  return [
    { ...base, metric: `${kind} state per object, ${count}, ${how}, whole (before)`, value: measured.whole },
    {
      ...base,
      metric: `${kind} state per object, ${count}, ${how}, kept (after)`,
      value: measured.kept,
      note: `${Math.round((100 * measured.kept) / measured.whole)} % of whole`,
    },
  ];
}

/** The scenario: through the API server at `apiCount` objects of each kind, directly at 1,000 and 5,000. */
export async function relayMemory(bench: Bench, apiCount = 1000): Promise<ScenarioResult> {
  const out: Figure[] = [];
  const detail: Record<string, number> = {};
  bench.progress(`relay memory: creating ${apiCount} Nodes and ${apiCount} LoadBalancer Services`);
  await createObjects(bench, apiCount);
  try {
    for (const [kind, type] of [
      ['Node', nodes],
      ['Service', services],
    ] as const) {
      const measured = await throughWatch(bench, type);
      detail[`${kind} objects listed`] = measured.size;
      out.push(...figures(kind, apiCount, 'through the API server', measured));
    }
  } finally {
    await deleteObjects(bench);
  }
  for (const count of [1000, 5000]) {
    bench.progress(`relay memory: a direct feed of ${count} Nodes and ${count} Services`);
    const makeNode = (i: number): KubeObject => normalize(nodes, realisticNode(group, i));
    const makeService = (i: number): KubeObject => normalize(services, realisticService(namespace, group, i));
    out.push(
      ...figures('Node', count, 'direct feed', {
        whole: directFeed(retainWhole(nodes), count, makeNode),
        kept: directFeed(nodes, count, makeNode),
      }),
      ...figures('Service', count, 'direct feed', {
        whole: directFeed(retainWhole(services), count, makeService),
        kept: directFeed(services, count, makeService),
      }),
    );
  }
  return { figures: out, detail };
}
