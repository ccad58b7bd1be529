// `npm run bench -- --compare go`: the stock Go cloud-controller-manager (built by go-ccm.ts) and
// `cirrus start`, one after the other on the bench's control plane, through the scenarios of
// scenarios.ts; the Go CCM three ways (contenders.ts). Each CCM runs twice: once for the Node
// scenarios (cloud calls 50 ms) and once for the load-balancer scenarios (cloud calls 0 ms,
// ensure/update/delete 1 s), in a process of its own, stopped and its objects removed before the
// next one starts. Returns the table (table.ts) and the JSON for bench/results/.

import { spawnSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from '../../tools/control-plane/index.ts';
import { BenchCloud } from '../../test/harness/cloud.ts';
import type { Bench } from '../../test/harness/context.ts';
import { percentile, sleep } from '../../test/harness/kube.ts';
import { calibrate } from '../scenarios/calibrate.ts';
import { cirrusWidth, contenders, startCcm, type ContenderName, type StartSettings } from './contenders.ts';
import { goCcm } from './go-ccm.ts';
import { commandName, memoryMb } from './procfs.ts';
import { initNodes, loadBalancers, removeLoadBalancers, sampleCheck, type Harness, type Sample } from './scenarios.ts';
import { markdown, rows, type ContenderResult, type Results } from './table.ts';

export interface CompareOptions {
  readonly full: boolean;
  /** Overrides the number of objects of every scenario. */
  readonly objects: number | undefined;
  readonly contenders: readonly ContenderName[];
  readonly progress: (line: string) => void;
}

export async function compareWithGo(
  bench: Bench,
  controlPlane: ControlPlane,
  options: CompareOptions,
): Promise<{ table: string; content: Record<string, unknown> }> {
  const { progress } = options;
  const go = await goCcm(progress);
  const apiserverPid = controlPlane.pids.find((pid) => commandName(pid) === 'kube-apiserver');
  if (apiserverPid === undefined) throw new Error('no kube-apiserver process among the control plane’s');
  progress('calibration: Node PATCH/s');
  const { patchesPerSecond: ceiling } = await calibrate(bench);
  const sizes = {
    nodes: options.objects ?? (options.full ? 1000 : 200),
    burst: options.objects ?? (options.full ? 1000 : 500),
  };
  const logDir = await mkdtemp(join(tmpdir(), 'cirrus-compare-'));
  progress(
    `CCM logs in ${logDir}; cirrus keeps ${cirrusWidth} reconciles in flight, so "Go at width" runs as many workers`,
  );
  const run: Run = {
    harness: { kube: bench.kube, apiserverPid },
    settings: { kubeconfig: controlPlane.info.adminKubeconfig, goBinary: go.binary, logDir },
    sizes,
    expected: await expectedSample(),
    progress,
  };
  const results: Results = {};
  for (const name of options.contenders) results[name] = await runContender(run, name);
  const table = rows(results, sizes, ceiling);
  return {
    table: markdown(table),
    content: {
      compare: 'go',
      goCcm: { binary: go.binary, kubernetes: go.kubernetes, builtInSeconds: go.builtInSeconds, go: goVersion() },
      cirrusWidth,
      flags: Object.fromEntries(options.contenders.map((n) => [n, contenders[n].flags])),
      apiserverPatchCeiling: ceiling,
      sizes,
      sample: run.reference,
      logDir,
      rows: table,
      runs: Object.fromEntries(Object.entries(results).map(([name, r]) => [name, summary(r)])),
    },
  };
}

interface Run {
  readonly harness: Harness;
  readonly settings: Pick<StartSettings, 'kubeconfig' | 'goBinary' | 'logDir'>;
  readonly sizes: { readonly nodes: number; readonly burst: number };
  readonly expected: Parameters<typeof sampleCheck>[2];
  readonly progress: (line: string) => void;
  /** What the first CCM wrote for the sample; every later one must write the same. */
  reference?: { readonly label: string; readonly sample: Sample };
}

async function runContender(run: Run, name: ContenderName): Promise<ContenderResult> {
  const contender = contenders[name];
  const { harness, sizes, progress } = run;
  progress(`${contender.label}: Nodes (cloud 50 ms a call)`);
  let ccm = await startCcm(contender, { ...run.settings, tag: `${name}-nodes`, latencyMs: 50, lbLatencyMs: 50 });
  let nodes;
  try {
    checkSample(run, contender.label, await sampleCheck(harness, ccm, run.expected));
    await sleep(2_000);
    const readyRssMb = memoryMb(ccm.pid).rss;
    progress(`${contender.label}: ${sizes.nodes} Nodes at 20/s`);
    const steady = await initNodes(harness, ccm, { group: 'cmp-steady', count: sizes.nodes, ratePerSecond: 20 });
    progress(`${contender.label}: ${sizes.burst} Nodes at once`);
    const burst = await initNodes(harness, ccm, { group: 'cmp-burst', count: sizes.burst });
    nodes = { readyRssMb, steady, burst, calls: await ccm.cloudCalls() };
  } finally {
    await ccm.stop();
  }
  progress(`${contender.label}: ${sizes.nodes} load balancers (ensure and update 1 s)`);
  ccm = await startCcm(contender, { ...run.settings, tag: `${name}-lb`, latencyMs: 0, lbLatencyMs: 1_000 });
  let lb;
  try {
    checkSample(run, contender.label, await sampleCheck(harness, ccm, run.expected));
    lb = { ...(await loadBalancers(harness, ccm, sizes.nodes)), calls: await ccm.cloudCalls() };
  } finally {
    await ccm.stop();
    await removeLoadBalancers(harness.kube);
  }
  const maxInFlight = { ...nodes.calls.maxInFlight };
  for (const [method, n] of Object.entries(lb.calls.maxInFlight))
    maxInFlight[method] = Math.max(n, maxInFlight[method] ?? 0);
  const result = { ...nodes, ensure: lb.ensure, sync: lb.sync, maxInFlight };
  progress(`${contender.label}: done (${describe(result)})`);
  return result;
}

function checkSample(run: Run, label: string, sample: Sample): void {
  if (run.reference === undefined) {
    run.reference = { label, sample };
    return;
  }
  const [mine, theirs] = [JSON.stringify(sample), JSON.stringify(run.reference.sample)];
  if (mine !== theirs)
    throw new Error(`${label} and ${run.reference.label} wrote different objects:\n  ${mine}\n  ${theirs}`);
}

// What the benchmark cloud answers for the sample Node (cirrus's own BenchCloud says it).
async function expectedSample(): Promise<Run['expected']> {
  const name = 'cmp-sample';
  const metadata = await new BenchCloud().instancesV2()?.instanceMetadata({ metadata: { name } });
  if (metadata === undefined) throw new Error('the benchmark cloud has no metadata for the sample Node');
  return {
    providerID: metadata.providerId,
    addresses: metadata.nodeAddresses,
    labels: {
      'node.kubernetes.io/instance-type': metadata.instanceType,
      'topology.kubernetes.io/zone': metadata.zone,
      'topology.kubernetes.io/region': metadata.region,
    },
  };
}

function describe(r: ContenderResult): string {
  const p99 = (xs: number[]): string => `${percentile(xs, 99).toFixed(0)} ms`;
  return [
    `Nodes at 20/s p99 ${p99(r.steady.latenciesMs)}`,
    `burst drain ${(r.burst.drainMs / 1000).toFixed(2)} s`,
    `ingress p99 ${p99(r.ensure.latenciesMs)}`,
    `node sync p99 ${p99(r.sync.latenciesMs)}`,
  ].join(', ');
}

// The JSON keeps percentiles rather than every latency.
function summary(r: ContenderResult): Record<string, unknown> {
  const scenario = (s: ContenderResult['steady']): Record<string, unknown> => ({
    objects: s.objects,
    latencyMs: Object.fromEntries([50, 90, 99, 100].map((q) => [`p${q}`, percentile(s.latenciesMs, q)])),
    perSecond: s.perSecond,
    drainMs: s.drainMs,
    costs: s.costs,
  });
  return {
    readyRssMb: r.readyRssMb,
    maxInFlight: r.maxInFlight,
    steady: scenario(r.steady),
    burst: scenario(r.burst),
    ensure: scenario(r.ensure),
    sync: scenario(r.sync),
  };
}

function goVersion(): string {
  return spawnSync('go', ['env', 'GOVERSION'], { encoding: 'utf8' }).stdout.trim();
}
