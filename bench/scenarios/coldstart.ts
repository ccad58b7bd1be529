// G11/G12: one function alone, as `cirrus serve <fn>` in a fresh process: spawn → first 200 on
// /healthz, and the resident set after 2 s idle (VmRSS in /proc/<pid>/status). And node-init as
// a Lambda sandbox starts it (../lambda-sandbox.ts): spawn → the handler's first reply, secrets
// read through a stand-in of the secrets extension.

import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { clusterCidr } from '../cirrus.ts';
import type { Bench } from '../context.ts';
import { percentile, sleep } from '../kube.ts';
import type { Figure, ScenarioResult } from '../report.ts';
import { startSecretsExtension } from '../../test/helpers/lambda.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { freePort } from '../../shared/control-plane/processes.ts';

const cli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));
const sandbox = fileURLToPath(new URL('../lambda-sandbox.ts', import.meta.url));
const functions = catalogue.map((entry) => entry.name);

export async function coldStarts(bench: Bench, kubeconfig: string): Promise<ScenarioResult> {
  const runs = bench.full ? 10 : 5;
  const figures: Figure[] = [];
  const detail: Record<string, string> = {};
  for (const fn of functions) {
    const starts: number[] = [];
    const rss: number[] = [];
    for (let i = 0; i < runs; i++) {
      const one = await coldStart(fn, kubeconfig);
      starts.push(one.startMs);
      rss.push(one.rssMb);
    }
    bench.progress(`cold start ${fn}: ${starts.map((s) => s.toFixed(0)).join(', ')} ms`);
    detail[fn] = JSON.stringify({ startMs: starts, rssMb: rss });
    const scenario = `cold start: ${fn} (${runs} runs)`;
    figures.push(...startFigures(scenario, runs, starts, rss));
  }
  const starts: number[] = [];
  const rss: number[] = [];
  for (let i = 0; i < runs; i++) {
    const one = await lambdaColdStart('nodeInit', kubeconfig);
    starts.push(one.startMs);
    rss.push(one.rssMb);
  }
  bench.progress(`cold start node-init on the Lambda handler: ${starts.map((s) => s.toFixed(0)).join(', ')} ms`);
  detail['lambda node-init'] = JSON.stringify({ startMs: starts, rssMb: rss });
  figures.push(...startFigures(`cold start: node-init, Lambda handler (${runs} runs)`, runs, starts, rss));
  return { figures, detail };
}

function startFigures(scenario: string, runs: number, starts: number[], rss: number[]): Figure[] {
  const p50 = percentile(starts, 50);
  const worst = Math.max(...starts);
  const rssMax = Math.max(...rss);
  return [
    { scenario, metric: 'spawn → first 200 p50', value: p50, unit: 'ms', goal: 'G11 ≤ 300 ms', met: p50 <= 300 },
    {
      scenario,
      metric: `spawn → first 200 max (p99 of ${runs})`,
      value: worst,
      unit: 'ms',
      goal: 'G11 p99 ≤ 500 ms',
      met: worst <= 500,
    },
    { scenario, metric: 'RSS after 2 s idle (max)', value: rssMax, unit: 'MB', goal: 'G12 ≤ 70 MB', met: rssMax <= 70 },
  ];
}

// As Lambda would run node-init: the fake provider, every secret from the extension.
async function lambdaColdStart(handler: string, kubeconfig: string): Promise<{ startMs: number; rssMb: number }> {
  const extension = await startSecretsExtension({
    kubeconfig: await readFile(kubeconfig, 'utf8'),
    signing: 'bench-signing-secret',
  });
  const env = {
    ...process.env,
    AWS_SESSION_TOKEN: extension.token,
    PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(extension.port),
    CIRRUS_CLOUD_PROVIDER: 'fake',
    CIRRUS_KUBECONFIG_SECRET_ID: 'kubeconfig',
    CIRRUS_SIGNING_SECRET_ID: 'signing',
    CIRRUS_LOG_LEVEL: 'warn',
  };
  const start = performance.now();
  const child = spawn(process.execPath, [sandbox, handler], { stdio: ['ignore', 'pipe', 'inherit'], env });
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  try {
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const first = JSON.parse(String((await lines.next()).value)) as { status?: number };
    const startMs = performance.now() - start;
    if (first.status !== 200) throw new Error(`the Lambda handler answered /healthz ${String(first.status)}`);
    const idle = JSON.parse(String((await lines.next()).value)) as { rssMb: number };
    return { startMs, rssMb: idle.rssMb };
  } finally {
    await exited;
    await extension.close();
  }
}

async function coldStart(fn: string, kubeconfig: string): Promise<{ startMs: number; rssMb: number }> {
  const port = await freePort();
  // Only routes reads the cluster CIDR; the others take it and ignore it.
  const args = [...serveArgs(fn, { kubeconfig, port, logLevel: 'warn' }), '--cluster-cidr', clusterCidr];
  const start = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  try {
    const deadline = start + 30_000;
    while (!(await healthy(port))) {
      if (performance.now() > deadline || child.exitCode !== null)
        throw new Error(`cirrus serve ${fn} did not answer /healthz`);
      await sleep(5);
    }
    const startMs = performance.now() - start;
    await sleep(2_000);
    const status = await readFile(`/proc/${child.pid ?? 0}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
    return { startMs, rssMb: kb / 1024 };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
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
