// Two relays, one Lease: only the leader delivers; when it is cut off from the API server it steps
// down and the standby takes over within the lease duration, listing and delivering the current
// state; when it stops, it releases the Lease and the standby takes over at once. Timings are
// scaled down (lease 3 s, renew deadline 2 s, retry 250 ms) from the defaults (15 s, 10 s, 2 s).

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { createNode, newNode, uninitialized } from '../helpers/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../helpers/cluster.ts';
import { CuttableProxy, functionServer, metric, ready, testRelay, throughProxy, waitFor } from './relay-harness.ts';

const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 250 };

describe('relay leader election', { skip: controlPlaneSkip }, () => {
  let admin: KubeConfig;
  let core: CoreV1Api;
  let server: URL;
  before(async () => {
    const cluster = await testCluster();
    admin = cluster.admin;
    core = admin.makeApiClient(CoreV1Api);
    server = new URL(cluster.info.server);
  });

  it('lets only the leader deliver, and hands over within the lease duration when the leader is cut off', async (t) => {
    const proxy = await new CuttableProxy(server).start();
    t.after(() => proxy.stop());
    const [fnA, fnB] = [await functionServer(t), await functionServer(t)];
    const lease = { ...timings, name: uniqueName('relay'), namespace: 'default' };
    const a = testRelay(t, throughProxy(admin, proxy.port), { to: [`node-init=${fnA.url}`] }, { leaderElection: lease });
    await ready(a);
    const b = testRelay(t, admin, { to: [`node-init=${fnB.url}`] }, { leaderElection: lease });
    await waitFor('the second relay to see the lease held', () => b.status().holder === a.identity);
    assert.deepEqual([a.status().role, b.status().role], ['leader', 'standby']);
    assert.equal(b.status().ready, true, 'a standby that can read the lease is ready');

    const before = uniqueName('led');
    await createNode(core, newNode(before, uninitialized));
    await waitFor('the leader to deliver', () => fnA.about(before).length === 1);
    await sleep(500);
    assert.equal(fnB.about(before).length, 0, 'the standby does not deliver');

    const cutAt = Date.now();
    proxy.cut();
    const during = uniqueName('handover');
    await createNode(core, newNode(during, uninitialized));
    await ready(b);
    const takeoverMs = Date.now() - cutAt;
    assert.ok(takeoverMs <= timings.leaseDurationMs + 1_000, `took over ${takeoverMs} ms after the leader was cut off`);
    await waitFor('the old leader to step down', () => a.status().role === 'standby');
    await waitFor('the new leader to deliver the current state', () => fnB.about(during).length === 1 && fnB.about(before).length === 1);
    assert.equal(fnA.about(during).length, 0, 'the old leader, cut off, delivered nothing more');
    assert.equal(await metric(b.registry, 'cirrus_relay_leader'), 1);
    assert.equal(await metric(a.registry, 'cirrus_relay_leader'), 0);

    const record = await admin.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: lease.name, namespace: lease.namespace });
    assert.equal(record.spec?.holderIdentity, b.identity);
    assert.equal(record.spec.leaseDurationSeconds, 3);
    assert.equal(record.spec.leaseTransitions, 1);
  });

  it('releases the lease on stop, so that the standby takes over at once', async (t) => {
    const [fnA, fnB] = [await functionServer(t), await functionServer(t)];
    const lease = { ...timings, leaseDurationMs: 10_000, renewDeadlineMs: 5_000, name: uniqueName('relay'), namespace: 'default' };
    const a = testRelay(t, admin, { to: [`node-init=${fnA.url}`] }, { leaderElection: lease });
    await ready(a);
    const b = testRelay(t, admin, { to: [`node-init=${fnB.url}`] }, { leaderElection: lease });
    await waitFor('the standby', () => b.status().holder === a.identity);
    const stoppedAt = Date.now();
    await a.stop();
    await ready(b);
    const takeoverMs = Date.now() - stoppedAt;
    assert.ok(takeoverMs < 2_000, `took over ${takeoverMs} ms after a clean stop, well before the 10 s lease would expire`);
    assert.equal(a.status().role, 'stopped');
  });
});
