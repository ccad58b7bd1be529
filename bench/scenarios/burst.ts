// Load shedding (issue 15): a burst against one `cirrus serve <fn>` in a process of its own (the
// first function of the catalogue that reconciles one Node per event: node-init) —
// 500 CloudEvents sent at once, 100 of them carrying a 1 MiB object — and what it did to the
// process: still up, its peak resident set (VmRSS in /proc/<pid>/status, sampled every 10 ms),
// and every request answered 2xx, 400 or 503 (counted). The baseline is the same process idle
// before the burst (as the cold-start scenario measures a bare server); the burst runs twice, with
// the default --max-concurrent-requests and with no limit (0), to show what the limit holds back.
// The events name Nodes that do not exist: each reconcile is one GET, answered 404 (not-found).

import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { Bench } from '../../test/harness/context.ts';
import { sleep } from '../../test/harness/kube.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { defaultMaxConcurrentRequests } from '../../shared/host/shedding.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { freePort } from '../../tools/control-plane/processes.ts';
import { healthy, serveArgs } from './coldstart.ts';

const fn = catalogue.find((entry) => entry.target.kind === 'Node' && entry.target.wholeCluster !== true)?.name ?? '';
const requests = 500;
const large = 100;
const largeBytes = 1024 * 1024;

interface Burst {
  readonly limit: number;
  readonly idleRssMb: number;
  readonly peakRssMb: number;
  readonly durationMs: number;
  readonly up: boolean;
  /** Replies by class: `2xx`, `400`, `503`, another status, or `error` (no reply). */
  readonly replies: Record<string, number>;
  readonly largeReplies: Record<string, number>;
}

const knativeNodeInitConcurrency = 20;

export async function burst(bench: Bench, kubeconfig: string): Promise<ScenarioResult> {
  const figures: Figure[] = [];
  const detail: Record<string, string> = {};
  // The default (what `cirrus serve` and `cirrus start` run with), node-init's Knative
  // containerConcurrency (deploy/knative/node-init/service.yaml), and no limit.
  for (const limit of [defaultMaxConcurrentRequests, knativeNodeInitConcurrency, 0]) {
    const result = await burstOnce(kubeconfig, limit);
    bench.progress(
      `burst, --max-concurrent-requests ${limit}: peak RSS ${result.peakRssMb.toFixed(0)} MB (idle ${result.idleRssMb.toFixed(0)}), replies ${JSON.stringify(result.replies)}`,
    );
    detail[`limit ${limit}`] = JSON.stringify(result);
    figures.push(...burstFigures(result));
  }
  return { figures, detail };
}

function burstFigures(result: Burst): Figure[] {
  const scenario = `burst: ${requests} events (${large} × 1 MiB) at ${fn}, --max-concurrent-requests ${result.limit}`;
  const count = (key: string): number => result.replies[key] ?? 0;
  const answered = count('2xx') + count('400') + count('503');
  return [
    { scenario, metric: 'process up after the burst', value: result.up ? 1 : 0, unit: 'bool', met: result.up },
    { scenario, metric: 'RSS idle before the burst (baseline)', value: result.idleRssMb, unit: 'MB' },
    { scenario, metric: 'peak RSS during the burst', value: result.peakRssMb, unit: 'MB' },
    {
      scenario,
      metric: 'answered 2xx, 400 or 503',
      value: answered,
      unit: `of ${requests}`,
      met: answered === requests,
    },
    { scenario, metric: '2xx', value: count('2xx'), unit: 'replies' },
    { scenario, metric: '400', value: count('400'), unit: 'replies' },
    {
      scenario,
      metric: '503 + Retry-After',
      value: count('503'),
      unit: 'replies',
      note: `large ones: ${result.largeReplies['503'] ?? 0} of ${large}`,
    },
    { scenario, metric: 'other status or no reply', value: requests - answered, unit: 'replies' },
    { scenario, metric: 'burst duration', value: result.durationMs, unit: 'ms' },
  ];
}

async function burstOnce(kubeconfig: string, limit: number): Promise<Burst> {
  const port = await freePort();
  const args = [...serveArgs(fn, { kubeconfig, port, logLevel: 'error' }), '--max-concurrent-requests', String(limit)];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  try {
    await waitHealthy(port, child);
    await sleep(2_000);
    const idleRssMb = await rssMb(child);
    let peakRssMb = idleRssMb;
    const sampling = new AbortController();
    const sampler = (async () => {
      while (!sampling.signal.aborted && child.exitCode === null) {
        peakRssMb = Math.max(peakRssMb, await rssMb(child).catch(() => 0));
        await sleep(10);
      }
    })();
    const started = performance.now();
    const outcomes = await Promise.all(
      Array.from({ length: requests }, (_, i) => send(port, i, i % (requests / large) === 0)),
    );
    const durationMs = performance.now() - started;
    await sleep(200);
    sampling.abort();
    await sampler;
    const replies: Record<string, number> = {};
    const largeReplies: Record<string, number> = {};
    for (const { kind, large: isLarge } of outcomes) {
      replies[kind] = (replies[kind] ?? 0) + 1;
      if (isLarge) largeReplies[kind] = (largeReplies[kind] ?? 0) + 1;
    }
    const up = child.exitCode === null && (await healthy(port));
    return { limit, idleRssMb, peakRssMb, durationMs, up, replies, largeReplies };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

// One binary-mode event about a Node that does not exist; `large` pads it to 1 MiB.
async function send(port: number, i: number, large: boolean): Promise<{ kind: string; large: boolean }> {
  const name = `burst-${i}`;
  const node: Record<string, unknown> = { apiVersion: 'v1', kind: 'Node', metadata: { name } };
  const body = JSON.stringify(
    large ? { ...node, metadata: { name, annotations: { padding: 'x'.repeat(largeBytes) } } } : node,
  );
  try {
    const response = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'ce-specversion': '1.0',
        'ce-id': `burst-${i}`,
        'ce-source': 'bench',
        'ce-type': 'dev.knative.apiserver.resource.update',
        'ce-kind': 'Node',
        'ce-name': name,
        'ce-namespace': '',
      },
      body,
    });
    await response.arrayBuffer();
    const status = response.status;
    if (status === 503 && response.headers.get('retry-after') === null)
      return { kind: '503 without Retry-After', large };
    return { kind: status >= 200 && status < 300 ? '2xx' : String(status), large };
  } catch {
    return { kind: 'error', large };
  }
}

async function rssMb(child: ChildProcess): Promise<number> {
  const status = await readFile(`/proc/${child.pid ?? 0}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024;
}

async function waitHealthy(port: number, child: ChildProcess): Promise<void> {
  const deadline = performance.now() + 30_000;
  while (!(await healthy(port))) {
    if (performance.now() > deadline || child.exitCode !== null)
      throw new Error(`cirrus serve ${fn} did not answer /healthz`);
    await sleep(20);
  }
}
