// `cirrus cluster` as a user runs it: a KUBECONFIG line that works, and no etcd or kube-apiserver
// left behind after Ctrl-C, or after the cirrus process itself is killed outright.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { controlPlaneSkip } from '../harness/cluster.ts';
import { childPids, isRunning } from '../harness/processes.ts';

const cli = new URL('../../bin/cirrus.js', import.meta.url).pathname;

interface Running {
  child: ChildProcess;
  kubeconfig: string;
  /** kube-apiserver and etcd: the children of the cirrus process. */
  controlPlanePids: number[];
}

// The TEST_ASSET_* variables set by the global setup let it start without building.
async function startCluster(args: string[] = []): Promise<Running> {
  // setpriv: should this test process die mid-test, cirrus gets SIGTERM and stops its control plane.
  const command = ['setpriv', '--pdeathsig', 'SIGTERM', '--', process.execPath, cli, 'cluster', ...args];
  const child = spawn(command[0] as string, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout });
  const exited = once(child, 'exit').then(() => {
    throw new Error(`cirrus cluster exited early:\n${stderr}`);
  });
  const first = (async () => {
    for await (const line of lines) return line;
    return '';
  })();
  const line = await Promise.race([first, exited]);
  const match = /^KUBECONFIG=(.+)$/.exec(line);
  assert.ok(match?.[1], `first line of stdout: ${line}`);
  return { child, kubeconfig: match[1], controlPlanePids: childPids(child.pid as number) };
}

async function eventually(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('cirrus cluster', { skip: controlPlaneSkip }, () => {
  it('prints a working KUBECONFIG and stops everything on Ctrl-C', async () => {
    const running = await startCluster(['--cluster-name', 'local']);
    assert.equal(running.controlPlanePids.length, 2);
    const config = new KubeConfig();
    config.loadFromFile(running.kubeconfig);
    assert.equal(config.getCurrentContext(), 'local');
    const namespaces = await config.makeApiClient(CoreV1Api).listNamespace();
    assert.ok(namespaces.items.some((ns) => ns.metadata?.name === 'default'));

    const exited = once(running.child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    running.child.kill('SIGINT');
    assert.deepEqual(await exited, [0, null], 'exit code 0, not killed by the signal');
    for (const pid of running.controlPlanePids) assert.equal(isRunning(pid), false, `pid ${pid} still runs`);
    assert.equal(existsSync(dirname(running.kubeconfig)), false, 'the temporary run folder is removed');
  });

  it('leaves no etcd or kube-apiserver behind when it is killed with SIGKILL', async () => {
    const running = await startCluster();
    assert.ok(running.controlPlanePids.every(isRunning));
    running.child.kill('SIGKILL');
    await eventually(() => !running.controlPlanePids.some(isRunning));
  });
});
