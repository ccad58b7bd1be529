// The start-up checks of the commands that act on a cluster (app/cli/preflight.ts, the static
// provider's preflight): each message, against the real API server where one is involved; an
// unreachable server is a closed port. Each command exits 1 with the message before serving.

import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { main } from '../../app/cli/main.ts';
import {
  checkAccess,
  checkReachable,
  functionAccess,
  grantedBy,
  PreflightError,
  relayAccess,
} from '../../app/cli/preflight.ts';
import { catalogue } from '../../app/root.ts';
import { controlPlaneSkip, testCluster, uniqueName, type TestCluster } from '../harness/cluster.ts';
import { pino } from 'pino';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import { loadAll } from 'js-yaml';
import { formatAccess } from '../../shared/kube/access.ts';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

async function run(argv: string[], env: Record<string, string> = {}): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  const controller = new AbortController();
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env,
    signal: controller.signal,
  };
  const started = Date.now();
  // A command that got past its checks serves until aborted: stop it, so that the test fails on its code.
  const timer = setTimeout(() => {
    controller.abort();
  }, 15_000);
  try {
    const code = await main(argv, io);
    return { code, stdout, stderr, ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

// A port nothing listens on: bound, then closed.
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
  return port;
}

let dir: string;

async function kubeconfigFile(name: string, server: string, user: Record<string, unknown> = {}): Promise<string> {
  const path = join(dir, `${name}.kubeconfig`);
  const document = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'ctx',
  };
  await writeFile(path, JSON.stringify(document));
  return path;
}

const instances = 'instances:\n  - name: worker-1\n    addresses: [{ type: InternalIP, address: 10.0.0.11 }]\n';

async function inventory(name: string, allocationsNamespace?: string): Promise<string> {
  const path = join(dir, `${name}.yaml`);
  const allocations =
    allocationsNamespace === undefined ? '' : `  allocations:\n    namespace: ${allocationsNamespace}\n`;
  await writeFile(
    path,
    `${instances}loadBalancers:\n  pools:\n    - name: default\n      default: true\n      addresses: [192.0.2.0/28]\n${allocations}`,
  );
  return path;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cirrus-preflight-'));
});

describe('no cluster configured', () => {
  it('cirrus serve exits 1 saying no cluster is configured, instead of serving', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'cirrus-home-'));
    const saved = { HOME: process.env['HOME'], KUBECONFIG: process.env['KUBECONFIG'] };
    // client-node reads HOME and KUBECONFIG from the process's environment.
    process.env['HOME'] = empty;
    delete process.env['KUBECONFIG'];
    try {
      const ran = await run([
        'serve',
        'node-init',
        '--cloud-provider',
        'static',
        '--cloud-config',
        await inventory('none'),
        '--port',
        '0',
      ]);
      assert.equal(ran.code, 1, ran.stderr);
      assert.match(
        ran.stderr,
        /^cirrus serve: no Kubernetes cluster configured \(no --kubeconfig, KUBECONFIG unset, no ~\/\.kube\/config, not in a pod\): pass --kubeconfig/m,
      );
    } finally {
      process.env['HOME'] = saved.HOME;
      if (saved.KUBECONFIG !== undefined) process.env['KUBECONFIG'] = saved.KUBECONFIG;
    }
  });
});

describe('an API server that cannot be reached', () => {
  it('cirrus start: connection refused, naming the server and the kubeconfig, within a second or so', async () => {
    const port = await closedPort();
    const file = await kubeconfigFile('refused', `https://127.0.0.1:${port}`);
    const ran = await run([
      'start',
      '--kubeconfig',
      file,
      '--use-existing-cluster',
      '--cloud-provider',
      'static',
      '--cloud-config',
      await inventory('refused'),
      '--port',
      '0',
      '--log-level',
      'silent',
    ]);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(
      ran.stderr,
      new RegExp(
        `cirrus start: cannot reach the API server https://127\\.0\\.0\\.1:${port} \\(--kubeconfig ${file}, context ctx\\): connection refused \\(.*ECONNREFUSED.*\\): nothing listens there; start the cluster, or point --kubeconfig or KUBECONFIG at a cluster that runs`,
      ),
    );
    assert.ok(ran.ms < 5_000, `took ${ran.ms} ms`);
  });

  it('cirrus serve: connection refused', async () => {
    const file = await kubeconfigFile('serve-refused', `https://127.0.0.1:${await closedPort()}`);
    const ran = await run([
      'serve',
      'node-init',
      '--kubeconfig',
      file,
      '--cloud-provider',
      'static',
      '--cloud-config',
      await inventory('serve-refused'),
      '--port',
      '0',
      '--log-level',
      'silent',
    ]);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(ran.stderr, /^cirrus serve: cannot reach the API server .*: connection refused/m);
  });

  it('cirrus relay: connection refused', async () => {
    const file = await kubeconfigFile('relay-refused', `https://127.0.0.1:${await closedPort()}`);
    const ran = await run([
      'relay',
      '--kubeconfig',
      file,
      '--to',
      'all=http://127.0.0.1:9',
      '--port',
      '0',
      '--log-level',
      'silent',
    ]);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(ran.stderr, /^cirrus relay: cannot reach the API server .*: connection refused/m);
  });

  it('cirrus conformance --kubeconfig: connection refused', async () => {
    const file = await kubeconfigFile('conformance-refused', `https://127.0.0.1:${await closedPort()}`);
    const ran = await run([
      'conformance',
      '--kubeconfig',
      file,
      '--cloud-provider',
      'static',
      '--cloud-config',
      await inventory('conformance-refused'),
      '--log-level',
      'silent',
    ]);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(ran.stderr, /^cirrus conformance: cannot reach the API server .*: connection refused/m);
  });

  it('an http:// server URL is refused by the client: says to use https://', async () => {
    const file = await kubeconfigFile('http', `http://127.0.0.1:${await closedPort()}`);
    const error = await checkReachable(loadFile(file), 'test').then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof PreflightError);
    assert.match(
      error.message,
      /the server URL is http:\/\/, which the client refuses without insecure-skip-tls-verify: use the https:\/\/ URL/,
    );
  });

  it('a server URL with a bad port: says the URL is not usable', async () => {
    const file = await kubeconfigFile('badport', 'https://127.0.0.1:99999');
    const error = await checkReachable(loadFile(file), 'test').then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof PreflightError);
    assert.match(error.message, /the server URL is not usable \(.*\); fix the cluster's server: in the kubeconfig/);
  });

  it('no such host', async () => {
    const file = await kubeconfigFile('nohost', 'https://no-such-host.invalid:6443');
    const error = await checkReachable(loadFile(file), 'test').then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof PreflightError);
    assert.match(error.message, /: no such host \(.*no-such-host\.invalid.*\); point --kubeconfig/);
  });

  it('a server that accepts the connection and never answers: no answer within the timeout', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as { port: number };
      const file = await kubeconfigFile('silent', `https://127.0.0.1:${port}`);
      const error = await checkReachable(loadFile(file), 'test', 300).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error instanceof PreflightError);
      assert.match(error.message, /no answer within 0\.3 s: the host does not answer/);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});

// The loader the commands use.
function loadFile(path: string): KubeConfig {
  return loadKubeConfig(path);
}

describe('an API server that refuses', { skip: controlPlaneSkip }, () => {
  let cluster: TestCluster;
  before(async () => {
    cluster = await testCluster();
  });

  it('the wrong CA: TLS failed, naming certificate-authority', async () => {
    const file = await kubeconfigFile('tls', cluster.info.server);
    const error = await checkReachable(loadFile(file), 'test').then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof PreflightError);
    assert.match(error.message, /: TLS failed \(.*\): the kubeconfig's certificate-authority\(-data\) does not match/);
  });

  it('a token the API server does not accept: 401, get a fresh kubeconfig', async () => {
    const ca = (await readFile(cluster.info.ca.cert)).toString('base64');
    const path = join(dir, 'badtoken.kubeconfig');
    await writeFile(
      path,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: cluster.info.server, 'certificate-authority-data': ca } }],
        users: [{ name: 'u', user: { token: 'not-a-token' } }],
        contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'ctx',
      }),
    );
    const ran = await run([
      'start',
      '--kubeconfig',
      path,
      '--use-existing-cluster',
      '--cloud-provider',
      'static',
      '--cloud-config',
      await inventory('badtoken'),
      '--port',
      '0',
      '--log-level',
      'silent',
    ]);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(
      ran.stderr,
      /cirrus start: cannot reach the API server .*: 401 Unauthorized: the API server does not accept the credentials of the kubeconfig's user .*get a fresh kubeconfig/,
    );
  });

  it('a user without the rights: the message lists what each function and the relay lacks', async () => {
    const kubeConfig = await cluster.as({ user: uniqueName('nobody') });
    const error = await checkAccess(
      kubeConfig,
      'test',
      [
        ...functionAccess(catalogue.filter((e) => e.name === 'node-init')),
        relayAccess({ namespace: 'kube-system', name: 'cirrus-relay' }),
      ],
      grantedBy.start,
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof PreflightError);
    assert.match(error.message, /^the kubeconfig's user \(test\) lacks rights that will be used:$/m);
    assert.match(
      error.message,
      /^ {2}node-init: get nodes, list nodes, patch nodes, patch nodes\/status, create events in default$/m,
    );
    assert.match(
      error.message,
      /^ {2}the relay: list nodes, watch nodes, list services, watch services, get leases\.coordination\.k8s\.io\/cirrus-relay in kube-system, update leases\.coordination\.k8s\.io\/cirrus-relay in kube-system, create leases\.coordination\.k8s\.io in kube-system$/m,
    );
  });

  it('the admin has every right the functions and the relay use', async () => {
    await checkAccess(
      cluster.admin,
      'test',
      [...functionAccess(catalogue), relayAccess({ namespace: 'kube-system', name: 'cirrus-relay' })],
      grantedBy.start,
    );
  });

  // Each command's deployment holds the Roles to grant: start's is the classic one (issue 43: the
  // message pointed every command at deploy/knative).
  const grants: [string, string[], RegExp][] = [
    [
      'start',
      ['start', '--use-existing-cluster', '--cloud-provider', 'static'],
      /^grant them \(deploy\/standalone\/ccm\/rbac\.yaml holds the ClusterRole of cirrus start\), or use a kubeconfig that has them$/m,
    ],
    [
      'serve',
      ['serve', 'node-lifecycle', '--cloud-provider', 'static'],
      /^grant them \(deploy\/knative\/node-lifecycle\/rbac\/ holds the function's Roles\), or use a kubeconfig that has them$/m,
    ],
    [
      'relay',
      ['relay', '--to', 'all=http://127.0.0.1:9'],
      /^grant them \(deploy\/knative\/relay\/rbac\.yaml holds the relay's Roles\), or use a kubeconfig that has them$/m,
    ],
  ];
  for (const [command, argv, message] of grants) {
    it(`cirrus ${command} without the rights: exits 1 pointing at the Roles of its own deployment`, async () => {
      const user = uniqueName('nobody');
      const path = join(dir, `${user}.kubeconfig`);
      await writeFile(path, (await cluster.as({ user })).exportConfig());
      const cloudConfig = command === 'relay' ? [] : ['--cloud-config', await inventory(user)];
      const ran = await run([...argv, '--kubeconfig', path, ...cloudConfig, '--port', '0', '--log-level', 'silent']);
      assert.equal(ran.code, 1, ran.stderr);
      assert.match(ran.stderr, /lacks rights that will be used:$/m);
      assert.match(ran.stderr, message);
      assert.equal(
        /deploy\/(knative|standalone)/.exec(ran.stderr)?.[1],
        command === 'start' ? 'standalone' : 'knative',
      );
    });
  }
});

describe("the static provider's preflight", { skip: controlPlaneSkip }, () => {
  let cluster: TestCluster;
  let core: CoreV1Api;
  before(async () => {
    cluster = await testCluster();
    core = cluster.admin.makeApiClient(CoreV1Api);
  });

  async function provider(namespace: string): Promise<import('../../shared/cloud/provider.ts').CloudProvider> {
    const { initCloudProvider } = await import('../../shared/cloud/registry.ts');
    return initCloudProvider('static', await inventory(namespace, namespace), {
      signal: AbortSignal.timeout(60_000),
      log: pino({ level: 'silent' }),
      kubeConfig: cluster.admin,
    });
  }

  it('creates the allocations namespace when it is missing and the identity may', async () => {
    const namespace = uniqueName('alloc');
    const cloud = await provider(namespace);
    const report = await cloud.preflight?.({
      kubeConfig: cluster.admin,
      mayCreate: true,
      loadBalancers: true,
      log: pino({ level: 'silent' }),
      signal: AbortSignal.timeout(10_000),
    });
    assert.deepEqual(report, { created: [`namespace ${namespace}`], problems: [] });
    await core.readNamespace({ name: namespace });
  });

  it('without a function that uses load balancers it checks nothing', async () => {
    const namespace = uniqueName('alloc');
    const cloud = await provider(namespace);
    const report = await cloud.preflight?.({
      kubeConfig: cluster.admin,
      mayCreate: true,
      loadBalancers: false,
      log: pino({ level: 'silent' }),
      signal: AbortSignal.timeout(10_000),
    });
    assert.deepEqual(report, { created: [], problems: [] });
    await assert.rejects(core.readNamespace({ name: namespace }), (e: { code?: number }) => e.code === 404);
  });

  it('a missing namespace an identity may not create: cirrus serve service-lb exits 1 naming it and the fix', async () => {
    const namespace = uniqueName('alloc');
    const user = uniqueName('reader');
    const rbac = cluster.admin.makeApiClient(RbacAuthorizationV1Api);
    // Every right service-lb uses, and reading namespaces; not creating them.
    await rbac.createClusterRole({
      body: {
        metadata: { name: user },
        rules: [
          { apiGroups: [''], resources: ['services', 'nodes', 'namespaces'], verbs: ['get', 'list'] },
          { apiGroups: [''], resources: ['services/status'], verbs: ['patch'] },
          { apiGroups: [''], resources: ['events'], verbs: ['create'] },
        ],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: user },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user },
        subjects: [{ kind: 'User', name: user, apiGroup: 'rbac.authorization.k8s.io' }],
      },
    });
    const kubeConfig = await cluster.as({ user });
    const path = join(dir, `${user}.kubeconfig`);
    await writeFile(path, kubeConfig.exportConfig());
    const ran = await run([
      'serve',
      'service-lb',
      '--kubeconfig',
      path,
      '--cloud-provider',
      'static',
      '--cloud-config',
      await inventory(namespace, namespace),
      '--port',
      '0',
      '--log-level',
      'silent',
    ]);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(
      ran.stderr,
      new RegExp(
        `^cirrus serve: the static provider records load balancer addresses in ConfigMaps ${namespace}/cirrus-lb-ipam-0 to cirrus-lb-ipam-7 \\(.*\\), but namespace ${namespace} does not exist, and this identity may not create namespaces: create it \\(kubectl create namespace ${namespace}\\), or set loadBalancers\\.allocations\\.namespace`,
        'm',
      ),
    );
  });

  it('a namespace being deleted: cirrus serve service-lb exits 1 saying so, not with advice on rights (issue 43)', async () => {
    const namespace = uniqueName('alloc');
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'cirrus-lb-ipam-0' } } });
    await core.deleteNamespace({ name: namespace });
    // This API server runs no namespace controller (nor does cirrus cluster's): it stays Terminating.
    const terminating = await core.readNamespace({ name: namespace });
    assert.equal(terminating.status?.phase, 'Terminating');
    const ran = await run([
      ...['serve', 'service-lb', '--kubeconfig', cluster.info.adminKubeconfig, '--cloud-provider', 'static'],
      ...['--cloud-config', await inventory(namespace, namespace), '--port', '0', '--log-level', 'silent'],
    ]);
    assert.equal(ran.code, 1, ran.stderr);
    assert.match(
      ran.stderr,
      new RegExp(
        `^cirrus serve: the static provider records load balancer addresses in ConfigMaps ${namespace}/cirrus-lb-ipam-0 ` +
          `to cirrus-lb-ipam-7 \\(.*\\), but namespace ${namespace} is being deleted \\(Terminating since ` +
          '\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\), and the API server creates nothing in a namespace being deleted: wait until ' +
          `it is gone \\(kubectl get namespace ${namespace}\\), or set loadBalancers\\.allocations\\.namespace .*` +
          "A control plane without a namespace controller, such as cirrus cluster's, never finishes the deletion: " +
          'docs/kind\\.md says how to remove the namespace there$',
        'm',
      ),
    );
    assert.doesNotMatch(ran.stderr, /grant them|rbac/);
    // What docs/kind.md does on such a control plane: empty the namespace, then finalize it.
    await core.deleteNamespacedConfigMap({ namespace, name: 'cirrus-lb-ipam-0' });
    await core.replaceNamespaceFinalize({ name: namespace, body: { ...terminating, spec: { finalizers: [] } } });
    await assert.rejects(core.readNamespace({ name: namespace }), (e: { code?: number }) => e.code === 404);
  });

  it('a namespace that exists but rights on the ConfigMap missing: names them', async () => {
    const namespace = uniqueName('alloc');
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const cloud = await provider(namespace);
    const kubeConfig = await cluster.as({ user: uniqueName('nobody') });
    const report = await cloud.preflight?.({
      kubeConfig,
      mayCreate: true,
      loadBalancers: true,
      log: pino({ level: 'silent' }),
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(report?.problems.length, 1);
    assert.match(
      String(report.problems[0]),
      new RegExp(
        // The single ConfigMap of earlier versions (moved into the parts), then the eight parts (ADR 0028).
        'but this identity may not ' +
          ['cirrus-lb-ipam', ...Array.from({ length: 8 }, (_, i) => `cirrus-lb-ipam-${i}`)]
            .map((name) => `get configmaps/${name} in ${namespace}, patch configmaps/${name} in ${namespace}`)
            .join(', ') +
          `, create configmaps in ${namespace}: grant them \\(the Role of static-provider/rbac\\.yaml, and the ` +
          'ConfigMaps of allocations\\.yaml beside it: in deploy/standalone/ for cirrus start, in deploy/knative/ for ' +
          'cirrus serve service-lb\\)$',
      ),
    );
  });
});

interface RbacDocument {
  kind?: string;
  metadata?: { namespace?: string };
  rules?: { apiGroups?: string[]; resources?: string[]; verbs?: string[]; resourceNames?: string[] }[];
}

describe("the functions' declared rights (the catalogue's access)", () => {
  for (const entry of catalogue) {
    it(`${entry.name}: exactly what deploy/knative/${entry.name}/rbac/rbac.yaml grants`, async () => {
      const file = new URL(`../../deploy/knative/${entry.name}/rbac/rbac.yaml`, import.meta.url);
      const documents = loadAll(await readFile(file, 'utf8')) as RbacDocument[];
      const granted = documents
        .filter((d) => d.kind === 'ClusterRole' || d.kind === 'Role')
        .flatMap((d) =>
          (d.rules ?? []).flatMap((rule) =>
            (rule.resources ?? []).flatMap((resource) =>
              (rule.verbs ?? []).map((verb) =>
                formatAccess({
                  group: rule.apiGroups?.[0] ?? '',
                  resource,
                  verb,
                  ...(d.kind === 'Role' && d.metadata?.namespace !== undefined
                    ? { namespace: d.metadata.namespace }
                    : {}),
                }),
              ),
            ),
          ),
        );
      assert.deepEqual(entry.access.map(formatAccess).sort(), [...new Set(granted)].sort());
    });
  }
});
