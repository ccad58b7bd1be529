// `cirrus cluster --data-dir` (and `cirrus start --data-dir`) started again keeps the API server's
// port, its CA and its ServiceAccount keys: a client of the run before (a cirrus start's relay
// still running, a kubeconfig written then) reconnects to the same address and still trusts it.

import assert from 'node:assert/strict';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ControlPlane, resolveAssets } from '../../tools/control-plane/index.ts';
import { controlPlaneSkip } from '../harness/cluster.ts';

describe('a kept control plane folder started again', { skip: controlPlaneSkip }, () => {
  it('serves on the same port with the same CA, so an old kubeconfig still works', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cirrus-kept-run-'));
    try {
      const assets = await resolveAssets({ build: false });
      const first = await ControlPlane.start({ assets, dir });
      const oldKubeconfig = await readFile(first.info.adminKubeconfig, 'utf8');
      const server = first.info.server;
      await first.stop();

      const second = await ControlPlane.start({ assets, dir });
      try {
        assert.equal(second.info.server, server);
        const kubeConfig = new KubeConfig();
        kubeConfig.loadFromString(oldKubeconfig);
        const namespace = await kubeConfig.makeApiClient(CoreV1Api).readNamespace({ name: 'default' });
        assert.equal(namespace.metadata?.name, 'default');
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
