// Row 12 of the fault table: node-lifecycle's periodic work after a relay take-over. The relay
// drives it from its copy of the Nodes (ADR 0029): each monitor period, one recheck per Node that is
// not Ready. A Node that turns NotReady while no relay replica leads must be rechecked by the next
// leader — found by its first LIST, then rechecked every period — so that when its machine goes
// after the take-over (no event of the Node says so) node-lifecycle deletes it, and leaves the
// Ready Nodes alone.

import { join } from 'node:path';
import { appendFile } from 'node:fs/promises';
import type { Kube } from '../harness/kube.ts';
import { sleep } from '../harness/kube.ts';
import { functions, lifecycleFunction, metricSum, type CirrusProcess } from './cirrus.ts';
import { withDeployment, type RowContext, type RowResult } from './rows.ts';
import { uninitializedTaint } from '../harness/context.ts';
import { createNode, emptyExpected, nodeName, retried } from './workload.ts';

const row = 'r12';
const monitorPeriod = '1s';

export async function notReadyWithoutLeader(ctx: RowContext): Promise<RowResult> {
  const fault = 'a Node turned NotReady while no relay replica leads, its machine gone after the take-over';
  const goal = 'deleted by its rechecks after the take-over; Ready Nodes kept';
  const gone = join(ctx.dir, row, 'gone-machines');
  return withDeployment(ctx, row, { gone }, async (d) => {
    // node-init initializes the Nodes; node-lifecycle is the function under test.
    await d.serveFunctions([functions[0] ?? '', lifecycleFunction]);
    const flags = ['--node-monitor-period', monitorPeriod];
    const first = await d.startRelay(flags);
    await first.ready();
    const expected = emptyExpected(row);
    const count = Math.max(4, Math.round(ctx.profile.churn.nodes / 6));
    const names = Array.from({ length: count }, (_, i) => nodeName(row, i));
    for (const name of names) {
      await createNode(ctx.kube, expected, name);
      await setReady(ctx.kube, name, 'True');
    }
    await until(() => allInitialized(ctx.kube, names), ctx.profile.convergeMs);

    await first.kill();
    const failing = names.filter((_, i) => i % 2 === 0);
    for (const name of failing) await setReady(ctx.kube, name, 'False');
    const t0 = performance.now();
    const second = await d.startRelay(flags);
    await until(() => leads(second), 60_000);
    const takeOverS = (performance.now() - t0) / 1000;
    // Its first LIST delivered each NotReady Node (its machine still there: nothing to write); from
    // now on nothing about these Nodes changes in the cluster, and only their rechecks can find
    // that their machines went.
    await sleep(2_000);
    await appendFile(gone, failing.map((name) => `${name}\n`).join(''));
    const t1 = performance.now();
    const remaining = async (): Promise<string[]> =>
      (await Promise.all(failing.map(async (name) => ((await exists(ctx.kube, name)) ? [name] : [])))).flat();
    await until(async () => (await remaining()).length === 0, ctx.profile.convergeMs);
    const afterGoneS = (performance.now() - t1) / 1000;
    const left = await remaining();
    const kept = names.filter((name) => !failing.includes(name));
    const wronglyDeleted = (
      await Promise.all(kept.map(async (name) => ((await exists(ctx.kube, name)) ? [] : [name])))
    ).flat();
    const lost = left.length + wronglyDeleted.length;
    return {
      row: 12,
      fault,
      lost,
      doubled: 0,
      convergenceS: (performance.now() - t0) / 1000,
      goal,
      ok: lost === 0,
      note:
        `${failing.length - left.length}/${failing.length} NotReady Nodes deleted ${afterGoneS.toFixed(1)} s after ` +
        `their machines went (monitor period ${monitorPeriod}; take-over ${takeOverS.toFixed(1)} s); ` +
        `${kept.length - wronglyDeleted.length}/${kept.length} Ready Nodes kept`,
      detail: { left, wronglyDeleted },
    };
  });
}

async function setReady(kube: Kube, name: string, status: 'True' | 'False'): Promise<void> {
  const conditions = [{ type: 'Ready', status, reason: 'KubeletReady', lastHeartbeatTime: new Date().toISOString() }];
  await retried(`node ${name} Ready=${status}`, () =>
    kube.call('PATCH', `/api/v1/nodes/${name}/status`, { status: { conditions } }, 'application/merge-patch+json'),
  );
}

async function allInitialized(kube: Kube, names: readonly string[]): Promise<boolean> {
  for (const name of names) {
    const node = await kube.call<{ spec?: { taints?: { key: string }[] } }>('GET', `/api/v1/nodes/${name}`);
    if ((node.spec?.taints ?? []).some((t) => t.key === uninitializedTaint)) return false;
  }
  return true;
}

async function exists(kube: Kube, name: string): Promise<boolean> {
  return kube.call('GET', `/api/v1/nodes/${name}`).then(
    () => true,
    (error: unknown) => {
      if (/ 404 /.test((error as Error).message)) return false;
      throw error;
    },
  );
}

async function leads(relay: CirrusProcess): Promise<boolean> {
  const metrics = await relay.metrics().catch(() => new Map<string, number>());
  return metricSum(metrics, 'cirrus_relay_leader') === 1;
}

// Polls `done` every 250 ms until it holds or `timeoutMs` passes (then the row measures what it got).
async function until(done: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await done().catch(() => false))) {
    if (performance.now() > deadline) return;
    await sleep(250);
  }
}
