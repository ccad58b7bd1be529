// `cirrus start`, the README walk-through as a test: with no cluster configured it starts the
// local control plane and the whole CCM with the static provider and the example inventory; the
// example Node gets initialized and a LoadBalancer Service an address from the example pool, with
// no manual step; Ctrl-C leaves nothing behind. And start, the demo or any provider, never touches a
// cluster it did not start unless asked by --use-existing-cluster, naming the cluster it acts on before it acts.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import {
  CoreV1Api,
  KubeConfig,
  loadYaml,
  RbacAuthorizationV1Api,
  type V1Node,
  type V1Service,
} from '@kubernetes/client-node';
import { catalogue } from '../../functions/catalogue.ts';
import { selectControllers } from '../../shared/catalogue.ts';
import { kubeconfigFor } from '../../tools/control-plane/index.ts';
import { createNode, newNode, withReady } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { childPids, isRunning } from '../harness/processes.ts';

const cli = new URL('../../bin/cirrus.js', import.meta.url).pathname;

async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('--controllers', () => {
  const cases: [string[], string[]][] = [
    [['*'], ['node-init', 'node-lifecycle', 'service-lb', 'routes']],
    [
      ['*', '-route'],
      ['node-init', 'node-lifecycle', 'service-lb'],
    ],
    [
      ['-service', '*'],
      ['node-init', 'node-lifecycle', 'routes'],
    ],
    [
      ['cloud-node', 'service-lb-controller'],
      ['node-init', 'service-lb'],
    ],
    [['node-route-controller', '-node-route-controller'], ['routes']],
    [[], []],
  ];
  for (const [entries, want] of cases) {
    it(`[${entries.join(',')}] runs ${want.join(', ') || 'nothing'}`, () => {
      assert.deepEqual(
        selectControllers(catalogue, entries).map((entry) => entry.name),
        want,
      );
    });
  }

  it('names an unknown controller', () => {
    assert.throws(
      () => selectControllers(catalogue, ['*', '-bogus']),
      /^Error: "-bogus" is not in the list of known controllers/,
    );
  });
});

describe('cirrus start', { skip: controlPlaneSkip }, () => {
  it('runs the README walk-through against the embedded control plane, and stops cleanly', async () => {
    const env = { ...process.env };
    delete env['KUBECONFIG'];
    const command = [
      'setpriv',
      '--pdeathsig',
      'SIGTERM',
      '--',
      process.execPath,
      cli,
      'start',
      '--port',
      '0',
      '--bind-address',
      '127.0.0.1',
      '--log-level',
      'warn',
    ];
    const child = spawn(command[0] as string, command.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const running = new Promise<void>((resolve) => {
      createInterface({ input: child.stderr }).on('line', (line) => {
        stderr += `${line}\n`;
        if (line.startsWith('cirrus running:')) resolve();
      });
    });
    const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
    let kubeconfig = '';
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.startsWith('KUBECONFIG=')) kubeconfig = line.slice('KUBECONFIG='.length);
    });
    await Promise.race([
      running,
      exited.then(() => {
        throw new Error(`cirrus start exited:\n${stderr}`);
      }),
    ]);
    const children = childPids(child.pid ?? 0);
    try {
      const config = new KubeConfig();
      config.loadFromFile(kubeconfig);
      const core = config.makeApiClient(CoreV1Api);
      await core.createNode({ body: loadYaml<V1Node>(readFileSync('examples/static/node.yaml', 'utf8')) });
      await core.createNamespacedService({
        namespace: 'default',
        body: loadYaml<V1Service>(readFileSync('examples/static/service.yaml', 'utf8')),
      });
      const node = await eventually(async () => {
        const read = await core.readNode({ name: 'worker-1' });
        return read.spec?.providerID === undefined ? undefined : read;
      });
      assert.equal(node.spec?.providerID, 'static://worker-1');
      assert.equal(
        node.spec.taints?.some((t) => t.key === 'node.cloudprovider.kubernetes.io/uninitialized'),
        false,
      );
      const ip = await eventually(
        async () =>
          (await core.readNamespacedService({ namespace: 'default', name: 'web' })).status?.loadBalancer?.ingress?.[0]
            ?.ip,
      );
      assert.equal(ip, '192.0.2.1');
      const reasons = (await core.listNamespacedEvent({ namespace: 'default' })).items.map((e) => e.reason);
      assert.ok(reasons.includes('Synced') && reasons.includes('EnsuredLoadBalancer'), reasons.join(','));
    } finally {
      child.kill('SIGINT');
      const [code] = await exited;
      assert.equal(code, 0, stderr);
    }
    assert.ok(children.length >= 2, 'etcd and kube-apiserver were children of cirrus start');
    for (const pid of children) assert.equal(isRunning(pid), false, `pid ${pid} still runs`);
  });
});

// The suite's cluster stands for an operator's real one. cirrus start reaches it as a user who may
// delete one Node only (and read Nodes, and write Events): should the demo act on the wrong
// cluster, it can hurt nothing of the other test files running against it at the same time.
describe('cirrus start and a cluster it did not start', { skip: controlPlaneSkip }, () => {
  /** A NotReady Node that no example machine backs, on the suite's cluster, and a kubeconfig that may delete only it. */
  async function strayNode(): Promise<{ core: CoreV1Api; node: V1Node; kubeconfig: string; server: string }> {
    const cluster = await testCluster();
    const core = cluster.admin.makeApiClient(CoreV1Api);
    const name = uniqueName('worker-9');
    const node = await createNode(core, newNode(name, withReady('False')));
    const user = uniqueName('operator');
    const rbac = cluster.admin.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRole({
      body: {
        metadata: { name: user },
        rules: [
          { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
          { apiGroups: [''], resources: ['nodes'], verbs: ['delete', 'patch'], resourceNames: [name] },
          { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        ],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: user },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    return { core, node, kubeconfig: await kubeconfigFor(cluster.info, { user }), server: cluster.info.server };
  }

  /**
   * `cirrus start <args>` with KUBECONFIG=`kubeconfig`, as a user would run it: its stderr lines as
   * they come, the kubeconfig of the control plane it started (if any), and a way to wait for a line.
   */
  function start(args: string[], kubeconfig: string) {
    const env = { ...process.env, KUBECONFIG: kubeconfig };
    const command = ['setpriv', '--pdeathsig', 'SIGTERM', '--', process.execPath, cli, 'start', '--port', '0'];
    const child = spawn(command[0] as string, [...command.slice(1), ...args, '--log-level', 'warn'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let ended = false;
    createInterface({ input: child.stderr }).on('line', (line) => lines.push(line));
    const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
    void exited.then(() => (ended = true));
    let ownKubeconfig: string | undefined;
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.startsWith('KUBECONFIG=')) ownKubeconfig = line.slice('KUBECONFIG='.length);
    });
    // The first line `pick` accepts; fails (rather than hangs) when start exits or never says it.
    const line = async (pick: (line: string) => boolean): Promise<string> => {
      const deadline = Date.now() + 120_000;
      for (;;) {
        const found = lines.find(pick);
        if (found !== undefined) return found;
        assert.ok(!ended && Date.now() < deadline, `no such line from cirrus start:\n${lines.join('\n')}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    // Ctrl-C after a pass; after a failure SIGKILL, as a start acting where it must not may not stop on Ctrl-C.
    const stop = async (passed: boolean): Promise<void> => {
      if (!ended) child.kill(passed ? 'SIGINT' : 'SIGKILL');
      const [code] = await exited;
      if (passed) assert.equal(code, 0, lines.join('\n'));
    };
    return { lines, own: () => ownKubeconfig, line, stop };
  }

  const acting = (line: string): boolean => line.startsWith('cirrus start: acting on cluster ');
  const running = (line: string): boolean => line.startsWith('cirrus running:');

  async function deleted(core: CoreV1Api, name: string): Promise<true | undefined> {
    return core.readNode({ name }).then(
      () => undefined,
      () => true,
    );
  }

  // The demo, and any provider: the fake one's empty cloud deleted a NotReady Node of the cluster
  // KUBECONFIG named within 15 s (issue 38, finding 5).
  for (const { what, args, said } of [
    { what: 'the demo', args: [], said: 'the demo \\(no --cloud-provider given\\)' },
    { what: 'the fake provider', args: ['--cloud-provider', 'fake'], said: 'cirrus start \\(provider fake\\)' },
  ])
    it(`runs ${what} on a control plane of its own, leaving the cluster KUBECONFIG names untouched, and says so`, async () => {
      const { core, node, kubeconfig } = await strayNode();
      const name = node.metadata?.name ?? '';
      const demo = start(args, kubeconfig);
      let passed = false;
      try {
        assert.match(
          await demo.line(acting),
          /^cirrus start: acting on cluster https:\/\/127\.0\.0\.1:\d+, context \S+ \(the local control plane started for this run/,
        );
        await demo.line(running);
        const ownKubeconfig = demo.own();
        assert.ok(ownKubeconfig, 'it started a control plane of its own');
        // The same stray Node on the demo's own cluster is deleted: the demo runs, and acts there.
        const own = new KubeConfig();
        own.loadFromFile(ownKubeconfig);
        const ownCore = own.makeApiClient(CoreV1Api);
        // The demo may delete it before createNode's read-back (404): that is the outcome looked for.
        await createNode(ownCore, newNode(name, withReady('False'))).catch((error: unknown) => {
          if ((error as { code?: number }).code !== 404) throw error;
        });
        await eventually(() => deleted(ownCore, name));
        passed = true;
      } finally {
        await demo.stop(passed);
      }
      const after = await core.readNode({ name });
      assert.equal(after.metadata?.resourceVersion, node.metadata?.resourceVersion, 'the Node is unchanged');
      const text = demo.lines.join('\n');
      assert.match(
        text,
        new RegExp(
          `^cirrus start: KUBECONFIG=${kubeconfig} is not used: ${said} acts on an existing cluster only with --use-existing-cluster.*add --use-existing-cluster`,
          'm',
        ),
      );
    });

  it('acts on that cluster with --use-existing-cluster, naming it (server, context) before it acts', async () => {
    const { core, node, kubeconfig, server } = await strayNode();
    const name = node.metadata?.name ?? '';
    const args = ['--use-existing-cluster', '--controllers', 'cloud-node-lifecycle', '--leader-elect=false'];
    const demo = start(args, kubeconfig);
    let passed = false;
    try {
      await demo.line(running);
      await eventually(() => deleted(core, name));
      passed = true;
    } finally {
      await demo.stop(passed);
    }
    assert.equal(demo.own(), undefined, 'no control plane of its own');
    const context = new KubeConfig();
    context.loadFromFile(kubeconfig);
    const named = demo.lines.findIndex(
      (line) =>
        line ===
        `cirrus start: acting on cluster ${server}, context ${context.getCurrentContext()} (KUBECONFIG=${kubeconfig})`,
    );
    assert.ok(named >= 0, demo.lines.join('\n'));
    assert.ok(
      named < demo.lines.findIndex((line) => line.startsWith('cirrus running:')),
      'named before the functions and the relay run',
    );
  });
});
