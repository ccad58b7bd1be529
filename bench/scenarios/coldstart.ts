// G11/G12 and issue 16's goals: one function alone in a fresh process, spawn → first 200 on
// /healthz, and the resident set after 2 s idle (VmRSS in /proc/<pid>/status), beside a bare
// Fastify server answering /healthz started the same way in the same run (the goals: p50 ≤ 1.5×
// its time, RSS ≤ 1.3× its memory). Measured from what ships (scripts/build.ts, built here):
//   - the image's cirrus (dist/image) serving each function, with the compile cache the image
//     warms at build time (deploy/Dockerfile); node-init also without it;
//   - each function's Lambda handler (dist/functions/<name>/lambda.js) in a sandbox-like process
//     (../lambda-sandbox.ts), secrets read through a stand-in of the secrets extension; beside it a
//     bare Fastify app behind @fastify/aws-lambda in the same harness;
//   - node-init from the TypeScript source, as `npm run cirrus` and the tests run it (labelled .ts).
// The variants take turns, run after run, so that a busy machine weighs on all of them alike. CPU
// time to the first answer (user + system, /proc/<pid>/stat) is kept too: it moves less than wall
// time when others share the CPU.

import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { clusterCidr } from '../../test/harness/cirrus.ts';
import type { Bench } from '../../test/harness/context.ts';
import { percentile, sleep } from '../../test/harness/kube.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { startSecretsExtension } from '../../test/harness/lambda.ts';
import { sandbox, type SandboxTarget } from '../lambda-sandbox.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { freePort } from '../../tools/control-plane/processes.ts';
import { build } from '../../scripts/build.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const cli = join(repoRoot, 'bin/cirrus.js');
const functions = catalogue.map((entry) => entry.name);

// The baseline: the least a Fastify server answering /healthz does. Run from the repository (its
// node_modules), the way a plain Node service starts.
const bareServer = (port: number): string =>
  "import Fastify from 'fastify'; const app = Fastify(); app.get('/healthz', () => 'ok'); " +
  `await app.listen({ host: '127.0.0.1', port: ${String(port)} });`;

/** One way of starting something that answers /healthz. */
interface Variant {
  readonly label: string;
  /** Whether the issue's goals apply: what ships, as it runs. */
  readonly shipped: boolean;
  readonly start: (port: number) => Started | Promise<Started>;
}

interface Started {
  readonly pid: number;
  /** performance.now() just before the spawn. */
  readonly spawnedAt: number;
  /** Resolves when the first /healthz answered 200. */
  readonly answered: Promise<void>;
  /** The resident set after 2 s idle, in MB. */
  readonly idleRssMb: () => Promise<number>;
  readonly stop: () => Promise<void>;
}

interface Sample {
  readonly startMs: number;
  readonly cpuMs: number;
  readonly rssMb: number;
}

export async function coldStarts(bench: Bench, kubeconfig: string): Promise<ScenarioResult> {
  const runs = bench.full ? 10 : 5;
  const out = await mkdtemp(join(tmpdir(), 'cirrus-bench-build-'));
  try {
    bench.progress('cold start: building the image and the functions (scripts/build.ts)');
    await build(['image', 'functions'], out);
    const compileCache = join(out, 'compile-cache');
    await warmCompileCache(join(out, 'image'), compileCache);
    const variants = allVariants(out, compileCache, kubeconfig);
    const samples = new Map<Variant, Sample[]>(variants.map((v) => [v, []]));
    for (let i = 0; i < runs; i++) {
      for (const variant of variants) samples.get(variant)?.push(await measure(variant));
      bench.progress(`cold start: run ${String(i + 1)} of ${String(runs)}`);
    }
    return report(samples, runs);
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

function allVariants(out: string, compileCache: string, kubeconfig: string): Variant[] {
  const image = join(out, 'image/cirrus.js');
  const lambda = (fn: string): string => join(out, `functions/${fn}/lambda.js`);
  const [first = ''] = functions;
  return [
    {
      label: 'bare Fastify server',
      shipped: false,
      start: (port) => server(['--input-type=module', '-e', bareServer(port)], port),
    },
    ...functions.map((fn) => ({
      label: `${fn}, image (dist/image, compile cache)`,
      shipped: true,
      start: (port: number) =>
        server([image, ...serveTail(fn, kubeconfig, port)], port, { NODE_COMPILE_CACHE: compileCache }),
    })),
    {
      label: `${first}, image without compile cache`,
      shipped: false,
      start: (port) => server([image, ...serveTail(first, kubeconfig, port)], port),
    },
    {
      label: `${first}, .ts source (bin/cirrus.js)`,
      shipped: false,
      start: (port) => server([cli, ...serveTail(first, kubeconfig, port)], port),
    },
    {
      label: 'bare Fastify app, Lambda harness',
      shipped: false,
      start: async () => lambdaSandbox('bare', kubeconfig),
    },
    ...functions.map((fn) => ({
      label: `${fn}, Lambda handler (dist/functions/${fn})`,
      shipped: true,
      start: async () => lambdaSandbox({ module: lambda(fn), exported: 'handler' }, kubeconfig),
    })),
    {
      label: `${first}, Lambda handler .ts source (bin/lambda.js)`,
      shipped: false,
      start: async () => lambdaSandbox({ module: join(repoRoot, 'bin/lambda.js'), exported: 'nodeInit' }, kubeconfig),
    },
  ];
}

// The image warms Node's compile cache at build time by loading every module once (deploy/Dockerfile);
// the comparison (../compare/shipped.ts) warms it alike.
export async function warmCompileCache(dir: string, cache: string): Promise<void> {
  const warm =
    "import { readdirSync } from 'node:fs'; " +
    `for (const f of readdirSync(${JSON.stringify(dir)})) ` +
    `if (f.endsWith('.js') && f !== 'cirrus.js') await import(${JSON.stringify(`${dir}/`)} + f);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', warm], {
    env: { ...process.env, NODE_COMPILE_CACHE: cache },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`warming the compile cache failed (exit ${String(code)})`);
}

async function measure(variant: Variant): Promise<Sample> {
  const port = await freePort();
  const started = await variant.start(port);
  try {
    await started.answered;
    const startMs = performance.now() - started.spawnedAt;
    const cpuMs = await cpuTimeMs(started.pid);
    return { startMs, cpuMs, rssMb: await started.idleRssMb() };
  } catch (error) {
    throw new Error(`${variant.label}: ${(error as Error).message}`, { cause: error });
  } finally {
    await started.stop();
  }
}

function serveTail(fn: string, kubeconfig: string, port: number): string[] {
  // Only routes reads the cluster CIDR; the others take it and ignore it.
  return [...serveArgs(fn, { kubeconfig, port, logLevel: 'warn' }).slice(1), '--cluster-cidr', clusterCidr];
}

// A process serving HTTP on 127.0.0.1:`port`, polled for its first /healthz 200.
function server(args: string[], port: number, env: Record<string, string> = {}): Started {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      resolve();
    });
  });
  const answered = (async () => {
    while (!(await healthy(port))) {
      if (performance.now() - spawnedAt > 30_000 || child.exitCode !== null) throw new Error('no /healthz 200');
      await sleep(5);
    }
  })();
  return {
    pid: child.pid ?? 0,
    spawnedAt,
    answered,
    idleRssMb: async () => {
      await sleep(2_000);
      return rssMb(child.pid ?? 0);
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

// A Lambda sandbox (../lambda-sandbox.ts) as Lambda would run a function: the fake provider, every
// secret from the extension.
async function lambdaSandbox(target: SandboxTarget, kubeconfig: string): Promise<Started> {
  const extension = await startSecretsExtension({
    kubeconfig: await readFile(kubeconfig, 'utf8'),
    signing: 'bench-signing-secret',
  });
  const harness = sandbox(target);
  const env = {
    ...process.env,
    ...harness.env,
    AWS_SESSION_TOKEN: extension.token,
    PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(extension.port),
    CIRRUS_CLOUD_PROVIDER: 'fake',
    CIRRUS_KUBECONFIG_SECRET_ID: 'kubeconfig',
    CIRRUS_SIGNING_SECRET_ID: 'signing',
    CIRRUS_CLUSTER_CIDR: clusterCidr,
    CIRRUS_LOG_LEVEL: 'warn',
  };
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, harness.args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'], env });
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      resolve();
    });
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const answered = (async () => {
    const first = JSON.parse(String((await lines.next()).value)) as { status?: number };
    if (first.status !== 200) throw new Error(`the Lambda handler answered /healthz ${String(first.status)}`);
  })();
  return {
    pid: child.pid ?? 0,
    spawnedAt,
    answered,
    idleRssMb: async () => (JSON.parse(String((await lines.next()).value)) as { rssMb: number }).rssMb,
    stop: async () => {
      await exited;
      await extension.close();
    },
  };
}

/** One cold start of `target` in the sandbox harness (as the coldstart scenario measures it): spawn → first 200, and RSS after 2 s idle. */
export async function lambdaSandboxStart(
  target: SandboxTarget,
  kubeconfig: string,
): Promise<{ startMs: number; rssMb: number }> {
  const started = await lambdaSandbox(target, kubeconfig);
  try {
    await started.answered;
    const startMs = performance.now() - started.spawnedAt;
    return { startMs, rssMb: await started.idleRssMb() };
  } finally {
    await started.stop();
  }
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024;
}

// User + system CPU time of `pid` so far (clock ticks of 10 ms).
async function cpuTimeMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function report(samples: ReadonlyMap<Variant, Sample[]>, runs: number): ScenarioResult {
  const figures: Figure[] = [];
  const detail: Record<string, string> = {};
  const of = (s: readonly Sample[], key: keyof Sample): number[] => s.map((x) => x[key]);
  const [bare] = samples.values();
  const bareStart = percentile(of(bare ?? [], 'startMs'), 50);
  const bareRss = percentile(of(bare ?? [], 'rssMb'), 50);
  for (const [variant, s] of samples) {
    const scenario = `cold start: ${variant.label} (${String(runs)} runs)`;
    const p50 = percentile(of(s, 'startMs'), 50);
    const worst = Math.max(...of(s, 'startMs'));
    const rss = percentile(of(s, 'rssMb'), 50);
    const rssMax = Math.max(...of(s, 'rssMb'));
    const goals = variant.shipped;
    detail[variant.label] = JSON.stringify({
      startMs: of(s, 'startMs').map(Math.round),
      cpuMs: of(s, 'cpuMs'),
      rssMb: of(s, 'rssMb').map((v) => Math.round(v)),
    });
    figures.push(
      { scenario, metric: 'spawn → first 200 p50', value: p50, unit: 'ms', ...goal(goals, 'G11 ≤ 300 ms', p50 <= 300) },
      { scenario, metric: 'CPU to first 200 p50', value: percentile(of(s, 'cpuMs'), 50), unit: 'ms' },
      {
        scenario,
        metric: `spawn → first 200 max (p99 of ${String(runs)})`,
        value: worst,
        unit: 'ms',
        ...goal(goals, 'G11 p99 ≤ 500 ms', worst <= 500),
      },
      {
        scenario,
        metric: 'RSS after 2 s idle (max)',
        value: rssMax,
        unit: 'MB',
        ...goal(goals, 'G12 ≤ 70 MB', rssMax <= 70),
      },
    );
    if (s === bare) continue;
    const startRatio = p50 / bareStart;
    const rssRatio = rss / bareRss;
    figures.push(
      {
        scenario,
        metric: 'p50 ÷ bare Fastify server p50',
        value: startRatio,
        unit: '×',
        ...goal(goals, 'issue 16 ≤ 1.5×', startRatio <= 1.5),
      },
      {
        scenario,
        metric: 'RSS p50 ÷ bare Fastify server RSS p50',
        value: rssRatio,
        unit: '×',
        ...goal(goals, 'issue 16 ≤ 1.3×', rssRatio <= 1.3),
      },
    );
  }
  return { figures, detail };
}

// A goal is read only against what ships; the other variants are there for comparison.
function goal(applies: boolean, text: string, met: boolean): { goal?: string; met?: boolean } {
  return applies ? { goal: text, met } : {};
}

/** The command line of `cirrus serve <fn>` on 127.0.0.1:`port` with the fake provider, as the bench runs it. */
export function serveArgs(fn: string, options: { kubeconfig: string; port: number; logLevel: string }): string[] {
  const { kubeconfig, port, logLevel } = options;
  return [cli, 'serve', fn, '--cloud-provider', 'fake', '--kubeconfig', kubeconfig, '--port', String(port)].concat([
    '--bind-address',
    '127.0.0.1',
    '--log-level',
    logLevel,
  ]);
}

/** Whether a server on 127.0.0.1:`port` answers /healthz with 200. */
export async function healthy(port: number): Promise<boolean> {
  try {
    const reply = await fetch(`http://127.0.0.1:${port}/healthz`);
    await reply.arrayBuffer();
    return reply.status === 200;
  } catch {
    return false;
  }
}
