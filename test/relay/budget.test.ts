// The cloud call budget (ADR 0015, issue 20 row 9): the relay starts at most `rate` deliveries a
// second after a burst of `burst`, over every destination together.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { CoreV1Api, type KubeConfig, type V1Service } from '@kubernetes/client-node';
import { CallBudget, checkCallBudget } from '../../shared/cloud/budget.ts';
import { pacedProvider } from '../../shared/cloud/paced.ts';
import { ManualClock } from '../../shared/clock.ts';
import { buildMultiHost } from '../../shared/host/app.ts';
import type { FunctionDefinition } from '../../shared/host/function.ts';
import { serve } from '../../shared/host/serve.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { callBudget } from '../../app/cli/relay.ts';
import { ConfigError } from '../../app/config.ts';
import { createNode, newNode, silentLogger, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import {
  functionServer,
  metric,
  reaching,
  ready,
  standIn,
  testRelay,
  transportNames,
  waitFor,
  within,
} from './harness.ts';

// The most of `times` (ms) that fall in any window of `windowMs`.
function peak(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let start = 0, end = 0; end < sorted.length; end += 1) {
    while ((sorted[end] ?? 0) - (sorted[start] ?? 0) >= windowMs) start += 1;
    most = Math.max(most, end - start + 1);
  }
  return most;
}

describe('CallBudget', () => {
  it('lets a burst through at once, then one take per 1/rate seconds, in order', async () => {
    const budget = new CallBudget({ rate: 20, burst: 3 });
    const signal = new AbortController().signal;
    const started = Date.now();
    const done: number[] = [];
    await Promise.all(
      Array.from({ length: 13 }, (_, i) =>
        budget.take(signal).then(() => {
          done.push(i);
        }),
      ),
    );
    const elapsed = Date.now() - started;
    assert.deepEqual(
      done,
      Array.from({ length: 13 }, (_, i) => i),
      'served in order',
    );
    // 3 at once, 10 more at 20 a second: 500 ms.
    assert.ok(elapsed >= 480 && elapsed < 1_500, `${elapsed} ms`);
  });

  it('takes as many tokens as a delivery may make calls, at most the burst', async () => {
    const budget = new CallBudget({ rate: 10, burst: 2 });
    const signal = new AbortController().signal;
    const started = Date.now();
    await budget.take(signal, 2); // the burst, at once
    await budget.take(signal, 2); // two more tokens: 200 ms at 10 a second
    const twoCalls = Date.now() - started;
    assert.ok(twoCalls >= 180 && twoCalls < 600, `${twoCalls} ms for a second take of 2`);
    await budget.take(signal, 5); // more than the bucket holds: the whole burst, 200 ms
    const capped = Date.now() - started - twoCalls;
    assert.ok(capped >= 180 && capped < 600, `${capped} ms for a take of 5 with a burst of 2`);
  });

  it('refills slower by what it lends, until it is given back', async () => {
    const budget = new CallBudget({ rate: 20, burst: 1 });
    const signal = new AbortController().signal;
    await budget.take(signal); // the burst
    const giveBack = budget.lend({ rate: 15, burst: 1 }); // 5 a second left: 200 ms a token
    let started = Date.now();
    await budget.take(signal);
    await budget.take(signal);
    const lent = Date.now() - started;
    assert.ok(lent >= 380 && lent < 1_000, `${lent} ms for 2 tokens at 5 a second`);
    giveBack();
    giveBack(); // a second call gives nothing back twice
    started = Date.now();
    await budget.take(signal);
    await budget.take(signal);
    const back = Date.now() - started;
    assert.ok(back >= 80 && back < 300, `${back} ms for 2 tokens at 20 a second`);
    assert.throws(() => budget.lend({ rate: 20, burst: 1 }), /cannot lend 20 calls a second of the 20 left/);
  });

  it('holds fewer tokens by the burst it lends, so that it and the borrower never hold more than the burst', async () => {
    const budget = new CallBudget({ rate: 10, burst: 4 });
    const signal = new AbortController().signal;
    budget.lend({ rate: 2, burst: 3 }); // holds 1 token now, refilled at 8 a second
    const started = Date.now();
    await budget.take(signal, 4); // as much as it holds: the 1 token, at once
    await budget.take(signal); // the next: 125 ms
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 110 && elapsed < 500, `${elapsed} ms for 2 takes with 1 token held`);
  });

  it('takes nothing for an aborted wait, and the next in line goes on', async () => {
    const budget = new CallBudget({ rate: 5, burst: 1 });
    const live = new AbortController().signal;
    await budget.take(live);
    const abort = new AbortController();
    const waiting = budget.take(abort.signal);
    abort.abort();
    await waiting;
    const started = Date.now();
    await budget.take(live);
    assert.ok(Date.now() - started < 400, 'the aborted take did not use the token');
  });

  it('serves waiting flows in turn by the tokens they took: a flood of one does not hold another back', async () => {
    const clock = new ManualClock(0);
    const budget = new CallBudget({ rate: 10, burst: 2 }, clock);
    const signal = new AbortController().signal;
    const served: string[] = [];
    const take = (flow: string, calls: number, name: string): Promise<void> =>
      budget.take(signal, calls, flow).then(() => {
        served.push(name);
      });
    const waits = Array.from({ length: 20 }, (_, i) => take('service-lb/Service', 2, `lb-${i}`));
    await setTimeout(0);
    waits.push(...Array.from({ length: 3 }, (_, i) => take('node-init/Node', 1, `node-${i}`)));
    // One token at a time, until every node's take went.
    for (let step = 0; step < 100 && served.filter((n) => n.startsWith('node-')).length < 3; step++) {
      clock.advance(100);
      await setTimeout(0);
    }
    const lastNode = served.lastIndexOf('node-2');
    assert.ok(lastNode >= 0, `the node takes were not served: ${served.join(' ')}`);
    // Each node's take (1 token) alternates with a Service's (2): by the third node, about four of the flood.
    assert.ok(lastNode <= 7, `${lastNode} takes before the third node's: ${served.join(' ')}`);
    assert.deepEqual(
      served.filter((n) => n.startsWith('lb-')),
      served.filter((n) => n.startsWith('lb-')).toSorted((a, b) => Number(a.slice(3)) - Number(b.slice(3))),
      'a flow is served in order',
    );
    for (let step = 0; step < 100 && served.length < 23; step++) {
      clock.advance(200);
      await setTimeout(0);
    }
    await Promise.all(waits);
  });

  it('holds again the tokens given back, and counts the flow as having taken fewer', async () => {
    const clock = new ManualClock(0);
    const budget = new CallBudget({ rate: 1, burst: 2 }, clock);
    const signal = new AbortController().signal;
    // The clock never moves: only what is given back lets the next takes go.
    for (let i = 0; i < 5; i++) {
      const taken = await within(
        budget.take(signal, 2, 'service-lb/Service'),
        5_000,
        `take ${i} (the clock stands still)`,
      );
      assert.equal(taken.tokens, 2);
      budget.giveBack(taken.tokens, 'service-lb/Service');
    }
    await within(budget.take(signal, 2, 'service-lb/Service'), 5_000, 'the sixth take');
    budget.giveBack(1, 'service-lb/Service'); // one call made of two charged
    let second = false;
    const waiting = budget.take(signal, 2, 'service-lb/Service').then(() => {
      second = true;
    });
    await setTimeout(10);
    assert.equal(second, false, 'one token held, two needed');
    clock.advance(1_000);
    await waiting;
    assert.equal(second, true);
  });

  it('refuses a rate or burst that makes no sense', () => {
    assert.throws(() => {
      checkCallBudget({ rate: 0, burst: 1 });
    }, /the rate must be more than 0 calls a second, got 0/);
    assert.throws(() => {
      checkCallBudget({ rate: 1, burst: 0.5 });
    }, /the burst must be a whole number of at least 1, got 0.5/);
  });
});

describe('callBudget (the options)', () => {
  it('is off without a rate; the burst defaults to the rate rounded up', () => {
    assert.equal(callBudget({ cloudCallRate: undefined, cloudCallBurst: undefined }), undefined);
    assert.deepEqual(callBudget({ cloudCallRate: 2.5, cloudCallBurst: undefined }), { rate: 2.5, burst: 3 });
    assert.deepEqual(callBudget({ cloudCallRate: 0.2, cloudCallBurst: undefined }), { rate: 0.2, burst: 1 });
    assert.deepEqual(callBudget({ cloudCallRate: 10, cloudCallBurst: 4 }), { rate: 10, burst: 4 });
  });

  it('refuses a burst without a rate', () => {
    assert.throws(
      () => callBudget({ cloudCallRate: undefined, cloudCallBurst: 5 }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.match(error.message, /^--cloud-call-burst: needs --cloud-call-rate/);
        return true;
      },
    );
  });
});

// A control plane of its own: the relay under test watches every namespace, and paced at a few
// deliveries a second it would otherwise wait behind the LoadBalancer Services that the other test
// files create in the shared cluster at the same time.
describe('relay with a cloud call budget', { skip: controlPlaneSkip }, () => {
  const own = ownControlPlane();
  let admin: KubeConfig;
  let core: CoreV1Api;
  const namespace = uniqueName('budget');
  before(async () => {
    admin = own.admin;
    core = own.core;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  // Creates `count` LoadBalancer Services at once; their names.
  async function loadBalancerServices(count: number, prefix: string): Promise<string[]> {
    const names = Array.from({ length: count }, (_, i) => uniqueName(`${prefix}-${i}`));
    await Promise.all(
      names.map((name) =>
        core.createNamespacedService({
          namespace,
          body: { metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } },
        }),
      ),
    );
    return names;
  }

  it('starts no more deliveries in any second than rate + burst, over all destinations, and delivers them all', async (t) => {
    const [a, b] = [await functionServer(t), await functionServer(t)];
    const relay = testRelay(
      t,
      admin,
      { to: [`service-lb=${a.url}`, `all=${b.url}`] },
      { cloudCallBudget: { rate: 8, burst: 2 } },
    );
    await ready(relay);
    const names = await loadBalancerServices(12, 'paced');
    await waitFor(
      'every Service at both',
      () => names.every((n) => a.about(n).length > 0 && b.about(n).length > 0),
      20_000,
    );
    const times = [...a.received, ...b.received].filter((r) => names.includes(r.name)).map((r) => r.at);
    assert.equal(times.length, 24);
    // 24 deliveries at 8 a second after 2 at once: at least 2.75 s, and never more than 10 in a second.
    assert.ok(Math.max(...times) - Math.min(...times) >= 2_500, `${Math.max(...times) - Math.min(...times)} ms`);
    assert.ok(peak(times, 1_000) <= 10, `${peak(times, 1_000)} in one second`);
    assert.ok((await metric(relay.registry, 'cirrus_relay_budget_wait_seconds_total', { destination: 'all' })) > 0);
  });

  for (const transport of transportNames)
    it(`lends each pass a share of the budget, named in its trigger's cirrusbudget, and none without a budget (${transport})`, async (t) => {
      // routes' period is a pass (reconcile.all); node-lifecycle's rechecks Nodes one by one (ADR 0029).
      const [routes, lifecycle] = [await standIn(t, transport), await standIn(t, transport)];
      const periods = { routes: 100 };
      const to = [`routes=${routes.url}`, `node-lifecycle=${lifecycle.url}`];
      const relay = testRelay(
        t,
        admin,
        { to, periods },
        { cloudCallBudget: { rate: 9, burst: 6 }, ...reaching(transport, to) },
      );
      await ready(relay);
      await waitFor('a periodic trigger', () => routes.ofType('dev.cirrus-ccm.reconcile.all').length > 0, 5_000);
      const [trigger] = routes.ofType('dev.cirrus-ccm.reconcile.all');
      // Two destinations, each with at most one trigger in flight, and the objects' deliveries: thirds.
      assert.equal(trigger?.headers['ce-cirrusbudget'], '3/2');

      const unpaced = await standIn(t, transport);
      const unpacedTo = [`routes=${unpaced.url}`];
      const free = testRelay(t, admin, { to: unpacedTo, periods }, reaching(transport, unpacedTo));
      await ready(free);
      await waitFor('a periodic trigger', () => unpaced.ofType('dev.cirrus-ccm.reconcile.all').length > 0, 5_000);
      assert.equal(unpaced.ofType('dev.cirrus-ccm.reconcile.all')[0]?.headers['ce-cirrusbudget'], undefined);
    });

  it("delivers objects only at what is not lent while a pass's trigger is in flight", async (t) => {
    const [routes, lb] = [await functionServer(t), await functionServer(t)];
    // Every pass takes 3 s, and the next is sent as soon as one ends: a share is always lent.
    routes.respond = async () => {
      await setTimeout(3_000);
      return { status: 202, body: '{}' };
    };
    const relay = testRelay(
      t,
      admin,
      { to: [`routes=${routes.url}`, `service-lb=${lb.url}`], periods: { routes: 100 } },
      { cloudCallBudget: { rate: 40, burst: 1 } },
    );
    await ready(relay);
    // The first trigger waits its turn behind the LIST's deliveries of every LoadBalancer Service
    // in the cluster (other tests' too).
    await waitFor('a pass in flight', () => routes.ofType('dev.cirrus-ccm.reconcile.all').length > 0, 30_000);
    const names = await loadBalancerServices(40, 'lent');
    await waitFor('every Service delivered', () => names.every((n) => lb.about(n).length > 0), 30_000);
    const times = names.map((n) => lb.about(n)[0]?.at ?? 0);
    // A third of 40 a second lent: 39 tokens after the first at 26.7 a second, 1.46 s (at the
    // whole rate, 0.98 s). Other tests' Services can only make it slower.
    const spread = Math.max(...times) - Math.min(...times);
    assert.ok(spread >= 1_300, `${spread} ms for 40 deliveries while a pass holds a share`);
  });
  // With places in flight to spare the budget's turns decide; with few, also the queue's.
  for (const concurrency of [512, 4])
    it(`keeps delivering Nodes to node-init at their share under a flood of service-lb deliveries (${concurrency} in flight)`, async (t) => {
      // The clock stands still but when the test moves it: each move of 100 ms is one token.
      const clock = new ManualClock(Date.now());
      const [lb, init] = [await functionServer(t), await functionServer(t)];
      const relay = testRelay(
        t,
        admin,
        { to: [`service-lb=${lb.url}`, `node-init=${init.url}`] },
        { cloudCallBudget: { rate: 10, burst: 2 }, clock, concurrency },
      );
      await ready(relay);
      // Deliveries to a destination waiting or in flight.
      const queued = async (destination: string): Promise<number> =>
        (await metric(relay.registry, 'cirrus_relay_queue_depth', { destination })) +
        (await metric(relay.registry, 'cirrus_relay_in_flight', { destination }));
      const before = await queued('service-lb');
      const services = await loadBalancerServices(30, 'flood');
      // All of them wait in the relay (the burst let one delivery through at most) before the Nodes come.
      await waitFor('the flood to be queued', async () => (await queued('service-lb')) >= before + 29, 20_000);
      const nodes = Array.from({ length: 3 }, (_, i) => uniqueName(`fair-${i}`));
      t.after(() => Promise.all(nodes.map((name) => core.deleteNode({ name }).catch(() => undefined))));
      for (const name of nodes) await createNode(core, newNode(name, uninitialized));
      await waitFor(
        'the Nodes to be queued',
        async () =>
          (await metric(relay.registry, 'cirrus_relay_queue_depth', { destination: 'node-init' })) +
            (await metric(relay.registry, 'cirrus_relay_in_flight', { destination: 'node-init' })) >=
          3,
      );
      const delivered = (fn: typeof lb, names: string[]): number => names.filter((n) => fn.about(n).length > 0).length;
      for (let step = 0; step < 400; step++) {
        if (delivered(init, nodes) === 3 || delivered(lb, services) === services.length) break;
        clock.advance(100);
        await setTimeout(20);
      }
      assert.equal(delivered(init, nodes), 3, 'every Node reached node-init');
      // First come, first served, node-init would wait for the whole flood (all 30, and whatever the
      // cluster held before); at its share, a few of the flood go between its deliveries.
      const flood = delivered(lb, services);
      assert.ok(flood <= 10, `${flood} of the 30 Services were delivered before the 3 Nodes`);
    });

  for (const transport of transportNames)
    it(`gives back the tokens of a delivery whose function made fewer cloud calls than it was charged (${transport})`, async (t) => {
      // A delivery to service-lb is charged 2 tokens: this reconcile makes two calls for a Service named `busy-<transport>-…`, none for others.
      const cloud = pacedProvider(new FakeCloud());
      const reconciled: string[] = [];
      const definition: FunctionDefinition = {
        name: 'service-lb',
        kinds: ['Service'],
        reconcileOne: async (key, options) => {
          reconciled.push(key.name);
          const service: V1Service = { metadata: { name: key.name, namespace: key.namespace ?? '', uid: 'u' } };
          // Only this run's: the other transport's run left its Services in the namespace.
          if (key.name.startsWith(`busy-${transport}-`))
            for (let i = 0; i < 2; i++) await cloud.loadBalancer()?.getLoadBalancer('c', service, options.signal);
          return { function: 'service-lb', dryRun: options.dryRun, objects: [] };
        },
        reconcileAll: (options) => Promise.resolve({ function: 'service-lb', dryRun: options.dryRun, objects: [] }),
      };
      const { app, local } = await buildMultiHost([definition], {
        logger: silentLogger(),
        processMetrics: false,
        pressure: false,
      });
      const stop = new AbortController();
      const serving = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal, graceMs: 100 });
      t.after(async () => {
        stop.abort();
        await serving.closed;
      });
      // The clock never moves: the bucket holds one delivery's 2 tokens and never refills.
      const to = [`service-lb=${serving.address}/service-lb`];
      const relay = testRelay(
        t,
        admin,
        { to },
        {
          cloudCallBudget: { rate: 1, burst: 2 },
          clock: new ManualClock(Date.now()),
          ...reaching(transport, to, local.handlers),
        },
      );
      await ready(relay);
      const idle = await loadBalancerServices(5, 'idle');
      // Each delivery made no call and gave its tokens back: the next one had them.
      await waitFor('every idle Service reconciled', () => idle.every((n) => reconciled.includes(n)), 20_000);
      const busy = await loadBalancerServices(2, `busy-${transport}`);
      await waitFor('the first busy Service', () => busy.some((n) => reconciled.includes(n)), 20_000);
      await setTimeout(500);
      assert.equal(
        busy.filter((n) => reconciled.includes(n)).length,
        1,
        'two calls made of two charged: nothing given back',
      );
    });
});
