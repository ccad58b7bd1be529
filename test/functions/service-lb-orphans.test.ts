// service-lb's pass over all Services releases load balancers that no live Service owns (issue 20,
// row 11): a Service whose finalizer was removed by hand and was then deleted, while no delete
// event reached service-lb, leaves its load balancer behind until the next "all" pass.

import assert from 'node:assert/strict';
import { before, beforeEach, describe, it } from 'node:test';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Service } from '@kubernetes/client-node';
import { LeanCore } from '../../shared/kube/core.ts';
import { serviceLbFunction } from '../../functions/service-lb/index.ts';
import { finalizer } from '../../functions/service-lb/predicates.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import type { OwnedLoadBalancer } from '../../shared/cloud/provider.ts';
import type { FunctionDefinition, ObjectReport } from '../../shared/host/function.ts';
import { createNode, eventsAbout, newNode, silentLogger } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const run = { dryRun: false, log: silentLogger(), signal: new AbortController().signal };
const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

describe('service-lb: load balancers without a Service', { skip: controlPlaneSkip }, () => {
  let core: CoreV1Api;
  // The function gets LeanCore, as cirrus gives it; the tests' own setup and checks use CoreV1Api.
  let lean: LeanCore;
  let cloud: FakeCloud;
  let fn: FunctionDefinition;
  const namespace = uniqueName('orphan');
  before(async () => {
    core = (await testCluster()).admin.makeApiClient(CoreV1Api);
    lean = new LeanCore((await testCluster()).admin);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await createNode(core, newNode(uniqueName('orphan-node')));
  });
  beforeEach(() => {
    cloud = new FakeCloud();
    fn = serviceLbFunction({
      core: lean,
      loadBalancer: cloud.loadBalancer() ?? assert.fail('the fake cloud has no load balancers'),
      clusterName: 'kubernetes',
    });
  });

  const createService = (name: string): Promise<V1Service> =>
    core.createNamespacedService({
      namespace,
      body: { metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } },
    });
  const sync = (name: string) => fn.reconcileOne({ kind: 'Service', namespace, name }, run);
  // A Service that got its load balancer, then lost its finalizer by hand and was deleted.
  async function orphan(name: string): Promise<string> {
    const uid = (await createService(name)).metadata?.uid ?? '';
    await sync(name);
    await core.patchNamespacedServiceStatus(
      { namespace, name, body: { metadata: { '$deleteFromPrimitiveList/finalizers': [finalizer] } } },
      strategic,
    );
    await core.deleteNamespacedService({ namespace, name });
    return uid;
  }
  // The pass covers the whole cluster, other test files' Services too: only this file's count.
  const ours = (keys: readonly string[]): string[] => keys.filter((key) => key.startsWith(`${namespace}/`));
  const deletions = (): string[] =>
    ours(cloud.calls.filter((c) => c.method === 'ensureLoadBalancerDeleted').map((c) => String(c.args[1])));
  const mine = (reports: readonly ObjectReport[]): ObjectReport[] =>
    reports.filter((r) => r.key.startsWith(`Service/${namespace}/`));

  it('deletes the load balancer of a Service deleted without its finalizer, and keeps the live ones', async () => {
    const gone = uniqueName('gone');
    const kept = uniqueName('kept');
    await orphan(gone);
    await createService(kept);
    await sync(kept);
    assert.equal(cloud.loadBalancers.size, 2);
    cloud.calls.length = 0;

    const reports = mine((await fn.reconcileAll(run)).objects);

    const released = reports.find((r) => r.key === `Service/${namespace}/${gone}`);
    assert.equal(released?.result, 'orphan-deleted', JSON.stringify(reports));
    assert.match(released.note ?? '', /the Service is gone/);
    assert.deepEqual(ours([...cloud.loadBalancers.keys()]), [`${namespace}/${kept}`]);
    assert.deepEqual(deletions(), [`${namespace}/${gone}`]);
    const events = (await eventsAbout(core, namespace, gone)).map((e) => e.split('/').slice(0, 2).join('/'));
    assert.ok(events.includes('Normal/DeletedLoadBalancer'), events.join(', '));
    // The next pass has nothing left to release.
    cloud.calls.length = 0;
    await fn.reconcileAll(run);
    assert.deepEqual(deletions(), []);
  });

  it("deletes a load balancer whose Service was created again (another uid), not the new one's", async () => {
    cloud.namesByUid = true;
    const name = uniqueName('again');
    const oldUid = await orphan(name);
    const newUid = (await createService(name)).metadata?.uid ?? '';
    await sync(name);
    assert.deepEqual([...cloud.loadBalancers.keys()].sort(), [`uid:${newUid}`, `uid:${oldUid}`].sort());

    const released = mine((await fn.reconcileAll(run)).objects).find((r) => r.result === 'orphan-deleted');
    assert.match(released?.note ?? '', new RegExp(`uid ${oldUid}\\): the Service now has uid ${newUid}`));
    assert.ok(cloud.loadBalancers.has(`uid:${newUid}`) && !cloud.loadBalancers.has(`uid:${oldUid}`));
  });

  it('reads the Service again before deleting: one created after the pass listed the Services keeps its load balancer', async () => {
    const late = uniqueName('late');
    const lb = cloud.loadBalancer();
    const list = lb?.listLoadBalancers?.bind(lb);
    assert.ok(lb && list);
    // The provider answers after a Service was created and got its load balancer (a race with the pass).
    lb.listLoadBalancers = async (clusterName: string): Promise<OwnedLoadBalancer[]> => {
      const service = await createService(late);
      await lb.ensureLoadBalancer(clusterName, service, []);
      return list(clusterName);
    };
    const reports = mine((await fn.reconcileAll(run)).objects);
    assert.deepEqual(
      reports.filter((r) => r.result === 'orphan-deleted'),
      [],
    );
    assert.ok(cloud.loadBalancers.has(`${namespace}/${late}`));
    assert.deepEqual(deletions(), []);
  });

  it('on a dry run, reports the deletion and makes none', async () => {
    const name = uniqueName('dry');
    await orphan(name);
    const reports = mine((await fn.reconcileAll({ ...run, dryRun: true })).objects);
    const released = reports.find((r) => r.key === `Service/${namespace}/${name}`);
    assert.equal(released?.result, 'orphan-deleted');
    assert.ok(released.changes.some((c) => c.action === 'cloud'));
    assert.ok(cloud.loadBalancers.has(`${namespace}/${name}`));
  });

  it('reports a provider that cannot list, and still reconciles the Services', async () => {
    const name = uniqueName('listfail');
    await orphan(name);
    cloud.errors.set('listLoadBalancers', new Error('cloud API down'));
    const { objects } = await fn.reconcileAll(run);
    assert.deepEqual(
      objects.filter((r) => r.key === 'LoadBalancers'),
      [{ key: 'LoadBalancers', result: 'failed', changes: [], error: 'cloud API down' }],
    );
    assert.ok(cloud.loadBalancers.has(`${namespace}/${name}`));
  });

  it('releases nothing with a provider that cannot list what it owns', async () => {
    const name = uniqueName('nolist');
    await orphan(name);
    const lb = cloud.loadBalancer();
    assert.ok(lb);
    delete lb.listLoadBalancers;
    await fn.reconcileAll(run);
    assert.ok(cloud.loadBalancers.has(`${namespace}/${name}`));
  });
});
