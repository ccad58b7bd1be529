// The known-keys cursor (ADR 0014, issue 20 row 7): objects deleted while no relay leads are
// delivered as deletes by the next leader, carrying what the functions decide on.

import assert from 'node:assert/strict';
import { before, describe, it, type TestContext } from 'node:test';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Relay, RelayOptions } from '../../relay/index.ts';
import { createNode, newNode } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { functionServer, metric, ready, testRelay, waitFor, type FunctionServer } from './harness.ts';

describe('relay known-keys cursor', { skip: controlPlaneSkip }, () => {
  let admin: KubeConfig;
  let core: CoreV1Api;
  const namespace = uniqueName('cursor');
  before(async () => {
    admin = (await testCluster()).admin;
    core = admin.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  const createService = (name: string) =>
    core.createNamespacedService({
      namespace,
      body: { metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } },
    });
  const recorded = async (cursor: string, resource: string): Promise<Record<string, { uid: string }>> => {
    const configMap = await core
      .readNamespacedConfigMap({ namespace, name: `${cursor}-${resource}` })
      .catch(() => undefined);
    const keys: Record<string, { uid: string }> = {};
    for (const text of Object.values(configMap?.data ?? {}))
      Object.assign(keys, JSON.parse(text) as Record<string, { uid: string }>);
    return keys;
  };
  const start = (t: TestContext, fn: FunctionServer, cursor: RelayOptions['cursor']): Relay =>
    testRelay(t, admin, { to: [`all=${fn.url}`] }, { cursor });

  it('delivers, after a gap with no relay, the deletes of a Service and a Node it knew', async (t) => {
    const cursor = { namespace, name: uniqueName('known'), flushMs: 100 };
    const fnA = await functionServer(t);
    const a = start(t, fnA, cursor);
    await ready(a);
    const service = uniqueName('svc');
    const node = uniqueName('node');
    const uid = (await createService(service)).metadata?.uid ?? '';
    await createNode(core, newNode(node));
    await waitFor('the adds', () => fnA.about(service).length > 0 && fnA.about(node).length > 0);
    await a.stop();

    await core.deleteNamespacedService({ namespace, name: service });
    await core.deleteNode({ name: node });
    const fnB = await functionServer(t);
    const b = start(t, fnB, cursor);
    await ready(b);
    await waitFor('the deletes', () => fnB.about(service).length > 0 && fnB.about(node).length > 0);
    const [deleted] = fnB.about(service);
    assert.equal(deleted?.type, 'delete');
    assert.deepEqual(JSON.parse(deleted.body), {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: service, namespace, uid },
      spec: { type: 'LoadBalancer' },
    });
    assert.equal(fnB.about(node)[0]?.type, 'delete');
    // Once delivered, the deletes leave the cursor.
    await waitFor(
      'the cursor to forget them',
      async () => (await recorded(cursor.name, 'services'))[`Service/${namespace}/${service}`] === undefined,
    );
    assert.equal((await recorded(cursor.name, 'nodes'))[`Node//${node}`], undefined);
  });

  it('delivers the delete of an incarnation replaced while no relay ran, then the add of the new one', async (t) => {
    const cursor = { namespace, name: uniqueName('known'), flushMs: 100 };
    const fnA = await functionServer(t);
    const a = start(t, fnA, cursor);
    await ready(a);
    const name = uniqueName('again');
    const oldUid = (await createService(name)).metadata?.uid ?? '';
    await waitFor('the add', () => fnA.about(name).length > 0);
    await a.stop();
    await core.deleteNamespacedService({ namespace, name });
    const newUid = (await createService(name)).metadata?.uid ?? '';

    const fnB = await functionServer(t);
    await ready(start(t, fnB, cursor));
    await waitFor('two deliveries', () => fnB.about(name).length >= 2);
    const seen = fnB
      .about(name)
      .map((r) => [r.type, (JSON.parse(r.body) as { metadata: { uid: string } }).metadata.uid]);
    assert.deepEqual(seen.slice(0, 2), [
      ['delete', oldUid],
      ['add', newUid],
    ]);
  });

  it('records an object before any function hears of it, in about one write per flush however many change', async (t) => {
    const cursor = { namespace, name: uniqueName('known'), flushMs: 200 };
    const fn = await functionServer(t);
    const unrecorded: string[] = [];
    fn.respond = async (request) => {
      if (request.type === 'add' && request.name.startsWith('burst-')) {
        const keys = await recorded(cursor.name, 'services');
        if (keys[`Service/${namespace}/${request.name}`] === undefined) unrecorded.push(request.name);
      }
      return { status: 202, body: '{}' };
    };
    const relay = start(t, fn, cursor);
    await ready(relay);
    const writesBefore = await metric(relay.registry, 'cirrus_relay_cursor_writes_total', {
      resource: 'services',
      result: 'written',
    });
    const names = Array.from({ length: 40 }, (_, i) => `burst-${uniqueName(String(i))}`);
    const started = Date.now();
    await Promise.all(names.map((name) => createService(name)));
    await waitFor('every add', () => names.every((name) => fn.about(name).length > 0), 20_000);
    const elapsed = Date.now() - started;
    assert.deepEqual(unrecorded, [], 'delivered before the cursor recorded them');
    const writes =
      (await metric(relay.registry, 'cirrus_relay_cursor_writes_total', { resource: 'services', result: 'written' })) -
      writesBefore;
    // One write per flush interval at most while they arrive, not one per object.
    assert.ok(
      writes >= 1 && writes <= Math.ceil(elapsed / cursor.flushMs) + 1,
      `${writes} writes for 40 Services in ${elapsed} ms`,
    );
    t.diagnostic(`${writes} cursor writes for 40 new Services in ${elapsed} ms`);
  });

  it('is on by default with leader election, named after the Lease, and off without', async (t) => {
    const lease = { name: uniqueName('lease'), namespace };
    const fn = await functionServer(t);
    const relay = testRelay(t, admin, { to: [`all=${fn.url}`] }, { leaderElection: lease });
    await ready(relay);
    const name = uniqueName('leased');
    await createService(name);
    await waitFor('the add', () => fn.about(name).length > 0);
    assert.ok((await recorded(`${lease.name}-known`, 'services'))[`Service/${namespace}/${name}`]);

    // Without leader election (and no cursor option), nothing is written anywhere.
    const count = async (ns: string): Promise<number> =>
      (await core.listNamespacedConfigMap({ namespace: ns })).items.length;
    const before = { here: await count(namespace), kubeSystem: await count('kube-system') };
    const other = uniqueName('plain');
    const fnPlain = await functionServer(t);
    const plain = testRelay(t, admin, { to: [`all=${fnPlain.url}`] });
    await ready(plain);
    await createService(other);
    await waitFor('the add', () => fnPlain.about(other).length > 0);
    await plain.stop();
    assert.equal(
      await metric(plain.registry, 'cirrus_relay_cursor_writes_total', { resource: 'services', result: 'written' }),
      0,
    );
    assert.deepEqual({ here: await count(namespace), kubeSystem: await count('kube-system') }, before);
  });

  it('delivers without the cursor when it cannot be written, and says why', async (t) => {
    const fn = await functionServer(t);
    const relay = start(t, fn, { namespace: uniqueName('missing-ns'), name: 'known', flushMs: 100 });
    await ready(relay);
    const name = uniqueName('nocursor');
    await createService(name);
    await waitFor('the add', () => fn.about(name).length > 0, 5_000);
    assert.ok(
      (await metric(relay.registry, 'cirrus_relay_cursor_writes_total', { resource: 'services', result: 'failed' })) >=
        1,
    );
  });

  it('refuses bad cursor settings', (t) => {
    assert.throws(
      () => testRelay(t, admin, { to: ['all=http://127.0.0.1:1/'] }, { cursor: { namespace, name: 'x', flushMs: 0 } }),
      /relay cursor: flushMs must be more than 0, got 0/,
    );
  });
});
