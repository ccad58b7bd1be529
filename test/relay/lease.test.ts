// Two relays, one Lease: only the leader delivers; when it is cut off from the API server it steps
// down and the standby takes over within the lease duration, listing and delivering the current
// state; when it stops, it releases the Lease and the standby takes over at once. Timings are
// scaled down (lease 3 s, renew deadline 2 s, retry 250 ms) from the defaults (12 s, 8 s, 2 s).
//
// The elections run on a manual clock: the test moves it from one wake-up to the next, each time
// once both elections have finished their attempt against the real API server and wait again. No
// lease expires in real time, and every timing is asserted exactly on the clock. The watches and
// the deliveries run on real time.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { ManualClock } from '../../shared/clock.ts';
import { createNode, newNode, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { CuttableProxy, functionServer, metric, ready, testRelay, throughProxy, waitFor } from './harness.ts';

const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 250 };

/** The elections' manual clock, moved by the test. */
class ElectionClock extends ManualClock {
  readonly #retryPeriodMs: number;

  constructor(retryPeriodMs: number) {
    super(Date.now());
    this.#retryPeriodMs = retryPeriodMs;
  }

  /**
   * Waits (in real time, for the API server) until `elections` elections wait for their next
   * attempt: one sleep each, and no request's timeout (the renew deadline, longer than any retry wait).
   */
  async settle(elections: number): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!(this.pending.length === elections && this.pending.every((sleep) => sleep.ms <= this.#retryPeriodMs))) {
      if (Date.now() > deadline)
        throw new Error(
          `timed out waiting for ${elections} elections to wait for their next attempt: ${JSON.stringify(this.pending)}`,
        );
      await sleep(2);
    }
  }

  /**
   * Moves the clock from one wake-up to the next, letting the elections act on each, until `done()`
   * holds while they wait; returns how long that took on the clock. Fails past `limitMs`.
   */
  async runUntil(elections: number, done: () => boolean, limitMs: number): Promise<number> {
    const start = this.now();
    for (;;) {
      await this.settle(elections);
      if (done()) return this.now() - start;
      const next = this.pending[0];
      if (next === undefined || next.until - start > limitMs)
        throw new Error(`not done within ${limitMs} ms on the clock`);
      this.advance(next.until - this.now());
    }
  }
}

// client-node hands MicroTime back as a Date (or the string it read).
function timeOf(value: unknown): number {
  return value instanceof Date ? value.getTime() : Date.parse(String(value));
}

describe('relay leader election', { skip: controlPlaneSkip }, () => {
  let admin: KubeConfig;
  let core: CoreV1Api;
  let leases: CoordinationV1Api;
  let server: URL;
  before(async () => {
    const cluster = await testCluster();
    admin = cluster.admin;
    core = admin.makeApiClient(CoreV1Api);
    leases = admin.makeApiClient(CoordinationV1Api);
    server = new URL(cluster.info.server);
  });

  it('lets only the leader deliver, and hands over within the lease duration when the leader is cut off', async (t) => {
    const proxy = await new CuttableProxy(server).start();
    t.after(() => proxy.stop());
    const [fnA, fnB] = [await functionServer(t), await functionServer(t)];
    const clock = new ElectionClock(timings.retryPeriodMs);
    const lease = { ...timings, name: uniqueName('relay'), namespace: 'default', clock };
    const a = testRelay(
      t,
      throughProxy(admin, proxy.port),
      { to: [`node-init=${fnA.url}`] },
      { leaderElection: lease },
    );
    await ready(a);
    const b = testRelay(t, admin, { to: [`node-init=${fnB.url}`] }, { leaderElection: lease });
    await waitFor('the second relay to see the lease held', () => b.status().holder === a.identity);
    assert.deepEqual([a.status().role, b.status().role], ['leader', 'standby']);
    assert.equal(b.status().ready, true, 'a standby that can read the lease is ready');

    const before = uniqueName('led');
    await createNode(core, newNode(before, uninitialized));
    await waitFor('the leader to deliver', () => fnA.about(before).length === 1);
    // More than a lease duration on the clock, the leader renewing: the standby does not take over.
    const quietFrom = clock.now();
    await clock.runUntil(
      2,
      () => b.status().role !== 'standby' || clock.now() - quietFrom > timings.leaseDurationMs,
      2 * timings.leaseDurationMs,
    );
    assert.deepEqual(
      [a.status().role, b.status().role],
      ['leader', 'standby'],
      'the standby did not take over a lease being renewed',
    );
    assert.equal(fnB.about(before).length, 0, 'the standby does not deliver');

    await clock.settle(2);
    const cutAt = clock.now();
    proxy.cut();
    const renewedAt = timeOf(
      (await leases.readNamespacedLease({ name: lease.name, namespace: lease.namespace })).spec?.renewTime,
    );
    const during = uniqueName('handover');
    await createNode(core, newNode(during, uninitialized));
    const stepDownMs = await clock.runUntil(2, () => a.status().role === 'standby', timings.leaseDurationMs);
    const stepDownAt = cutAt + stepDownMs;
    assert.ok(
      stepDownAt - renewedAt >= timings.renewDeadlineMs &&
        stepDownAt - renewedAt < timings.renewDeadlineMs + timings.retryPeriodMs,
      `the cut-off leader stepped down ${stepDownAt - renewedAt} ms after its last renewal: on its first attempt past the renew deadline`,
    );
    assert.equal(b.status().role, 'standby', 'the standby has not taken over yet');
    const takeoverMs =
      stepDownMs + (await clock.runUntil(2, () => b.status().role === 'leader', timings.leaseDurationMs));
    const takeoverAt = cutAt + takeoverMs;
    assert.ok(
      takeoverAt - renewedAt >= timings.leaseDurationMs,
      `took over ${takeoverAt - renewedAt} ms after the last renewal, before the lease expired`,
    );
    assert.ok(takeoverMs <= timings.leaseDurationMs + 1, `took over ${takeoverMs} ms after the leader was cut off`);
    await ready(b);
    await waitFor(
      'the new leader to deliver the current state',
      () => fnB.about(during).length === 1 && fnB.about(before).length === 1,
    );
    assert.equal(fnA.about(during).length, 0, 'the old leader, cut off, delivered nothing more');
    assert.equal(await metric(b.registry, 'cirrus_relay_leader'), 1);
    assert.equal(await metric(a.registry, 'cirrus_relay_leader'), 0);

    const record = await leases.readNamespacedLease({ name: lease.name, namespace: lease.namespace });
    assert.equal(record.spec?.holderIdentity, b.identity);
    assert.equal(record.spec.leaseDurationSeconds, 3);
    assert.equal(record.spec.leaseTransitions, 1);
  });

  it('releases the lease on stop, so that the standby takes over at once', async (t) => {
    const [fnA, fnB] = [await functionServer(t), await functionServer(t)];
    const clock = new ElectionClock(timings.retryPeriodMs);
    const lease = {
      ...timings,
      leaseDurationMs: 10_000,
      renewDeadlineMs: 5_000,
      name: uniqueName('relay'),
      namespace: 'default',
      clock,
    };
    const a = testRelay(t, admin, { to: [`node-init=${fnA.url}`] }, { leaderElection: lease });
    await ready(a);
    const b = testRelay(t, admin, { to: [`node-init=${fnB.url}`] }, { leaderElection: lease });
    await waitFor('the standby', () => b.status().holder === a.identity);
    await clock.settle(2);
    const stoppedAt = clock.now();
    await a.stop();
    const takeoverMs =
      clock.now() - stoppedAt + (await clock.runUntil(1, () => b.status().role === 'leader', lease.leaseDurationMs));
    assert.ok(
      takeoverMs <= timings.retryPeriodMs,
      `took over ${takeoverMs} ms after a clean stop, on its next attempt, not when the 10 s lease would expire`,
    );
    await ready(b);
    assert.equal(a.status().role, 'stopped');
  });
});
