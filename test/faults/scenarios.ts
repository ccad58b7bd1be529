// Rows 1 to 6 and 8 of issue 20's table: faults of the relay, the API server and cirrus itself,
// measured against their goals (rows.ts has the shared parts; features.ts rows 7, 9, 10 and 11).

import { readFileSync } from 'node:fs';
import { difference, sleep, type Counts, type Kube } from '../harness/kube.ts';
import { metricSum, type CirrusProcess } from './cirrus.ts';
import { readCloud } from './check.ts';
import { replay } from './records.ts';
import {
  atRandomMoments,
  converge,
  emptyExpected,
  outcome,
  waitReady,
  withDeployment,
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

const noElection = ['--leader-elect=false'];

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

// Row 4: every event delivered 3 times (three relays without leader election, all delivering),
// against the same sequence with one relay: the extra cloud mutations and API writes.
export async function tripleDelivery(ctx: RowContext): Promise<RowResult> {
  const once = await deliveredTimes(ctx, 'r4a', 1);
  const thrice = await deliveredTimes(ctx, 'r4b', 3);
  const extraMutations = thrice.mutations - once.mutations;
  const extraWrites = thrice.writes - once.writes;
  const lost = once.lost + thrice.lost;
  return {
    row: 4,
    fault: 'every event delivered 3 times (3 relays, no leader election)',
    lost,
    doubled: extraMutations + extraWrites,
    convergenceS: thrice.seconds,
    goal: '0 extra cloud mutations, 0 extra API writes',
    ok: lost === 0 && extraMutations <= 0 && extraWrites <= 0,
    note: `extra: ${extraMutations} cloud mutations, ${extraWrites} API writes (once: ${once.mutations} / ${once.writes}; thrice: ${thrice.mutations} / ${thrice.writes})`,
    detail: { once, thrice },
  };
}

interface Delivered {
  readonly mutations: number;
  readonly writes: number;
  readonly writesByKey: Counts;
  readonly lost: number;
  readonly seconds: number;
  readonly wrong: string[];
}

// Nodes, then Services, then a port change, then half the Services deleted, each step converged
// before the next, so that the work is the same however the events interleave.
async function deliveredTimes(ctx: RowContext, rowName: string, relays: number): Promise<Delivered> {
  const { kube, profile } = ctx;
  return withDeployment(ctx, rowName, {}, async (d) => {
    await d.serveFunctions();
    const started: CirrusProcess[] = [];
    for (let i = 0; i < relays; i++) started.push(await d.startRelay(noElection));
    await waitReady(started);
    const expected = emptyExpected(rowName);
    const before = await kube.requestCounters();
    const sentBefore = { ...kube.sent };
    const t0 = performance.now();
    const services = Array.from({ length: profile.triple.services }, (_, i) => serviceName(rowName, i));
    await step(ctx, expected, d.setup.cloudLog, async () => {
      for (let i = 0; i < profile.triple.nodes; i++) await createNode(kube, expected, nodeName(rowName, i));
    });
    await step(ctx, expected, d.setup.cloudLog, async () => {
      for (const name of services) await createService(kube, expected, name);
    });
    await step(ctx, expected, d.setup.cloudLog, async () => {
      for (const name of services) await setServicePort(kube, expected, name, 81);
    });
    const last = await step(ctx, expected, d.setup.cloudLog, async () => {
      for (const name of services.filter((_, i) => i % 2 === 0)) await deleteService(kube, expected, name);
    });
    // Late duplicates: let every relay's queue drain before counting.
    await sleep(3_000);
    const apiserver = difference(await kube.requestCounters(), before);
    const cirrusWrites = writesOf(difference(apiserver, difference(kube.sent, sentBefore)));
    const cloud = replay(await readCloud(d.setup.cloudLog));
    return {
      mutations: cloud.mutations,
      writes: Object.values(cirrusWrites).reduce((a, b) => a + b, 0),
      writesByKey: cirrusWrites,
      lost: last.wrong.length,
      seconds: (performance.now() - t0) / 1000,
      wrong: last.wrong.slice(0, 5),
    };
  });
}

async function step(
  ctx: RowContext,
  expected: Expected,
  cloudLog: string,
  body: () => Promise<void>,
): Promise<{ wrong: string[] }> {
  await body();
  const { verdict } = await converge(ctx.kube, expected, cloudLog, ctx.profile.convergeMs);
  return { wrong: verdict.wrong };
}

const writeVerbs = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'APPLY']);

// cirrus's writes to Nodes and Services: the API server's count minus the harness's own.
function writesOf(counts: Counts): Counts {
  return Object.fromEntries(
    Object.entries(counts).filter(([key]) => {
      const [verb = '', resource = ''] = key.split(' ');
      return writeVerbs.has(verb) && /^(nodes|services)(\/status)?$/.test(resource);
    }),
  );
}

// The competing writer's changes: what it last wrote to each Node.
class Writer {
  readonly labels = new Map<string, number>();
  readonly taints = new Map<string, Set<string>>();
  readonly conditions = new Map<string, number>();
  writes = 0;
  refused = 0;
  readonly #kube: Kube;

  constructor(kube: Kube) {
    this.#kube = kube;
  }

  /** Writes at 50/s to a random Node of `targets` until `done()`. */
  async run(targets: readonly string[], done: () => boolean): Promise<void> {
    const started = performance.now();
    for (let n = 0; !done(); n++) {
      await sleep(started + n * 20 - performance.now());
      const name = targets[Math.floor(Math.random() * targets.length)];
      if (name === undefined) continue;
      try {
        await this.#write(name, n);
        this.writes++;
      } catch {
        this.refused++;
      }
    }
  }

  async #write(name: string, n: number): Promise<void> {
    const path = `/api/v1/nodes/${name}`;
    if (n % 3 === 0) {
      const labels = { 'chaos.cirrus/writer': String(n) };
      await this.#kube.call('PATCH', path, { metadata: { labels } }, 'application/merge-patch+json');
      this.labels.set(name, n);
    } else if (n % 3 === 1) {
      const key = `chaos.cirrus/writer-${n}`;
      const add = { op: 'add', path: '/spec/taints/-', value: { key, value: 'x', effect: 'PreferNoSchedule' } };
      await this.#kube.call('PATCH', path, [add], 'application/json-patch+json');
      this.taints.set(name, (this.taints.get(name) ?? new Set()).add(key));
    } else {
      const condition = { type: 'ChaosWriter', status: 'True', reason: `Seq${n}`, message: 'chaos' };
      const body = { status: { conditions: [condition] } };
      await this.#kube.call('PATCH', `${path}/status`, body, 'application/strategic-merge-patch+json');
      this.conditions.set(name, n);
    }
  }

  /** The writer's changes that are not on the Nodes now. */
  lost(nodes: readonly WrittenNode[]): number {
    return nodes.reduce((sum, node) => sum + this.#lostOn(node), 0);
  }

  #lostOn(node: WrittenNode): number {
    const name = node.metadata.name;
    const label = this.labels.get(name);
    const keys = new Set((node.spec?.taints ?? []).map((t) => t.key));
    const condition = this.conditions.get(name);
    const reason = node.status?.conditions?.find((c) => c.type === 'ChaosWriter')?.reason;
    const labelLost = label !== undefined && node.metadata.labels?.['chaos.cirrus/writer'] !== String(label);
    const taintsLost = [...(this.taints.get(name) ?? [])].filter((key) => !keys.has(key)).length;
    const conditionLost = condition !== undefined && reason !== `Seq${condition}`;
    return Number(labelLost) + taintsLost + Number(conditionLost);
  }
}

interface WrittenNode {
  metadata: { name: string; labels?: Record<string, string> };
  spec?: { taints?: { key: string }[] };
  status?: { conditions?: { type: string; reason?: string }[] };
}

// Row 5: a competing writer on Nodes (labels, taints, conditions at 50 writes/s) while a burst of
// Nodes registers: every Node initialized and every one of the writer's changes kept.
export async function competingWriter(ctx: RowContext): Promise<RowResult> {
  const { kube, profile } = ctx;
  const count = profile.writerBurst;
  const goal = "100 % initialized; every one of the writer's changes kept";
  const fault = `a competing writer on Nodes (50 writes/s) during a ${count}-node burst`;
  return withDeployment(ctx, 'r5', {}, async (d) => {
    await d.serveFunctions();
    const relay = await d.startRelay(noElection);
    await relay.ready();
    const expected = emptyExpected('r5');
    const created: string[] = [];
    const writer = new Writer(kube);
    let stop = false;
    const writing = writer.run(created, () => stop);
    const t0 = performance.now();
    const names = Array.from({ length: count }, (_, i) => nodeName('r5', i));
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < names.length) {
          const name = names[next++] ?? '';
          await createNode(kube, expected, name);
          created.push(name);
        }
      }),
    );
    const { ms, verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, profile.convergeMs);
    stop = true;
    await writing;
    const nodes = await kube.call<{ items: WrittenNode[] }>(
      'GET',
      `/api/v1/nodes?labelSelector=${encodeURIComponent('chaos.cirrus/row=r5')}`,
    );
    const lostWrites = writer.lost(nodes.items);
    const initialized = count - verdict.wrong.filter((w) => w.includes('not initialized')).length;
    const o = outcome(verdict, ms);
    const lost = o.lost + lostWrites;
    return {
      row: 5,
      fault,
      lost,
      doubled: o.doubled,
      convergenceS: (performance.now() - t0) / 1000,
      goal,
      ok: lost === 0,
      note: `${initialized}/${count} initialized; ${writer.writes} writer changes, ${lostWrites} lost (${writer.refused} writes refused)`,
      detail: { wrong: o.sample, writes: writer.writes, lostWrites, refused: writer.refused },
    };
  });
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
