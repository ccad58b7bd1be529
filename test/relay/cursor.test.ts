// The known-keys cursor (ADR 0014, issue 20 row 7): objects deleted while no relay leads are
// delivered as deletes by the next leader, carrying what the functions decide on.

import assert from 'node:assert/strict';
import { pino, type Logger } from 'pino';
import { before, describe, it, type TestContext } from 'node:test';
import { randomUUID } from 'node:crypto';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import {
  buildRoutingTable,
  defaultCursorParts,
  startRelay,
  type CursorSettings,
  type Relay,
  type RelayOptions,
} from '../../relay/index.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { relayCursor } from '../../app/cli/relay.ts';
import { parseConfig } from '../../app/config.ts';
import { KnownKeys, partLimitBytes, writerAnnotation } from '../../relay/cursor.ts';
import { placeOf } from '../../relay/cursor-format.ts';
import { createRelayMetrics } from '../../relay/metrics.ts';
import { services, type KubeObject } from '../../relay/resources.ts';
import { createNode, newNode, silentLogger, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import {
  CuttableProxy,
  fastTimings,
  functionServer,
  metric,
  noPeriods,
  ready,
  testRelay,
  throughProxy,
  waitFor,
  type FunctionServer,
} from './harness.ts';

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
  // The cursor's ConfigMaps of a resource: its parts, `<cursor>-<resource>` then `-1`, `-2`, `-3`.
  const parts = async (
    cursor: string,
    resource: string,
    count = defaultCursorParts,
  ): Promise<(V1ConfigMap | undefined)[]> =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        core
          .readNamespacedConfigMap({ namespace, name: `${cursor}-${resource}${i === 0 ? '' : `-${String(i)}`}` })
          .catch(() => undefined),
      ),
    );
  const recorded = async (cursor: string, resource: string): Promise<Record<string, { uid: string }>> => {
    const keys: Record<string, { uid: string }> = {};
    for (const configMap of await parts(cursor, resource))
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
    // (Each resource's parts are written on their own: the Node's may be forgotten a flush later.)
    await waitFor(
      'the cursor to forget them',
      async () =>
        (await recorded(cursor.name, 'services'))[`Service/${namespace}/${service}`] === undefined &&
        (await recorded(cursor.name, 'nodes'))[`Node/${node}`] === undefined,
    );
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

  it('delivers a Node without waiting for the cursor (no function acts on its delete), and records it when stopped', async (t) => {
    // No periodic write within the test: a delivery that waited for one would not arrive.
    const cursor = { namespace, name: uniqueName('known'), flushMs: 120_000 };
    const fn = await functionServer(t);
    // node-init's destination (an `all` one waits for the cursor: it expects every delete).
    const relay = testRelay(t, admin, { to: [`node-init=${fn.url}`] }, { cursor });
    await ready(relay);
    const node = uniqueName('node');
    await createNode(core, newNode(node, uninitialized));
    await waitFor('the Node delivered', () => fn.about(node).length > 0, 10_000);
    assert.equal((await recorded(cursor.name, 'nodes'))[`Node/${node}`], undefined, 'not written yet');
    await relay.stop();
    assert.ok((await recorded(cursor.name, 'nodes'))[`Node/${node}`], 'written by the stop, before the Lease went');
  });

  it('records an object before any function hears of it, soon, in about one write per batch however many change', async (t) => {
    // No periodic write within the test: the deliveries waiting bring the writes forward (urgentMs).
    const cursor = { namespace, name: uniqueName('known'), flushMs: 120_000, urgentMs: 100 };
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
    // One write per part of the cursor per urgent interval at most while they arrive, not one per object.
    assert.ok(
      writes >= 1 && writes <= (Math.ceil(elapsed / cursor.urgentMs) + 1) * defaultCursorParts,
      `${writes} writes for 40 Services in ${elapsed} ms`,
    );
    t.diagnostic(`${writes} cursor writes for 40 new Services in ${elapsed} ms`);
  });

  it('is on by default with leader election, named after the Lease', async (t) => {
    const lease = { name: uniqueName('lease'), namespace };
    const fn = await functionServer(t);
    const relay = testRelay(t, admin, { to: [`all=${fn.url}`] }, { leaderElection: lease });
    await ready(relay);
    const name = uniqueName('leased');
    await createService(name);
    await waitFor('the add', () => fn.about(name).length > 0);
    assert.ok((await recorded(`${lease.name}-known`, 'services'))[`Service/${namespace}/${name}`]);
  });

  it('costs a leader no write at rest: its writer record is not renewed, the Lease stands for it (ADR 0014)', async (t) => {
    const lease = { name: uniqueName('rest'), namespace };
    const fn = await functionServer(t);
    const relay = testRelay(
      t,
      admin,
      { to: [`all=${fn.url}`] },
      { leaderElection: lease, cursor: { namespace, name: `${lease.name}-known`, flushMs: 100, claimMs: 900 } },
    );
    await ready(relay);
    const record = async (): Promise<string | undefined> =>
      (await parts(`${lease.name}-known`, 'services', 1))[0]?.metadata?.annotations?.[writerAnnotation];
    await waitFor('the leader to name itself the writer', async () => (await record()) !== undefined);
    const first = await record();
    assert.match(first ?? '', new RegExp(`"lease":"${namespace}/${lease.name}"`));
    // Three renewal periods (a third of claimMs each) and more: a renewing writer rewrites renewTime.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.equal(await record(), first, 'the record was renewed while the relay led on its Lease');
  });

  it("is on by default without leader election too, after the default Lease's name", async (t) => {
    // Not testRelay, which turns it off: other tests' relays would share kube-system's.
    const fn = await functionServer(t);
    const relay = startRelay({
      kubeConfig: admin,
      routing: buildRoutingTable(catalogue, { to: [`all=${fn.url}`], periods: noPeriods }),
      logger: silentLogger(),
      leaderElection: false,
      ...fastTimings,
    });
    const configMaps = ['nodes', 'services'].flatMap((resource) =>
      Array.from(
        { length: defaultCursorParts },
        (_, i) => `cirrus-relay-known-${resource}${i === 0 ? '' : `-${String(i)}`}`,
      ),
    );
    t.after(async () => {
      await relay.stop();
      await Promise.all(
        configMaps.map((name) =>
          core.deleteNamespacedConfigMap({ namespace: 'kube-system', name }).catch(() => undefined),
        ),
      );
    });
    await ready(relay);
    const name = uniqueName('single');
    await createService(name);
    await waitFor('the add', () => fn.about(name).length > 0);
    const inKubeSystem = async (): Promise<boolean> => {
      const found = await Promise.all(
        configMaps.map((cm) =>
          core.readNamespacedConfigMap({ namespace: 'kube-system', name: cm }).catch(() => undefined),
        ),
      );
      return found.some((cm) =>
        Object.values(cm?.data ?? {}).some((text) => text.includes(`Service/${namespace}/${name}`)),
      );
    };
    await waitFor('kube-system/cirrus-relay-known-services to record it', inKubeSystem);
  });

  it('is off when turned off', async (t) => {
    const count = async (ns: string): Promise<number> =>
      (await core.listNamespacedConfigMap({ namespace: ns })).items.length;
    const before = { here: await count(namespace), kubeSystem: await count('kube-system') };
    const other = uniqueName('plain');
    const fnPlain = await functionServer(t);
    const plain = testRelay(t, admin, { to: [`all=${fnPlain.url}`] }, { cursor: false });
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

  it('delivers every delete made while a single relay without leader election was stopped (0 lost)', async (t) => {
    const cursor = { namespace, name: uniqueName('single'), flushMs: 100 };
    const fnA = await functionServer(t);
    const a = start(t, fnA, cursor);
    await ready(a);
    const nodeNames = Array.from({ length: 20 }, () => uniqueName('gone-node'));
    const serviceNames = Array.from({ length: 17 }, () => uniqueName('gone-svc'));
    const uids = new Map<string, string>();
    const uidOf = (object: { metadata?: { uid?: string } }): string => object.metadata?.uid ?? '';
    for (const name of nodeNames) uids.set(name, uidOf(await createNode(core, newNode(name))));
    for (const name of serviceNames) uids.set(name, uidOf(await createService(name)));
    const names = [...nodeNames, ...serviceNames];
    await waitFor('the adds', () => names.every((name) => fnA.about(name).length > 0));
    await a.stop();

    for (const name of nodeNames) await core.deleteNode({ name });
    for (const name of serviceNames) await core.deleteNamespacedService({ namespace, name });
    const fnB = await functionServer(t);
    const b = start(t, fnB, cursor);
    await ready(b);
    await waitFor('every delete', () => names.every((name) => fnB.about(name).some((r) => r.type === 'delete')));
    assert.deepEqual(lostDeletes(fnB, uids), [], 'every delete, each carrying the uid of what was deleted');
    for (const name of serviceNames) assert.equal(carried(fnB, name)?.spec?.type, 'LoadBalancer');
  });

  it('delivers without the cursor when it cannot be written, and says why', async (t) => {
    const fn = await functionServer(t);
    const records: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => records.push(JSON.parse(line) as never) });
    const where = { namespace: uniqueName('missing-ns'), name: 'known', flushMs: 100 };
    const relay = testRelay(t, admin, { to: [`all=${fn.url}`] }, { cursor: where, logger });
    await ready(relay);
    const name = uniqueName('nocursor');
    await createService(name);
    await waitFor('the add', () => fn.about(name).length > 0, 5_000);
    assert.ok(
      (await metric(relay.registry, 'cirrus_relay_cursor_writes_total', { resource: 'services', result: 'failed' })) >=
        1,
    );
    const said = records.find((r) => r.msg.startsWith("could not write the cursor's known-services"));
    assert.ok(said, 'an error in the log names the ConfigMap');
    assert.match(said.msg, /delivering without it: objects deleted while no relay runs will not be delivered/);
  });

  it('records only the Services whose delete a function needs, and a new leader delivers the deletes it missed', async (t) => {
    const cursor = { namespace, name: uniqueName('known'), flushMs: 100 };
    const fnA = await functionServer(t);
    // Fed by a function (an `all` destination records every Service).
    const startLb = (fn: FunctionServer): Relay => testRelay(t, admin, { to: [`service-lb=${fn.url}`] }, { cursor });
    const a = startLb(fnA);
    await ready(a);
    const plain = Array.from({ length: 20 }, (_, i) => uniqueName(`plain-${i}`));
    const balanced = Array.from({ length: 6 }, (_, i) => uniqueName(`lb-${i}`));
    const cleanup = uniqueName('finalizer');
    await Promise.all([
      ...plain.map((name) =>
        core.createNamespacedService({ namespace, body: { metadata: { name }, spec: { ports: [{ port: 80 }] } } }),
      ),
      ...balanced.map((name) => createService(name)),
      core.createNamespacedService({
        namespace,
        body: {
          metadata: { name: cleanup, finalizers: ['service.kubernetes.io/load-balancer-cleanup'] },
          spec: { ports: [{ port: 80 }] },
        },
      }),
    ]);
    t.after(() =>
      core
        .patchNamespacedService(
          { namespace, name: cleanup, body: { metadata: { finalizers: null } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        )
        .catch(() => undefined),
    );
    const key = (name: string): string => `Service/${namespace}/${name}`;
    const wanted = [...balanced, cleanup];
    await waitFor('the Services with a load balancer to be recorded', async () => {
      const keys = await recorded(cursor.name, 'services');
      return wanted.every((name) => keys[key(name)] !== undefined);
    });
    const keys = await recorded(cursor.name, 'services');
    assert.deepEqual(
      plain.filter((name) => keys[key(name)] !== undefined),
      [],
      'Services without a load balancer are not recorded',
    );
    const spread = (await parts(cursor.name, 'services')).filter((configMap) =>
      Object.values(configMap?.data ?? {}).some((text) => balanced.some((name) => text.includes(name))),
    );
    assert.ok(spread.length >= 2, `the keys are in ${spread.length} of the ConfigMaps`);
    await a.stop();

    await Promise.all(balanced.map((name) => core.deleteNamespacedService({ namespace, name })));
    const fnB = await functionServer(t);
    await ready(startLb(fnB));
    await waitFor('every missed delete', () =>
      balanced.every((name) => fnB.about(name).some((r) => r.type === 'delete')),
    );
  });

  // `count` keys of LoadBalancer Services with long names (as tenants may choose them), ~250 bytes each recorded.
  const manyKeys = (count: number): { key: string; object: KubeObject; uid: string }[] => {
    const space = `ns-${'n'.repeat(55)}`;
    return Array.from({ length: count }, (_, i) => {
      const name = `svc-${String(i).padStart(5, '0')}-${'s'.repeat(50)}`;
      const uid = randomUUID();
      const spec = { type: 'LoadBalancer', loadBalancerClass: 'example.com/lb' };
      return { key: `Service/${space}/${name}`, uid, object: { metadata: { name, namespace: space, uid }, spec } };
    });
  };
  const cursorOf = (settings: CursorSettings) => {
    const metrics = createRelayMetrics({ processMetrics: false, gauges: () => undefined });
    return { known: new KnownKeys(core, services, settings, { log: silentLogger(), metrics }), metrics };
  };
  const recordAll = async (known: KnownKeys, keys: ReturnType<typeof manyKeys>): Promise<void> => {
    await known.load();
    for (const { key, object } of keys) known.record({ resource: services, type: 'add', key, object, observedAt: 0 });
    await known.flush(new Set());
  };
  // Bytes of data (keys and values) of each ConfigMap, as the API server counts them against its limit.
  const dataBytes = (configMap: V1ConfigMap | undefined): number =>
    Object.entries(configMap?.data ?? {}).reduce((sum, [k, v]) => sum + k.length + Buffer.byteLength(v), 0);

  it('spreads its keys over its ConfigMaps so that none is over the limit, and a new leader reads them all', async () => {
    const cursor = { namespace, name: uniqueName('many'), flushMs: 1_000 };
    const keys = manyKeys(10_000); // about 2.5 MB recorded: more than one ConfigMap holds
    const sample = keys.at(42);
    assert.ok(sample);
    const writer = cursorOf(cursor).known;
    await recordAll(writer, keys);
    const sizes = (await parts(cursor.name, 'services')).map(dataBytes);
    assert.ok(sizes.reduce((a, b) => a + b) > 1024 * 1024, `${sizes.join(' + ')} bytes`);
    for (const size of sizes) assert.ok(size > 0 && size <= partLimitBytes, `a part of ${size} bytes`);
    assert.ok(
      keys.every(({ key, uid }) => writer.durable(key, uid)),
      'every key recorded',
    );

    const read = await cursorOf(cursor).known.load();
    assert.equal(read.size, keys.length);
    assert.equal(read.get(sample.key)?.metadata?.uid, sample.uid);

    // A part its keys would take over the limit is not written, and nothing waits for it; the others are.
    const two = { ...cursor, name: uniqueName('two'), parts: 2 };
    const crowded = manyKeys(12_000).filter(({ key }) => placeOf(key, 2).part === 0); // about 1.5 MB
    const few = manyKeys(200).filter(({ key }) => placeOf(key, 2).part === 1);
    const [over, under] = [crowded.at(0), few.at(0)];
    assert.ok(over && under);
    const lopsided = cursorOf(two);
    await recordAll(lopsided.known, [...crowded, ...few]);
    const [part0, part1] = await parts(two.name, 'services', 2);
    // (Its ConfigMap exists: the first part carries the writer record, and was created empty for it.)
    assert.deepEqual(
      Object.values(part0?.data ?? {}).filter((text) => text !== '{}'),
      [],
      'the crowded part is not written',
    );
    assert.ok(
      Object.values(part1?.data ?? {}).some((text) => text.includes(under.key)),
      'the other part is',
    );
    assert.ok((await metric(lopsided.metrics.registry, 'cirrus_relay_cursor_writes_total', { result: 'failed' })) >= 1);
    assert.ok(lopsided.known.durable(over.key, over.uid), "the crowded part's keys wait for nothing");
  });

  // A logger that keeps the error lines it is given.
  const errorLog = (): { logger: Logger; lines: { msg: string; writer?: { identity?: string } }[] } => {
    const lines: { msg: string }[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => lines.push(JSON.parse(line) as never) });
    return { logger, lines };
  };
  const writerOf = async (cursor: string): Promise<string | undefined> => {
    const [first] = await parts(cursor, 'services', 1);
    const record = first?.metadata?.annotations?.[writerAnnotation];
    return record === undefined ? undefined : (JSON.parse(record) as { identity: string }).identity;
  };

  it('refuses a second relay on a cursor another live relay writes, names that relay, and loses no key (issue 38)', async (t) => {
    const cursor = { namespace, name: uniqueName('shared'), flushMs: 100, claimMs: 1_500 };
    const fnA = await functionServer(t);
    const a = start(t, fnA, cursor);
    await ready(a);
    const names = Array.from({ length: 8 }, () => uniqueName('both'));
    const uids = new Map<string, string>();
    for (const name of names) uids.set(name, (await createService(name)).metadata?.uid ?? '');
    await waitFor('A to record them', async () => {
      const keys = await recorded(cursor.name, 'services');
      return names.every((name) => keys[`Service/${namespace}/${name}`] !== undefined);
    });
    assert.equal(await writerOf(cursor.name), a.identity, 'the cursor names its writer');

    const fnB = await functionServer(t);
    const log = errorLog();
    const b = testRelay(t, admin, { to: [`all=${fnB.url}`] }, { cursor, logger: log.logger });
    await waitFor('B to say it is refused', () => log.lines.some((l) => l.writer?.identity === a.identity));
    const said = log.lines.find((l) => l.writer?.identity === a.identity);
    assert.match(said?.msg ?? '', new RegExp(`written by another relay, ${a.identity}`));
    assert.match(said?.msg ?? '', /leader election on one Lease .* or give each its own cursor/);
    // Longer than the record holds: A renews it, so B keeps out — neither writing nor delivering.
    await new Promise((resolve) => setTimeout(resolve, 2 * cursor.claimMs));
    assert.equal(b.status().ready, false, 'B is not ready while A writes the cursor');
    assert.deepEqual(fnB.received, [], 'B delivers nothing meanwhile');
    assert.ok((await metric(b.registry, 'cirrus_relay_cursor_writes_total', { result: 'refused' })) >= 1);
    assert.equal(await writerOf(cursor.name), a.identity);
    const keys = await recorded(cursor.name, 'services');
    assert.deepEqual(
      names.filter((name) => keys[`Service/${namespace}/${name}`] === undefined),
      [],
      'no key of A removed',
    );

    // A goes; the deletes made meanwhile reach B, which takes the cursor over.
    await a.stop();
    for (const name of names) await core.deleteNamespacedService({ namespace, name });
    await ready(b);
    await waitFor('every delete at B', () => names.every((name) => fnB.about(name).some((r) => r.type === 'delete')));
    assert.deepEqual(lostDeletes(fnB, uids), [], 'every delete, with the uid of what was deleted');
    assert.equal(await writerOf(cursor.name), b.identity);
  });

  it('takes the cursor over from a writer whose record went stale, which then stops writing it and says so', async (t) => {
    const cursor = { namespace, name: uniqueName('stale'), flushMs: 100, claimMs: 1_500 };
    const proxy = await new CuttableProxy(new URL(admin.getCurrentCluster()?.server ?? '')).start();
    t.after(() => proxy.stop());
    const fnA = await functionServer(t);
    const logA = errorLog();
    const a = testRelay(
      t,
      throughProxy(admin, proxy.port),
      { to: [`all=${fnA.url}`] },
      { cursor, logger: logA.logger },
    );
    await ready(a);
    await waitFor('A to write the cursor', async () => (await writerOf(cursor.name)) === a.identity);
    proxy.cut(); // A can no longer renew its record: as good as gone, for the cursor
    const fnB = await functionServer(t);
    const b = testRelay(t, admin, { to: [`all=${fnB.url}`] }, { cursor });
    await ready(b);
    assert.equal(await writerOf(cursor.name), b.identity, 'B took the cursor over');
    proxy.restore();
    await waitFor(
      'A to find B writing the cursor',
      () => logA.lines.some((l) => l.writer?.identity === b.identity),
      10_000,
    );
    assert.match(logA.lines.find((l) => l.writer?.identity === b.identity)?.msg ?? '', /no longer writes it/);
    // B keeps the cursor: A writes it no more.
    const name = uniqueName('after');
    await createService(name);
    await waitFor(
      'B to record it',
      async () => (await recorded(cursor.name, 'services'))[`Service/${namespace}/${name}`] !== undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, cursor.claimMs));
    assert.equal(await writerOf(cursor.name), b.identity);
  });

  it('records every Service an `all` destination receives, so that the deletes of ClusterIP Services made while it was down reach it (issue 38)', async (t) => {
    const cursor = { namespace, name: uniqueName('sink'), flushMs: 100 };
    const fnA = await functionServer(t);
    const unrecorded: string[] = [];
    fnA.respond = async (request) => {
      if (request.type === 'add' && request.name.startsWith('cip-')) {
        const keys = await recorded(cursor.name, 'services');
        if (keys[`Service/${namespace}/${request.name}`] === undefined) unrecorded.push(request.name);
      }
      return { status: 202, body: '{}' };
    };
    const a = start(t, fnA, cursor);
    await ready(a);
    const names = Array.from({ length: 12 }, () => `cip-${uniqueName('svc')}`);
    const uids = new Map<string, string>();
    for (const name of names) {
      const created = await core.createNamespacedService({
        namespace,
        body: { metadata: { name }, spec: { ports: [{ port: 80, protocol: 'TCP' }] } },
      });
      assert.equal(created.spec?.type, 'ClusterIP');
      uids.set(name, created.metadata?.uid ?? '');
    }
    await waitFor('the adds', () => names.every((name) => fnA.about(name).length > 0));
    // Recorded before the sink heard of them: a relay killed right after delivering leaves them to the next.
    assert.deepEqual(unrecorded, [], 'delivered before the cursor recorded them');
    await a.stop();

    for (const name of names) await core.deleteNamespacedService({ namespace, name });
    const fnB = await functionServer(t);
    await ready(start(t, fnB, cursor));
    await waitFor('every delete', () => names.every((name) => fnB.about(name).some((r) => r.type === 'delete')));
    assert.deepEqual(lostDeletes(fnB, uids), [], 'every delete, with the uid of what was deleted');
    for (const name of names) assert.equal(carried(fnB, name)?.spec?.type, 'ClusterIP');
  });

  it('refuses bad cursor settings', (t) => {
    assert.throws(
      () => testRelay(t, admin, { to: ['all=http://127.0.0.1:1/'] }, { cursor: { namespace, name: 'x', flushMs: 0 } }),
      /relay cursor: flushMs must be more than 0, got 0/,
    );
    assert.throws(
      () =>
        testRelay(
          t,
          admin,
          { to: ['all=http://127.0.0.1:1/'] },
          { cursor: { namespace, name: 'x', flushMs: 100, parts: 0 } },
        ),
      /relay cursor: parts must be a whole number of at least 1, got 0/,
    );
  });
});

// What the delete of `name` that `fn` received carries, if it received one.
function carried(
  fn: FunctionServer,
  name: string,
): { metadata?: { uid?: string }; spec?: { type?: string } } | undefined {
  const deleted = fn.about(name).find((r) => r.type === 'delete');
  return deleted === undefined ? undefined : (JSON.parse(deleted.body) as { metadata?: { uid?: string } });
}

// The names in `uids` whose delete `fn` did not receive, with the uid of the incarnation deleted.
function lostDeletes(fn: FunctionServer, uids: ReadonlyMap<string, string>): string[] {
  return [...uids].filter(([name, uid]) => carried(fn, name)?.metadata?.uid !== uid).map(([name]) => name);
}

describe('cirrus relay and start: --relay-cursor', () => {
  const command = {
    options: ['relayCursor', 'leaderElect', 'leaderElectResourceName', 'leaderElectResourceNamespace'] as const,
  };
  const where = (args: readonly string[], env: NodeJS.ProcessEnv = {}) => relayCursor(parseConfig(command, args, env));

  it("is on by default, beside the relay's Lease, with or without leader election", () => {
    const beside = { namespace: 'kube-system', name: 'cirrus-relay-known' };
    assert.deepEqual(where([]), beside);
    assert.deepEqual(where(['--leader-elect=false']), beside);
    assert.deepEqual(
      where([
        '--leader-elect=false',
        '--leader-elect-resource-namespace',
        'cirrus-system',
        '--leader-elect-resource-name',
        'r',
      ]),
      { namespace: 'cirrus-system', name: 'r-known' },
    );
  });

  it('is off with --relay-cursor=false or CIRRUS_RELAY_CURSOR=false', () => {
    assert.equal(where(['--relay-cursor=false']), false);
    assert.equal(where(['--leader-elect=false'], { CIRRUS_RELAY_CURSOR: 'false' }), false);
  });
});
