// One reconcile per object at a time, end to end: cirrus wired as `cirrus start` wires it (every
// function behind one port, the relay handing its events to them in process, each object frozen so that a function that writes to it fails) against a control plane of this file's
// own (on the shared one, its service-lb would reconcile other test files' Services), with the
// fake cloud recording every call. A Node's arrival reaches service-lb as one event per
// load-balanced Service through that Service's own queue key, and inside the function the same
// key never runs twice at once, so a Service created together with Nodes is ensured exactly once.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Service } from '@kubernetes/client-node';
import { startCirrus } from '../harness/cirrus.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { createNode, newNode } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { waitFor } from '../relay/harness.ts';

describe('one reconcile per object at a time', { skip: controlPlaneSkip }, () => {
  const cluster = ownControlPlane();

  // cirrus with a fake cloud whose ensure takes a while, so that a second ensure of the same
  // Service, if anything started one, would overlap the first.
  async function cirrusWith(t: TestContext): Promise<FakeCloud> {
    const cloud = new FakeCloud();
    cloud.latencyMs.set('ensureLoadBalancer', 300);
    const cirrus = await startCirrus(cluster.admin, cloud, 'silent', { transport: 'in-process', freeze: true });
    t.after(() => cirrus.stop());
    return cloud;
  }

  const loadBalancer = (name: string): V1Service => ({
    metadata: { name, namespace: 'default' },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
  });

  const ensures = (cloud: FakeCloud, name: string): number =>
    cloud.calls.filter((c) => c.method === 'ensureLoadBalancer' && c.args[1] === `default/${name}`).length;

  async function settled(cloud: FakeCloud, names: readonly string[]): Promise<void> {
    await waitFor(
      'every Service to have its address',
      async () => {
        const { items } = await cluster.core.listNamespacedService({ namespace: 'default' });
        const done = items.filter(
          (s) => names.includes(s.metadata?.name ?? '') && s.status?.loadBalancer?.ingress?.length,
        );
        return done.length === names.length;
      },
      30_000,
    );
    // Whatever the Nodes' arrival set off has had time to run (node-lifecycle's periodic pass
    // keeps asking about the NotReady Nodes: only load-balancer calls count).
    const balancerCalls = (): number => cloud.calls.filter((c) => c.method.includes('LoadBalancer')).length;
    await waitFor(
      'the load balancers to be quiet',
      () => {
        const count = balancerCalls();
        return sleep(1_000).then(() => balancerCalls() === count);
      },
      30_000,
    );
  }

  it('ensures a Service created together with a Node once, with one Ensuring/Ensured pair', async (t) => {
    const cloud = await cirrusWith(t);
    const [service, node] = [uniqueName('web'), uniqueName('node')];
    await Promise.all([
      createNode(cluster.core, newNode(node)),
      cluster.core.createNamespacedService({ namespace: 'default', body: loadBalancer(service) }),
    ]);
    await settled(cloud, [service]);
    assert.equal(ensures(cloud, service), 1, cloud.methods().join(', '));
    // Each Event is counted: a repeat of one would raise its count rather than add an Event.
    const { items } = await cluster.core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${service}`,
    });
    const count = (reason: string): number =>
      items.filter((e) => e.reason === reason).reduce((sum, e) => sum + (e.count ?? 1), 0);
    const reasons = items.map((e) => `${e.reason ?? ''}×${e.count ?? 1}`).join(', ');
    assert.equal(count('EnsuringLoadBalancer'), 1, reasons);
    assert.equal(count('EnsuredLoadBalancer'), 1, reasons);
  });

  it('ensures 50 Services created at once with 20 Nodes exactly 50 times', async (t) => {
    const cloud = await cirrusWith(t);
    const services = Array.from({ length: 50 }, () => uniqueName('burst'));
    const nodes = Array.from({ length: 20 }, () => uniqueName('burst-node'));
    await Promise.all([
      ...nodes.map((name) => createNode(cluster.core, newNode(name))),
      ...services.map((name) =>
        cluster.core.createNamespacedService({ namespace: 'default', body: loadBalancer(name) }),
      ),
    ]);
    await settled(cloud, services);
    const counts = services.map((name) => ensures(cloud, name));
    assert.equal(
      counts.reduce((a, b) => a + b, 0),
      50,
      `ensures per Service: ${counts.join(' ')}`,
    );
  });
});
