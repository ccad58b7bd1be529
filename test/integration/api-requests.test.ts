// API requests per reconcile, counted by the API server itself (apiserver_request_total), on a
// control plane of this file's own so that no other test's requests are counted: a reconcile of
// one object reads that object, never a whole resource (issue 21). Only passes over all objects
// list, and service-lb's node list is read once per instance and node change, not once per Service.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Service } from '@kubernetes/client-node';
import { startCirrus } from '../harness/cirrus.ts';
import { BenchCloud } from '../harness/cloud.ts';
import { Kube, type Counts } from '../harness/kube.ts';
import { serviceLbFunction } from '../../functions/service-lb/index.ts';
import { nodeListDigest } from '../../functions/service-lb/predicates.ts';
import { createNode, newNode, silentLogger, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { waitFor } from '../relay/harness.ts';

describe('API requests per reconcile', { skip: controlPlaneSkip }, () => {
  const cluster = ownControlPlane();

  const loadBalancer = (name: string): V1Service => ({
    metadata: { name, namespace: 'default' },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
  });

  // The requests the API server counted while `during` ran, by "VERB resource[/subresource]".
  async function counted(t: TestContext, during: () => Promise<void>): Promise<Counts> {
    const kube = await Kube.connect(cluster.admin);
    const before = await kube.requestCounters();
    await during();
    const after = await kube.requestCounters();
    const diff: Counts = {};
    for (const [key, value] of Object.entries(after)) {
      const delta = value - (before[key] ?? 0);
      if (delta > 0) diff[key] = delta;
    }
    t.diagnostic(JSON.stringify(diff));
    return diff;
  }

  // Waits until `count` stops moving for a second and a half.
  async function quiet(what: string, count: () => number): Promise<void> {
    await waitFor(
      what,
      async () => {
        const seen = count();
        await sleep(1_500);
        return count() === seen;
      },
      60_000,
    );
  }

  it('a Node joining reaches 40 load-balanced Services with a bounded number of node LISTs, not one per Service', async (t) => {
    const cloud = new BenchCloud();
    const cirrus = await startCirrus(cluster.admin, cloud, 'silent');
    t.after(() => cirrus.stop());
    const services = Array.from({ length: 40 }, () => uniqueName('counted'));
    await Promise.all(
      services.map((name) => cluster.core.createNamespacedService({ namespace: 'default', body: loadBalancer(name) })),
    );
    await waitFor('every Service ensured', () => (cloud.calls['ensureLoadBalancer'] ?? 0) >= services.length, 30_000);
    await quiet('the Services to settle', () => Object.values(cloud.calls).reduce((a, b) => a + b, 0));

    const node = uniqueName('joining');
    const requests = await counted(t, async () => {
      await createNode(cluster.core, newNode(node, uninitialized));
      // Every load balancer gets the node: once with its name, once more when it has a provider ID.
      await waitFor(
        'every load balancer to include the new node',
        () => services.every((s) => cloud.updates.some((u) => u.service === `default/${s}` && u.nodes.includes(node))),
        30_000,
      );
      await quiet('the load balancers to settle', () => cloud.updates.length);
    });
    const updates = cloud.updates.filter((u) => u.nodes.includes(node)).length;
    assert.ok(updates >= services.length, `${updates} updateLoadBalancer calls`);
    // service-lb lists when an event's digest is not the one it holds — once or twice per version
    // of the node (added, initialized, addresses written) — and routes once per pass, passes a
    // second apart. Listing per Service would be 40 per wave, 80 here.
    assert.ok((requests['LIST nodes'] ?? 0) <= 12, `LIST nodes: ${requests['LIST nodes']}`);
    assert.equal(requests['LIST services'] ?? 0, 0, 'no reconcile lists Services');
    // node-init reads the node before it writes (as the Go controller does); node-lifecycle
    // decides from the event that a NotReady node with a live instance needs no write.
    assert.ok((requests['GET nodes'] ?? 0) <= 2, `GET nodes: ${requests['GET nodes']}`);
    // A Service reconcile reads its Service once per node change (two here: the node added, then
    // its provider ID set), and the echo of its own status write sends none.
    const gets = requests['GET services'] ?? 0;
    assert.ok(gets <= 2 * services.length, `GET services: ${gets}, updates: ${updates}`);
  });

  it("service-lb reads the nodes only when an event's digest is not the one it holds", async (t) => {
    const fn = serviceLbFunction({
      core: cluster.core,
      loadBalancer: new BenchCloud().loadBalancer() ?? assert.fail('the benchmark cloud has load balancers'),
      clusterName: 'kubernetes',
    });
    const services = Array.from({ length: 40 }, () => uniqueName('direct'));
    await Promise.all(
      services.map((name) => cluster.core.createNamespacedService({ namespace: 'default', body: loadBalancer(name) })),
    );
    const log = silentLogger();
    const signal = new AbortController().signal;
    const reconcileAll = async (nodeSet?: string): Promise<void> => {
      const reports = await Promise.all(
        services.map((name) =>
          fn.reconcileOne(
            { kind: 'Service', namespace: 'default', name },
            { dryRun: false, log, signal, ...(nodeSet === undefined ? {} : { nodeSet }) },
          ),
        ),
      );
      const failed = reports.flatMap((r) => r.objects).filter((o) => o.result === 'failed');
      assert.deepEqual(failed, []);
    };
    // Without a digest (ApiServerSource, a manual request) the nodes are read: requests waiting at
    // the same time share a list (shared/coalesce.ts), so there are at most as many as requests.
    const cold = await counted(t, () => reconcileAll());
    assert.ok((cold['LIST nodes'] ?? 0) >= 1, 'no digest: the nodes are read');
    assert.equal(cold['GET services'], services.length);

    // With the digest of the nodes as they are (what the relay sends), the list held is current.
    const { items } = await cluster.core.listNode();
    const warm = await counted(t, () => reconcileAll(nodeListDigest(items)));
    assert.equal(warm['LIST nodes'] ?? 0, 0, 'a current digest reads no node');
    assert.equal(warm['GET services'], services.length);

    // A digest the instance does not hold (another node set) is never served from the list held.
    const stale = await counted(t, () => reconcileAll('0000000000000000'));
    assert.ok((stale['LIST nodes'] ?? 0) >= 1, 'another digest: the nodes are read again');
  });
});
