// `npm run bench`: cirrus's figures against their goals (docs/figures.md), on a local control
// plane of its own, with the benchmark cloud (test/harness/cloud.ts). Prints a table; writes JSON to
// bench/results/<time>.json, the figures as a chart beside it, <time>.svg (also latest.svg), and as
// the Markdown table of docs/figures.md, <time>.md (also latest.md; bench/markdown.ts).
//
//   npm run bench                       short sizes (a couple of minutes on 2 cores)
//   npm run bench -- --full             full sizes (1000 nodes, 1000 Services, 10 cold starts)
//   npm run bench -- --only nodes,lb    some scenarios: calibration, nodes, lb, coldstart, relay, relay-memory, burst, aws, api-client, rie
//   npm run bench -- --log-level info   cirrus's log level (default warn; pino writes to stdout)
//   npm run bench -- --only nodes --objects 50   the nodes and lb scenarios with 50 objects each
//   node --cpu-prof --cpu-prof-dir=/tmp/prof bench/run.ts --only nodes   profile the process (harness + cirrus)
//
//   npm run bench -- --compare go       instead: the stock Go cloud-controller-manager (built once per machine
//                                       from bench/go-ccm/) at its defaults, tuned and at cirrus's width,
//                                       `cirrus start` from the source and as built, and node-init served alone
//                                       fed by the relay, each in processes of its own, through issue 21's
//                                       scenarios; a table of every figure, the build's ratio and issue 30's
//                                       goals (bench/compare/). With --full: 1000 objects; --objects <n>: n
//                                       objects; --sizes short,full: both sizes and each figure's growth;
//                                       --contenders go-width,cirrus-build,…: some of them; --baseline <commit>:
//                                       also the build of that commit (before ÷ after in one run).

import { copyFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadKubeConfig } from '../shared/kube/client.ts';
import type { LevelWithSilent } from 'pino';
import { ControlPlane, resolveAssets } from '../tools/control-plane/index.ts';
import { startCirrus } from '../test/harness/cirrus.ts';
import { BenchCloud } from '../test/harness/cloud.ts';
import type { Bench } from '../test/harness/context.ts';
import { Kube } from '../test/harness/kube.ts';
import { machine, table, writeResults, type Figure, type ScenarioResult } from '../test/harness/report.ts';
import { calibrate } from './scenarios/calibrate.ts';
import { coldStarts } from './scenarios/coldstart.ts';
import { loadBalancers } from './scenarios/lb.ts';
import { nodeInit } from './scenarios/nodes.ts';
import { relayAlone } from './scenarios/relay.ts';
import { relayMemory } from './scenarios/relay-memory.ts';
import { burst } from './scenarios/burst.ts';
import { awsIfAvailable } from './scenarios/aws.ts';
import { apiClient } from './scenarios/api-client.ts';
import { underRie } from './scenarios/rie.ts';
import { drawChart } from './chart.ts';
import { scale, scaleSizeOf, writePlot, resultsDir } from './scenarios/scale.ts';
import { comparisonSection, runSection } from './markdown.ts';
import { compareWithGo, sizesOf } from './compare/index.ts';
import { contenderNames, type ContenderName } from './compare/contenders.ts';

const scenarioNames = [
  'calibration',
  'nodes',
  'lb',
  'coldstart',
  'relay',
  'relay-memory',
  'burst',
  'aws',
  'api-client',
  'rie',
] as const;

const usage = `Usage: npm run bench -- [flags]

cirrus's figures against their goals (docs/figures.md), on a local control plane of its own.
Prints a table; writes bench/results/<time>.json, the chart bench/results/<time>.svg and the table
for docs/figures.md, bench/results/<time>.md (and latest.svg, latest.md).

  --full                 full sizes (1000 nodes, 1000 Services, 10 cold starts); default short (minutes)
  --only <list>          some scenarios: ${scenarioNames.join(', ')}
  --log-level <level>    cirrus's log level (default warn; pino writes to stdout)
  --compare go           instead: the stock Go cloud-controller-manager beside \`cirrus start\` (bench/compare/)
  --objects <n>          n objects: the nodes and lb scenarios' sizes, or with --compare its objects
  --sizes <list>         with --compare: several sizes (short, full or n objects) in one table, with
                         each figure's growth beside the object count's
  --contenders <list>    with --compare: some of ${contenderNames.join(', ')}
  --baseline <commit>    with --compare: also \`cirrus start\` as shipped at that commit (cirrus-baseline, run
                         before cirrus-build), and a column "build ÷ baseline": a change's before and after in one run
  --only scale           not among the defaults: kwok's simulated Nodes (--scale n, default 200; 5000
                         the full size) and n/5 Services, \`cirrus start\` and the split (\`cirrus relay\` and a
                         \`cirrus serve\` per function) beside the Go CCM (bench/scenarios/scale.ts)
  -h, --help             this text

Profile the process: node --cpu-prof --cpu-prof-dir=/tmp/prof bench/run.ts --only nodes
Chart a results file again: node bench/chart.ts bench/results/<time>.json
`;

// Usage first, and a usage error (exit 2) instead of parseArgs's stack trace for an unknown flag.
const values = (() => {
  try {
    return parseArgs({
      options: {
        full: { type: 'boolean', default: false },
        only: { type: 'string' },
        'log-level': { type: 'string', default: 'warn' },
        compare: { type: 'string' },
        objects: { type: 'string' },
        sizes: { type: 'string' },
        contenders: {
          type: 'string',
          // The Knative shape (every function served alone) is the scale scenario's: chosen by name here.
          default: contenderNames.filter((n) => n !== 'cirrus-baseline' && n !== 'cirrus-knative').join(','),
        },
        baseline: { type: 'string' },
        scale: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (error) {
    process.stderr.write(`bench: ${(error as Error).message}\n\n${usage}`);
    process.exit(2);
  }
})();
if (values.help) {
  process.stdout.write(usage);
  process.exit(0);
}
if (values.compare !== undefined && values.compare !== 'go') throw new Error('--compare: only "go" is known');
if (values.compare === undefined && values.sizes !== undefined) throw new Error('--sizes: only with --compare go');
const only = new Set(values.only?.split(',') ?? scenarioNames);
const progress = (line: string): void => {
  process.stderr.write(`bench: ${line}\n`);
};

const results: Record<string, ScenarioResult> = {};
let comparison: Awaited<ReturnType<typeof compareWithGo>> | undefined;
const startedAt = new Date().toISOString();
const assets = await resolveAssets({ build: true, progress });
const controlPlane = await ControlPlane.start({ assets });
try {
  // Loaded as cirrus loads it (connections reused), so the figures are cirrus's.
  const kubeConfig = loadKubeConfig(controlPlane.info.adminKubeconfig);
  const bench: Bench = {
    kube: await Kube.connect(kubeConfig),
    kubeConfig,
    cloud: new BenchCloud(),
    full: values.full,
    progress,
  };
  progress(`kube-apiserver ${controlPlane.info.kubernetesVersion} at ${controlPlane.info.server}`);
  if (values.compare === undefined) await runAll(bench, values['log-level'] as LevelWithSilent);
  else comparison = await compareWithGo(bench, controlPlane, compareOptions());
} finally {
  await controlPlane.stop();
}

const common = { startedAt, full: values.full, machine: machine(), kubernetes: controlPlane.info.kubernetesVersion };
const file = await writeResults(
  fileURLToPath(new URL('results/', import.meta.url)),
  comparison === undefined ? { ...common, results } : { ...common, ...comparison.content },
);
const chart = await drawChart(file);
await copyFile(chart, join(dirname(file), 'latest.svg'));
const sizeFlags = [
  ...(values.objects === undefined ? [] : [`--objects ${values.objects}`]),
  ...(values.scale === undefined ? [] : [`--scale ${values.scale}`]),
].join(' ');
const facts = {
  ...common,
  ...(values.only === undefined ? {} : { only: values.only }),
  ...(sizeFlags === '' ? {} : { sizeFlags }),
};
const figures: Figure[] = Object.values(results).flatMap((r) => r.figures);
const markdown =
  comparison === undefined
    ? runSection(facts, figures)
    : comparisonSection(facts, comparison.content, comparison.table);
const pasteable = file.replace(/\.json$/, '.md');
await writeFile(pasteable, markdown);
await copyFile(pasteable, join(dirname(file), 'latest.md'));
const written = `JSON: ${file}\nchart: ${chart}\ntable for docs/figures.md: ${pasteable}\n`;
if (comparison !== undefined) {
  process.stdout.write(`\n${comparison.table}\n\n${written}`);
} else {
  process.stdout.write(`\n${table(figures)}\n\nnot measured: ${notMeasured().join(', ') || 'nothing'}\n${written}`);
}

async function runAll(bench: Bench, logLevel: LevelWithSilent): Promise<void> {
  let ceiling: number | undefined;
  if (only.has('calibration')) {
    progress('calibration: Node PATCH/s');
    const calibration = await calibrate(bench);
    results['calibration'] = calibration.result;
    ceiling = calibration.patchesPerSecond;
  }
  if (only.has('nodes') || only.has('lb')) {
    const cirrus = await startCirrus(bench.kubeConfig, bench.cloud, logLevel);
    try {
      if (only.has('nodes')) await nodes(bench, ceiling);
      if (only.has('lb')) {
        const count = objectCount() ?? (bench.full ? 1000 : 200);
        progress(`load balancers: ${count} Services, ensureLoadBalancer 1 s`);
        results['lb'] = await loadBalancers(bench, count);
      }
    } finally {
      await cirrus.stop();
    }
  }
  await alone(bench, ceiling);
}

// The scenarios that run a process or a relay of their own.
async function alone(bench: Bench, ceiling: number | undefined): Promise<void> {
  if (only.has('coldstart')) {
    progress('cold starts');
    results['coldstart'] = await coldStarts(bench, controlPlane.info.adminKubeconfig);
  }
  if (only.has('relay')) {
    progress('relay alone');
    results['relay'] = await relayAlone(bench, ceiling);
  }
  if (only.has('relay-memory')) {
    progress("relay memory: the relay's state bytes per Node and per Service");
    results['relay-memory'] = await relayMemory(bench);
  }
  if (only.has('burst')) {
    progress('burst: 500 events, 100 of 1 MiB, at one `cirrus serve`');
    results['burst'] = await burst(bench, controlPlane.info.adminKubeconfig);
  }
  if (only.has('aws')) {
    const sizes = bench.full ? { nodes: 200, services: 100 } : { nodes: 50, services: 20 };
    progress(`aws: the aws provider against moto, ${sizes.nodes} nodes and ${sizes.services} NLB Services`);
    const aws = await awsIfAvailable(bench, { ...sizes, logLevel: values['log-level'] as LevelWithSilent });
    if (aws !== undefined) results['aws'] = aws;
  }
  if (only.has('scale')) {
    const { result, svg } = await scale(bench, controlPlane, scaleSizeOf(values.scale));
    results['scale'] = result;
    progress(`scale: RSS over time in ${await writePlot(resultsDir, svg)}`);
  }
  await lambdaAndClient(bench);
}

// The Lambda functions under AWS's emulator, and the API client alone.
async function lambdaAndClient(bench: Bench): Promise<void> {
  if (only.has('rie')) {
    progress("rie: each function's cold start and memory under AWS's Lambda Runtime Interface Emulator");
    const rie = await underRie(bench, controlPlane.info.adminKubeconfig);
    if (rie !== undefined) results['rie'] = rie;
  }
  if (only.has('api-client')) {
    progress('api-client: CPU per core/v1 call, client-node CoreV1Api and LeanCore');
    results['api-client'] = await apiClient(bench);
  }
}

async function nodes(bench: Bench, ceiling: number | undefined): Promise<void> {
  const count = objectCount() ?? (bench.full ? 1000 : 200);
  bench.cloud.latencyMs = 50;
  progress(`node init, steady: ${count} nodes at 20/s, cloud 50 ms/call`);
  results['nodes-steady'] = await nodeInit(bench, { mode: 'steady', count, ratePerSecond: 20 }, ceiling);
  progress(`node init, burst: ${count} nodes`);
  results['nodes-burst'] = await nodeInit(bench, { mode: 'burst', count }, ceiling);
}

// --objects, when given: a positive integer.
function objectCount(): number | undefined {
  const objects = values.objects === undefined ? undefined : Number(values.objects);
  if (objects !== undefined && !(Number.isInteger(objects) && objects > 0))
    throw new Error('--objects: a positive integer');
  return objects;
}

function compareOptions(): Parameters<typeof compareWithGo>[2] {
  const sizes = sizesOf(values);
  const chosen = values.contenders.split(',');
  const unknown = chosen.filter((n) => !(contenderNames as readonly string[]).includes(n));
  if (unknown.length > 0)
    throw new Error(`--contenders: unknown ${unknown.join(', ')}; known: ${contenderNames.join(', ')}`);
  // --baseline runs the baseline's build before what ships; cirrus-baseline is nothing without it.
  if (chosen.includes('cirrus-baseline') && values.baseline === undefined)
    throw new Error('--contenders cirrus-baseline: give --baseline <commit>');
  const withBaseline =
    values.baseline === undefined || chosen.includes('cirrus-baseline')
      ? chosen
      : chosen.flatMap((n) => (n === 'cirrus-build' ? ['cirrus-baseline', n] : [n]));
  if (values.baseline !== undefined && !withBaseline.includes('cirrus-baseline')) withBaseline.push('cirrus-baseline');
  return { sizes, contenders: withBaseline as ContenderName[], baseline: values.baseline, progress };
}

function notMeasured(): string[] {
  const measured = new Set(Object.values(results).flatMap((r) => r.figures.map((f) => f.goal?.split(' ')[0])));
  return [
    'G1',
    'G2',
    'G3',
    'G4',
    'G5',
    'G6',
    'G7',
    'G8',
    'G9',
    'G10',
    'G11',
    'G12',
    'G13',
    'G14',
    'G15',
    'G16',
    'G17',
    'G18',
  ].filter((g) => !measured.has(g));
}
