// `npm run bench -- --compare go`: the stock Go cloud-controller-manager (built by go-ccm.ts) and
// cirrus, one after the other on the bench's control plane, through the scenarios of
// scenarios.ts: the Go CCM three ways, `cirrus start` from the source and as shipped, and one
// function alone fed by the relay (contenders.ts; the build by shipped.ts). Each CCM runs twice
// per size: once for the Node scenarios (cloud calls 50 ms) and once for the load-balancer
// scenarios (cloud calls 0 ms, ensure/update/delete 1 s), in processes of its own, stopped and its
// objects removed before the next one starts. Returns the table (table.ts) and the JSON for
// bench/results/.

import { spawnSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from '../../tools/control-plane/index.ts';
import { BenchCloud } from '../../test/harness/cloud.ts';
import type { Bench } from '../../test/harness/context.ts';
import { percentile, sleep } from '../../test/harness/kube.ts';
import { calibrate } from '../scenarios/calibrate.ts';
import {
  cirrusWidth,
  contenders,
  shippedContender,
  startCcm,
  type ContenderName,
  type RunningCcm,
  type StartSettings,
} from './contenders.ts';
import { goCcm } from './go-ccm.ts';
import { commandName, memoryMb } from './procfs.ts';
import { initNodes, loadBalancers, removeLoadBalancers, sampleCheck, type Harness, type Sample } from './scenarios.ts';
import { buildShipped } from './shipped.ts';
import {
  growthTolerance,
  markdown,
  rows,
  type ContenderResult,
  type Results,
  type Size,
  type SizedResults,
} from './table.ts';

export interface CompareOptions {
  /** The sizes to run, smallest first (sizesOf()). */
  readonly sizes: readonly Size[];
  readonly contenders: readonly ContenderName[];
  /** `--baseline`: the commit whose build runs as cirrus-baseline. */
  readonly baseline?: string | undefined;
  readonly progress: (line: string) => void;
}

/** The default size: 200 objects, a burst of 500 Nodes; `--full`: 1,000 of each. */
export const shortSize: Size = { nodes: 200, burst: 500 };
export const fullSize: Size = { nodes: 1000, burst: 1000 };

/**
 * The sizes of --sizes (a comma-separated list of "short", "full" or an object count n — n objects in
 * every scenario), else of --objects n, --full or the default; smallest first.
 */
export function sizesOf(options: { sizes?: string | undefined; objects?: string | undefined; full: boolean }): Size[] {
  const count = (text: string, flag: string): number => {
    const n = Number(text);
    if (!(Number.isInteger(n) && n > 0)) throw new Error(`${flag}: "${text}" is not a positive integer`);
    return n;
  };
  if (options.sizes !== undefined) {
    if (options.objects !== undefined || options.full)
      throw new Error('--sizes: give it alone, without --objects or --full');
    const sizes = options.sizes.split(',').map((text): Size => {
      if (text === 'short') return shortSize;
      if (text === 'full') return fullSize;
      const n = count(text, '--sizes (short, full or a number of objects)');
      return { nodes: n, burst: n };
    });
    return sizes.sort((a, b) => a.nodes - b.nodes || a.burst - b.burst);
  }
  if (options.objects !== undefined) {
    const n = count(options.objects, '--objects');
    return [{ nodes: n, burst: n }];
  }
  return [options.full ? fullSize : shortSize];
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
  const { sizes } = options;
  const logDir = await mkdtemp(join(tmpdir(), 'cirrus-compare-'));
  progress(
    `CCM logs in ${logDir}; cirrus keeps ${cirrusWidth} reconciles in flight, so "Go at width" runs as many workers`,
  );
  const shipped = options.contenders.some((n) => n !== 'cirrus-baseline' && contenders[n].built)
    ? await buildShipped(progress)
    : undefined;
  const baseline = options.baseline === undefined ? undefined : await buildShipped(progress, options.baseline);
  const run: Run = {
    harness: { kube: bench.kube, apiserverPid },
    settings: { kubeconfig: controlPlane.info.adminKubeconfig, goBinary: go.binary, shipped, baseline, logDir },
    expected: await expectedSample(),
    progress,
  };
  const sized: SizedResults[] = [];
  try {
    for (const size of sizes) {
      const results: Results = {};
      for (const name of options.contenders) results[name] = await runContender(run, name, size);
      sized.push({ size, results });
    }
  } finally {
    await shipped?.remove();
    await baseline?.remove();
  }
  const table = rows(sized, ceiling);
  return {
    table: markdown(table),
    content: {
      compare: 'go',
      goCcm: { binary: go.binary, kubernetes: go.kubernetes, builtInSeconds: go.builtInSeconds, go: goVersion() },
      cirrusWidth,
      shipped: shippedContender,
      baseline: options.baseline,
      flags: Object.fromEntries(options.contenders.map((n) => [n, contenders[n].flags])),
      apiserverPatchCeiling: ceiling,
      sizes,
      growthTolerance: sizes.length > 1 ? growthTolerance : undefined,
      sample: run.reference,
      logDir,
      rows: table,
      runs: sized.map(({ size, results }) => ({
        size,
        contenders: Object.fromEntries(Object.entries(results).map(([name, r]) => [name, summary(r)])),
      })),
    },
  };
}

interface Run {
  readonly harness: Harness;
  readonly settings: Pick<StartSettings, 'kubeconfig' | 'goBinary' | 'shipped' | 'baseline' | 'logDir'>;
  readonly expected: Parameters<typeof sampleCheck>[2];
  readonly progress: (line: string) => void;
  /** What the first CCM wrote for the sample; every later one must write the same. */
  reference?: { readonly label: string; readonly sample: Sample };
}

async function runContender(run: Run, name: ContenderName, sizes: Size): Promise<ContenderResult> {
  const contender = contenders[name];
  const { harness, progress } = run;
  const tag = `${name}-${sizes.nodes}`;
  progress(`${contender.label}: Nodes (cloud 50 ms a call)`);
  let ccm = await startCcm(contender, { ...run.settings, tag: `${tag}-nodes`, latencyMs: 50, lbLatencyMs: 50 });
  let nodes;
  try {
    checkSample(run, contender.label, await sampleCheck(harness, ccm, run.expected));
    await sleep(2_000);
    const ready = readyRss(ccm);
    progress(`${contender.label}: ${sizes.nodes} Nodes at 20/s`);
    const steady = await initNodes(harness, ccm, { group: 'cmp-steady', count: sizes.nodes, ratePerSecond: 20 });
    progress(`${contender.label}: ${sizes.burst} Nodes at once`);
    const burst = await initNodes(harness, ccm, { group: 'cmp-burst', count: sizes.burst });
    nodes = { ...ready, steady, burst, calls: await ccm.cloudCalls() };
  } finally {
    await ccm.stop();
  }
  if (contender.nodesOnly) {
    const result = { ...nodes, ensure: undefined, sync: undefined, maxInFlight: nodes.calls.maxInFlight };
    progress(`${contender.label}: done (${describe(result)})`);
    return result;
  }
  progress(`${contender.label}: ${sizes.nodes} load balancers (ensure and update 1 s)`);
  ccm = await startCcm(contender, { ...run.settings, tag: `${tag}-lb`, latencyMs: 0, lbLatencyMs: 1_000 });
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

function readyRss(ccm: RunningCcm): Pick<ContenderResult, 'readyRssMb' | 'readyByProcess'> {
  const readyByProcess: ContenderResult['readyByProcess'] = {};
  for (const p of ccm.processes) readyByProcess[p.role] = memoryMb(p.pid).rss;
  return { readyRssMb: Object.values(readyByProcess).reduce((sum: number, mb) => sum + (mb ?? 0), 0), readyByProcess };
}

// Every CCM must write what the first wrote; one that runs the Node scenarios only is compared on
// the Node, and the first that provisions a load balancer too becomes the reference.
function checkSample(run: Run, label: string, sample: Sample): void {
  const reference = run.reference;
  if (reference !== undefined) {
    const nodeOnly = sample.ingress === undefined || reference.sample.ingress === undefined;
    const [mine, theirs] = [sample, reference.sample].map((s) => JSON.stringify(nodeOnly ? s.node : s));
    if (mine !== theirs)
      throw new Error(`${label} and ${reference.label} wrote different objects:\n  ${mine}\n  ${theirs}`);
  }
  if (reference === undefined || (reference.sample.ingress === undefined && sample.ingress !== undefined))
    run.reference = { label, sample };
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
    ...(r.ensure === undefined ? [] : [`ingress p99 ${p99(r.ensure.latenciesMs)}`]),
    ...(r.sync === undefined ? [] : [`node sync p99 ${p99(r.sync.latenciesMs)}`]),
  ].join(', ');
}

// The JSON keeps percentiles rather than every latency.
function summary(r: ContenderResult): Record<string, unknown> {
  const scenario = (s: ContenderResult['ensure']): Record<string, unknown> | undefined =>
    s && {
      objects: s.objects,
      latencyMs: Object.fromEntries([50, 90, 99, 100].map((q) => [`p${q}`, percentile(s.latenciesMs, q)])),
      perSecond: s.perSecond,
      drainMs: s.drainMs,
      costs: s.costs,
    };
  return {
    readyRssMb: r.readyRssMb,
    readyByProcess: r.readyByProcess,
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
