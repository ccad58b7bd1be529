// Rows 1 to 3, 6 and 8 of issue 20's table: faults of the relay, the API server and cirrus itself,
// measured against their goals (rows.ts has the shared parts; writes.ts rows 4 and 5; features.ts
// rows 7, 9, 10 and 11).

import { readFileSync } from 'node:fs';
import { sleep, type Kube } from '../harness/kube.ts';
import { metricSum, type CirrusProcess } from './cirrus.ts';
import { readCloud } from './check.ts';
import { replay } from './records.ts';
import {
  atRandomMoments,
  converge,
  emptyExpected,
  outcome,
  withDeployment,
  noElection,
  type RowContext,
  type RowResult,
} from './rows.ts';
import {
  churn,
  createNode,
  createService,
  deleteNode,
  deleteService,
  nodeName,
  retried,
  serviceName,
  setServicePort,
  type Expected,
} from './workload.ts';

interface Measured {
  readonly lost: number;
  readonly doubled: number;
  readonly convergenceS: number;
}

function row(
  head: { row: number; fault: string; goal: string },
  o: Measured,
  verdict: { ok: boolean; detail: Record<string, unknown>; note?: string },
): RowResult {
  return { ...head, ...o, ok: verdict.ok, note: verdict.note ?? '', detail: verdict.detail };
}

// Row 1: churn while the relay is SIGKILLed at random moments and started again at once.
export async function relayKills(ctx: RowContext): Promise<RowResult> {
  const { profile } = ctx;
  const head = {
    row: 1,
    goal: '0 final states lost; duplicates counted',
    fault: `churn of ${profile.churn.nodes} Nodes + ${profile.churn.services} LB Services, relay SIGKILLed ${profile.relayKills}×`,
  };
  return withDeployment(ctx, 'r1', {}, async (d) => {
    await d.serveFunctions();
    const relay = await d.startRelay(noElection);
    await relay.ready();
    const expected = emptyExpected('r1');
    await Promise.all([
      churn(ctx.kube, expected, profile.churn, 1),
      atRandomMoments(profile.relayKills, churnSeconds(ctx) * 1000, 11, async () => {
        await relay.kill();
        await sleep(Math.random() * 500);
        await relay.restart();
      }),
    ]);
    const { ms, verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, profile.convergeMs);
    const o = outcome(verdict, ms);
    return row(head, o, {
      ok: o.lost === 0,
      detail: { wrong: o.sample, redundant: verdict.cloud.redundantByKind },
      note: `duplicates: ${JSON.stringify(verdict.cloud.redundantByKind)}`,
    });
  });
}

// Row 2: churn while kube-apiserver is restarted (SIGTERM, its 10 s drain, etcd kept).
export async function apiserverRestarts(ctx: RowContext): Promise<RowResult> {
  const { profile } = ctx;
  const head = {
    row: 2,
    goal: '0 lost',
    fault: `kube-apiserver restarted ${profile.apiserverRestarts}× during churn (etcd kept)`,
  };
  return withDeployment(ctx, 'r2', {}, async (d) => {
    await d.serveFunctions();
    const relay = await d.startRelay(noElection);
    await relay.ready();
    const expected = emptyExpected('r2');
    await Promise.all([
      churn(ctx.kube, expected, profile.churn, 2),
      atRandomMoments(profile.apiserverRestarts, churnSeconds(ctx) * 1000, 22, async () => {
        ctx.progress('  restarting kube-apiserver');
        await ctx.controlPlane.restartApiserver();
      }),
    ]);
    const { ms, verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, profile.convergeMs);
    const o = outcome(verdict, ms);
    const lists = await relayLists(relay);
    return row(head, o, {
      ok: o.lost === 0,
      detail: { wrong: o.sample, lists },
      note: `LISTs: ${JSON.stringify(lists)}`,
    });
  });
}

// Row 3: a forced 410 Gone. The relay is paused (SIGSTOP); etcd's revision is moved past every
// resourceVersion it holds and compacted there, and kube-apiserver restarted, so that neither its
// new watch cache nor etcd (which serves watches while that cache is not ready yet) has them;
// Nodes and Services are then deleted and updated; the relay resumes, its watches come back with
// 410 and it must relist once per resource, the deletes coming from the relist's diff.
export async function forcedGone(ctx: RowContext): Promise<RowResult> {
  const { profile } = ctx;
  const head = {
    row: 3,
    goal: '0 lost, one relist per resource',
    fault: 'forced 410 Gone during churn (watch history gone while the relay was paused)',
  };
  return withDeployment(ctx, 'r3', {}, async (d) => {
    await d.serveFunctions();
    const relay = await d.startRelay(noElection);
    await relay.ready();
    const expected = emptyExpected('r3');
    await churn(ctx.kube, expected, { ...profile.churn, nodes: profile.churn.nodes / 2 }, 3);
    await converge(ctx.kube, expected, d.setup.cloudLog, profile.convergeMs);
    relay.pause(true);
    try {
      await bumpAndCompactEtcd(ctx);
      await ctx.controlPlane.restartApiserver({ graceMs: 1_000 });
      await changeWhileAway(ctx.kube, expected);
    } finally {
      relay.pause(false);
    }
    const { ms, verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, profile.convergeMs);
    const o = outcome(verdict, ms);
    // The objects can converge before both watches are back: a relisted Node set fans out to every
    // LoadBalancer Service the relay knows, and service-lb acts on what it re-reads. The relists are
    // counted once both have happened, or after 15 s.
    const lists = await relayListsOnce(relay, ['nodes/gone', 'services/gone'], 15_000);
    const gone = { nodes: lists['nodes/gone'] ?? 0, services: lists['services/gone'] ?? 0 };
    return row(head, o, {
      ok: o.lost === 0 && gone.nodes === 1 && gone.services === 1,
      detail: { wrong: o.sample, lists },
      note: `relists after 410: nodes ${gone.nodes}, services ${gone.services}`,
    });
  });
}

// What the relay can learn only from the relist: a third of the Nodes deleted, a third of the
// Services deleted and another third given a new port.
async function changeWhileAway(kube: Kube, expected: Expected): Promise<void> {
  const live = [...expected.nodes].filter(([, exists]) => exists).map(([name]) => name);
  for (const name of live.filter((_, i) => i % 3 === 0)) await deleteNode(kube, expected, name);
  const services = [...expected.services].filter(([, ports]) => ports !== undefined).map(([name]) => name);
  for (const [i, name] of services.entries()) {
    if (i % 3 === 0) await deleteService(kube, expected, name);
    else if (i % 3 === 1) await setServicePort(kube, expected, name, 90);
  }
}

// Row 6: LoadBalancer Services deleted while cirrus (`cirrus start`) is down, some of them before
// their finalizer was set; after the restart nothing may be left in the cloud or stuck.
export async function deletedWhileDown(ctx: RowContext): Promise<RowResult> {
  const { kube, profile } = ctx;
  const count = profile.downServices;
  const head = {
    row: 6,
    goal: '0 load balancers without a Service, 0 Services stuck on the finalizer',
    fault: `${count} LB Services deleted while cirrus is down, some before their finalizer was set`,
  };
  return withDeployment(ctx, 'r6', {}, async (d) => {
    const cirrus = await d.startAllInOne(noElection);
    await cirrus.ready();
    const expected = emptyExpected('r6');
    await createNode(kube, expected, nodeName('r6', 0));
    const names = Array.from({ length: count }, (_, i) => serviceName('r6', i));
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < names.length) await createService(kube, expected, names[next++] ?? '');
      }),
    );
    // Killed part-way: some Services have a load balancer, some only the finalizer, some nothing.
    const deadline = performance.now() + profile.convergeMs;
    while (replay(await readCloud(d.setup.cloudLog)).lbs.size < count / 2 && performance.now() < deadline)
      await sleep(50);
    await cirrus.kill();
    const withLb = replay(await readCloud(d.setup.cloudLog)).lbs.size;
    const listed = await kube.call<{ items: { metadata: { finalizers?: string[] } }[] }>(
      'GET',
      `/api/v1/namespaces/chaos/services?labelSelector=${encodeURIComponent('chaos.cirrus/row=r6')}`,
    );
    const withoutFinalizer = listed.items.filter((s) => (s.metadata.finalizers ?? []).length === 0).length;
    for (const name of names) await deleteService(kube, expected, name);
    const t0 = performance.now();
    await cirrus.restart();
    const { verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, profile.convergeMs);
    const o = outcome(verdict, performance.now() - t0);
    return row(head, o, {
      ok: o.lost === 0,
      detail: { wrong: o.sample, withLb, withoutFinalizer },
      note: `at the kill: ${withLb} with a load balancer, ${withoutFinalizer} without the finalizer`,
    });
  });
}

// Row 8: the leading relay SIGKILLed; the time until the standby leads (the relay's default Lease,
// 12 s: a kill just after a renewal waits all of it, ADR 0007).
export async function leaderKills(ctx: RowContext): Promise<RowResult> {
  const { profile } = ctx;
  const goal = 'take-over ≤ 15 s each';
  const fault = `the leading relay SIGKILLed, ${profile.leaderKills}×`;
  return withDeployment(ctx, 'r8', {}, async (d) => {
    await d.serveFunctions();
    const replicas = [await d.startRelay(), await d.startRelay()];
    const takeovers: number[] = [];
    const expected = emptyExpected('r8');
    const size = { nodes: profile.churn.nodes / 5, services: profile.churn.services / 5, ratePerSecond: 5 };
    const churning = churn(ctx.kube, expected, size, 8);
    for (let k = 0; k < profile.leaderKills; k++) {
      const leader = await waitForLeader(replicas, 60_000);
      const killedAt = performance.now();
      await leader.kill();
      const next = await waitForLeader(
        replicas.filter((r) => r !== leader),
        60_000,
      );
      takeovers.push((performance.now() - killedAt) / 1000);
      ctx.progress(`  take-over ${k + 1}: ${((performance.now() - killedAt) / 1000).toFixed(1)} s (${next.name})`);
      await leader.restart();
    }
    await churning;
    const { ms, verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, profile.convergeMs);
    const o = outcome(verdict, ms);
    const worst = Math.max(...takeovers);
    return {
      row: 8,
      fault,
      lost: o.lost,
      doubled: o.doubled,
      convergenceS: worst,
      goal,
      ok: worst <= 15 && o.lost === 0,
      note: `take-overs: ${takeovers.map((t) => t.toFixed(1)).join(', ')} s (convergence column: the slowest)`,
      detail: { takeovers, wrong: o.sample },
    };
  });
}

async function waitForLeader(replicas: readonly CirrusProcess[], timeoutMs: number): Promise<CirrusProcess> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    for (const replica of replicas) {
      if (!replica.alive) continue;
      const metrics = await replica.metrics().catch(() => new Map<string, number>());
      if (metricSum(metrics, 'cirrus_relay_leader') === 1) return replica;
    }
    if (performance.now() > deadline) throw new Error('no relay became leader');
    await sleep(100);
  }
}

/** The relay's LISTs once every one of `wanted` has happened at least once, or at `timeoutMs`. */
async function relayListsOnce(
  relay: CirrusProcess,
  wanted: readonly string[],
  timeoutMs: number,
): Promise<Record<string, number>> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const lists = await relayLists(relay);
    if (wanted.every((k) => (lists[k] ?? 0) > 0) || performance.now() >= deadline) return lists;
    await sleep(100);
  }
}

/** The relay's completed LISTs, as `resource/reason` → count. */
export async function relayLists(relay: CirrusProcess): Promise<Record<string, number>> {
  const metrics = await relay.metrics();
  const out: Record<string, number> = {};
  for (const [series, value] of metrics) {
    const labels = /^cirrus_relay_lists_total\{(.*)\}$/.exec(series)?.[1];
    if (labels === undefined) continue;
    const resource = /resource="([^"]*)"/.exec(labels)?.[1] ?? '';
    const reason = /reason="([^"]*)"/.exec(labels)?.[1] ?? '';
    out[`${resource}/${reason}`] = value;
  }
  return out;
}

// etcd's revision moved by a write outside the API server's keys, and compacted there: every
// resourceVersion the relay holds is then older than where a new watch cache starts, and etcd no
// longer has it either. (Without the compaction, a watch that arrives before the API server's
// cache for its resource is ready is served by etcd from the old revision, without a 410: at
// --full, 1,000 Services, that happened to the Services watch.)
async function bumpAndCompactEtcd(ctx: RowContext): Promise<void> {
  const flag = '--listen-client-urls=';
  const url = ctx.controlPlane.pids
    .flatMap((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0'))
    .find((arg) => arg.startsWith(flag))
    ?.slice(flag.length);
  if (url === undefined) throw new Error('etcd: no --listen-client-urls among the control plane processes');
  const key = Buffer.from('/chaos/revision-bump').toString('base64');
  let revision = '';
  // Two writes: a watch from resourceVersion R starts at revision R + 1, so after one write (R + 1)
  // and a compaction there, a watch from the newest revision the relay holds would still be valid.
  for (const n of [1, 2]) {
    await retried(`etcd put ${n}`, async () => {
      const reply = await fetch(`${url}/v3/kv/put`, {
        method: 'POST',
        body: JSON.stringify({ key, value: Buffer.from(`${Date.now()} ${n}`).toString('base64') }),
      });
      if (!reply.ok) throw new Error(`etcd put: ${reply.status}`);
      revision = ((await reply.json()) as { header?: { revision?: string } }).header?.revision ?? '';
    });
  }
  if (revision === '') throw new Error('etcd put: no revision in the answer');
  await retried('etcd compaction', async () => {
    const reply = await fetch(`${url}/v3/kv/compaction`, {
      method: 'POST',
      body: JSON.stringify({ revision, physical: true }),
    });
    if (!reply.ok) throw new Error(`etcd compaction: ${reply.status} ${await reply.text()}`);
  });
}

function churnSeconds(ctx: RowContext): number {
  const { churn: size } = ctx.profile;
  // About 1.75 operations per object (create, half updated, a quarter deleted).
  return (1.75 * (size.nodes + size.services)) / size.ratePerSecond;
}
