// `npm run bench -- --only scale [--scale n]` (issue 29): a simulated cluster whose Nodes kwok
// (tools/kwok/) keeps alive as kubelets would — a Lease renewed per Node, status reported — against
// the stock Go CCM at cirrus's width, `cirrus start` and the Knative shape (`cirrus relay` and one
// `cirrus serve` per function on loopback; bench/compare/contenders.ts), one after the other, each in
// processes of its own:
//
//   1. waves: n Nodes registered tainted node.cloudprovider.kubernetes.io/uninitialized, in 5
//      waves created at once; create → taint gone, p50 and p99 per wave;
//   2. n/5 LoadBalancer Services, ensured (ensure/update/delete 1 s, other calls 50 ms);
//   3. at rest, 20 s: the API requests per second the CCM adds with only kwok's heartbeats around,
//      and for cirrus the reconcile requests each function answers per minute;
//   4. churn: a tenth of the Nodes NotReady (kwok lets go of them, the harness reports Ready=False
//      as their kubelet would) and back (kwok takes them again and reports Ready); a twentieth
//      NotReady with their machines gone from the cloud (instance gone → the CCM's node-lifecycle
//      deletes the Node); a tenth relabelled node.kubernetes.io/exclude-from-external-load-balancers
//      (node-set change → every load balancer updated without them); a quarter of the Services
//      deleted and as many created;
//   5. the final states: every Node initialized, the gone ones deleted, every Service served and
//      its load balancer's last update on the right Nodes, every deleted Service gone; each that
//      is not counts as lost.
//
// Costs as bench/compare/scenarios.ts reads them (measured()): the CCM's CPU and peak RSS, the API
// server's CPU, and the API requests on Nodes, Services and Events minus the harness's own. kwok's
// Node status writes land on nodes/status too; at rest and in churn the CCMs write no Node status,
// so those windows' figures leave nodes/status writes out (see ccmRequests()). For the Knative shape
// each process's CPU and peak RSS in the waves and at rest are kept too (./scale-split.ts). An SVG beside the
// results plots each CCM's resident set over the run and, for cirrus, its relay's queue depth.
//
// The full size is --scale 5000 (5,000 Nodes, 1,000 Services); the default (200 Nodes) fits 2 cores.

import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ControlPlane } from '../../tools/control-plane/index.ts';
import { freePort, startProcess, type ManagedProcess } from '../../tools/control-plane/processes.ts';
import { kwokStages, resolveKwok } from '../../tools/kwok/assets.ts';
import { listVersion, nodeObject, uninitializedTaint, type Bench } from '../../test/harness/context.ts';
import { percentile, sleep, type Kube, type KubeObject } from '../../test/harness/kube.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { contenders, startCcm, type CloudCalls, type ContenderName, type RunningCcm } from '../compare/contenders.ts';
import { goCcm } from '../compare/go-ccm.ts';
import { commandName, memoryMb } from '../compare/procfs.ts';
import { measured, waitFor, watch, type Costs, type Harness, type WatchStats } from '../compare/scenarios.ts';
import { buildShipped } from '../compare/shipped.ts';
import { answeredByFunction, invocationFigures, processFigures } from './scale-split.ts';

export interface ScaleSize {
  readonly nodes: number;
  readonly services: number;
}

/** The default: small enough for 2 cores. */
export const defaultScale = 200;
/** The size issue 29 reads: 5,000 Nodes, 1,000 Services. */
export const fullScale = 5000;

/** `--scale n`: n Nodes and n/5 LoadBalancer Services (at least 20 Nodes, for the churn's fractions). */
export function scaleSizeOf(text: string | undefined): ScaleSize {
  const nodes = text === undefined ? defaultScale : Number(text);
  if (!(Number.isInteger(nodes) && nodes >= 20)) throw new Error(`--scale: "${text}" is not an integer ≥ 20`);
  return { nodes, services: Math.max(1, Math.floor(nodes / 5)) };
}

/** The CCMs issue 29 sets side by side, and issue 44's split deployment. */
// The Go CCM at cirrus's width, `cirrus start` as shipped (the build: bench/compare/shipped.ts), and
// the Knative shape of the same build.
const scaleContenders: readonly ContenderName[] = ['go-width', 'cirrus-build', 'cirrus-knative'];

const group = 'scale';
const groupLabel = 'bench.cirrus/group';
// kwok manages the Nodes that carry this label, and lets go of a Node when it is removed.
const kwokLabel = 'bench.cirrus/kwok';
const excludeLabel = 'node.kubernetes.io/exclude-from-external-load-balancers';
const servicesPath = '/api/v1/namespaces/default/services';
const waves = 5;
const restSeconds = 20;
const sampleEveryMs = 500;

interface Track {
  readonly created: Map<string, number>;
  readonly initialized: Map<string, number>;
  readonly ready: Map<string, boolean>;
  readonly deleted: Map<string, number>;
  readonly served: Map<string, number>;
  readonly servicesGone: Set<string>;
}

interface Sample {
  readonly t: number;
  readonly rssMb: number;
  readonly queueDepth: number | undefined;
}

interface ContenderRun {
  readonly figures: Figure[];
  readonly samples: Sample[];
  readonly lost: string[];
}

export async function scale(
  bench: Bench,
  controlPlane: ControlPlane,
  size: ScaleSize,
): Promise<{ result: ScenarioResult; svg: string }> {
  const { progress } = bench;
  const kwok = await resolveKwok({ build: true, progress });
  const go = await goCcm(progress);
  const apiserverPid = controlPlane.pids.find((pid) => commandName(pid) === 'kube-apiserver');
  if (apiserverPid === undefined) throw new Error('no kube-apiserver process among the control plane’s');
  const logDir = await mkdtemp(join(tmpdir(), 'cirrus-scale-'));
  progress(
    `scale: ${size.nodes} Nodes kept alive by kwok ${kwok.version}, ${size.services} Services; logs in ${logDir}`,
  );
  const shipped = await buildShipped(progress);
  const kwokProcess = await startKwok(kwok.binary, controlPlane.info.adminKubeconfig, logDir);
  const harness: Harness = { kube: bench.kube, apiserverPid };
  const runs = new Map<ContenderName, ContenderRun>();
  try {
    for (const name of scaleContenders) {
      const settings = { kubeconfig: controlPlane.info.adminKubeconfig, goBinary: go.binary, shipped };
      const ccm = await startCcm(contenders[name], {
        ...settings,
        logDir,
        tag: `scale-${name}-${size.nodes}`,
        latencyMs: 50,
        lbLatencyMs: 1_000,
      });
      try {
        runs.set(name, await runOne(harness, ccm, size, { kwok: kwokProcess, progress }));
      } finally {
        await ccm.stop();
        await cleanUp(bench.kube);
      }
    }
  } finally {
    await kwokProcess.stop(10_000);
    await shipped.remove();
  }
  const figures = [...runs.values()].flatMap((r) => r.figures);
  const lost = [...runs].flatMap(([name, r]) => r.lost.map((line) => `${name}: ${line}`));
  return {
    result: {
      figures,
      detail: {
        nodes: size.nodes,
        services: size.services,
        waves,
        kwok: kwok.version,
        goCcm: go.binary,
        logDir,
        ...(lost.length > 0 ? { lost: lost.slice(0, 50).join('\n') } : {}),
      },
    },
    svg: plot(runs),
  };
}

/** Writes the plot into `dir` as scale-<time>.svg; returns its path. */
export async function writePlot(dir: string, svg: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, `scale-${new Date().toISOString().replaceAll(':', '-')}.svg`);
  await writeFile(path, svg);
  return path;
}

async function startKwok(binary: string, kubeconfig: string, logDir: string): Promise<ManagedProcess> {
  const args = [`--kubeconfig=${kubeconfig}`, `--manage-nodes-with-label-selector=${kwokLabel}=managed`];
  // Upstream's default Node stages (tools/kwok/): initialized at once, heartbeats through Leases.
  args.push(
    `--config=${kwokStages(binary)}`,
    `--server-address=127.0.0.1:${await freePort()}`,
    '--node-lease-duration-seconds=40',
  );
  return startProcess('kwok', binary, args, join(logDir, 'kwok.log'));
}

async function runOne(
  h: Harness,
  ccm: RunningCcm,
  size: ScaleSize,
  context: { kwok: ManagedProcess; progress: (line: string) => void },
): Promise<ContenderRun> {
  const { kube } = h;
  const { kwok, progress } = context;
  const label = ccm.contender.label;
  const scenario = `scale, ${label}`;
  const figures: Figure[] = [];
  const figure = (metric: string, value: number | undefined, unit: string, note?: string): void => {
    figures.push({ scenario, metric, value, unit, ...(note === undefined ? {} : { note }) });
  };
  const track: Track = {
    created: new Map(),
    initialized: new Map(),
    ready: new Map(),
    deleted: new Map(),
    served: new Map(),
    servicesGone: new Set(),
  };
  const abort = new AbortController();
  const watches = { nodes: { resumed: 0, relisted: 0 }, services: { resumed: 0, relisted: 0 } };
  const terminatedBefore = await terminatedWatchers(kube);
  const watching = watchAll(kube, track, watches, abort.signal);
  // Read as the run goes (each waiting loop reads what came since), never all at once.
  const updateLog = new UpdateLog(ccm);
  const samples: Sample[] = [];
  const started = performance.now();
  const sampler = setInterval(() => {
    void sample(ccm).then((s) => samples.push({ ...s, t: (performance.now() - started) / 1000 }));
  }, sampleEveryMs);
  const alive = (): void => {
    ccm.assertAlive();
    if (kwok.hasExited()) throw new Error(`kwok exited; its log: ${kwok.logFile}`);
  };
  try {
    // 1. Waves of tainted Nodes.
    const names = Array.from({ length: size.nodes }, (_, i) => `scale-node-${i}`);
    const perWave = Math.ceil(size.nodes / waves);
    const waveCosts: Costs[] = [];
    for (let w = 0; w < waves; w++) {
      const wave = names.slice(w * perWave, (w + 1) * perWave);
      progress(`${label}: wave ${w + 1}/${waves}, ${wave.length} Nodes`);
      waveCosts.push(
        await measured(h, ccm, async () => {
          await kube.createAll('/api/v1/nodes', wave.map(kwokNode), {
            concurrency: 32,
            created: (name) => track.created.set(name, performance.now()),
          });
          await waitFor(ccm, `wave ${w + 1} initialized`, 60_000 + wave.length * 300, () => {
            alive();
            return wave.every((n) => track.initialized.has(n));
          });
        }),
      );
      const latencies = wave.map((n) => (track.initialized.get(n) ?? 0) - (track.created.get(n) ?? 0));
      figure(`wave ${w + 1} init p50`, percentile(latencies, 50), 'ms');
      figure(`wave ${w + 1} init p99`, percentile(latencies, 99), 'ms');
    }
    costFigures(figure, 'waves', waveCosts);
    processFigures(figure, ccm, 'waves', waveCosts);
    await waitFor(ccm, 'every Node Ready (kwok)', 60_000 + size.nodes * 50, () =>
      names.every((n) => track.ready.get(n) === true),
    );

    // 2. Load balancers.
    progress(`${label}: ${size.services} LoadBalancer Services`);
    const services = Array.from({ length: size.services }, (_, i) => `scale-svc-${i}`);
    const ensure = await measured(h, ccm, async () => {
      await kube.createAll(servicesPath, services.map(serviceObject), { concurrency: 8 });
      await waitFor(ccm, `${size.services} load balancers`, 60_000 + size.services * 1_500, () =>
        services.every((s) => track.served.has(s)),
      );
    });
    costFigures(figure, 'ensure', [ensure]);

    // 3. At rest.
    progress(`${label}: at rest, ${restSeconds} s`);
    const answeredBefore = await answeredByFunction(ccm);
    const rest = await measured(h, ccm, () => sleep(restSeconds * 1000));
    figure('API requests/s at rest', ccmRequests(rest) / rest.seconds, '/s', 'nodes/status writes (kwok’s) left out');
    figure('CPU at rest', rest.ccmCpuMs / rest.seconds / 10, '%');
    figure('API server CPU at rest', rest.apiserverCpuMs / rest.seconds / 10, '%');
    figure('peak RSS at rest', rest.peakRssMb, 'MB');
    processFigures(figure, ccm, 'at rest', [rest]);
    invocationFigures(figure, answeredBefore, await answeredByFunction(ccm), rest.seconds);

    // 4. Churn.
    const tenth = Math.max(1, Math.floor(size.nodes / 10));
    const twentieth = Math.max(1, Math.floor(size.nodes / 20));
    const flapping = names.slice(0, tenth);
    const gone = names.slice(tenth, tenth + twentieth);
    const excluded = names.slice(tenth + twentieth, 2 * tenth + twentieth);
    const quarter = Math.max(1, Math.floor(size.services / 4));
    const deletedServices = services.slice(0, quarter);
    const newServices = Array.from({ length: quarter }, (_, i) => `scale-svc-new-${i}`);
    let goneLatencies: number[] = [];
    let syncLatencies: number[] = [];
    const churn = await measured(h, ccm, async () => {
      progress(`${label}: churn: ${flapping.length} Nodes NotReady and back`);
      await forEach(flapping, (n) => notReady(kube, n));
      await sleep(10_000);
      await forEach(flapping, (n) => managed(kube, n, true));
      await waitFor(ccm, 'the NotReady Nodes Ready again', 60_000 + flapping.length * 200, () =>
        flapping.every((n) => track.ready.get(n) === true),
      );

      progress(`${label}: churn: ${gone.length} Nodes NotReady with their machines gone`);
      await forEach(gone, (n) => notReady(kube, n));
      // More than a node-monitor period (5 s), so that each CCM has seen them NotReady with their
      // machines still there: what is timed is the machine going, not the Node's status.
      await sleep(7_000);
      const forgotten = performance.now();
      await ccm.forget(gone);
      await waitFor(ccm, `${gone.length} Nodes deleted`, 120_000 + gone.length * 500, () =>
        gone.every((n) => track.deleted.has(n)),
      );
      goneLatencies = gone.map((n) => (track.deleted.get(n) ?? 0) - forgotten);

      progress(`${label}: churn: ${excluded.length} Nodes excluded from load balancers`);
      await updateLog.read();
      const expected = names.filter((n) => !gone.includes(n) && !excluded.includes(n)).sort();
      const relabelled = Date.now();
      await forEach(excluded, (n) => relabel(kube, n, { [excludeLabel]: 'true' }));
      const updated = new Map<string, number>();
      // The harness's NodeSetReader gives every update of one node set the same array.
      const matches = new WeakMap<readonly string[], boolean>();
      const isExpected = (nodes: readonly string[]): boolean => {
        let match = matches.get(nodes);
        if (match === undefined) matches.set(nodes, (match = sameSet(nodes, expected)));
        return match;
      };
      await waitFor(ccm, `${size.services} load balancers updated`, 120_000 + size.services * 1_500, async () => {
        const updates = await updateLog.read();
        for (const u of updates)
          if (!updated.has(u.service) && isExpected(u.nodes)) updated.set(u.service, u.at - relabelled);
        return services.every((s) => updated.has(`default/${s}`));
      });
      syncLatencies = [...updated.values()];

      progress(`${label}: churn: ${quarter} Services deleted, ${quarter} created`);
      await forEach(deletedServices, (s) => kube.call('DELETE', `${servicesPath}/${s}`).then(() => undefined));
      await kube.createAll(servicesPath, newServices.map(serviceObject), { concurrency: 8 });
      await waitFor(
        ccm,
        'the Services deleted and created',
        120_000 + quarter * 3_000,
        () => deletedServices.every((s) => track.servicesGone.has(s)) && newServices.every((s) => track.served.has(s)),
      );
    });
    figure('instance gone → Node deleted p50', percentile(goneLatencies, 50), 'ms');
    figure('instance gone → Node deleted p100', percentile(goneLatencies, 100), 'ms');
    figure('node-set change → every LB updated', Math.max(...syncLatencies), 'ms');
    figure(
      'API requests/s in churn',
      ccmRequests(churn) / churn.seconds,
      '/s',
      'nodes/status writes (kwok’s) left out',
    );
    costFigures(figure, 'churn', [churn]);

    // 5. Final states.
    const liveServices = [...services.slice(quarter), ...newServices];
    const lost = await finalStates(kube, updateLog, {
      live: names.filter((n) => !gone.includes(n)),
      gone,
      expectedBackends: names.filter((n) => !gone.includes(n) && !excluded.includes(n)).sort(),
      syncedServices: services.slice(quarter),
      liveServices,
      deletedServices,
    });
    figure('final states lost', lost.length, '');
    const peak = Math.max(...samples.map((s) => s.rssMb));
    figure('peak RSS (sampled)', peak, 'MB');
    if (lost.length > 0) progress(`${label}: ${lost.length} final states lost: ${lost.slice(0, 5).join('; ')}`);
    const terminated = (await terminatedWatchers(kube)) - terminatedBefore;
    progress(
      `${label}: done; the API server closed ${terminated} watches of Nodes or Services as too slow; ` +
        `the harness's resumed ${watches.nodes.resumed} (Nodes) and ${watches.services.resumed} (Services) ` +
        `times, listed ${watches.nodes.relisted + watches.services.relisted} times after an expired version`,
    );
    return { figures, samples, lost };
  } finally {
    clearInterval(sampler);
    abort.abort();
    await watching;
  }
}

// One watch on the scenario's Nodes and one on its Services, for the whole run.
async function watchAll(
  kube: Kube,
  track: Track,
  stats: { nodes: WatchStats; services: WatchStats },
  signal: AbortSignal,
): Promise<void> {
  const nodesPath = `/api/v1/nodes?labelSelector=${encodeURIComponent(`${groupLabel}=${group}`)}`;
  const servicesSelected = `${servicesPath}?labelSelector=${encodeURIComponent(`${groupLabel}=${group}`)}`;
  const nodes = watch(
    kube,
    { path: nodesPath, resourceVersion: await listVersion(kube, '/api/v1/nodes'), stats: stats.nodes },
    ({ type, object }) => {
      const name = object.metadata.name;
      const now = performance.now();
      if (type === 'DELETED') {
        if (!track.deleted.has(name)) track.deleted.set(name, now);
        return;
      }
      if (!track.initialized.has(name) && !taintsOf(object).includes(uninitializedTaint))
        track.initialized.set(name, now);
      track.ready.set(name, readyOf(object));
    },
    signal,
  );
  const services = watch(
    kube,
    { path: servicesSelected, resourceVersion: await listVersion(kube, servicesPath), stats: stats.services },
    ({ type, object }) => {
      const name = object.metadata.name;
      if (type === 'DELETED') track.servicesGone.add(name);
      else if (!track.served.has(name) && ingressOf(object).length > 0) track.served.set(name, performance.now());
    },
    signal,
  );
  await Promise.allSettled([nodes, services]);
}

// Watchers of Nodes and Services (the CCM's, kwok's, the harness's) the API server's watch cache
// closed as unresponsive (kubernetes, staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go,
// cacheWatcher.add), from its apiserver_terminated_watchers_total.
async function terminatedWatchers(kube: Kube): Promise<number> {
  const lines = (await kube.text('/metrics')).split('\n');
  return lines
    .filter((l) => l.startsWith('apiserver_terminated_watchers_total{') && /resource="(nodes|services)"/.test(l))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

// RSS summed over the CCM's processes; for cirrus, its relay's queue depth from /metrics.
async function sample(ccm: RunningCcm): Promise<Omit<Sample, 't'>> {
  let rssMb = 0;
  for (const p of ccm.processes) {
    try {
      rssMb += memoryMb(p.pid).rss;
    } catch {
      // gone: the run fails on its own
    }
  }
  let queueDepth: number | undefined;
  if (ccm.metricsUrl !== undefined) {
    try {
      const text = await (await fetch(ccm.metricsUrl)).text();
      // The gauge has a series per destination with keys waiting, none when nothing waits.
      const lines = text.split('\n').filter((l) => l.startsWith('cirrus_relay_queue_depth{'));
      if (text.includes('# TYPE cirrus_relay_queue_depth '))
        queueDepth = lines.reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    } catch {
      // not answering this once
    }
  }
  return { rssMb, queueDepth };
}

// The CCM's API requests: measured()'s count less the nodes/status writes, which at rest and in
// churn are kwok's (the CCMs write Node status only when they initialize a Node).
function ccmRequests(costs: Costs): number {
  const statusWrites = (counts: Record<string, number>): number =>
    ['PATCH', 'PUT', 'APPLY'].reduce((sum, verb) => sum + (counts[`${verb} nodes/status`] ?? 0), 0);
  return costs.requests.all - (statusWrites(costs.apiserverCounts) - statusWrites(costs.harnessCounts));
}

function costFigures(
  figure: (metric: string, value: number | undefined, unit: string) => void,
  phase: string,
  costs: readonly Costs[],
): void {
  const sum = (f: (c: Costs) => number): number => costs.reduce((s, c) => s + f(c), 0);
  const seconds = sum((c) => c.seconds);
  figure(`CPU, ${phase}`, sum((c) => c.ccmCpuMs) / seconds / 10, '%');
  figure(`peak RSS, ${phase}`, Math.max(...costs.map((c) => c.peakRssMb)), 'MB');
  figure(`API server CPU, ${phase}`, sum((c) => c.apiserverCpuMs) / seconds / 10, '%');
}

async function finalStates(
  kube: Kube,
  updates: UpdateLog,
  expected: {
    live: string[];
    gone: string[];
    expectedBackends: string[];
    syncedServices: string[];
    liveServices: string[];
    deletedServices: string[];
  },
): Promise<string[]> {
  const selector = `labelSelector=${encodeURIComponent(`${groupLabel}=${group}`)}`;
  const nodes = new Map(
    (await kube.call<{ items: KubeObject[] }>('GET', `/api/v1/nodes?${selector}`)).items.map((n) => [
      n.metadata.name,
      n,
    ]),
  );
  const services = new Map(
    (await kube.call<{ items: KubeObject[] }>('GET', `${servicesPath}?${selector}`)).items.map((s) => [
      s.metadata.name,
      s,
    ]),
  );
  await updates.read();
  return [...nodeLosses(nodes, expected), ...serviceLosses(services, updates.last, expected)];
}

function nodeLosses(nodes: ReadonlyMap<string, KubeObject>, expected: { live: string[]; gone: string[] }): string[] {
  const lost: string[] = [];
  for (const name of expected.live) {
    const node = nodes.get(name);
    if (node === undefined) lost.push(`Node ${name}: deleted`);
    else if (taintsOf(node).includes(uninitializedTaint)) lost.push(`Node ${name}: still tainted`);
    else if (node.spec?.['providerID'] !== `fake://${name}`) lost.push(`Node ${name}: providerID`);
  }
  for (const name of expected.gone) if (nodes.has(name)) lost.push(`Node ${name}: its machine is gone, not deleted`);
  return lost;
}

function serviceLosses(
  services: ReadonlyMap<string, KubeObject>,
  lastUpdate: ReadonlyMap<string, string[]>,
  expected: { expectedBackends: string[]; syncedServices: string[]; liveServices: string[]; deletedServices: string[] },
): string[] {
  const lost: string[] = [];
  for (const name of expected.liveServices)
    if (ingressOf(services.get(name) ?? emptyObject).length === 0) lost.push(`Service ${name}: no ingress`);
  for (const name of expected.deletedServices) if (services.has(name)) lost.push(`Service ${name}: not deleted`);
  for (const name of expected.syncedServices) {
    const backends = lastUpdate.get(`default/${name}`) ?? [];
    if (!sameSet(backends, expected.expectedBackends))
      lost.push(`Service ${name}: its load balancer's last update has ${backends.length} Nodes`);
  }
  return lost;
}

async function cleanUp(kube: Kube): Promise<void> {
  const selector = `labelSelector=${encodeURIComponent(`${groupLabel}=${group}`)}`;
  const list = await kube.call<{ items: KubeObject[] }>('GET', `${servicesPath}?${selector}`);
  await forEach(
    list.items.map((s) => s.metadata.name),
    async (name) => {
      const patch = { metadata: { finalizers: null } };
      await kube.call('PATCH', `${servicesPath}/${name}`, patch, 'application/merge-patch+json');
      await kube.call('DELETE', `${servicesPath}/${name}`).catch(ignoreNotFound);
    },
  );
  await kube.call('DELETE', `/api/v1/nodes?${selector}`);
  for (let i = 0; i < 600; i++) {
    const left = await kube.call<{ items: unknown[] }>('GET', `/api/v1/nodes?limit=1&${selector}`);
    if (left.items.length === 0) return;
    await sleep(100);
  }
  throw new Error('the scale scenario’s Nodes were not deleted within 60 s');
}

function kwokNode(name: string): KubeObject {
  const node = nodeObject(name, group, true);
  return { ...node, metadata: { ...node.metadata, labels: { [groupLabel]: group, [kwokLabel]: 'managed' } } };
}

// kwok lets go of the Node (no more Lease renewals), and the harness reports Ready=False, as a
// kubelet that lost its runtime would (no kube-controller-manager runs here to mark it Unknown).
async function notReady(kube: Kube, name: string): Promise<void> {
  await managed(kube, name, false);
  const now = new Date().toISOString();
  const condition = { type: 'Ready', status: 'False', reason: 'BenchNotReady', lastHeartbeatTime: now };
  await kube.call(
    'PATCH',
    `/api/v1/nodes/${name}/status`,
    { status: { conditions: [{ ...condition, lastTransitionTime: now, message: 'scale scenario' }] } },
    'application/strategic-merge-patch+json',
  );
}

function managed(kube: Kube, name: string, yes: boolean): Promise<void> {
  return relabel(kube, name, { [kwokLabel]: yes ? 'managed' : null });
}

async function relabel(kube: Kube, name: string, labels: Record<string, string | null>): Promise<void> {
  await kube.call('PATCH', `/api/v1/nodes/${name}`, { metadata: { labels } }, 'application/merge-patch+json');
}

async function forEach<T>(items: readonly T[], f: (item: T) => Promise<void>, concurrency = 16): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let item = items[next++]; item !== undefined; item = items[next++]) await f(item);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

function serviceObject(name: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, labels: { [groupLabel]: group } },
    spec: { type: 'LoadBalancer', selector: { app: name }, ports: [{ port: 80, targetPort: 8080, protocol: 'TCP' }] },
  };
}

const emptyObject: KubeObject = { metadata: { name: '' } };

function sameSet(a: readonly string[], sortedB: readonly string[]): boolean {
  if (a.length !== sortedB.length) return false;
  const sorted = [...a].sort();
  return sorted.every((x, i) => x === sortedB[i]);
}

function taintsOf(node: KubeObject): string[] {
  return ((node.spec?.['taints'] ?? []) as { key?: string }[]).map((t) => t.key ?? '');
}

function readyOf(node: KubeObject): boolean {
  const conditions = (node.status?.['conditions'] ?? []) as { type?: string; status?: string }[];
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

function ingressOf(service: KubeObject): unknown[] {
  const lb = service.status?.['loadBalancer'] as { ingress?: unknown[] } | undefined;
  return lb?.ingress ?? [];
}

function ignoreNotFound(error: unknown): void {
  if (!/: 404 /.test((error as Error).message)) throw error;
}

// The plot: each CCM's resident set over the run (left axis), and cirrus's relay queue depth
// (right axis, dashed), in the manner of bench/chart.ts.
function plot(runs: ReadonlyMap<ContenderName, ContenderRun>): string {
  const width = 900;
  const height = 420;
  const margin = { left: 70, right: 80, top: 40, bottom: 50 };
  const colours = ['#5c6bc0', '#ef6c00', '#26a69a', '#ab47bc'];
  const all = [...runs.values()].flatMap((r) => r.samples);
  const tMax = Math.max(1, ...all.map((s) => s.t));
  const rssMax = Math.max(1, ...all.map((s) => s.rssMb)) * 1.1;
  const depthMax = Math.max(1, ...all.map((s) => s.queueDepth ?? 0)) * 1.1;
  const x = (t: number): number => margin.left + (t / tMax) * (width - margin.left - margin.right);
  const y = (v: number, max: number): number =>
    height - margin.bottom - (v / max) * (height - margin.top - margin.bottom);
  const parts: string[] = [];
  parts.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  parts.push(`<text x="${margin.left}" y="22" font-size="15">Scale (kwok): CCM resident set over the run</text>`);
  const axisY = height - margin.bottom;
  parts.push(`<line x1="${margin.left}" y1="${axisY}" x2="${width - margin.right}" y2="${axisY}" stroke="#333"/>`);
  parts.push(`<line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${axisY}" stroke="#333"/>`);
  for (let i = 0; i <= 4; i++) {
    const v = (rssMax * i) / 4;
    const d = (depthMax * i) / 4;
    const t = (tMax * i) / 4;
    parts.push(
      `<text x="${margin.left - 8}" y="${y(v, rssMax) + 4}" font-size="11" text-anchor="end">${v.toFixed(0)}</text>`,
    );
    parts.push(
      `<text x="${width - margin.right + 8}" y="${y(d, depthMax) + 4}" font-size="11">${d.toFixed(depthMax < 10 ? 1 : 0)}</text>`,
    );
    parts.push(`<text x="${x(t)}" y="${axisY + 16}" font-size="11" text-anchor="middle">${t.toFixed(0)}</text>`);
  }
  parts.push(
    `<text x="${(width - margin.right + margin.left) / 2}" y="${height - 12}" font-size="12" text-anchor="middle">seconds since the CCM started</text>`,
  );
  parts.push(`<text x="16" y="${margin.top - 8}" font-size="12">RSS MB</text>`);
  parts.push(`<text x="${width - margin.right}" y="${margin.top - 8}" font-size="12">relay queue</text>`);
  let legend = 0;
  for (const [index, [name, run]] of [...runs].entries()) {
    const colour = colours[index % colours.length] ?? '#333';
    const rss = run.samples.map((s) => `${x(s.t).toFixed(1)},${y(s.rssMb, rssMax).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${colour}" stroke-width="1.5" points="${rss}"/>`);
    parts.push(
      legendEntry(
        { x: margin.left + 10, y: margin.top + 14 + 16 * legend++ },
        colour,
        `${contenders[name].label}: RSS`,
        false,
      ),
    );
    const depth = run.samples.filter((s) => s.queueDepth !== undefined);
    if (depth.length > 0) {
      const points = depth.map((s) => `${x(s.t).toFixed(1)},${y(s.queueDepth ?? 0, depthMax).toFixed(1)}`).join(' ');
      parts.push(`<polyline fill="none" stroke="${colour}" stroke-dasharray="4 3" points="${points}"/>`);
      parts.push(
        legendEntry(
          { x: margin.left + 10, y: margin.top + 14 + 16 * legend++ },
          colour,
          `${contenders[name].label}: relay queue depth`,
          true,
        ),
      );
    }
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">\n${parts.join('\n')}\n</svg>\n`;
}

function legendEntry(at: { x: number; y: number }, colour: string, text: string, dashed: boolean): string {
  const { x, y } = at;
  const dash = dashed ? ' stroke-dasharray="4 3"' : '';
  return `<line x1="${x}" y1="${y - 4}" x2="${x + 24}" y2="${y - 4}" stroke="${colour}" stroke-width="1.5"${dash}/><text x="${x + 30}" y="${y}" font-size="11">${escape(text)}</text>`;
}

function escape(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/** Where bench/run.ts keeps its results (the plot goes beside them). */
export const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));

/**
 * The cloud's load balancer updates, read a page at a time and each only once. The cloud keeps and
 * serves each update's node set as a bitset over its numbered node names (test/harness/node-sets.ts,
 * bench/go-ccm/calls.go), a few hundred bytes where the names of thousands of Nodes were tens of
 * KB, and the harness turns it back into names in its own process (startCcm's cloudCalls): what
 * the CCM's process pays for being read is a page of those. Keeps each Service's last node set.
 */
export class UpdateLog {
  #seen = 0;
  /** Each Service's node set in its last update read so far. */
  readonly last = new Map<string, string[]>();
  readonly #ccm: RunningCcm;

  constructor(ccm: RunningCcm) {
    this.#ccm = ccm;
  }

  /** The updates since the last read. */
  async read(): Promise<CloudCalls['updates']> {
    const read: CloudCalls['updates'] = [];
    for (;;) {
      const { updates } = await this.#ccm.cloudCalls(this.#seen, updatePage);
      this.#seen += updates.length;
      for (const u of updates) this.last.set(u.service, u.nodes);
      read.push(...updates);
      if (updates.length < updatePage) return read;
    }
  }
}

const updatePage = 200;
