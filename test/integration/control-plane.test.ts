// The local control plane is a real Kubernetes API server: what later controllers rely on works
// through @kubernetes/client-node 2.x, and RBAC is enforced per identity.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import {
  ApiException,
  CoreV1Api,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  VersionApi,
  Watch,
  type V1Node,
} from '@kubernetes/client-node';
import { pinnedVersions } from '../../tools/control-plane/index.ts';
import { controlPlaneSkip, testCluster, uniqueName, type TestCluster } from '../harness/cluster.ts';

const uninitializedTaint = {
  key: 'node.cloudprovider.kubernetes.io/uninitialized',
  value: 'true',
  effect: 'NoSchedule',
};
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

async function statusOf(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 200;
  } catch (error) {
    if (error instanceof ApiException) return error.code;
    throw error;
  }
}

describe('the local control plane', { skip: controlPlaneSkip }, () => {
  let cluster: TestCluster;
  let core: CoreV1Api;
  before(async () => {
    cluster = await testCluster();
    core = cluster.admin.makeApiClient(CoreV1Api);
  });

  it('is the kube-apiserver release that tools/control-plane/go.mod pins', async () => {
    const version = await cluster.admin.makeApiClient(VersionApi).getCode();
    assert.equal(version.gitVersion, (await pinnedVersions()).kubernetes);
    assert.equal(cluster.info.kubernetesVersion, version.gitVersion);
  });

  it('keeps a tainted Node, streams its changes to a watch, and patches nodes/status', async () => {
    const name = uniqueName('node');
    const events: { type: string; node: V1Node }[] = [];
    const abort = await new Watch(cluster.admin).watch(
      '/api/v1/nodes',
      { fieldSelector: `metadata.name=${name}` },
      (type, node: V1Node) => events.push({ type, node }),
      () => {},
    );
    try {
      await core.createNode({ body: { metadata: { name }, spec: { taints: [uninitializedTaint] } } });
      const addresses = [
        { type: 'InternalIP', address: '192.0.2.10' },
        { type: 'Hostname', address: name },
      ];
      await core.patchNodeStatus({ name, body: { status: { addresses } } }, mergePatch);
      const node = await core.readNode({ name });
      // The API server's TaintNodesByCondition admission adds node.kubernetes.io/not-ready beside ours.
      assert.ok(hasUninitializedTaint(node), JSON.stringify(node.spec?.taints));
      assert.deepEqual(plain(node.status?.addresses), addresses);
      await waitFor(() => events.some((e) => e.type === 'MODIFIED' && e.node.status?.addresses?.length === 2));
      const [first] = events;
      assert.ok(first);
      assert.equal(first.type, 'ADDED');
      assert.ok(hasUninitializedTaint(first.node));
    } finally {
      abort.abort();
    }
  });

  it('allocates a ClusterIP and a NodePort to a LoadBalancer Service', async () => {
    const namespace = 'default';
    const service = await core.createNamespacedService({
      namespace,
      body: {
        metadata: { name: uniqueName('lb') },
        spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
      },
    });
    assert.match(service.spec?.clusterIP ?? '', /^10\.0\.\d+\.\d+$/);
    const nodePort = service.spec?.ports?.[0]?.nodePort ?? 0;
    assert.ok(nodePort >= 30000 && nodePort <= 32767, `nodePort ${nodePort} is outside 30000-32767`);
    assert.deepEqual(plain(service.status?.loadBalancer), {});
  });

  it('refuses a user without RBAC rules (403) and grants exactly what a binding gives', async () => {
    const user = uniqueName('user');
    const userCore = (await cluster.as({ user })).makeApiClient(CoreV1Api);
    assert.equal(await statusOf(userCore.listNode()), 403);
    assert.equal(await statusOf(core.listNode()), 200);

    const rbac = cluster.admin.makeApiClient(RbacAuthorizationV1Api);
    const role = uniqueName('node-reader');
    await rbac.createClusterRole({
      body: { metadata: { name: role }, rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['list'] }] },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    await waitFor(async () => (await statusOf(userCore.listNode())) === 200);
    assert.equal(await statusOf(userCore.createNode({ body: { metadata: { name: uniqueName('denied') } } })), 403);
  });

  it('authenticates a ServiceAccount token and confines it to its namespace', async () => {
    const namespace = uniqueName('ns');
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const account = await cluster.asServiceAccount(namespace, 'cirrus');
    const accountCore = account.makeApiClient(CoreV1Api);
    assert.equal(await statusOf(accountCore.listNamespacedService({ namespace })), 403);

    const rbac = cluster.admin.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace,
      body: { metadata: { name: 'services' }, rules: [{ apiGroups: [''], resources: ['services'], verbs: ['list'] }] },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'services' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'services' },
        subjects: [{ kind: 'ServiceAccount', name: 'cirrus', namespace }],
      },
    });
    await waitFor(async () => (await statusOf(accountCore.listNamespacedService({ namespace }))) === 200);
    assert.equal(await statusOf(accountCore.listNamespacedService({ namespace: 'default' })), 403);
  });
});

function hasUninitializedTaint(node: V1Node): boolean {
  return (node.spec?.taints ?? []).some(
    (t) => t.key === uninitializedTaint.key && t.effect === uninitializedTaint.effect,
  );
}

// client-node returns class instances; compare their JSON form.
function plain(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
