// The cloud call budget (ADR 0015, issue 20 row 9): the relay starts at most `rate` deliveries a
// second after a burst of `burst`, over every destination together.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { CallBudget, checkCallBudget } from '../../shared/cloud/budget.ts';
import { callBudget } from '../../app/cli/relay.ts';
import { ConfigError } from '../../app/config.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { functionServer, metric, ready, testRelay, waitFor } from './harness.ts';

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

describe('relay with a cloud call budget', { skip: controlPlaneSkip }, () => {
  let admin: KubeConfig;
  let core: CoreV1Api;
  const namespace = uniqueName('budget');
  before(async () => {
    admin = (await testCluster()).admin;
    core = admin.makeApiClient(CoreV1Api);
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

  it("lends each pass a share of the budget, named in its trigger's cirrusbudget, and none without a budget", async (t) => {
    const [lifecycle, routes] = [await functionServer(t), await functionServer(t)];
    const periods = { 'node-lifecycle': 100 };
    const relay = testRelay(
      t,
      admin,
      { to: [`node-lifecycle=${lifecycle.url}`, `routes=${routes.url}`], periods },
      { cloudCallBudget: { rate: 9, burst: 6 } },
    );
    await ready(relay);
    await waitFor('a periodic trigger', () => lifecycle.ofType('dev.cirrus-ccm.reconcile.all').length > 0, 5_000);
    const [trigger] = lifecycle.ofType('dev.cirrus-ccm.reconcile.all');
    // Two destinations, each with at most one trigger in flight, and the objects' deliveries: thirds.
    assert.equal(trigger?.headers['ce-cirrusbudget'], '3/2');

    const unpaced = await functionServer(t);
    const free = testRelay(t, admin, { to: [`node-lifecycle=${unpaced.url}`], periods });
    await ready(free);
    await waitFor('a periodic trigger', () => unpaced.ofType('dev.cirrus-ccm.reconcile.all').length > 0, 5_000);
    assert.equal(unpaced.ofType('dev.cirrus-ccm.reconcile.all')[0]?.headers['ce-cirrusbudget'], undefined);
  });

  it("delivers objects only at what is not lent while a pass's trigger is in flight", async (t) => {
    const [lifecycle, lb] = [await functionServer(t), await functionServer(t)];
    // Every pass takes 3 s, and the next is sent as soon as one ends: a share is always lent.
    lifecycle.respond = async () => {
      await setTimeout(3_000);
      return { status: 202, body: '{}' };
    };
    const relay = testRelay(
      t,
      admin,
      { to: [`node-lifecycle=${lifecycle.url}`, `service-lb=${lb.url}`], periods: { 'node-lifecycle': 100 } },
      { cloudCallBudget: { rate: 40, burst: 1 } },
    );
    await ready(relay);
    // The first trigger waits its turn behind the LIST's deliveries of every LoadBalancer Service
    // in the cluster (other tests' too).
    await waitFor('a pass in flight', () => lifecycle.ofType('dev.cirrus-ccm.reconcile.all').length > 0, 30_000);
    const names = await loadBalancerServices(40, 'lent');
    await waitFor('every Service delivered', () => names.every((n) => lb.about(n).length > 0), 30_000);
    const times = names.map((n) => lb.about(n)[0]?.at ?? 0);
    // A third of 40 a second lent: 39 tokens after the first at 26.7 a second, 1.46 s (at the
    // whole rate, 0.98 s). Other tests' Services can only make it slower.
    const spread = Math.max(...times) - Math.min(...times);
    assert.ok(spread >= 1_300, `${spread} ms for 40 deliveries while a pass holds a share`);
  });
});
