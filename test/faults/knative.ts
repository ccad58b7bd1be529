// Row 10: Knative Eventing's own ApiServerSource receive adapter (v1.22.2, Go module
// knative.dev/eventing v0.49.2, built from test/faults/knative-adapter/ once per machine into
// <cache>/knative/, as bench/compare builds the Go CCM) instead of the relay: one adapter per
// function, as deploy/knative/apiserversource wires them, while the functions shed (503) and are
// restarted during churn. The adapter drops what it fails to deliver, so the periodic passes
// (PingSources; here one `cirrus reconcile <fn> --all` each after the churn) must recover it.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildFolder, cacheRoot, goBuild, isExecutable } from '../../tools/control-plane/index.ts';
import { startProcess, type ManagedProcess } from '../../tools/control-plane/processes.ts';
import { sleep } from '../harness/kube.ts';
import { converge } from './check.ts';
import { functions, metricSum } from './cirrus.ts';
import { emptyExpected, outcome, withDeployment, type RowContext, type RowResult } from './rows.ts';
import { churn } from './workload.ts';

const moduleDir = fileURLToPath(new URL('knative-adapter/', import.meta.url));
const cli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));
const pkg = 'knative.dev/eventing/cmd/apiserver_receive_adapter';
const binaryName = 'apiserver_receive_adapter';

/** The cached adapter binary, built first when missing (about 2 minutes on 2 cores with a cold module cache). */
export async function knativeAdapter(progress: (line: string) => void): Promise<string> {
  const dir = join(cacheRoot(), 'knative', `apiserver-receive-adapter-v1.22.2-${await moduleHash()}`);
  const binary = join(dir, binaryName);
  if (await isExecutable(binary)) return binary;
  progress(`building Knative's ApiServerSource receive adapter v1.22.2 once into ${dir}`);
  await buildFolder(dir, binaryName, (staging) =>
    goBuild({
      dir: moduleDir,
      pkg,
      output: join(staging, binaryName),
      ldflags: [],
      name: 'adapter',
      env: process.env,
      progress,
    }),
  );
  return binary;
}

async function moduleHash(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of (await readdir(moduleDir)).sort()) hash.update(file).update(await readFile(join(moduleDir, file)));
  return hash.digest('hex').slice(0, 12);
}

export async function knativeAdapterRow(ctx: RowContext): Promise<RowResult> {
  const fault = 'ApiServerSource adapter instead of the relay; functions shed (503) and restart during churn';
  const goal = 'every object converges within one periodic pass; 0 lost final states';
  let binary: string;
  try {
    binary = await knativeAdapter(ctx.progress);
  } catch (error) {
    return unmeasurable(
      fault,
      goal,
      `the adapter could not be built: ${(error as Error).message.split('\n')[0] ?? ''}`,
    );
  }
  // Shedding: each function admits one reconcile at a time (Knative's containerConcurrency 1) and
  // answers 503 beyond. The adapter sends one event at a time, so what it meets is a periodic pass
  // in flight: as the PingSources do (deploy/knative/apiserversource), `{"all": true}` is posted to
  // each function's /reconcile during the churn, here every second.
  // Unsigned, as deploy/knative/apiserversource serves them: a source cannot sign.
  const setup = { serveFlags: ['--max-concurrent-requests', '1'], unsigned: true };
  return withDeployment(ctx, 'r10', setup, async (d) => {
    await d.serveFunctions();
    const adapters: ManagedProcess[] = [];
    try {
      for (const [i, fn] of functions.entries()) {
        const sink = `${d.functions[i]?.url ?? ''}/`;
        const kubeconfig = ctx.controlPlane.info.adminKubeconfig;
        adapters.push(await startAdapter(binary, { dir: d.setup.dir, kubeconfig, fn, sink }));
      }
      await sleep(5_000);
      const dead = adapters.find((a) => a.hasExited());
      if (dead !== undefined)
        return unmeasurable(fault, goal, `the adapter exited at start: ${await tail(dead.logFile)}`);
      const expected = emptyExpected('r10');
      const size = { nodes: ctx.profile.churn.nodes / 2, services: ctx.profile.churn.services / 2, ratePerSecond: 40 };
      // What the functions answered the adapters, before each restart and at the end (a restart
      // starts its counters again): evidence that the events came, and that some were shed.
      const answered = { events: 0, shed: 0 };
      const count = async (): Promise<void> => {
        for (const f of d.functions) {
          const metrics = await f.metrics().catch(() => new Map<string, number>());
          const all = metricSum(metrics, 'cirrus_reconcile_requests_total');
          answered.events += all - metricSum(metrics, 'cirrus_reconcile_requests_total', { trigger: 'manual' });
          answered.shed += metricSum(metrics, 'cirrus_reconcile_requests_total', { code: '503' });
        }
      };
      const churning = { on: true };
      await Promise.all([
        churn(ctx.kube, expected, size, 10).finally(() => (churning.on = false)),
        (async () => {
          await sleep(2_000);
          await count();
          for (const f of d.functions) await f.restart();
        })(),
        (async () => {
          while (churning.on) {
            for (const f of d.functions) void ping(f.url);
            await sleep(1_000);
          }
        })(),
      ]);
      await Promise.all(d.functions.map((f) => f.ready()));
      await sleep(3_000);
      await count();
      let dropped = 0;
      for (const a of adapters)
        dropped += (await readFile(a.logFile, 'utf8')).split('failed to send cloudevent').length - 1;
      // One periodic pass per function, as its PingSource would send it: a pass that is shed (503,
      // while the adapter's backlog still holds the one slot) is sent again, as Knative's delivery
      // retries it; what counts is one pass that ran.
      const t0 = performance.now();
      let shedPasses = 0;
      for (const [i, fn] of functions.entries()) shedPasses += await periodicPass(fn, `${d.functions[i]?.url ?? ''}/`);
      const { verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, 5_000);
      const o = outcome(verdict, performance.now() - t0);
      return {
        row: 10,
        fault,
        lost: o.lost,
        doubled: o.doubled,
        convergenceS: o.convergenceS,
        goal,
        // The adapters must have delivered for the row to say anything about them.
        ok: o.lost === 0 && answered.events > 0,
        note:
          `after one "all" pass per function; the functions answered ${answered.events} events from the adapters ` +
          `(${answered.shed} of them 503), the adapters logged ${dropped} as failed to send (dropped); ` +
          `${shedPasses} passes shed and sent again`,
        detail: { wrong: o.sample, dropped, answered, shedPasses },
      };
    } finally {
      await Promise.all(adapters.map((a) => a.stop(2_000)));
    }
  });
}

// One `reconcile --all` that ran, sent again while it is shed (503); returns how many were shed.
async function periodicPass(fn: string, url: string): Promise<number> {
  const deadline = performance.now() + 120_000;
  for (let shed = 0; ; shed++) {
    const pass = spawnSync(process.execPath, [cli, 'reconcile', fn, '--all', '--url', url], {
      encoding: 'utf8',
      timeout: 300_000,
    });
    if (pass.status === 0) return shed;
    if (!pass.stderr.includes('answered 503') || performance.now() > deadline)
      throw new Error(`the periodic pass of ${fn} failed: ${pass.stderr.trim().slice(0, 300)}`);
    await sleep(1_000);
  }
}

// A PingSource's event: `{"all": true}` to /reconcile. Its answer (200, 503, or none while the
// function restarts) does not matter here.
async function ping(url: string): Promise<void> {
  await fetch(`${url}/reconcile`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"all": true}',
  })
    .then((reply) => reply.body?.cancel())
    .catch(() => undefined);
}

async function startAdapter(
  binary: string,
  { dir, kubeconfig, fn, sink }: { dir: string; kubeconfig: string; fn: string; sink: string },
): Promise<ManagedProcess> {
  // As deploy/knative/apiserversource wires them: the Node function's source watches Nodes, the
  // Service function's Services (node-set changes reach it only through its periodic pass).
  const watched = fn === functions[1] ? ['services'] : ['nodes'];
  const sourceConfig = {
    namespaces: [],
    allNamespaces: true,
    resources: watched.map((resource) => ({ gvr: { Group: '', Version: 'v1', Resource: resource } })),
    mode: 'Resource',
  };
  const env = {
    ...process.env,
    KUBECONFIG: kubeconfig,
    K_SINK: sink,
    K_SOURCE_CONFIG: JSON.stringify(sourceConfig),
    NAME: `chaos-${fn}`,
    NAMESPACE: 'chaos',
    SYSTEM_NAMESPACE: 'chaos',
    POD_NAME: `chaos-${fn}`,
    K_LOGGING_CONFIG: '{}',
    K_OBSERVABILITY_CONFIG: '{}',
  };
  const previous = process.env;
  process.env = env;
  try {
    return await startProcess(`adapter ${fn}`, binary, [`--kubeconfig=${kubeconfig}`], join(dir, `adapter-${fn}.log`));
  } finally {
    process.env = previous;
  }
}

async function tail(file: string): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.trim().split('\n').slice(-3).join(' / ').slice(0, 400);
}

function unmeasurable(fault: string, goal: string, why: string): RowResult {
  return {
    row: 10,
    fault,
    lost: undefined,
    doubled: undefined,
    convergenceS: undefined,
    goal,
    ok: undefined,
    note: `not measurable: ${why}`,
  };
}
