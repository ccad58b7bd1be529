// The API requests of the functions' periodic work, counted by the API server itself
// (apiserver_request_total), on a control plane of this file's own: the relay drives each period
// from its copy of the Nodes (ADR 0029, ADR 0031), so at rest no period lists or reads a Node.
// node-init's refresh asks the cloud once per Node per period and writes only an address that
// changed, conditionally on the copy it decided on; node-lifecycle's period costs nothing while
// every Node is Ready. (service-lb has no period: a node-set change reaches it as one event per
// Service, which lists no Service — api-requests.test.ts, "a Node joining…".)

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { nodeInitFunction } from '../../functions/node-init/index.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { mergePatch } from '../../shared/kube/api.ts';
import { startCirrus } from '../harness/cirrus.ts';
import {
  createNode,
  newNode,
  ownTaints,
  silentLogger,
  uninitialized,
  withProviderId,
  withReady,
} from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { countRequests, type Counts } from '../harness/kube.ts';
import { waitFor } from '../relay/harness.ts';

describe('API requests of the periodic work', { skip: controlPlaneSkip }, () => {
  const cluster = ownControlPlane();

  // The requests the API server counted while `during` ran, by "VERB resource[/subresource]".
  const counted = (t: TestContext, during: () => Promise<void>): Promise<Counts> =>
    countRequests(cluster.admin, t, during);

  // A cloud with instances only (no load balancers, no routes: their functions do not run), and a
  // machine for each of `names` at 10.3.0.<i>.
  function cloudFor(names: readonly string[]): FakeCloud {
    const cloud = new FakeCloud();
    cloud.disabled.add('loadBalancer');
    cloud.disabled.add('routes');
    cloud.recordCalls = false;
    names.forEach((name, i) => {
      setAddresses(cloud, name, [{ type: 'InternalIP', address: `10.3.0.${i + 1}` }]);
    });
    return cloud;
  }

  // The machine of `name`, with `addresses` from now on.
  function setAddresses(cloud: FakeCloud, name: string, addresses: V1NodeAddress[]): void {
    const at = cloud.machines.findIndex((m) => m.nodeName === name);
    const machine = { id: name, nodeName: name, instanceType: 'm1.large', zone: 'zone-a', addresses };
    if (at === -1) cloud.machines.push(machine);
    else cloud.machines[at] = machine;
  }

  const addressesOf = async (name: string): Promise<string[]> =>
    ((await cluster.core.readNode({ name })).status?.addresses ?? []).map((a) => `${a.type}=${a.address}`);

  // Whether every Node of `names` is initialized and has addresses.
  async function initialized(names: readonly string[]): Promise<boolean> {
    for (const name of names) {
      const node = await cluster.core.readNode({ name });
      if (ownTaints(node).length > 0 || (node.status?.addresses ?? []).length === 0) return false;
    }
    return true;
  }

  const count = (counts: Counts, key: string): number => counts[key] ?? 0;

  const cloudCalls = (cloud: FakeCloud, method: string): number => cloud.callCounts.get(method) ?? 0;

  it("node-init's periodic refresh reads no Node at rest, and writes one conditional patch when an address changed", async (t) => {
    const names = Array.from({ length: 5 }, () => uniqueName('refresh'));
    const cloud = cloudFor(names);
    for (const name of names) await createNode(cluster.core, newNode(name, uninitialized, withReady('True')));
    const period = 1_000;
    const cirrus = await startCirrus(cluster.admin, cloud, 'silent', { periods: { 'node-init': period } });
    t.after(() => cirrus.stop());
    await waitFor('every Node initialized, with its addresses', () => initialized(names), 30_000);
    await sleep(period * 1.5);

    // At rest: one cloud call per Node per period, no API request.
    const calls = cloudCalls(cloud, 'instanceMetadata');
    const atRest = await counted(t, () => sleep(period * 3.5));
    const refreshed = cloudCalls(cloud, 'instanceMetadata') - calls;
    assert.ok(
      refreshed >= names.length * 3 && refreshed <= names.length * 4,
      `${refreshed} cloud calls for ${names.length} Nodes over 3.5 periods`,
    );
    assert.equal(count(atRest, 'LIST nodes'), 0, 'the period lists no Node');
    assert.equal(count(atRest, 'GET nodes'), 0, 'the period reads no Node');
    assert.equal(count(atRest, 'PATCH nodes') + count(atRest, 'PATCH nodes/status'), 0, 'nothing to write');

    // An address changed in the cloud: one status patch, from the relay's copy, with no read.
    const [moved = ''] = names;
    setAddresses(cloud, moved, [{ type: 'InternalIP', address: '10.3.1.1' }]);
    // (Not polled: this test's own reads would be counted.)
    const changed = await counted(t, () => sleep(period * 2.5));
    assert.deepEqual(await addressesOf(moved), ['InternalIP=10.3.1.1']);
    assert.equal(changed['PATCH nodes/status'], 1, 'one status write');
    assert.equal(count(changed, 'PATCH nodes'), 0);
    assert.equal(count(changed, 'LIST nodes'), 0);
    assert.equal(count(changed, 'GET nodes'), 0);
  });

  it('node-init: a recheck from a stale copy meets a 409, reads the Node, and keeps what was written since', async (t) => {
    const name = uniqueName('stale-refresh');
    const cloud = cloudFor([name]);
    const fn = nodeInitFunction({ core: cluster.core, cloud });
    const copy = await createNode(cluster.core, newNode(name, withReady('True'), withProviderId(`fake://${name}`)));
    // The kubelet writes the addresses after the relay's copy was taken: a write decided on the copy
    // without a precondition would not know of them.
    await cluster.core.patchNodeStatus(
      { name, body: { status: { addresses: [{ type: 'Hostname', address: `${name}.example` }] } } },
      mergePatch,
    );
    const signal = new AbortController().signal;
    const recheck = (claimed: V1Node) =>
      fn.reconcileOne(
        { kind: 'Node', name },
        { dryRun: false, log: silentLogger(), signal, claimed, claimVerified: true, recheck: true },
      );
    const requests = await counted(t, async () => {
      assert.equal((await recheck(copy)).objects[0]?.result, 'addresses-updated');
    });
    assert.equal(requests['PATCH nodes/status'], 2, 'the conditional patch was refused once, then applied');
    assert.equal(requests['GET nodes'], 1, 'the refusal read the Node');
    // The kubelet's Hostname is kept (the cloud has none), as upstream's updateNodeAddress keeps it.
    assert.deepEqual(await addressesOf(name), ['InternalIP=10.3.0.1', `Hostname=${name}.example`]);
    const fresh = await cluster.core.readNode({ name });
    const again = await counted(t, async () => {
      assert.equal((await recheck(fresh)).objects[0]?.result, 'unchanged');
    });
    assert.deepEqual(again, {}, 'a current copy with the cloud’s addresses: no request');
  });

  it("node-lifecycle's period lists, reads and asks nothing while every Node is Ready", async (t) => {
    const names = Array.from({ length: 5 }, () => uniqueName('monitored'));
    const cloud = cloudFor(names);
    for (const name of names) await createNode(cluster.core, newNode(name, withReady('True')));
    const period = 300;
    const cirrus = await startCirrus(cluster.admin, cloud, 'silent', {
      periods: { 'node-lifecycle': period, 'node-init': 0 },
    });
    t.after(() => cirrus.stop());
    await sleep(period * 2);
    const before = cloudCalls(cloud, 'instanceExists') + cloudCalls(cloud, 'instanceShutdown');
    const requests = await counted(t, () => sleep(period * 6));
    assert.equal(count(requests, 'LIST nodes'), 0, 'the monitor period lists no Node');
    assert.equal(count(requests, 'GET nodes'), 0);
    assert.equal(cloudCalls(cloud, 'instanceExists') + cloudCalls(cloud, 'instanceShutdown'), before, 'no cloud call');
  });
});
