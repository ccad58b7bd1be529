// Rows 7, 9, 10 and 11 of issue 20's table: the faults that needed a feature of their own (the
// relay's durable cursor, ADR 0014; the cloud call budget, ADR 0015; the "all" pass releasing what
// no Service owns) or a binary built here (Knative's ApiServerSource receive adapter, knative.ts).

import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { sleep } from '../harness/kube.ts';
import { readCloud } from './check.ts';
import { functions } from './cirrus.ts';
import { peakCalls, replay } from './records.ts';
import { converge, emptyExpected, outcome, withDeployment, type RowContext, type RowResult } from './rows.ts';
import { churn, createNode, createService, deleteNode, nodeName, retried, serviceName } from './workload.ts';
import { knativeAdapterRow } from './knative.ts';

type Row = (ctx: RowContext) => Promise<RowResult>;

const cli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));

// Row 7: objects deleted while no relay replica leads must reach the functions as deletes after
// the take-over. Measured at a recording sink (K_SINK): the new leader's deliveries must include
// a `delete` for every Node deleted while no relay ran.
async function deletedWithoutLeader(ctx: RowContext): Promise<RowResult> {
  const fault = 'objects deleted while no relay replica leads';
  const goal = 'delivered as deletes after take-over';
  const sink = await recordingSink();
  try {
    return await withDeployment(ctx, 'r7', {}, async (d) => {
      const flags = ['--to', `all=${sink.url}`];
      const first = await d.startRelay(flags);
      await first.ready();
      const expected = emptyExpected('r7');
      const count = Math.max(10, ctx.profile.churn.nodes / 5);
      for (let i = 0; i < count; i++) await createNode(ctx.kube, expected, nodeName('r7', i));
      await sleep(3_000);
      await first.kill();
      const deleted = Array.from({ length: count / 2 }, (_, i) => nodeName('r7', i * 2));
      for (const name of deleted) await deleteNode(ctx.kube, expected, name);
      sink.events.length = 0;
      const t0 = performance.now();
      const second = await d.startRelay(flags);
      await second.ready(60_000);
      const deadline = performance.now() + ctx.profile.convergeMs;
      const missing = (): string[] =>
        deleted.filter((n) => !sink.events.some((e) => e.type.endsWith('.delete') && e.name === n));
      while (missing().length > 0 && performance.now() < deadline) await sleep(250);
      const lost = missing().length;
      return {
        row: 7,
        fault,
        lost,
        doubled: 0,
        convergenceS: (performance.now() - t0) / 1000,
        goal,
        ok: lost === 0,
        note: `${deleted.length - lost}/${deleted.length} deletes delivered after take-over`,
      };
    });
  } finally {
    sink.close();
  }
}

interface SinkEvent {
  readonly type: string;
  readonly name: string;
}

async function recordingSink(): Promise<{ url: string; events: SinkEvent[]; close(): void }> {
  const events: SinkEvent[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const type = String(req.headers['ce-type'] ?? '');
      const name = /"name":"([^"]*)"/.exec(body)?.[1] ?? '';
      events.push({ type, name });
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return { url: `http://127.0.0.1:${port}/`, events, close: () => server.close() };
}

// Row 9: a cloud that throttles (RetryError above `perSecond` calls a second): cirrus, given a
// cloud call budget below that, never exceeds it across its function processes, and converges.
async function throttlingCloud(ctx: RowContext): Promise<RowResult> {
  const rate = 10;
  const burst = 10;
  const fault = 'a cloud that throttles (RetryError above 20 calls/s)';
  const goal = `never above the budget (${rate}/s, burst ${burst}) across instances; converges`;
  // The budget is the relay's (ADR 0015): it paces the deliveries to every function instance.
  const budget = ['--cloud-call-rate', String(rate), '--cloud-call-burst', String(burst)];
  return withDeployment(ctx, 'r9', { throttle: { perSecond: 20, retryAfterMs: 200 } }, async (d) => {
    await d.serveFunctions();
    const relay = await d.startRelay(['--leader-elect=false', ...budget]);
    await relay.ready();
    const expected = emptyExpected('r9');
    const size = { nodes: ctx.profile.churn.nodes / 2, services: ctx.profile.churn.services / 2, ratePerSecond: 30 };
    await churn(ctx.kube, expected, size, 9);
    const { ms, verdict } = await converge(ctx.kube, expected, d.setup.cloudLog, ctx.profile.convergeMs * 2);
    const records = await readCloud(d.setup.cloudLog);
    const peak = peakCalls(records, 1_000);
    const o = outcome(verdict, ms);
    return {
      row: 9,
      fault,
      lost: o.lost,
      doubled: o.doubled,
      convergenceS: o.convergenceS,
      goal,
      ok: o.lost === 0 && peak <= rate + burst,
      note: `peak ${peak} cloud calls in any 1 s across ${functions.length} function processes`,
      detail: { peak, wrong: o.sample },
    };
  });
}

// Row 11: a Service whose finalizer was removed by hand, then deleted while the relay was down:
// its load balancer must be released by the next "all" pass (`cirrus reconcile <service fn> --all`).
async function finalizerRemovedByHand(ctx: RowContext): Promise<RowResult> {
  const fault = 'LB Services whose finalizer was removed by hand, then deleted (relay down)';
  const goal = 'their load balancers reclaimed by the next "all" pass';
  return withDeployment(ctx, 'r11', {}, async (d) => {
    await d.serveFunctions();
    const relay = await d.startRelay(['--leader-elect=false']);
    await relay.ready();
    const expected = emptyExpected('r11');
    await createNode(ctx.kube, expected, nodeName('r11', 0));
    const count = Math.max(5, ctx.profile.churn.services / 5);
    for (let i = 0; i < count; i++) await createService(ctx.kube, expected, serviceName('r11', i));
    await converge(ctx.kube, expected, d.setup.cloudLog, ctx.profile.convergeMs);
    await relay.kill();
    for (let i = 0; i < count; i++) {
      const name = serviceName('r11', i);
      const path = `/api/v1/namespaces/chaos/services/${name}`;
      await retried('strip finalizer', () =>
        ctx.kube.call('PATCH', path, { metadata: { finalizers: null } }, 'application/merge-patch+json'),
      );
      await retried('delete', () => ctx.kube.call('DELETE', path), / 404 /);
      expected.services.set(name, undefined);
    }
    const t0 = performance.now();
    const serviceFn = d.functions[1];
    if (serviceFn === undefined) throw new Error('no service function served');
    const pass = spawnSync(
      process.execPath,
      [
        cli,
        'reconcile',
        functions[1] ?? '',
        '--all',
        '--url',
        `${serviceFn.url}/`,
        '--signing-secret-file',
        d.secretFile,
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    const left = replay(await readCloud(d.setup.cloudLog)).lbs.size;
    const ms = performance.now() - t0;
    return {
      row: 11,
      fault,
      lost: left,
      doubled: 0,
      convergenceS: ms / 1000,
      goal,
      ok: pass.status === 0 && left === 0,
      note: `${count - left}/${count} load balancers released by one "all" pass (exit ${pass.status})`,
      detail: { stderr: pass.stderr.slice(-500) },
    };
  });
}

export const featureRows: readonly (readonly [number, Row])[] = [
  [7, deletedWithoutLeader],
  [9, throttlingCloud],
  [10, knativeAdapterRow],
  [11, finalizerRemovedByHand],
];
