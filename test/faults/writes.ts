// Rows 4 and 5 of issue 20's table: the writes cirrus makes when every event arrives three times,
// and the writes of a competing writer on Nodes that cirrus must keep (rows.ts has the shared parts).

import { difference, sleep, type Counts, type Kube } from '../harness/kube.ts';
import type { CirrusProcess } from './cirrus.ts';
import { readCloud } from './check.ts';
import { replay } from './records.ts';
import {
  converge,
  emptyExpected,
  outcome,
  waitReady,
  withDeployment,
  noElection,
  type RowContext,
  type RowResult,
} from './rows.ts';
import {
  createNode,
  createService,
  deleteService,
  nodeName,
  serviceName,
  setServicePort,
  type Expected,
} from './workload.ts';

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
    // A cursor has one writer (issue 38): the first relay keeps it, the others deliver without one.
    for (let i = 0; i < relays; i++)
      started.push(await d.startRelay(i === 0 ? noElection : [...noElection, '--relay-cursor=false']));
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
