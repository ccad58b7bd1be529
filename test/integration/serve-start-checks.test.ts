// `cirrus serve` listens before its start-up checks (app/cli/preflight.ts) have answered, so that
// a cold start does not wait for their round trips: its probes answer at once, /readyz says 503
// `starting` and a reconcile request waits until the checks pass; a check that fails still stops
// the command with exit status 1 and its message (shared/host/starting.ts). The API server is the
// real one, reached through a proxy that holds every connection until the test lets it through.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { main } from '../../app/cli/main.ts';
import { freePort } from '../../tools/control-plane/processes.ts';
import { controlPlaneSkip, testCluster, type TestCluster } from '../harness/cluster.ts';

/** A TCP proxy to `upstream` that holds each connection until `release()`. */
interface HoldingProxy {
  readonly port: number;
  /** Connections accepted and not yet let through. */
  held(): number;
  /** Lets every held connection (and every later one) through. */
  release(): void;
  close(): Promise<void>;
}

async function holdingProxy(upstream: URL): Promise<HoldingProxy> {
  const waiting: Socket[] = [];
  const sockets = new Set<Socket>();
  let open = false;
  const pass = (client: Socket): void => {
    const server = connect(Number(upstream.port), upstream.hostname);
    sockets.add(server);
    client.pipe(server).pipe(client);
    const end = (): void => {
      client.destroy();
      server.destroy();
    };
    client.on('error', end).on('close', end);
    server.on('error', end).on('close', end);
  };
  const proxy: Server = createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    if (open) pass(client);
    else waiting.push(client);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  return {
    port: (proxy.address() as AddressInfo).port,
    held: () => waiting.filter((s) => !s.destroyed).length,
    release: () => {
      open = true;
      for (const client of waiting.splice(0)) if (!client.destroyed) pass(client);
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      proxy.close();
      await once(proxy, 'close');
    },
  };
}

interface Serving {
  readonly port: number;
  readonly exited: Promise<{ code: number; stderr: string }>;
  readonly stop: () => void;
}

// `cirrus serve node-init` in this process (the fake provider) against the cluster through `proxy`.
async function serveThrough(cluster: TestCluster, proxy: HoldingProxy, dir: string): Promise<Serving> {
  const kubeconfig = join(dir, `proxy-${String(proxy.port)}.kubeconfig`);
  const config = JSON.parse(cluster.admin.exportConfig()) as { clusters: { cluster: { server: string } }[] };
  for (const entry of config.clusters) entry.cluster.server = `https://127.0.0.1:${String(proxy.port)}`;
  await writeFile(kubeconfig, JSON.stringify(config));
  const port = await freePort();
  const controller = new AbortController();
  let stderr = '';
  const io = {
    stdout: { write: () => true },
    stderr: { write: (text: string) => (stderr += text) },
    env: {},
    signal: controller.signal,
  };
  const argv = ['serve', 'node-init', '--kubeconfig', kubeconfig, '--cloud-provider', 'fake'];
  const exited = main(
    [...argv, '--port', String(port), '--bind-address', '127.0.0.1', '--log-level', 'silent'],
    io,
  ).then((code) => ({ code, stderr }));
  return {
    port,
    exited,
    stop: () => {
      controller.abort();
    },
  };
}

async function get(port: number, path: string): Promise<{ status: number; body: unknown } | undefined> {
  try {
    const reply = await fetch(`http://127.0.0.1:${String(port)}${path}`);
    return { status: reply.status, body: await reply.json() };
  } catch {
    return undefined;
  }
}

// Polls `path` until it answers; fails after `ms`.
async function firstAnswer(port: number, path: string, ms: number): Promise<{ status: number; body: unknown }> {
  const until = Date.now() + ms;
  for (;;) {
    const answer = await get(port, path);
    if (answer !== undefined) return answer;
    if (Date.now() > until) throw new Error(`no answer on ${path} within ${String(ms)} ms`);
    await sleep(20);
  }
}

function reconcile(port: number): Promise<{ status: number; body: { code?: string } }> {
  return fetch(`http://127.0.0.1:${String(port)}/reconcile`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'no-such-node' }),
  }).then(async (reply) => ({ status: reply.status, body: (await reply.json()) as { code?: string } }));
}

// Whether `promise` is still pending after `ms`.
async function pendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const still = Symbol('pending');
  return (await Promise.race([promise.then(() => undefined), sleep(ms, still)])) === still;
}

describe('cirrus serve answers before its start-up checks have', { skip: controlPlaneSkip }, () => {
  let cluster: TestCluster;
  let dir: string;
  const proxies: HoldingProxy[] = [];
  before(async () => {
    cluster = await testCluster();
    dir = await mkdtemp(join(tmpdir(), 'cirrus-start-checks-'));
  });
  after(async () => {
    await Promise.all(proxies.map((p) => p.close()));
  });

  it('probes answer while the checks wait, a reconcile waits for them, then runs', async () => {
    const proxy = await holdingProxy(new URL(cluster.info.server));
    proxies.push(proxy);
    const serving = await serveThrough(cluster, proxy, dir);
    try {
      // The reach check's request is held: the function answers all the same.
      assert.deepEqual(await firstAnswer(serving.port, '/healthz', 15_000), { status: 200, body: { status: 'ok' } });
      assert.ok(proxy.held() >= 1, 'the check reached the proxy');
      assert.deepEqual(await get(serving.port, '/readyz'), { status: 503, body: { status: 'starting' } });
      const reconciled = reconcile(serving.port);
      assert.ok(await pendingAfter(reconciled, 500), 'a reconcile request waits for the checks');
      proxy.release();
      const answer = await reconciled;
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      assert.deepEqual(await get(serving.port, '/readyz'), { status: 200, body: { status: 'ready' } });
    } finally {
      serving.stop();
    }
    assert.equal((await serving.exited).code, 0);
  });

  it('a check that fails after listening: waiting requests 503, exit 1 with its message', async () => {
    // Never let through: the reach check gives up after its timeout (3 s).
    const proxy = await holdingProxy(new URL(cluster.info.server));
    proxies.push(proxy);
    const serving = await serveThrough(cluster, proxy, dir);
    try {
      await firstAnswer(serving.port, '/healthz', 15_000);
      const reconciled = reconcile(serving.port).catch((error: unknown) => error);
      const { code, stderr } = await serving.exited;
      assert.equal(code, 1, stderr);
      assert.match(
        stderr,
        new RegExp(
          `^cirrus serve: cannot reach the API server https://127\\.0\\.0\\.1:${String(proxy.port)} \\(--kubeconfig .*, context .*\\): no answer within 3 s: the host does not answer`,
          'm',
        ),
      );
      assert.deepEqual(await reconciled, {
        status: 503,
        body: { error: 'this instance is shutting down: its start-up checks failed', code: 'CIRRUS_ERR_CLOSING' },
      });
      assert.equal(await get(serving.port, '/healthz'), undefined, 'nothing listens once the command exited');
    } finally {
      serving.stop();
    }
  });
});
