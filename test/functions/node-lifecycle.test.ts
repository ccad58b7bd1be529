// node-lifecycle against the real API server with the recording fake cloud (k8s.io/cloud-provider
// controllers/nodelifecycle).

import assert from 'node:assert/strict';
import { before, beforeEach, describe, it } from 'node:test';
import { CoreV1Api, type V1Node } from '@kubernetes/client-node';
import { LeanCore } from '../../shared/kube/core.ts';
import { nodeLifecycleFunction } from '../../functions/node-lifecycle/index.ts';
import { InstanceNotFoundError, NotImplementedError } from '../../shared/cloud/errors.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import type { FunctionDefinition } from '../../shared/host/function.ts';
import {
  createNode,
  eventsAbout,
  firstResult,
  newNode,
  ownTaints,
  setReady,
  silentLogger,
  uninitialized,
  withProviderId,
  withReady,
} from '../harness/builders.ts';
import { loadFunction } from '../harness/cirrus.ts';
import { controlPlaneSkip, offlineCore, ownControlPlane, testCluster, uniqueName } from '../harness/cluster.ts';

const run = { dryRun: false, log: silentLogger(), signal: new AbortController().signal };
const shutdownTaint = { key: 'node.cloudprovider.kubernetes.io/shutdown', effect: 'NoSchedule' };

const result = firstResult;

describe('node-lifecycle', { skip: controlPlaneSkip }, () => {
  let core: CoreV1Api;
  // The functions get LeanCore, as cirrus gives it; the tests' own setup and checks use CoreV1Api.
  let lean: LeanCore;
  let cloud: FakeCloud;
  let fn: FunctionDefinition;
  before(async () => {
    core = (await testCluster()).admin.makeApiClient(CoreV1Api);
    lean = new LeanCore((await testCluster()).admin);
  });
  beforeEach(() => {
    cloud = new FakeCloud();
    fn = nodeLifecycleFunction({ core: lean, cloud });
  });

  async function exists(name: string): Promise<boolean> {
    return core.readNode({ name }).then(
      () => true,
      () => false,
    );
  }

  const events = (name: string): Promise<string[]> => eventsAbout(core, 'default', name);

  it('deletes a NotReady node whose instance is gone, with a DeletingNode event', async () => {
    const name = uniqueName('gone');
    await createNode(core, newNode(name, withReady('False')));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'deleted');
    assert.equal(await exists(name), false);
    assert.deepEqual(await events(name), [
      `Normal/DeletingNode/Deleting node ${name} because it does not exist in the cloud provider`,
    ]);
  });

  it('deletes a node without a Ready condition, even one still waiting for initialization', async () => {
    const name = uniqueName('gone-init');
    await createNode(core, newNode(name, uninitialized));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'deleted');
    assert.equal(await exists(name), false);
  });

  it('only reports the deletion on a dry run', async () => {
    const name = uniqueName('gone-dry');
    await createNode(core, newNode(name, withReady('Unknown')));
    const report = await fn.reconcileOne({ kind: 'Node', name }, { ...run, dryRun: true });
    assert.deepEqual(
      report.objects[0]?.changes.map((c) => c.action),
      ['event', 'delete'],
    );
    assert.equal(await exists(name), true);
    assert.deepEqual(await events(name), []);
  });

  it('never checks the cloud for a Ready node', async () => {
    const name = uniqueName('ready');
    await createNode(core, newNode(name, withReady('True')));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'ready');
    assert.equal(await exists(name), true);
    assert.deepEqual(cloud.calls, []);
  });

  it('taints a NotReady node whose instance is shut down, and untaints it once Ready', async () => {
    const name = uniqueName('shutdown');
    cloud.machines.push({ id: name, nodeName: name, shutdown: true });
    await createNode(core, newNode(name, withReady('False')));

    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'shutdown-tainted');
    assert.deepEqual(ownTaints(await core.readNode({ name })), [shutdownTaint]);
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'shutdown');

    cloud.machines[0] = { id: name, nodeName: name, shutdown: false };
    assert.equal(
      result(await fn.reconcileOne({ kind: 'Node', name }, run)),
      'not-ready',
      'the taint stays until the node is Ready',
    );
    await setReady(core, name, 'True');
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'shutdown-taint-removed');
    assert.deepEqual(ownTaints(await core.readNode({ name })), []);
  });

  it('leaves a NotReady node alone while its instance exists and runs', async () => {
    const name = uniqueName('running');
    cloud.machines.push({ id: name, nodeName: name });
    const before = await createNode(core, newNode(name, withReady('False')));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'not-ready');
    assert.equal((await core.readNode({ name })).metadata?.resourceVersion, before.metadata?.resourceVersion);
    assert.deepEqual(cloud.methods(), ['instanceExists', 'instanceShutdown']);
  });

  it("decides from an event's object that nothing is to be written, without reading the node", async () => {
    const quiet = nodeLifecycleFunction({ core: offlineCore(), cloud });
    const name = uniqueName('claimed');
    cloud.machines.push({ id: name, nodeName: name });
    const claim = (node: V1Node): typeof run & { claimed: unknown } => ({ ...run, claimed: node });
    const notReady = newNode(name, withReady('False'));
    assert.equal(result(await quiet.reconcileOne({ kind: 'Node', name }, claim(notReady))), 'not-ready');
    assert.equal(
      result(await quiet.reconcileOne({ kind: 'Node', name }, claim(newNode(name, withReady('True'))))),
      'ready',
    );
    // What needs a write is decided again on the node as the API server has it.
    await assert.rejects(
      quiet.reconcileOne({ kind: 'Node', name: 'gone' }, claim(newNode('gone', withReady('False')))),
    );
  });

  it("acts on the node as read, not as an event's object claims it", async () => {
    const name = uniqueName('claim-stale');
    cloud.machines.push({ id: name, nodeName: name, shutdown: true });
    await createNode(core, newNode(name, withReady('True')));
    // The event says NotReady (stale or forged); the node is Ready: no shutdown taint.
    const claimed = newNode(name, withReady('False'));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, { ...run, claimed })), 'ready');
    assert.deepEqual(ownTaints(await core.readNode({ name })), []);
  });

  it('treats a shutdown check the provider does not implement as "not shut down"', async () => {
    const name = uniqueName('noimpl');
    cloud.machines.push({ id: name, nodeName: name });
    cloud.errors.set('instanceShutdown', new NotImplementedError());
    await createNode(core, newNode(name, withReady('False')));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'not-ready');
  });

  it('fails, touching nothing, when the provider fails', async () => {
    const name = uniqueName('cloud-error');
    cloud.errors.set('instanceExists', new Error('cloud API unavailable'));
    await createNode(core, newNode(name, withReady('False')));
    await assert.rejects(fn.reconcileOne({ kind: 'Node', name }, run), { message: 'cloud API unavailable' });
    assert.equal(await exists(name), true);
  });

  it('uses the legacy Instances interface by provider ID when InstancesV2 is missing', async () => {
    const name = uniqueName('legacy');
    cloud.disabled.add('instancesV2');
    cloud.machines.push({ id: name, nodeName: name, shutdown: true });
    await createNode(core, newNode(name, withReady('False'), withProviderId(`fake://${name}`)));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'shutdown-tainted');
    assert.deepEqual(cloud.methods(), ['instanceExistsByProviderId', 'instanceShutdownByProviderId']);

    const gone = uniqueName('legacy-gone');
    await createNode(core, newNode(gone, withReady('False')));
    assert.equal(
      result(await fn.reconcileOne({ kind: 'Node', name: gone }, run)),
      'deleted',
      'InstanceNotFound from instanceId means gone',
    );
  });

  it('deletes a NotReady node when the legacy instanceId throws a wrapped InstanceNotFound', async () => {
    const name = uniqueName('legacy-wrapped');
    cloud.disabled.add('instancesV2');
    cloud.errors.set('instanceId', new Error('instance lookup failed', { cause: new InstanceNotFoundError() }));
    await createNode(core, newNode(name, withReady('False')));
    assert.equal(
      result(await fn.reconcileOne({ kind: 'Node', name }, run)),
      'deleted',
      'a wrapped InstanceNotFound means gone too',
    );
    assert.equal(await exists(name), false);
    assert.deepEqual(cloud.methods(), ['instanceId']);
    assert.deepEqual(await events(name), [
      `Normal/DeletingNode/Deleting node ${name} because it does not exist in the cloud provider`,
    ]);
  });

  it('refuses to start with a provider that supports no instances', async () => {
    const bare = new FakeCloud();
    bare.disabled.add('instancesV2');
    bare.disabled.add('instances');
    await assert.rejects(loadFunction('node-lifecycle', { core: lean, cloud: bare }), {
      message: 'node-lifecycle: cloud provider "fake" does not support instances',
    });
  });
});

// The periodic pass goes over every Node of the cluster and deletes those whose instance is gone:
// on the shared cluster it would delete other test files' Nodes (none is in this cloud), so it runs
// on a control plane of its own.
describe('node-lifecycle, the periodic pass', { skip: controlPlaneSkip }, () => {
  const own = ownControlPlane();
  let cloud: FakeCloud;
  let fn: FunctionDefinition;
  beforeEach(() => {
    cloud = new FakeCloud();
    fn = nodeLifecycleFunction({ core: new LeanCore(own.admin), cloud });
  });

  async function exists(core: CoreV1Api, name: string): Promise<boolean> {
    return core.readNode({ name }).then(
      () => true,
      () => false,
    );
  }

  it('checks every node in the periodic pass, one failure not stopping the others', async () => {
    const gone = uniqueName('all-gone');
    const broken = uniqueName('all-broken');
    await createNode(own.core, newNode(gone, withReady('False')));
    await createNode(own.core, newNode(broken, withReady('False')));
    cloud.machines.push({ id: broken, nodeName: broken });
    cloud.errors.set('instanceShutdown', new Error('flaky'));

    const report = await fn.reconcileAll(run);
    const byKey = new Map(report.objects.map((o) => [o.key, o]));
    assert.equal(byKey.get(`Node/${gone}`)?.result, 'deleted');
    assert.equal(await exists(own.core, gone), false);
    assert.deepEqual(byKey.get(`Node/${broken}`), {
      key: `Node/${broken}`,
      result: 'failed',
      changes: [],
      error: 'flaky',
    });
    assert.equal(await exists(own.core, broken), true);
  });

  it('leaves a node to a reconcile of it that ran since the pass began: no second check', async () => {
    const name = uniqueName('checked');
    cloud.machines.push({ id: name, nodeName: name });
    await createNode(own.core, newNode(name, withReady('False')));
    cloud.latencyMs.set('instanceExists', 300);
    // An event's reconcile is asking the cloud about the node when the pass lists it.
    const event = fn.reconcileOne({ kind: 'Node', name }, run);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const report = await fn.reconcileAll(run);
    assert.equal(result(await event), 'not-ready');
    assert.equal(report.objects.find((o) => o.key === `Node/${name}`)?.result, 'checked-meanwhile');
    const about = cloud.calls.filter((c) => JSON.stringify(c.args).includes(name)).map((c) => c.method);
    assert.deepEqual(about, ['instanceExists', 'instanceShutdown'], 'the event asked once; the pass did not ask again');
  });

  it('leaves a NotReady node of another CCM alone: not asked about, not deleted, in events and passes (issue 38)', async () => {
    const name = uniqueName('sky');
    const created = await createNode(own.core, newNode(name, withProviderId('skycloud://m-001'), withReady('False')));
    try {
      assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'other-provider');
      const pass = await fn.reconcileAll(run);
      assert.equal(
        pass.objects.find((o) => o.key === `Node/${name}`),
        undefined,
      );
      const after = await own.core.readNode({ name });
      assert.equal(after.metadata?.resourceVersion, created.metadata?.resourceVersion);
      assert.deepEqual(
        cloud.calls.filter((c) => c.args.includes('skycloud://m-001') || c.args.includes(name)),
        [],
      );
      assert.deepEqual(await eventsAbout(own.core, 'default', name), []);
    } finally {
      await own.core.deleteNode({ name }).catch(() => undefined);
    }
  });
});
