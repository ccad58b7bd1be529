// Which function hears of which change, on a control plane of this file's own (on the shared one,
// other test files' nodes would send reconcile.all triggers at any time, and "nothing was sent"
// could not be checked). Each step makes one change and then checks every destination's count:
// a destination that should not hear of it must still have the same count once the K_SINK
// destination (fed everything) has received that change, and a little later.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { PatchStrategy, setHeaderOptions, type V1Node } from '@kubernetes/client-node';
import { createNode, newNode, uninitialized, uninitializedTaint } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { functionServer, ready, testRelay, waitFor, type FunctionServer } from './harness.ts';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Counts {
  readonly nodeInit: number;
  readonly lifecycle: number;
  readonly serviceLb: number;
  readonly routes: number;
}

describe('relay routing', { skip: controlPlaneSkip }, () => {
  const cluster = ownControlPlane();

  interface Servers {
    readonly nodeInit: FunctionServer;
    readonly lifecycle: FunctionServer;
    readonly serviceLb: FunctionServer;
    readonly routes: FunctionServer;
    readonly sink: FunctionServer;
  }

  async function servers(t: TestContext): Promise<Servers> {
    return {
      nodeInit: await functionServer(t),
      lifecycle: await functionServer(t),
      serviceLb: await functionServer(t),
      routes: await functionServer(t),
      sink: await functionServer(t),
    };
  }

  // service-lb hears of a node-set change as one event per load-balanced Service (here: one, `lb`,
  // whose own add is not counted), never as a reconcile.all.
  function counts(s: Servers, node: string, lb = ''): Counts {
    return {
      nodeInit: s.nodeInit.about(node).length,
      lifecycle: s.lifecycle.about(node).length,
      serviceLb: s.serviceLb.about(lb).filter((r) => r.type !== 'add').length,
      // routes hears of a Node change as the Node's own event, carrying the digest of the Nodes'
      // route views (ADR 0030), never as a reconcile.all.
      routes: s.routes.about(node).filter((r) => r.headers['ce-cirrusnodeset'] !== undefined).length,
    };
  }

  interface Step {
    readonly what: string;
    /** Makes the change; resolves with the object written, or undefined for a deletion. */
    readonly change: () => Promise<V1Node | undefined>;
    /** The counts after it. */
    readonly expected: Counts;
  }

  // Runs the change, waits for the sink to have the resulting version, then for the counts.
  async function step(s: Servers, node: string, { what, change, expected }: Step, lb?: string): Promise<void> {
    const written = await change();
    const version = written?.metadata?.resourceVersion;
    await waitFor(`the sink to receive: ${what}`, () =>
      s.sink
        .about(node)
        .some((r) => (version === undefined ? r.type === 'delete' : r.data?.metadata?.resourceVersion === version)),
    );
    await waitFor(
      `the counts after: ${what}`,
      () => JSON.stringify(counts(s, node, lb)) === JSON.stringify(expected),
    ).catch(() => undefined);
    await sleep(200);
    assert.deepEqual(counts(s, node, lb), expected, what);
    assert.equal(
      s.serviceLb.received.filter((r) => r.key === 'all/service-lb').length,
      0,
      'no reconcile.all for service-lb',
    );
    assert.equal(s.routes.received.filter((r) => r.key === 'all/routes').length, 0, 'no reconcile.all for routes');
  }

  it('sends each function the node changes it acts on, and the sink everything', async (t) => {
    const s = await servers(t);
    const relay = testRelay(t, cluster.admin, {
      to: [
        `node-init=${s.nodeInit.url}`,
        `node-lifecycle=${s.lifecycle.url}`,
        `service-lb=${s.serviceLb.url}`,
        `routes=${s.routes.url}`,
      ],
      sink: s.sink.url,
    });
    await ready(relay);
    const lb = uniqueName('lb');
    await cluster.core.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name: lb }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } },
    });
    await waitFor('service-lb to hear of the new Service', () => s.serviceLb.about(lb).length === 1);
    const name = uniqueName('route');
    const patch = async (body: object): Promise<V1Node> => cluster.core.patchNode({ name, body }, mergePatch);
    const status = async (ready: string): Promise<V1Node> =>
      cluster.core.patchNodeStatus(
        { name, body: { status: { conditions: [{ type: 'Ready', status: ready, reason: 'Test' }] } } },
        mergePatch,
      );

    await step(
      s,
      name,
      {
        what: 'a new, uninitialized node',
        change: () => createNode(cluster.core, newNode(name, uninitialized)),
        expected: { nodeInit: 1, lifecycle: 1, serviceLb: 1, routes: 1 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'it becomes Ready, still tainted',
        change: () => status('True'),
        expected: { nodeInit: 2, lifecycle: 1, serviceLb: 1, routes: 1 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'initialized: taint off, providerID set',
        change: () => patch({ spec: { taints: [], providerID: `test://${name}` } }),
        expected: { nodeInit: 2, lifecycle: 1, serviceLb: 2, routes: 2 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'podCIDR set',
        change: () => patch({ spec: { podCIDR: '10.244.7.0/24', podCIDRs: ['10.244.7.0/24'] } }),
        expected: { nodeInit: 2, lifecycle: 1, serviceLb: 2, routes: 3 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'excluded from load balancers',
        change: () =>
          patch({ metadata: { labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' } } }),
        expected: { nodeInit: 2, lifecycle: 1, serviceLb: 3, routes: 3 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'an unrelated label',
        change: () => patch({ metadata: { labels: { unrelated: 'label' } } }),
        expected: { nodeInit: 2, lifecycle: 1, serviceLb: 3, routes: 3 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'it becomes NotReady',
        change: () => status('False'),
        expected: { nodeInit: 2, lifecycle: 2, serviceLb: 3, routes: 3 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'shutdown taint',
        change: () =>
          patch({ spec: { taints: [{ key: 'node.cloudprovider.kubernetes.io/shutdown', effect: 'NoSchedule' }] } }),
        expected: { nodeInit: 2, lifecycle: 3, serviceLb: 3, routes: 3 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'Ready again with the shutdown taint on: node-lifecycle takes it off',
        change: () => status('True'),
        expected: { nodeInit: 2, lifecycle: 4, serviceLb: 3, routes: 3 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'tainted uninitialized again',
        change: () => patch({ spec: { taints: [uninitializedTaint] } }),
        expected: { nodeInit: 3, lifecycle: 4, serviceLb: 3, routes: 3 },
      },
      lb,
    );
    await step(
      s,
      name,
      {
        what: 'deleted',
        change: async () => {
          await cluster.core.deleteNode({ name });
          return undefined;
        },
        expected: { nodeInit: 3, lifecycle: 4, serviceLb: 4, routes: 4 },
      },
      lb,
    );

    const sinkTargets = new Set(
      s.sink.received.filter((r) => r.key.startsWith('all/')).map((r) => r.headers['ce-cirrustarget']),
    );
    assert.deepEqual(
      [...sinkTargets].sort(),
      ['service-lb'],
      'the sink gets the node-change triggers, each naming its function (routes has the Node events)',
    );
    assert.equal(s.sink.about(name).length, 11, 'the sink gets every change');
  });

  it('sends service-lb the Services that have or had a load balancer, and no others', async (t) => {
    const s = await servers(t);
    const relay = testRelay(t, cluster.admin, { to: [`service-lb=${s.serviceLb.url}`], sink: s.sink.url });
    await ready(relay);
    const [plain, balanced] = [uniqueName('plain'), uniqueName('lb')];
    const service = (name: string, type: string): Promise<unknown> =>
      cluster.core.createNamespacedService({
        namespace: 'default',
        body: { metadata: { name }, spec: { type, ports: [{ port: 80 }] } },
      });
    await service(plain, 'ClusterIP');
    await service(balanced, 'LoadBalancer');
    await cluster.core.patchNamespacedService(
      { name: balanced, namespace: 'default', body: { spec: { type: 'ClusterIP' } } },
      mergePatch,
    );
    await cluster.core.deleteNamespacedService({ name: plain, namespace: 'default' });
    await cluster.core.deleteNamespacedService({ name: balanced, namespace: 'default' });
    await waitFor('the sink to see both deletions', () =>
      [plain, balanced].every((name) => s.sink.about(name).some((r) => r.type === 'delete')),
    );
    await waitFor('service-lb to hear of the type change', () =>
      s.serviceLb.about(balanced).some((r) => r.type === 'update'),
    );
    await sleep(200);
    assert.deepEqual(s.serviceLb.about(plain), [], 'a ClusterIP Service is no work for service-lb');
    assert.deepEqual(
      s.serviceLb.about(balanced).map((r) => r.type),
      ['add', 'update'],
      'LoadBalancer → ClusterIP is sent (the load balancer must go); the delete of a Service that no longer was one is not',
    );
  });
});
