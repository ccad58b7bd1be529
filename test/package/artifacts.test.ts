// The one-role artifacts of scripts/build.ts, beside the image (test/deploy/manifests.test.ts) and
// the Lambda handlers (test/deploy/serverless.test.ts): each function's command line serves that
// function and refuses the others, naming what it lacks; the relay's runs the relay against the
// real control plane until it is ready. Built into a temporary folder with no node_modules above it.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { catalogue } from '../../functions/catalogue.ts';
import { freePort } from '../../tools/control-plane/processes.ts';
import { build } from '../../scripts/build.ts';
import { controlPlaneSkip, testCluster } from '../harness/cluster.ts';

const names = catalogue.map((entry) => entry.name);

// `cirrus serve` checks at start that it reaches its cluster and holds the rights its function
// uses: the suite's API server (serving, a function calls nothing until asked).
describe('the one-role artifacts', { skip: controlPlaneSkip }, () => {
  let dist: string;
  let kubeconfig: string;
  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cirrus-artifacts-'));
    dist = join(dir, 'dist');
    kubeconfig = (await testCluster()).info.adminKubeconfig;
    await build(['functions', 'relay'], dist);
  });
  after(async () => {
    await rm(join(dist, '..'), { recursive: true, force: true });
  });

  for (const name of names) {
    it(`functions/${name} serves ${name}, and no other function nor the relay`, async () => {
      const cli = join(dist, `functions/${name}/cirrus.js`);
      const args = ['--cloud-provider', 'fake', '--cluster-cidr', '10.244.0.0/16', '--kubeconfig', kubeconfig];
      await serving(cli, ['serve', name, ...args, '--port', '0', '--bind-address', '127.0.0.1']);
      const other = names.find((n) => n !== name) ?? '';
      const refused = spawnSync(process.execPath, [cli, 'serve', other, ...args, '--port', '0'], { encoding: 'utf8' });
      assert.equal(refused.status, 1);
      assert.match(
        refused.stderr,
        new RegExp(`functions/${other}/index\\.ts is not in this artifact \\(functions/${name}\\)`),
      );
      const relay = spawnSync(process.execPath, [cli, 'relay', '--to', `${name}=http://127.0.0.1:1`], {
        encoding: 'utf8',
      });
      assert.equal(relay.status, 1);
      assert.match(relay.stderr, /app\/cli\/relay\.ts is not in this artifact/);
    });
  }

  it('relay runs the relay, and serves no function', async () => {
    const cluster = await testCluster();
    const cli = join(dist, 'relay/cirrus.js');
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [cli, 'relay', '--to', `${names[0] ?? ''}=http://127.0.0.1:1`, '--leader-elect=false'].concat(
        ['--kubeconfig', cluster.info.adminKubeconfig, '--port', String(port), '--bind-address', '127.0.0.1'],
        ['--log-level', 'warn'],
      ),
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, 'exit') as Promise<[number | null]>;
    try {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const ready = await fetch(`http://127.0.0.1:${String(port)}/readyz`).catch(() => undefined);
        if (ready?.status === 200) break;
        assert.equal(child.exitCode, null, `the relay exited:\n${stderr}`);
        assert.ok(Date.now() < deadline, `the relay was not ready in 20 s:\n${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      child.kill('SIGTERM');
      assert.equal((await exited)[0], 0, stderr);
    }
    const serve = spawnSync(process.execPath, [cli, 'serve', names[0] ?? '', '--cloud-provider', 'fake'], {
      encoding: 'utf8',
    });
    assert.equal(serve.status, 1);
    assert.match(serve.stderr, /app\/cli\/serve\.ts is not in this artifact \(relay\)/);
  });
});

// Resolves once `cli` logs "<function> serving", then stops it and expects a clean exit.
async function serving(cli: string, args: readonly string[]): Promise<void> {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null]>;
  const served = (async () => {
    for await (const line of createInterface({ input: child.stdout })) {
      if ((JSON.parse(line) as { msg?: string }).msg?.endsWith(' serving') === true) return;
    }
  })();
  await Promise.race([
    served,
    exited.then(([code]) => {
      throw new Error(`${cli} exited with ${String(code)} before serving:\n${stderr}`);
    }),
  ]);
  child.kill('SIGTERM');
  assert.equal((await exited)[0], 0, stderr);
}
