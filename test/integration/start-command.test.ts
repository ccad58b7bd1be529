// `cirrus start`, the README walk-through as a test: with no cluster configured it starts the
// local control plane and the whole CCM with the static provider and the example inventory; the
// example Node gets initialized and a LoadBalancer Service an address from the example pool, with
// no manual step; Ctrl-C leaves nothing behind.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { CoreV1Api, KubeConfig, loadYaml, type V1Node, type V1Service } from '@kubernetes/client-node';
import { catalogue } from '../../functions/catalogue.ts';
import { selectControllers } from '../../shared/catalogue.ts';
import { controlPlaneSkip } from '../harness/cluster.ts';
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
