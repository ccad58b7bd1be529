// `cirrus start` when its API server goes away and comes back: /readyz answers 503 while the relay
// has no open watch (it answered 200 throughout before), and 200 again once it has recovered.
// The control plane is this suite's own: its API server is restarted.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { main } from '../../app/cli/main.ts';
import { ControlPlane, resolveAssets } from '../../tools/control-plane/index.ts';
import { controlPlaneSkip } from '../harness/cluster.ts';

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

async function readyz(port: number): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) })).status;
  } catch {
    return 0;
  }
}

describe('cirrus start when the API server restarts', { skip: controlPlaneSkip }, () => {
  let plane: ControlPlane | undefined;
  before(async () => {
    plane = await ControlPlane.start({ assets: await resolveAssets({ build: false }) });
  });
  after(() => plane?.stop());

  it('is not ready while the API server is gone, and ready again once it is back', async () => {
    assert.ok(plane);
    const port = await freePort();
    let stderr = '';
    const stop = new AbortController();
    const io = {
      stdout: { write: () => true },
      stderr: { write: (text: string) => (stderr += text) },
      env: { XDG_RUNTIME_DIR: mkdtempSync(join(tmpdir(), 'cirrus-runtime-')) },
      signal: stop.signal,
    };
    const args = ['--cloud-provider', 'fake', '--kubeconfig', plane.info.adminKubeconfig, '--use-existing-cluster'];
    const more = ['--controllers', 'cloud-node', '--leader-elect=false', '--log-level', 'silent'];
    const start = main(['start', ...args, ...more, '--port', String(port), '--bind-address', '127.0.0.1'], io);
    try {
      const deadline = Date.now() + 60_000;
      while (!stderr.includes('cirrus running:')) {
        assert.ok(Date.now() < deadline, stderr);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.equal(await readyz(port), 200);
      // Watch /readyz while the API server restarts (it drains its watches for ~10 s, then is gone).
      const seen = new Set<number>();
      const watching = { on: true };
      const watcher = (async () => {
        while (watching.on) {
          seen.add(await readyz(port));
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      await plane.restartApiserver({ graceMs: 1_000 });
      const back = Date.now() + 60_000;
      while ((await readyz(port)) !== 200) {
        assert.ok(Date.now() < back, `not ready again within 60 s:\n${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      watching.on = false;
      await watcher;
      assert.ok(seen.has(503), `/readyz answered only ${[...seen].join(', ')} while the API server was gone`);
    } finally {
      stop.abort();
      assert.equal(await start, 0, stderr);
    }
  });
});
