// `cirrus serve` and `cirrus reconcile` as an operator runs them, against the real API server:
// node-init with the static provider initializes a tainted Node after one CloudEvent or one manual
// reconcile, and a dry run reports the same changes without making them; node-lifecycle runs an
// out-of-tree provider loaded with --provider-module.

import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { createNode, newNode, uninitialized, uninitializedTaint, withReady } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName, type TestCluster } from '../harness/cluster.ts';
import { signRequest } from '../../shared/wire/signing.ts';
import { partName, partOf } from '../../providers/static/allocations.ts';

const cli = new URL('../../bin/cirrus.js', import.meta.url).pathname;

interface Served {
  child: ChildProcess;
  url: string;
  logs: string[];
}

// Starts `cirrus serve …` (or another serving command) on a free port and resolves once it logs where it listens.
async function startServe(args: string[], command = 'serve'): Promise<Served> {
  const argv = [
    'setpriv',
    '--pdeathsig',
    'SIGTERM',
    '--',
    process.execPath,
    cli,
    command,
    ...args,
    '--port',
    '0',
    '--bind-address',
    '127.0.0.1',
  ];
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: string[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout });
  const exited = once(child, 'exit').then(() => {
    throw new Error(`cirrus serve exited early:\n${stderr}\n${logs.join('\n')}`);
  });
  const listening = (async () => {
    for await (const line of lines) {
      logs.push(line);
      const entry = JSON.parse(line) as { msg?: string; address?: string };
      if (entry.msg?.endsWith(' serving') && entry.address) return entry.address;
    }
    return '';
  })();
  const url = await Promise.race([listening, exited]);
  return { child, url, logs };
}

async function stop(served: Served): Promise<number | null> {
  const exited = once(served.child, 'exit') as Promise<[number | null]>;
  served.child.kill('SIGTERM');
  return (await exited)[0];
}

function isTainted(node: { spec?: { taints?: { key: string }[] } }): boolean {
  return (node.spec?.taints ?? []).some((t) => t.key === uninitializedTaint.key);
}

describe('cirrus serve', { skip: controlPlaneSkip }, () => {
  let cluster: TestCluster;
  let core: CoreV1Api;
  let dir: string;
  before(async () => {
    cluster = await testCluster();
    core = cluster.admin.makeApiClient(CoreV1Api);
    dir = await mkdtemp(join(tmpdir(), 'cirrus-serve-test-'));
  });

  describe('node-init with the static provider', () => {
    const [viaEvent, viaReconcile, viaCli] = [uniqueName('ev'), uniqueName('rc'), uniqueName('cli')];
    let served: Served;
    before(async () => {
      const inventory = join(dir, 'inventory.yaml');
      const machines = [viaEvent, viaReconcile, viaCli].map(
        (name, i) =>
          `  - { name: ${name}, instanceType: m1.small, zone: rack-a, region: dc-1, addresses: [{ type: InternalIP, address: 10.9.0.${i + 1} }] }`,
      );
      await writeFile(inventory, `instances:\n${machines.join('\n')}\n`);
      served = await startServe([
        'node-init',
        '--cloud-provider',
        'static',
        '--cloud-config',
        inventory,
        '--kubeconfig',
        cluster.info.adminKubeconfig,
      ]);
    });
    after(async () => {
      assert.equal(await stop(served), 0, 'a clean stop on SIGTERM');
    });

    it('initializes a node after one CloudEvent (ApiServerSource binary mode)', async () => {
      const node = await createNode(core, newNode(viaEvent, uninitialized));
      const response = await fetch(served.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'ce-specversion': '1.0',
          'ce-id': 'test-1',
          'ce-source': cluster.info.server,
          'ce-type': 'dev.knative.apiserver.resource.add',
          'ce-subject': `/apis/v1/namespaces//nodes/${viaEvent}`,
          'ce-kind': 'Node',
          'ce-name': viaEvent,
          'ce-apiversion': 'v1',
        },
        body: JSON.stringify(node),
      });
      assert.equal(response.status, 202, await response.clone().text());
      const initialized = await core.readNode({ name: viaEvent });
      assert.equal(isTainted(initialized), false);
      assert.equal(initialized.spec?.providerID, `static://${viaEvent}`);
      assert.equal(initialized.metadata?.labels?.['topology.kubernetes.io/zone'], 'rack-a');
    });

    it('shows the changes on a dry run, makes them on POST /reconcile', async () => {
      await createNode(core, newNode(viaReconcile, uninitialized));
      const dry = await fetch(`${served.url}/reconcile?dryRun=true`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: viaReconcile }),
      });
      assert.equal(dry.status, 200);
      const planned = (await dry.json()) as {
        dryRun: boolean;
        objects: { result: string; changes: { action: string }[] }[];
      };
      assert.equal(planned.dryRun, true);
      assert.deepEqual(
        planned.objects[0]?.changes.map((c) => c.action),
        ['patch', 'patch-status', 'event'],
      );
      assert.equal(isTainted(await core.readNode({ name: viaReconcile })), true, 'the dry run changed nothing');

      const real = await fetch(`${served.url}/reconcile`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: viaReconcile }),
      });
      const done = (await real.json()) as typeof planned;
      assert.equal(real.status, 200);
      assert.deepEqual(
        done.objects[0]?.changes.map((c) => c.action),
        ['patch', 'patch-status', 'event'],
      );
      assert.equal(isTainted(await core.readNode({ name: viaReconcile })), false);
    });

    it('is driven by `cirrus reconcile node <name>`', async () => {
      await createNode(core, newNode(viaCli, uninitialized));
      const result = spawnSync(
        process.execPath,
        [cli, 'reconcile', 'node', viaCli, '--url', served.url, '-o', 'json'],
        {
          encoding: 'utf8',
        },
      );
      assert.equal(result.status, 0, result.stderr);
      assert.equal((JSON.parse(result.stdout) as { objects: { result: string }[] }).objects[0]?.result, 'initialized');
      assert.equal(isTainted(await core.readNode({ name: viaCli })), false);
    });

    it('warned at start that it serves without a signing secret', () => {
      const warnings = served.logs
        .map((line) => JSON.parse(line) as { level?: string; msg?: string })
        .filter((entry) => entry.level === 'warn')
        .map((entry) => entry.msg);
      assert.deepEqual(warnings, [
        'no signing secret (--signing-secret-file): reconcile requests are not authenticated, anyone who can reach this server can make it reconcile',
      ]);
    });

    it('answers 400 naming the problem for a malformed event, and changes nothing', async () => {
      const response = await fetch(served.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'ce-specversion': '1.0' },
        body: '{}',
      });
      assert.equal(response.status, 400);
      assert.match(await response.text(), /type|id|source/);
    });
  });

  it('service-lb with static pools: an address, the finalizer and Events; deletion releases it', async () => {
    const namespace = uniqueName('svc');
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await createNode(core, newNode(uniqueName('lb-node')));
    const config = join(dir, 'pools.yaml');
    const configMap = uniqueName('ipam');
    await writeFile(
      config,
      [
        'instances: []',
        'loadBalancers:',
        '  pools: [{ name: lab, default: true, addresses: [198.51.100.20-198.51.100.21] }]',
        `  allocations: { namespace: ${namespace}, configMap: ${configMap} }`,
        '',
      ].join('\n'),
    );
    const served = await startServe([
      'service-lb',
      '--cloud-provider',
      'static',
      '--cloud-config',
      config,
      '--kubeconfig',
      cluster.info.adminKubeconfig,
    ]);
    try {
      await core.createNamespacedService({
        namespace,
        body: { metadata: { name: 'web' }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } },
      });
      const cli = (...args: string[]): { status: number | null; stdout: string; stderr: string } =>
        spawnSync(
          process.execPath,
          [
            new URL('../../bin/cirrus.js', import.meta.url).pathname,
            'reconcile',
            'service',
            `${namespace}/web`,
            '--url',
            served.url,
            ...args,
          ],
          { encoding: 'utf8' },
        );
      assert.equal(cli().status, 0);
      const service = await core.readNamespacedService({ namespace, name: 'web' });
      assert.equal(service.status?.loadBalancer?.ingress?.[0]?.ip, '198.51.100.20');
      assert.ok(service.metadata?.finalizers?.includes('service.kubernetes.io/load-balancer-cleanup'));
      const reasons = (await core.listNamespacedEvent({ namespace })).items.map((e) => e.reason).sort();
      assert.deepEqual(reasons, ['EnsuredLoadBalancer', 'EnsuringLoadBalancer']);
      // The address's claim is in its block's part of the record (ADR 0028).
      const part = partName(configMap, partOf('198.51.100.20') ?? -1);
      const allocations = await core.readNamespacedConfigMap({ namespace, name: part });
      assert.equal(Object.keys(allocations.data ?? {}).length, 1);

      await core.deleteNamespacedService({ namespace, name: 'web' });
      const deleted = cli();
      assert.equal(deleted.status, 0, deleted.stderr);
      // Readably: the heading, then a line per object, its key and result, and each change made.
      assert.match(
        deleted.stdout,
        new RegExp(`^service-lb: reconciled 1 object\\nService/${namespace}/web: deleted\\n`),
      );
      await assert.rejects(core.readNamespacedService({ namespace, name: 'web' }), { code: 404 });
      const released = await core.readNamespacedConfigMap({ namespace, name: part });
      assert.equal(Object.keys(released.data ?? {}).length, 0);
    } finally {
      assert.equal(await stop(served), 0);
    }
  });

  it('routes: programs a route for a node with a pod CIDR and sets NetworkUnavailable; a dry run lists the same', async () => {
    const name = uniqueName('pods');
    await createNode(core, { ...newNode(name), spec: { podCIDR: '10.244.7.0/24', podCIDRs: ['10.244.7.0/24'] } });
    const served = await startServe([
      'routes',
      '--cloud-provider',
      'fake',
      '--cluster-cidr',
      '10.244.0.0/16',
      '--kubeconfig',
      cluster.info.adminKubeconfig,
    ]);
    try {
      const post = async (
        query: string,
      ): Promise<{ objects: { key: string; result: string; changes: { action: string }[] }[] }> => {
        const response = await fetch(`${served.url}/reconcile${query}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"all":true}',
        });
        assert.equal(response.status, 200, await response.clone().text());
        return response.json() as Promise<{
          objects: { key: string; result: string; changes: { action: string }[] }[];
        }>;
      };
      const actions = (report: Awaited<ReturnType<typeof post>>): string[] =>
        report.objects.find((o) => o.key === `Node/${name}`)?.changes.map((c) => c.action) ?? [];
      const dry = await post('?dryRun=true');
      assert.deepEqual(actions(dry), ['create-route', 'patch-status']);
      const unavailable = (await core.readNode({ name })).status?.conditions?.find(
        (c) => c.type === 'NetworkUnavailable',
      );
      assert.equal(unavailable, undefined, 'the dry run set no condition');

      assert.deepEqual(actions(await post('')), ['create-route', 'patch-status']);
      const condition = (await core.readNode({ name })).status?.conditions?.find(
        (c) => c.type === 'NetworkUnavailable',
      );
      assert.equal(condition?.status, 'False');
      assert.equal(condition.reason, 'RouteCreated');
      assert.deepEqual(actions(await post('')), [], 'the route exists now');
    } finally {
      assert.equal(await stop(served), 0);
    }
  });

  it('routes: refuses to start without a cluster CIDR, saying so', () => {
    const result = spawnSync(
      process.execPath,
      [cli, 'serve', 'routes', '--cloud-provider', 'fake', '--kubeconfig', cluster.info.adminKubeconfig],
      { encoding: 'utf8' },
    );
    assert.equal(result.status, 1);
    assert.match(result.stderr, /routes: no cluster CIDR is set/);
  });

  it('relay → node-init, signed: a tainted Node is initialized with no manual step; unsigned requests get 401', async () => {
    const name = uniqueName('relayed');
    const inventory = join(dir, 'relayed.yaml');
    await writeFile(
      inventory,
      `instances:\n  - { name: ${name}, zone: rack-r, addresses: [{ type: InternalIP, address: 10.9.9.9 }] }\n`,
    );
    const secret = join(dir, 'secret');
    await writeFile(secret, 'a shared secret\n');
    const kubeconfig = ['--kubeconfig', cluster.info.adminKubeconfig];
    const fn = await startServe([
      'node-init',
      '--cloud-provider',
      'static',
      '--cloud-config',
      inventory,
      '--signing-secret-file',
      secret,
      ...kubeconfig,
    ]);
    const relay = await startServe(
      ['--to', `node-init=${fn.url}`, '--leader-elect=false', '--signing-secret-file', secret, ...kubeconfig],
      'relay',
    );
    try {
      await createNode(core, newNode(name, uninitialized));
      const deadline = Date.now() + 15_000;
      while (isTainted(await core.readNode({ name }))) {
        assert.ok(Date.now() < deadline, 'the relay delivered the new Node to node-init within 15 s');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.equal((await core.readNode({ name })).metadata?.labels?.['topology.kubernetes.io/zone'], 'rack-r');
      const readyz = await fetch(`${relay.url}/readyz`);
      assert.equal(readyz.status, 200);

      const unsigned = spawnSync(process.execPath, [cli, 'reconcile', 'node', name, '--url', fn.url], {
        encoding: 'utf8',
      });
      assert.equal(unsigned.status, 1);
      assert.match(unsigned.stderr, /answered 401/);
      const signed = spawnSync(
        process.execPath,
        [cli, 'reconcile', 'node', name, '--url', fn.url, '--signing-secret-file', secret],
        { encoding: 'utf8' },
      );
      assert.equal(signed.status, 0, signed.stderr);
    } finally {
      assert.equal(await stop(relay), 0);
      assert.equal(await stop(fn), 0);
    }
  });

  it('signed: a captured dry run replayed with ?dryRun=false gets 401 and writes nothing', async () => {
    const name = uniqueName('replay');
    const inventory = join(dir, 'replay.yaml');
    await writeFile(
      inventory,
      `instances:\n  - { name: ${name}, zone: rack-q, addresses: [{ type: InternalIP, address: 10.9.9.10 }] }\n`,
    );
    const secret = 'a replayed secret';
    const secretFile = join(dir, 'replay-secret');
    await writeFile(secretFile, `${secret}\n`);
    const fn = await startServe([
      'node-init',
      '--cloud-provider',
      'static',
      '--cloud-config',
      inventory,
      '--signing-secret-file',
      secretFile,
      '--kubeconfig',
      cluster.info.adminKubeconfig,
    ]);
    try {
      assert.ok(!fn.logs.some((line) => line.includes('no signing secret')), 'no warning with a secret');
      await createNode(core, newNode(name, uninitialized));
      // What `cirrus reconcile node <name> --dry-run` sends, as someone on the path captured it.
      const body = JSON.stringify({ name });
      const headers = { 'content-type': 'application/json' };
      const captured = {
        ...headers,
        'x-cirrus-signature': signRequest(secret, { method: 'POST', url: '/reconcile?dryRun=true', headers, body }),
      };
      const post = (query: string): Promise<Response> =>
        fetch(`${fn.url}/reconcile${query}`, { method: 'POST', headers: captured, body });
      const replayed = await post('?dryRun=false');
      assert.equal(replayed.status, 401, await replayed.clone().text());
      assert.deepEqual(await replayed.json(), {
        error: 'unauthorized: signature does not match',
        code: 'CIRRUS_ERR_SIGNATURE_INVALID',
      });
      assert.equal((await post('')).status, 401, 'nor with the query left out');
      assert.equal(isTainted(await core.readNode({ name })), true, 'nothing was written');
      const dry = await post('?dryRun=true');
      assert.equal(dry.status, 200, await dry.clone().text());
      assert.equal(((await dry.json()) as { dryRun: boolean }).dryRun, true);
      assert.equal(isTainted(await core.readNode({ name })), true, 'a dry run writes nothing');
      const again = await post('?dryRun=true');
      assert.equal(again.status, 401, 'the captured request is accepted once');
      assert.equal(((await again.json()) as { code: string }).code, 'CIRRUS_ERR_SIGNATURE_REPLAYED');
      const misspelt = await fetch(`${fn.url}/reconcile?dryrun=true`, {
        method: 'POST',
        headers: {
          ...headers,
          'x-cirrus-signature': signRequest(secret, { method: 'POST', url: '/reconcile?dryrun=true', headers, body }),
        },
        body,
      });
      assert.equal(misspelt.status, 400, 'signed, but dryrun is not dryRun');
      const refusal = (await misspelt.json()) as { error: string; code: string };
      assert.match(refusal.error, /unknown query parameter "dryrun"/);
      assert.equal(refusal.code, 'CIRRUS_ERR_INVALID_QUERY');
      assert.equal(isTainted(await core.readNode({ name })), true);
      const written = spawnSync(
        process.execPath,
        [cli, 'reconcile', 'node', name, '--url', fn.url, '--signing-secret-file', secretFile],
        { encoding: 'utf8' },
      );
      assert.equal(written.status, 0, written.stderr);
      assert.equal(isTainted(await core.readNode({ name })), false, 'cirrus reconcile signs path and query');
    } finally {
      assert.equal(await stop(fn), 0);
    }
  });

  it('runs an out-of-tree provider given with --provider-module', async () => {
    const gone = uniqueName('gone');
    await createNode(core, newNode(gone, withReady('False')));
    const served = await startServe([
      'node-lifecycle',
      '--provider-module',
      'examples/out-of-tree-provider/naming-provider.ts',
      '--cloud-provider',
      'naming',
      '--cloud-config',
      'examples/out-of-tree-provider/naming.yaml',
      '--kubeconfig',
      cluster.info.adminKubeconfig,
    ]);
    try {
      const response = await fetch(`${served.url}/reconcile`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: gone }),
      });
      assert.equal(response.status, 200, await response.clone().text());
      assert.equal(((await response.json()) as { objects: { result: string }[] }).objects[0]?.result, 'deleted');
    } finally {
      assert.equal(await stop(served), 0);
    }
  });

  it('refuses to start with an unknown provider, listing the registered ones', () => {
    const result = spawnSync(
      process.execPath,
      [cli, 'serve', 'node-init', '--cloud-provider', 'nimbus', '--kubeconfig', cluster.info.adminKubeconfig],
      { encoding: 'utf8' },
    );
    assert.equal(result.status, 1);
    assert.match(result.stderr, /unknown cloud provider "nimbus"; registered: aws, fake, http, static/);
  });

  it('refuses to start with an invalid cloud-config, naming the file and the field', async () => {
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'instances:\n  - { name: w1, state: sleeping }\n');
    const result = spawnSync(
      process.execPath,
      [
        cli,
        'serve',
        'node-init',
        '--cloud-provider',
        'static',
        '--cloud-config',
        bad,
        '--kubeconfig',
        cluster.info.adminKubeconfig,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(result.status, 1);
    assert.match(result.stderr, new RegExp(`${bad.replaceAll('.', '\\.')}: instances\\[0\\]\\.state: `));
  });
});
