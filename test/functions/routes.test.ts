// routes against the real API server with the recording fake cloud (k8s.io/cloud-provider controllers/route).

import assert from 'node:assert/strict';
import { afterEach, before, beforeEach, describe, it } from 'node:test';
import { CoreV1Api, type V1Node, type V1NodeAddress, type V1NodeCondition } from '@kubernetes/client-node';
import { LeanCore } from '../../shared/kube/core.ts';
import { Registry } from 'prom-client';
import { routesFunction } from '../../functions/routes/index.ts';
import type { FunctionSettings } from '../../shared/catalogue.ts';
import { findCause, RetryError } from '../../shared/cloud/errors.ts';
import type { Route, Routes } from '../../shared/cloud/provider.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import type { FunctionDefinition, ObjectReport, Report } from '../../shared/host/function.ts';
import { apiStatus, mergePatch } from '../../shared/kube/api.ts';
import { createNode, newNode, plain, silentLogger, withAddresses, type NodeTweak } from '../harness/builders.ts';
import { loadFunction } from '../harness/cirrus.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const log = silentLogger();
const run = { dryRun: false, log, signal: new AbortController().signal };
const dryRun = { ...run, dryRun: true };
const clusterCidrs = ['10.244.0.0/16', 'fd00:10:244::/56'];

function route(destinationCidr: string, targetNode: string, extra: Partial<Route> = {}): Route {
  return {
    name: `r-${destinationCidr}`,
    targetNode,
    enableNodeAddresses: false,
    targetNodeAddresses: [],
    destinationCidr,
    blackhole: false,
    ...extra,
  };
}

const withPodCidrs =
  (...cidrs: string[]): NodeTweak =>
  (node) => {
    node.spec = { ...node.spec, podCIDR: cidrs[0] ?? '', podCIDRs: cidrs };
  };
// Ready, and one more kubelet condition: both must survive the route controller's writes.
const kubeletConditions: NodeTweak = (node) => {
  const now = new Date();
  const conditions: V1NodeCondition[] = [
    {
      type: 'Ready',
      status: 'True',
      reason: 'KubeletReady',
      message: 'kubelet is posting ready status',
      lastHeartbeatTime: now,
      lastTransitionTime: now,
    },
    {
      type: 'MemoryPressure',
      status: 'False',
      reason: 'KubeletHasSufficientMemory',
      lastHeartbeatTime: now,
      lastTransitionTime: now,
    },
  ];
  node.status = { ...node.status, conditions };
};

function nameOf(node: V1Node): string {
  return node.metadata?.name ?? '';
}

function byKey(report: Report, key: string): ObjectReport | undefined {
  return report.objects.find((o) => o.key === key);
}

function condition(node: V1Node, type: string): { status: string; reason?: string; message?: string } | undefined {
  const found = node.status?.conditions?.find((c) => c.type === type);
  return (
    found && {
      status: found.status,
      ...(found.reason === undefined ? {} : { reason: found.reason }),
      ...(found.message === undefined ? {} : { message: found.message }),
    }
  );
}

const created = { status: 'False', reason: 'RouteCreated', message: 'RouteController created a route' };
const notCreated = { status: 'True', reason: 'NoRouteCreated', message: 'RouteController failed to create a route' };

// A fake that counts the route calls in flight at once.
// The fake's routes, which it has unless a test switched them off.
const routesOf = (cloud: FakeCloud): Routes => cloud.routes() ?? assert.fail('the fake cloud has no routes');

class CountingCloud extends FakeCloud {
  maxInFlight = 0;
  #inFlight = 0;

  override routes(): Routes | undefined {
    const inner = super.routes();
    if (!inner) return undefined;
    const track = async <T>(call: () => Promise<T>): Promise<T> => {
      this.#inFlight += 1;
      this.maxInFlight = Math.max(this.maxInFlight, this.#inFlight);
      try {
        return await call();
      } finally {
        this.#inFlight -= 1;
      }
    };
    return {
      listRoutes: async (clusterName, signal) => inner.listRoutes(clusterName, signal),
      createRoute: async (clusterName, nameHint, r, signal) =>
        track(async () => inner.createRoute(clusterName, nameHint, r, signal)),
      deleteRoute: async (clusterName, r, signal) => track(async () => inner.deleteRoute(clusterName, r, signal)),
    };
  }
}

describe('routes', { skip: controlPlaneSkip }, () => {
  let core: CoreV1Api;
  // The functions get LeanCore, as cirrus gives it; the tests' own setup and checks use CoreV1Api.
  let lean: LeanCore;
  let cloud: FakeCloud;
  let fn: FunctionDefinition;
  let mine: string[] = [];
  before(async () => {
    core = (await testCluster()).admin.makeApiClient(CoreV1Api);
    lean = new LeanCore((await testCluster()).admin);
  });
  beforeEach(() => {
    cloud = new FakeCloud();
    fn = routesFunction({
      core: lean,
      routes: routesOf(cloud),
      clusterName: 'kubernetes',
      clusterCidrs,
      minPassIntervalMs: 0,
    });
    mine = [];
  });
  // Every pass lists every node of the shared cluster: nodes with pod CIDRs must not outlive their test.
  afterEach(async () => {
    await Promise.all(
      mine.map(async (name) =>
        core.deleteNode({ name }).catch((error: unknown) => {
          if (apiStatus(error) !== 404) throw error;
        }),
      ),
    );
  });

  async function node(prefix: string, ...tweaks: NodeTweak[]): Promise<V1Node> {
    const name = uniqueName(prefix);
    mine.push(name);
    return createNode(core, newNode(name, kubeletConditions, ...tweaks));
  }

  function calls(method: string): unknown[][] {
    return cloud.calls.filter((c) => c.method === method).map((c) => [...c.args]);
  }

  function routesTo(name: string): string[] {
    return cloud.routeTable
      .filter((r) => r.targetNode === name)
      .map((r) => r.destinationCidr)
      .sort();
  }

  async function events(name: string): Promise<string[]> {
    const list = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${name}` });
    return list.items.map((e) => `${e.type ?? ''}/${e.reason ?? ''}/${e.source?.component ?? ''}/${e.message ?? ''}`);
  }

  it('creates a route per pod CIDR of a dual-stack node and sets NetworkUnavailable=False, other conditions intact', async () => {
    const addresses: V1NodeAddress[] = [
      { type: 'InternalIP', address: '10.0.0.11' },
      { type: 'Hostname', address: 'w' },
    ];
    const stored = await node('dual', withPodCidrs('10.244.1.0/24', 'fd00:10:244:1::/64'), withAddresses(...addresses));
    const name = stored.metadata?.name ?? '';
    const uid = stored.metadata?.uid ?? '';

    const report = await fn.reconcileOne({ kind: 'Node', name }, run);

    const expected = (cidr: string): unknown[] => [
      'kubernetes',
      uid,
      {
        name: '',
        targetNode: name,
        enableNodeAddresses: false,
        targetNodeAddresses: addresses,
        destinationCidr: cidr,
        blackhole: false,
      },
    ];
    assert.deepEqual(
      calls('createRoute').filter((c) => c[1] === uid),
      [expected('10.244.1.0/24'), expected('fd00:10:244:1::/64')],
    );
    assert.deepEqual(routesTo(name), ['10.244.1.0/24', 'fd00:10:244:1::/64']);
    const after = await core.readNode({ name });
    assert.deepEqual(condition(after, 'NetworkUnavailable'), created);
    assert.deepEqual(condition(after, 'Ready'), {
      status: 'True',
      reason: 'KubeletReady',
      message: 'kubelet is posting ready status',
    });
    assert.deepEqual(condition(after, 'MemoryPressure'), { status: 'False', reason: 'KubeletHasSufficientMemory' });
    const own = byKey(report, `Node/${name}`);
    assert.equal(own?.result, 'routes-created');
    assert.deepEqual(
      own.changes.map((c) => `${c.action} ${c.target}`),
      ['create-route Route/10.244.1.0/24', 'create-route Route/fd00:10:244:1::/64', `patch-status Node/${name}`],
    );
  });

  it('writes nothing the second time: no route created again, the condition left as it is', async () => {
    const name = (await node('steady', withPodCidrs('10.244.2.0/24'))).metadata?.name ?? '';
    await fn.reconcileAll(run);
    const settled = await core.readNode({ name });

    const report = await fn.reconcileAll(run);

    assert.equal(byKey(report, `Node/${name}`)?.result, 'unchanged');
    assert.deepEqual(byKey(report, `Node/${name}`)?.changes, []);
    assert.equal((await core.readNode({ name })).metadata?.resourceVersion, settled.metadata?.resourceVersion);
    assert.equal(calls('createRoute').filter((c) => (c[2] as Route).targetNode === name).length, 1);
  });

  it('overwrites a NetworkUnavailable condition set by someone else (a CNI)', async () => {
    const name = (await node('cni', withPodCidrs('10.244.3.0/24'))).metadata?.name ?? '';
    const cni = {
      type: 'NetworkUnavailable',
      status: 'False',
      reason: 'CalicoIsUp',
      message: 'Calico is running on this node',
    };
    // A merge patch of the whole list, keeping the kubelet's conditions in it.
    const current = (await core.readNode({ name })).status?.conditions ?? [];
    await core.patchNodeStatus({ name, body: { status: { conditions: [...plain(current), cni] } } }, mergePatch);

    await fn.reconcileAll(run);

    const after = await core.readNode({ name });
    assert.deepEqual(condition(after, 'NetworkUnavailable'), created);
    assert.equal(after.status?.conditions?.filter((c) => c.type === 'NetworkUnavailable').length, 1);
    assert.equal(condition(after, 'Ready')?.status, 'True');
  });

  it('gives a node without pod CIDRs no route and no condition', async () => {
    const stored = await node('no-cidr');
    const name = stored.metadata?.name ?? '';

    const report = await fn.reconcileAll(run);

    assert.deepEqual(byKey(report, `Node/${name}`), { key: `Node/${name}`, result: 'no-pod-cidr', changes: [] });
    assert.deepEqual(
      calls('createRoute').filter((c) => (c[2] as Route).targetNode === name),
      [],
    );
    const after = await core.readNode({ name });
    assert.equal(condition(after, 'NetworkUnavailable'), undefined);
    assert.equal(after.metadata?.resourceVersion, stored.metadata?.resourceVersion);
  });

  it('deletes the routes of a node without pod CIDRs and sets NetworkUnavailable=True', async () => {
    const name = (await node('orphan')).metadata?.name ?? '';
    cloud.routeTable.push(route('10.244.4.0/24', name));

    const report = await fn.reconcileAll(run);

    assert.deepEqual(routesTo(name), []);
    assert.equal(byKey(report, 'Route/10.244.4.0/24')?.result, 'deleted');
    assert.equal(byKey(report, `Node/${name}`)?.result, 'no-pod-cidr');
    assert.deepEqual(condition(await core.readNode({ name }), 'NetworkUnavailable'), notCreated);
  });

  it('replaces the route of a node whose pod CIDR changed', async () => {
    const name = (await node('moved', withPodCidrs('10.244.5.0/24'))).metadata?.name ?? '';
    cloud.routeTable.push(route('10.244.50.0/24', name));

    const report = await fn.reconcileAll(run);

    assert.deepEqual(routesTo(name), ['10.244.5.0/24']);
    assert.deepEqual(
      byKey(report, 'Route/10.244.50.0/24')?.changes.map((c) => c.detail),
      [
        {
          name: 'r-10.244.50.0/24',
          destinationCidr: '10.244.50.0/24',
          targetNode: name,
          blackhole: false,
          reason: 'cidr-not-assigned',
        },
      ],
    );
    assert.equal(byKey(report, `Node/${name}`)?.result, 'routes-created');
  });

  it('deletes routes in the cluster CIDRs whose node is gone, and leaves routes outside every cluster CIDR alone', async () => {
    const gone = uniqueName('gone');
    const outside = [
      route('192.168.7.0/24', gone),
      route('10.0.0.0/8', gone),
      route('fd00:99::/64', gone),
      route('172.16.0.0/24', ''),
    ];
    cloud.routeTable.push(route('10.244.6.0/24', gone), route('fd00:10:244:6::/64', gone), ...outside);

    // The delete event of the node: like every request, it reconciles the whole cluster.
    const report = await fn.reconcileOne({ kind: 'Node', name: gone }, run);

    assert.deepEqual(cloud.routeTable, outside);
    assert.deepEqual(
      calls('deleteRoute')
        .map((c) => (c[1] as Route).destinationCidr)
        .sort(),
      ['10.244.6.0/24', 'fd00:10:244:6::/64'],
    );
    assert.equal(byKey(report, 'Route/10.244.6.0/24')?.result, 'deleted');
    assert.equal(byKey(report, 'Route/192.168.7.0/24'), undefined);
  });

  it('deletes blackhole routes in the cluster CIDRs and routes the node anew', async () => {
    const name = (await node('hole', withPodCidrs('10.244.7.0/24'))).metadata?.name ?? '';
    const outside = route('192.168.8.0/24', '', { blackhole: true });
    cloud.routeTable.push(route('10.244.7.0/24', '', { name: 'dead', blackhole: true }), outside);

    const report = await fn.reconcileAll(run);

    assert.deepEqual(
      calls('deleteRoute').map((c) => (c[1] as Route).name),
      ['dead'],
    );
    assert.deepEqual(
      byKey(report, 'Route/10.244.7.0/24')?.changes.map((c) => (c.detail as { reason: string }).reason),
      ['blackhole'],
    );
    assert.deepEqual(
      cloud.routeTable.filter((r) => r.blackhole),
      [outside],
    );
    assert.deepEqual(routesTo(name), ['10.244.7.0/24']);
  });

  it('deletes a blackhole route that still names its node, and re-creates it in the next pass (as upstream)', async () => {
    const name = (await node('hole-named', withPodCidrs('10.244.8.0/24'))).metadata?.name ?? '';
    cloud.routeTable.push(route('10.244.8.0/24', name, { blackhole: true }));

    await fn.reconcileAll(run);
    assert.deepEqual(
      cloud.routeTable.filter((r) => r.targetNode === name),
      [],
    );

    await fn.reconcileAll(run);
    assert.deepEqual(
      cloud.routeTable.filter((r) => r.targetNode === name).map((r) => r.blackhole),
      [false],
    );
  });

  it('reports a failed creation and goes on with the others; the node gets NoRouteCreated and a FailedToCreateRoute event', async () => {
    const failing = await node('fail', withPodCidrs('10.244.9.0/24', 'fd00:10:244:9::/64'));
    const [bad, good] = [nameOf(failing), nameOf(await node('ok', withPodCidrs('10.244.10.0/24')))];
    cloud.routeErrors.set('fd00:10:244:9::/64', new Error('quota exceeded'));

    const report = await fn.reconcileAll(run);

    const failed = byKey(report, `Node/${bad}`);
    assert.equal(failed?.result, 'failed');
    const message = new RegExp(
      `^Could not create route ${String(failing.metadata?.uid)} fd00:10:244:9::/64 for node ${bad} after [0-9.]+m?s: quota exceeded$`,
    );
    assert.match(failed.error ?? '', message);
    assert.deepEqual(
      failed.changes.map((c) => c.action),
      ['create-route', 'event', 'patch-status'],
    );
    assert.deepEqual(routesTo(bad), ['10.244.9.0/24']);
    assert.deepEqual(routesTo(good), ['10.244.10.0/24']);
    assert.equal(byKey(report, `Node/${good}`)?.result, 'routes-created');
    assert.deepEqual(condition(await core.readNode({ name: bad }), 'NetworkUnavailable'), notCreated);
    assert.deepEqual(condition(await core.readNode({ name: good }), 'NetworkUnavailable'), created);
    const recorded = await events(bad);
    assert.equal(recorded.length, 1);
    assert.match(
      recorded[0] ?? '',
      /^Warning\/FailedToCreateRoute\/route_controller\/Could not create route .* quota exceeded$/,
    );

    cloud.routeErrors.clear();
    await fn.reconcileAll(run);
    assert.deepEqual(routesTo(bad), ['10.244.9.0/24', 'fd00:10:244:9::/64']);
    assert.deepEqual(condition(await core.readNode({ name: bad }), 'NetworkUnavailable'), created);
  });

  it('reports a failed deletion and goes on with the others', async () => {
    const gone = uniqueName('gone');
    cloud.routeTable.push(
      route('10.244.11.0/24', gone, { name: 'stuck' }),
      route('10.244.12.0/24', gone, { name: 'freed' }),
    );
    cloud.routeErrors.set('10.244.11.0/24', new Error('route is in use'));

    const report = await fn.reconcileAll(run);

    const stuck = byKey(report, 'Route/10.244.11.0/24');
    assert.equal(stuck?.result, 'failed');
    assert.deepEqual(stuck.changes, []);
    assert.match(
      stuck.error ?? '',
      /^Could not delete route stuck 10\.244\.11\.0\/24 after [0-9.]+m?s: route is in use$/,
    );
    assert.equal(byKey(report, 'Route/10.244.12.0/24')?.result, 'deleted');
    assert.deepEqual(routesTo(gone), ['10.244.11.0/24']);
  });

  it('re-creates a route whose node addresses changed when the provider compares them, deleting first', async () => {
    const addresses = [{ type: 'InternalIP', address: '10.0.0.21' }];
    const name =
      (await node('readdr', withPodCidrs('10.244.13.0/24'), withAddresses(...addresses))).metadata?.name ?? '';
    const counting = new CountingCloud();
    counting.routesEnableNodeAddresses = true;
    counting.routeTable.push(
      route('10.244.13.0/24', name, {
        enableNodeAddresses: true,
        targetNodeAddresses: [{ type: 'InternalIP', address: '10.0.0.99' }],
      }),
    );
    counting.latencyMs.set('deleteRoute', 30);
    const comparing = routesFunction({
      core: lean,
      routes: routesOf(counting),
      clusterName: 'kubernetes',
      clusterCidrs,
      minPassIntervalMs: 0,
    });

    const report = await comparing.reconcileAll(run);

    assert.deepEqual(counting.methods(), ['listRoutes', 'deleteRoute', 'createRoute']);
    assert.equal(counting.maxInFlight, 1); // the creation waited for the deletion
    assert.deepEqual(
      counting.routeTable.map((r) => plain(r.targetNodeAddresses)),
      [addresses],
    );
    assert.equal(
      (byKey(report, 'Route/10.244.13.0/24')?.changes[0]?.detail as { reason: string }).reason,
      'addresses-changed',
    );
    assert.deepEqual(condition(await core.readNode({ name }), 'NetworkUnavailable'), created);

    await comparing.reconcileAll(run);
    assert.deepEqual(counting.methods().slice(3), ['listRoutes']);
  });

  it('fails the request when the routes cannot be listed, keeping a RetryError as the cause', async () => {
    cloud.errors.set('listRoutes', new RetryError('throttled', 4_000));
    await assert.rejects(fn.reconcileAll(run), (error: unknown) => {
      assert.equal(findCause(error, RetryError)?.retryAfterMs, 4_000);
      assert.match((error as Error).message, /^error listing routes: throttled$/);
      return true;
    });
    assert.deepEqual(cloud.methods(), ['listRoutes']);
  });

  it('writes nothing on a dry run, and reports the routes and the condition it would write', async () => {
    const stored = await node('dry', withPodCidrs('10.244.14.0/24'));
    const name = stored.metadata?.name ?? '';
    const gone = uniqueName('gone');
    cloud.routeTable.push(route('10.244.15.0/24', gone));
    const table = structuredClone(cloud.routeTable);

    const report = await fn.reconcileAll(dryRun);

    assert.equal(report.dryRun, true);
    assert.deepEqual(cloud.methods(), ['listRoutes']);
    assert.deepEqual(cloud.routeTable, table);
    const after = await core.readNode({ name });
    assert.equal(after.metadata?.resourceVersion, stored.metadata?.resourceVersion);
    assert.equal(condition(after, 'NetworkUnavailable'), undefined);
    assert.deepEqual(await events(name), []);
    const own = byKey(report, `Node/${name}`);
    assert.deepEqual(
      own?.changes.map((c) => c.action),
      ['create-route', 'patch-status'],
    );
    assert.deepEqual(
      (own.changes[1]?.detail as { status: { conditions: { reason: string }[] } }).status.conditions.map(
        (c) => c.reason,
      ),
      ['RouteCreated'],
    );
    assert.equal(byKey(report, 'Route/10.244.15.0/24')?.result, 'deleted');
  });

  it('coalesces concurrent requests: five at once make two passes, and each report is complete', async () => {
    const name = (await node('burst', withPodCidrs('10.244.16.0/24'))).metadata?.name ?? '';
    const registry = new Registry();
    fn.registerMetrics?.(registry);
    cloud.latencyMs.set('listRoutes', 100);

    const reports = await Promise.all(
      Array.from({ length: 5 }, async (_, i) =>
        i % 2 === 0 ? fn.reconcileAll(run) : fn.reconcileOne({ kind: 'Node', name }, run),
      ),
    );

    assert.equal(calls('listRoutes').length, 2);
    assert.equal(calls('createRoute').length, 1);
    assert.equal(byKey(reports[0] as Report, `Node/${name}`)?.result, 'routes-created');
    for (const report of reports.slice(1)) assert.equal(byKey(report, `Node/${name}`)?.result, 'unchanged');
    const syncs = await registry.getSingleMetric('route_controller_route_sync_total')?.get();
    assert.deepEqual(
      syncs?.values.map((v) => [v.labels['trigger'], v.labels['outcome'], v.value]),
      [
        ['manual', 'changed', 1],
        ['manual', 'noop', 1],
      ],
    );

    await fn.reconcileAll(run);
    assert.equal(calls('listRoutes').length, 3);
  });

  it('keeps dry runs and real passes apart', async () => {
    const name = (await node('apart', withPodCidrs('10.244.17.0/24'))).metadata?.name ?? '';
    cloud.latencyMs.set('listRoutes', 50);

    const [real, dry] = await Promise.all([fn.reconcileAll(run), fn.reconcileAll(dryRun)]);

    assert.equal(real.dryRun, false);
    assert.equal(dry.dryRun, true);
    assert.equal(calls('listRoutes').length, 2);
    assert.equal(calls('createRoute').length, 1);
    assert.deepEqual(routesTo(name), ['10.244.17.0/24']);
  });

  it('keeps at most `concurrency` route calls in flight', async () => {
    const counting = new CountingCloud();
    counting.latencyMs.set('deleteRoute', 20);
    const gone = uniqueName('gone');
    for (let i = 0; i < 10; i += 1) counting.routeTable.push(route(`10.244.${100 + i}.0/24`, gone));
    const limited = routesFunction({
      core: lean,
      routes: routesOf(counting),
      clusterName: 'kubernetes',
      clusterCidrs,
      concurrency: 3,
      minPassIntervalMs: 0,
    });

    await limited.reconcileAll(run);

    assert.equal(counting.methods().filter((m) => m === 'deleteRoute').length, 10);
    assert.equal(counting.maxInFlight, 3);
  });

  it('refuses an invalid node name as a bad request', async () => {
    await assert.rejects(fn.reconcileOne({ kind: 'Node', name: 'Not_A_Name' }, run), { name: 'InvalidRequestError' });
    assert.deepEqual(cloud.calls, []);
  });
});

describe('routes start-up refusals', () => {
  // The client is never used: the function refuses before it could be.
  const core = {} as CoreV1Api;
  const load = (extra: Partial<FunctionSettings> = {}, cloud = new FakeCloud()): Promise<FunctionDefinition> =>
    loadFunction('routes', { core, cloud }, { clusterCidr: clusterCidrs, ...extra });
  const noRoutes = new FakeCloud();
  noRoutes.disabled.add('routes');
  const cases: [string, () => Promise<FunctionDefinition>, RegExp][] = [
    [
      'routes disabled',
      () => load({ configureCloudRoutes: false }),
      /^routes: cloud routes are disabled \(configure-cloud-routes is false\)/,
    ],
    ['a provider without routes', () => load({}, noRoutes), /^routes: cloud provider "fake" does not support routes$/],
    ['no cluster CIDR', () => load({ clusterCidr: [] }), /^routes: no cluster CIDR is set/],
    [
      'an invalid cluster CIDR',
      () => load({ clusterCidr: ['10.244.0.0/16', '10.300.0.0/16'] }),
      /^routes: cluster CIDR "10\.300\.0\.0\/16" is not a valid CIDR/,
    ],
    ['two IPv4 cluster CIDRs', () => load({ clusterCidr: ['10.244.0.0/16', '10.245.0.0/16'] }), /both IPv4/],
    ['three cluster CIDRs', () => load({ clusterCidr: [...clusterCidrs, '10.1.0.0/16'] }), /at most 2/],
    [
      'a concurrency of 0',
      () => load({ concurrentRouteOperations: 0 }),
      /^routes: concurrency must be a positive integer, got 0$/,
    ],
  ];
  for (const [title, start, message] of cases) {
    it(`refuses ${title}`, async () => {
      await assert.rejects(start(), { message });
    });
  }

  it('starts with one cluster CIDR, and with routes enabled explicitly', async () => {
    assert.equal((await load({ clusterCidr: ['fd00:10:244::/56'], configureCloudRoutes: true })).name, 'routes');
  });
});
