// The relay's watches when their API server goes away — restarted mid-stream, and a gap long enough
// (a restart behind a cut connection) that the watch cannot resume and gets 410 Gone — and when
// the server ends them or they go quiet. Runs on a control plane
// of its own, since restarting the run's shared one would disturb every other test file.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ControlPlane, resolveAssets } from '../../tools/control-plane/index.ts';
import type { KubeObject } from '../../relay/resources.ts';
import { createNode, newNode } from '../harness/builders.ts';
import { controlPlaneSkip, uniqueName } from '../harness/cluster.ts';
import {
  CuttableProxy,
  fastTimings,
  functionServer,
  metric,
  ready,
  testRelay,
  throughProxy,
  waitFor,
  type FunctionServer,
} from './harness.ts';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('relay watch recovery', { skip: controlPlaneSkip }, () => {
  let plane: ControlPlane;
  let admin: KubeConfig;
  let core: CoreV1Api;
  let proxy: CuttableProxy;
  before(async () => {
    plane = await ControlPlane.start({ assets: await resolveAssets({ build: false }) });
    admin = new KubeConfig();
    admin.loadFromFile(plane.info.adminKubeconfig);
    core = admin.makeApiClient(CoreV1Api);
    proxy = await new CuttableProxy(new URL(plane.info.server)).start();
  });
  after(async () => {
    await proxy.stop();
    await plane.stop();
  });

  async function lists(relay: { registry: Parameters<typeof metric>[0] }, resource: string): Promise<number> {
    return metric(relay.registry, 'cirrus_relay_lists_total', { resource });
  }

  it('delivers changes made after an API server restart, with at most one LIST per resource', async (t) => {
    const fn = await functionServer(t);
    const relay = testRelay(t, admin, { to: [`all=${fn.url}`] });
    await ready(relay);
    const before = uniqueName('before');
    await createNode(core, newNode(before));
    await waitFor('the first node', () => fn.about(before).length === 1);
    const listsBefore = { nodes: await lists(relay, 'nodes'), services: await lists(relay, 'services') };

    // Killed after half a second: kube-apiserver would otherwise drain the open watches for 10 s.
    await plane.restartApiserver({ graceMs: 500 });
    const after = uniqueName('after');
    await createNode(core, newNode(after));
    await core.patchNode({ name: before, body: { metadata: { labels: { restarted: 'yes' } } } }, mergePatch);

    await waitFor('the node created after the restart', () => fn.about(after).some((r) => r.type === 'add'), 20_000);
    await waitFor(
      'the update made after the restart',
      () => fn.about(before).some((r) => r.data?.metadata?.labels?.['restarted'] === 'yes'),
      20_000,
    );
    await waitFor('the watches to be open again', () => relay.status().ready);
    assert.ok(
      (await metric(relay.registry, 'cirrus_relay_watch_restarts_total', { resource: 'nodes' })) >= 1,
      'the node watch broke and was reopened',
    );
    assert.ok((await lists(relay, 'nodes')) - listsBefore.nodes <= 1, 'at most one LIST of nodes to recover');
    assert.ok((await lists(relay, 'services')) - listsBefore.services <= 1, 'at most one LIST of services to recover');
  });

  it('reopens watches the server ends and watches cut for inactivity from where they were, without a LIST', async (t) => {
    const fn = await functionServer(t);
    const closing = testRelay(
      t,
      admin,
      { to: [`all=${fn.url}`] },
      { watch: { ...fastTimings.watch, timeoutSeconds: { min: 1, max: 1 } } },
    );
    const quiet = testRelay(
      t,
      admin,
      { to: [`all=${fn.url}`] },
      { watch: { ...fastTimings.watch, inactivityTimeoutMs: 300 } },
    );
    await Promise.all([ready(closing), ready(quiet)]);
    await waitFor(
      'watches to be reopened',
      async () =>
        (await metric(closing.registry, 'cirrus_relay_watch_restarts_total', {
          resource: 'nodes',
          reason: 'closed',
        })) >= 2 &&
        (await metric(quiet.registry, 'cirrus_relay_watch_restarts_total', { resource: 'nodes', reason: 'timeout' })) >=
          2,
    );
    const name = uniqueName('reopened');
    await createNode(core, newNode(name));
    await waitFor('both relays to deliver', () => fn.about(name).length === 2);
    for (const relay of [closing, quiet]) assert.equal(await lists(relay, 'nodes'), 1, 'only the initial LIST');
  });

  it('reopens at once, without backing off, a watch the server closed after it had delivered events', async (t) => {
    const fn = await functionServer(t);
    // The server ends every watch after 1 s, far short of the backoff's reset, and a backoff of 10 s.
    const relay = testRelay(
      t,
      admin,
      { to: [`all=${fn.url}`] },
      {
        watch: {
          ...fastTimings.watch,
          timeoutSeconds: { min: 1, max: 1 },
          backoff: { initialMs: 10_000, maxMs: 10_000, jitter: 0 },
        },
      },
    );
    await ready(relay);
    // Nodes keep coming for longer than a watch lives, so each watch moves on before it is closed.
    const names: string[] = [];
    for (let i = 0; i < 14; i++) {
      const name = uniqueName('streamed');
      names.push(name);
      await createNode(core, newNode(name));
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    // A watch that backed off would deliver the nodes created in its gap up to 10 s late.
    await waitFor('every node, without a 10 s gap', () => names.every((n) => fn.about(n).length > 0), 3_000);
    assert.ok(
      (await metric(relay.registry, 'cirrus_relay_watch_restarts_total', { resource: 'nodes', reason: 'closed' })) >= 2,
      'the server closed the watch at least twice meanwhile',
    );
    assert.equal(await lists(relay, 'nodes'), 1, 'reopened from where it was, without a LIST');
  });

  it('relists after 410 Gone and delivers what changed in the gap, deletions included', async (t) => {
    const fn = await functionServer(t);
    const relay = testRelay(t, throughProxy(admin, proxy.port), { to: [`all=${fn.url}`] });
    await ready(relay);
    const [keep, gone, changed, fresh] = ['keep', 'gone', 'changed', 'fresh'].map(uniqueName) as [
      string,
      string,
      string,
      string,
    ];
    const service = uniqueName('svc');
    for (const name of [keep, gone, changed])
      await createNode(
        core,
        newNode(name, (n) => {
          n.metadata = { ...n.metadata, labels: { state: 'initial' } };
          n.spec = { providerID: `fake:///${name}` };
        }),
      );
    await core.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name: service }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } },
    });
    await waitFor('the initial adds', () =>
      [keep, gone, changed, service].every((name) => fn.about(name).length === 1),
    );
    const gone410 = {
      nodes: await metric(relay.registry, 'cirrus_relay_lists_total', { resource: 'nodes', reason: 'gone' }),
    };

    proxy.cut();
    await waitFor('the relay to notice', () => !relay.status().ready);
    await core.deleteNode({ name: gone });
    await core.patchNode({ name: changed, body: { metadata: { labels: { state: 'changed' } } } }, mergePatch);
    await createNode(core, newNode(fresh));
    await core.deleteNamespacedService({ name: service, namespace: 'default' });
    // A restarted API server's watch cache starts at etcd's current revision: the relay's
    // resourceVersion is now too old to resume from.
    await plane.restartApiserver();
    proxy.restore();

    await waitFor('the deletion made in the gap', () => fn.about(gone).some((r) => r.type === 'delete'), 20_000);
    await waitFor(
      'the rest of the gap',
      () =>
        fn.about(changed).some((r) => r.type === 'update') &&
        fn.about(fresh).some((r) => r.type === 'add') &&
        fn.about(service).some((r) => r.type === 'delete'),
    );
    const deletion = fn.about(gone).find((r) => r.type === 'delete');
    assert.equal(
      deletion?.data?.metadata?.labels?.['state'],
      'initial',
      'a delete found by the relist carries the last known state',
    );
    assertKeptDeletes(fn, gone, service);
    assert.equal(fn.about(changed).at(-1)?.data?.metadata?.labels?.['state'], 'changed');
    assert.deepEqual(
      fn.about(keep).map((r) => r.type),
      ['add'],
      'an object unchanged in the gap is not sent again',
    );
    assert.equal(
      (await metric(relay.registry, 'cirrus_relay_lists_total', { resource: 'nodes', reason: 'gone' })) - gone410.nodes,
      1,
      'one LIST of nodes after the 410',
    );
    assert.equal(
      await metric(relay.registry, 'cirrus_relay_lists_total', { resource: 'services', reason: 'gone' }),
      1,
      'one LIST of services after the 410',
    );
    await waitFor('readiness to come back', () => relay.status().ready);
  });
});

// The deletes a relist found carry the state as the relay kept it (ADR 0024): what the functions
// decide a delete on, the cursor's tombstone fields among it (a Node's providerID, a Service's
// type), the uid, and no status.
function assertKeptDeletes(fn: FunctionServer, node: string, service: string): void {
  const body = (name: string): KubeObject => {
    const deletion = fn.about(name).find((r) => r.type === 'delete');
    assert.ok(deletion, `the delete of ${name}`);
    return JSON.parse(deletion.body) as KubeObject;
  };
  const deletedNode = body(node);
  assert.equal((deletedNode['spec'] as { providerID?: string } | undefined)?.providerID, `fake:///${node}`);
  assert.ok(deletedNode.metadata?.uid, 'with its uid');
  assert.equal(deletedNode['status'], undefined, 'without the status the relay does not keep');
  const deletedService = body(service);
  assert.equal((deletedService['spec'] as { type?: string } | undefined)?.type, 'LoadBalancer');
  assert.ok(deletedService.metadata?.uid);
}
