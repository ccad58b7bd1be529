// Issue 32, item 1, end to end: `cirrus start` (node-init and the relay in one process, against a
// control plane of this suite's own) under 1,000 slow unauthenticated clients at its listening
// port and 1,000 more at the functions' own port. The functions are on loopback only, and nothing
// unauthenticated holds a place among their requests in flight: the relay's deliveries go
// through, and new Nodes are initialized. How long a Node takes, created to initialized, idle and
// under attack (ten each), is printed: measured, not asserted (issue 32's goal, within 2×).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, loadYaml, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { ControlPlane, resolveAssets } from '../../tools/control-plane/index.ts';
import { controlPlaneSkip } from '../harness/cluster.ts';
import { quantile, startAttack, type Attack } from '../harness/slow-clients.ts';
import { loadKubeConfig } from '../../shared/kube/client.ts';

const cli = new URL('../../bin/cirrus.js', import.meta.url).pathname;

// One sample of the relay's path under `cirrus start`: worker-1 created (as the kubelet registers
// it) until it has its providerID and no uninitialized taint, in ms, polled every 20 ms; then
// deleted, and gone, for the next sample.
async function initializeOnce(core: CoreV1Api, timeoutMs: number): Promise<number> {
  const started = performance.now();
  await core.createNode({ body: loadYaml<V1Node>(readFileSync('examples/static/node.yaml', 'utf8')) });
  const node = await eventually(
    async () => {
      const read = await core.readNode({ name: 'worker-1' });
      return read.spec?.providerID === undefined ? undefined : read;
    },
    timeoutMs,
    20,
  );
  const ms = performance.now() - started;
  assert.equal(node.spec?.providerID, 'static://worker-1');
  assert.equal(
    node.spec.taints?.some((taint) => taint.key === 'node.cloudprovider.kubernetes.io/uninitialized'),
    false,
  );
  await core.deleteNode({ name: 'worker-1' });
  await eventually(
    () =>
      core.readNode({ name: 'worker-1' }).then(
        () => undefined,
        (error: unknown) => ((error as { code?: number }).code === 404 ? true : undefined),
      ),
    10_000,
    20,
  );
  return ms;
}

async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs: number, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

describe('cirrus start under slow unauthenticated clients', { skip: controlPlaneSkip, timeout: 180_000 }, () => {
  let plane: ControlPlane | undefined;
  let admin: KubeConfig;
  before(async () => {
    plane = await ControlPlane.start({ assets: await resolveAssets({ build: false }) });
    admin = loadKubeConfig(plane.info.adminKubeconfig);
  });
  after(() => plane?.stop());

  it('initializes new Nodes while 2,000 slow clients hold connections to its ports', async (t) => {
    const kubeconfig = plane?.info.adminKubeconfig ?? '';
    const args = ['start', '--kubeconfig', kubeconfig, '--use-existing-cluster', '--controllers', 'cloud-node'];
    const child = spawn(process.execPath, [cli, ...args, '--port', '0', '--bind-address', '127.0.0.1'], {
      env: { ...process.env, CIRRUS_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = once(child, 'exit');
    let stderr = '';
    const running = new Promise<void>((resolve) => {
      createInterface({ input: child.stderr }).on('line', (line) => {
        stderr += `${line}\n`;
        if (line.startsWith('cirrus running:')) resolve();
      });
      void exited.then(() => {
        resolve();
      });
    });
    t.after(async () => {
      child.kill('SIGINT');
      await exited;
    });
    await running;
    const functions = Number(/^ {2}functions .* at http:\/\/127\.0\.0\.1:(\d+)\//m.exec(stderr)?.[1] ?? 0);
    assert.ok(functions > 0, `cirrus start did not come up:\n${stderr}`);
    // Before the fix the functions listened at the configured port itself, and there was no probes line.
    const listening = Number(/^ {2}probes +http:\/\/127\.0\.0\.1:(\d+)/m.exec(stderr)?.[1] ?? functions);
    const core = admin.makeApiClient(CoreV1Api);
    // The relay's deliveries on an idle host, for comparison (issue 32's goal: within 2× under attack).
    const idle: number[] = [];
    for (let i = 0; i < 10; i += 1) idle.push(await initializeOnce(core, 30_000));
    const attacks: Attack[] = [];
    t.after(() => {
      for (const attack of attacks) attack.stop();
    });
    for (const port of [listening, functions])
      attacks.push(
        await startAttack({ port, path: '/node-init', slowBodies: 500, slowHeaders: 500, intervalMs: 2000 }),
      );
    // Every client has sent its headers: a host that admitted them would be full now.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    // Before the fix the first of these was not initialized within 30 s.
    const loaded: number[] = [];
    for (let i = 0; i < 10; i += 1) loaded.push(await initializeOnce(core, 30_000));
    const figures = (ms: number[]): string =>
      `p50 ${quantile(ms, 0.5).toFixed(0)} p99 ${quantile(ms, 0.99).toFixed(0)} (max of 10)`;
    t.diagnostic(
      `a new Node created to initialized, ms: idle ${figures(idle)}; under 2,000 slow clients ${figures(loaded)} ` +
        `(attacking connections opened: ${attacks.map((a) => a.opened()).join(' + ')})`,
    );
  });
});
