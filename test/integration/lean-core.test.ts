// LeanCore (shared/kube/core.ts) against the real API server: each call it implements, beside
// client-node's CoreV1Api where they must agree (errors, what is stored), and what differs by design
// (plain JSON: timestamps as the server's strings, fields client-node's models lack kept).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  ApiException,
  CoreV1Api,
  KubeConfig,
  setHeaderOptions,
  type V1Node,
  type V1ObjectMeta,
  type V1Service,
} from '@kubernetes/client-node';
import { apiMessage, apiStatus, mergePatch, strategicMergePatch } from '../../shared/kube/api.ts';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import { LeanCore } from '../../shared/kube/core.ts';
import { eventFor, recordEvent } from '../../shared/kube/events.ts';
import { readNode } from '../../shared/kube/nodes.ts';
import { createNode, newNode, uninitializedTaint, withReady, withTaints } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

/** Whether `error` is an ApiException with `code`. */
function apiError(code: number): (error: unknown) => boolean {
  return (error) => error instanceof ApiException && error.code === code;
}

/** A label of an object (undefined when absent). */
function label(object: { metadata?: { labels?: Record<string, string> } }, key: string): string | undefined {
  return object.metadata?.labels?.[key];
}

/** The types of a Node's conditions, sorted. */
function conditionTypes(node: V1Node): string[] {
  return (node.status?.conditions ?? []).map((c) => c.type).sort();
}

/** The first load balancer ingress IP of a Service. */
function ingressIp(service: V1Service): string | undefined {
  return service.status?.loadBalancer?.ingress?.[0]?.ip;
}

/** A Node's metadata, which the API server always sends. */
function meta(node: V1Node): V1ObjectMeta {
  return node.metadata ?? assert.fail('no metadata');
}

/** What `work` rejects with. */
async function failure(work: () => Promise<unknown>): Promise<unknown> {
  try {
    await work();
  } catch (error) {
    return error;
  }
  return assert.fail('expected a failure');
}

describe('LeanCore', { skip: controlPlaneSkip }, () => {
  let config: KubeConfig;
  let core: CoreV1Api;
  let lean: LeanCore;
  const namespace = uniqueName('lean');
  before(async () => {
    const { info } = await testCluster();
    config = loadKubeConfig(info.adminKubeconfig);
    core = config.makeApiClient(CoreV1Api);
    lean = new LeanCore(config);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  const service = async (name: string): Promise<void> => {
    await core.createNamespacedService({
      namespace,
      body: { metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } },
    });
  };

  it('reads a Node as the server sent it: timestamps are RFC 3339 strings', async () => {
    const name = uniqueName('lean-read');
    const stored = await createNode(core, newNode(name, withReady('True')));
    const node = await lean.readNode({ name });
    assert.equal(meta(node).uid, meta(stored).uid);
    assert.equal(meta(node).resourceVersion, meta(stored).resourceVersion);
    const created: unknown = meta(node).creationTimestamp;
    assert.equal(typeof created, 'string');
    assert.equal(new Date(created as string).getTime(), meta(stored).creationTimestamp?.getTime());
    const ready: unknown = (node.status?.conditions ?? []).find((c) => c.type === 'Ready')?.lastTransitionTime;
    assert.match(String(ready), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(Object.getPrototypeOf(node), Object.prototype, 'plain JSON, no model class');
  });

  it('lists Nodes and Services with query parameters', async () => {
    const name = uniqueName('lean-list');
    await createNode(core, newNode(name));
    const nodes = await lean.listNode({ fieldSelector: `metadata.name=${name}` });
    assert.deepEqual(
      nodes.items.map((n) => n.metadata?.name),
      [name],
    );
    const all = await lean.listNode({ resourceVersion: '0' });
    assert.ok(all.items.some((n) => n.metadata?.name === name));
    const svc = uniqueName('lean-svc');
    await service(svc);
    const services = await lean.listServiceForAllNamespaces({ fieldSelector: `metadata.namespace=${namespace}` });
    assert.ok(services.items.some((s) => s.metadata?.name === svc));
    assert.ok(services.items.every((s) => s.metadata?.namespace === namespace));
    const page = await lean.listServiceForAllNamespaces({ limit: 1 });
    assert.equal(page.items.length, 1);
    assert.ok(page.metadata?._continue, "a continue token for the next page, under V1ListMeta's name");
    assert.equal('continue' in page.metadata, false);
    const next = await lean.listServiceForAllNamespaces({ limit: 1, _continue: page.metadata._continue });
    assert.notEqual(next.items[0]?.metadata?.uid, page.items[0]?.metadata?.uid);
  });

  it('patches with the content type of mergePatch, strategicMergePatch, else JSON patch', async () => {
    const name = uniqueName('lean-patch');
    const other = { key: 'example.com/other', value: 'x', effect: 'NoSchedule' };
    await createNode(core, newNode(name, withTaints(uninitializedTaint, other), withReady('True')));
    // A merge patch replaces the taint list.
    const merged = await lean.patchNode({ name, body: { spec: { taints: [other] } } }, mergePatch);
    assert.deepEqual(
      merged.spec?.taints?.map((t) => t.key),
      [other.key],
    );
    // A strategic merge patch of the status merges conditions by type: Ready stays.
    const time = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const condition = { type: 'NetworkUnavailable', status: 'False', reason: 'Test', lastTransitionTime: time };
    const status = await lean.patchNodeStatus(
      { name, body: { status: { conditions: [condition] } } },
      strategicMergePatch,
    );
    assert.deepEqual(conditionTypes(status), ['NetworkUnavailable', 'Ready']);
    // No options: a JSON patch, as client-node's default.
    const patched = await lean.patchNode({
      name,
      body: [{ op: 'add', path: '/metadata/labels', value: { lean: 'yes' } }],
    });
    assert.equal(label(patched, 'lean'), 'yes');
    const stored = await core.readNode({ name });
    assert.equal(label(stored, 'lean'), 'yes');
    assert.deepEqual(conditionTypes(stored), ['NetworkUnavailable', 'Ready']);
  });

  it('sends dryRun: nothing is stored', async () => {
    const name = uniqueName('lean-dry');
    const before = await createNode(core, newNode(name));
    const answer = await lean.patchNode(
      { name, body: { metadata: { labels: { dry: 'run' } } }, dryRun: 'All' },
      mergePatch,
    );
    assert.equal(label(answer, 'dry'), 'run', 'the server answers with the patched object');
    const svc = uniqueName('lean-dry-svc');
    await service(svc);
    const status = await lean.patchNamespacedServiceStatus(
      { name: svc, namespace, body: { status: { loadBalancer: { ingress: [{ ip: '192.0.2.9' }] } } }, dryRun: 'All' },
      mergePatch,
    );
    assert.equal(ingressIp(status), '192.0.2.9');
    await lean.createNamespacedEvent({
      namespace,
      body: eventFor(
        { kind: 'Service', namespace, name: svc },
        { type: 'Normal', reason: 'Dry', message: 'm', component: 'test' },
      ),
      dryRun: 'All',
    });
    await lean.deleteNode({ name, body: { preconditions: { uid: meta(before).uid ?? '' }, dryRun: ['All'] } });
    const after = await core.readNode({ name });
    assert.equal(label(after, 'dry'), undefined);
    assert.equal(meta(after).resourceVersion, meta(before).resourceVersion);
    assert.equal(ingressIp(await core.readNamespacedServiceStatus({ name: svc, namespace })), undefined);
    const events = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${svc}` });
    assert.equal(events.items.length, 0);
  });

  it('deletes a Node with a uid precondition, and refuses one of another uid with 409', async () => {
    const name = uniqueName('lean-delete');
    const node = await createNode(core, newNode(name));
    const conflict = await failure(() => lean.deleteNode({ name, body: { preconditions: { uid: 'not-its-uid' } } }));
    assert.ok(apiError(409)(conflict));
    await lean.deleteNode({ name, body: { preconditions: { uid: node.metadata?.uid ?? '' } } });
    assert.equal(await readNode(lean, name), undefined);
  });

  it('reads and patches a Service and its status', async () => {
    const name = uniqueName('lean-svc');
    await service(name);
    const read = await lean.readNamespacedService({ namespace, name });
    assert.equal(read.spec?.type, 'LoadBalancer');
    const finalizer = 'service.kubernetes.io/load-balancer-cleanup';
    await lean.patchNamespacedServiceStatus(
      { namespace, name, body: { metadata: { finalizers: [finalizer] } } },
      strategicMergePatch,
    );
    await lean.patchNamespacedService({ namespace, name, body: { metadata: { labels: { lean: 'yes' } } } }, mergePatch);
    const status = await lean.patchNamespacedServiceStatus(
      { namespace, name, body: { status: { loadBalancer: { ingress: [{ ip: '192.0.2.10' }] } } } },
      mergePatch,
    );
    assert.equal(ingressIp(status), '192.0.2.10');
    const stored = await core.readNamespacedService({ namespace, name });
    assert.deepEqual(stored.metadata?.finalizers, [finalizer]);
    assert.equal(label(stored, 'lean'), 'yes');
    assert.equal(ingressIp(stored), '192.0.2.10');
  });

  it('records an Event whose Date times are sent as client-node sends them', async () => {
    const name = uniqueName('lean-event');
    const now = new Date('2026-01-02T03:04:05.678Z');
    const event = eventFor(
      { kind: 'Service', namespace, name },
      { type: 'Warning', reason: 'R', message: 'M', component: 'c' },
      now,
    );
    await recordEvent(lean, event);
    const created = await lean.createNamespacedEvent({ namespace, body: event });
    assert.equal(String(created.firstTimestamp as unknown), '2026-01-02T03:04:05Z');
    const list = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
    assert.equal(list.items.length, 2);
    for (const item of list.items) {
      assert.equal(item.lastTimestamp?.toISOString(), '2026-01-02T03:04:05.000Z');
      assert.equal(item.source?.component, 'c');
    }
  });

  it('fails as CoreV1Api fails: an ApiException with the same code and body', async () => {
    const missing = uniqueName('lean-missing');
    const leanError = await failure(() => lean.readNode({ name: missing }));
    const coreError = await failure(() => core.readNode({ name: missing }));
    assert.ok(apiError(404)(leanError));
    assert.equal(apiStatus(leanError), 404);
    assert.equal(apiMessage(leanError), apiMessage(coreError));
    assert.equal(apiMessage(leanError), `404: nodes "${missing}" not found`);
    assert.equal(typeof (leanError as ApiException<string>).body, 'string');
    assert.deepEqual(
      JSON.parse((leanError as ApiException<string>).body),
      JSON.parse((coreError as ApiException<string>).body),
    );
    assert.equal(await readNode(lean, missing), undefined, 'readNode maps 404 to undefined');

    const name = uniqueName('lean-conflict');
    await createNode(core, newNode(name));
    const stale = failure(() =>
      lean.patchNode({ name, body: { metadata: { resourceVersion: '1', labels: { a: 'b' } } } }, mergePatch),
    );
    assert.ok(apiError(409)(await stale));
    const invalid = await failure(() =>
      lean.patchNode({ name, body: { spec: { taints: [{ key: 'k', effect: 'Sometimes' }] } } }, mergePatch),
    );
    assert.equal(apiStatus(invalid), 422);
    assert.match(apiMessage(invalid), /^422: .*Unsupported value: "Sometimes"/);
  });

  it('fails with 401 (no body) for a bad token and 403 for an identity without the right', async () => {
    const { info } = await testCluster();
    const bad = new KubeConfig();
    bad.loadFromFile(info.adminKubeconfig);
    const cluster = bad.getCurrentCluster();
    assert.ok(cluster);
    bad.loadFromClusterAndUser(cluster, { name: 'bad', token: 'not-a-token' });
    const unauthorized = await failure(() => new LeanCore(bad).readNode({ name: 'x' }));
    const coreUnauthorized = await failure(() => bad.makeApiClient(CoreV1Api).readNode({ name: 'x' }));
    assert.ok(apiError(401)(unauthorized));
    assert.equal((unauthorized as ApiException<undefined>).body, undefined);
    assert.equal(apiMessage(unauthorized), apiMessage(coreUnauthorized));

    const nobody = await (await testCluster()).as({ user: uniqueName('nobody') });
    const forbidden = await failure(() => new LeanCore(nobody).listNode());
    const coreForbidden = await failure(() => nobody.makeApiClient(CoreV1Api).listNode());
    assert.equal(apiStatus(forbidden), 403);
    assert.equal(apiMessage(forbidden), apiMessage(coreForbidden));
  });

  it('refuses request options it would not honour, before sending anything', async () => {
    const withSignal = setHeaderOptions('X-Other', 'x');
    await assert.rejects(lean.readNode({ name: 'x' }, mergePatch), /options other than a patch type/);
    await assert.rejects(lean.patchNode({ name: 'x', body: {} }, withSignal), /options other than a patch type/);
    await assert.rejects(
      lean.patchNode({ name: 'x', body: {} }, { ...mergePatch }),
      /options other than a patch type/,
      'a copy of mergePatch may carry more: refused',
    );
  });

  it('shares the connection pool of client-node on the same KubeConfig', async () => {
    const name = uniqueName('lean-pool');
    await createNode(core, newNode(name));
    await core.readNode({ name });
    let opened = 0;
    const onSocket = (): void => {
      opened += 1;
    };
    subscribe('net.client.socket', onSocket);
    try {
      for (let i = 0; i < 5; i += 1) {
        await lean.readNode({ name });
        await core.readNode({ name });
      }
    } finally {
      unsubscribe('net.client.socket', onSocket);
    }
    assert.equal(opened, 0, 'every request on the connection client-node opened');
  });

  it('without a TLS setting of the KubeConfig (no dispatcher of its own), uses the fetch of Node', async () => {
    // A token and no CA in the kubeconfig: client-node has no dispatcher for it, so the request
    // goes through Node's global pool, which trusts the cluster's CA here by NODE_EXTRA_CA_CERTS
    // (read at start-up: a process of its own). An authenticated refusal proves the token went.
    const cluster = await testCluster();
    const account = uniqueName('lean-sa');
    const token =
      (await cluster.asServiceAccount(namespace, account)).getCurrentUser()?.token ?? assert.fail('no token');
    const script = `
      import { KubeConfig } from '@kubernetes/client-node';
      import { LeanCore } from ${JSON.stringify(new URL('../../shared/kube/core.ts', import.meta.url).href)};
      const config = new KubeConfig();
      config.loadFromClusterAndUser({ name: 'c', server: process.env.SERVER }, { name: 'u', token: process.env.TOKEN });
      const dispatcher = config.createDispatcher(config.getCurrentCluster(), {});
      const error = await new LeanCore(config).listNode().then(() => undefined, (e) => e);
      console.log(JSON.stringify({ dispatcher: dispatcher !== undefined, code: error?.code, body: error?.body }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: cluster.info.ca.cert, SERVER: cluster.info.server, TOKEN: token },
    });
    const seen = JSON.parse(stdout) as { dispatcher: boolean; code?: number; body?: string };
    assert.equal(seen.dispatcher, false);
    assert.equal(seen.code, 403);
    assert.match(seen.body ?? '', new RegExp(`system:serviceaccount:${namespace}:${account}`));
  });

  it('is a Core that functions take in place of CoreV1Api (same answers on the fields they read)', async () => {
    const name = uniqueName('lean-same');
    await createNode(core, newNode(name, withTaints(uninitializedTaint), withReady('False')));
    const a: V1Node = await lean.readNode({ name });
    const b: V1Node = await core.readNode({ name });
    assert.deepEqual(a.spec?.taints, JSON.parse(JSON.stringify(b.spec?.taints)) as unknown);
    assert.deepEqual(
      a.status?.conditions?.map((c) => [c.type, c.status, c.reason]),
      b.status?.conditions?.map((c) => [c.type, c.status, c.reason]),
    );
  });
});
