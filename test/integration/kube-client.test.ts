// loadKubeConfig's clients reuse their connections to the API server (client-node alone opens a
// new TLS connection for every request).

import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { describe, it } from 'node:test';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import { controlPlaneSkip, testCluster } from '../harness/cluster.ts';

async function socketsOpenedBy(work: () => Promise<void>): Promise<number> {
  let opened = 0;
  const onSocket = (): void => {
    opened += 1;
  };
  subscribe('net.client.socket', onSocket);
  try {
    await work();
  } finally {
    unsubscribe('net.client.socket', onSocket);
  }
  return opened;
}

describe('Kubernetes client connections', { skip: controlPlaneSkip }, () => {
  it('reuse one connection for sequential requests', async () => {
    const { info } = await testCluster();
    const core = loadKubeConfig(info.adminKubeconfig).makeApiClient(CoreV1Api);
    const opened = await socketsOpenedBy(async () => {
      for (let i = 0; i < 5; i += 1) await core.readNamespace({ name: 'default' });
    });
    assert.equal(opened, 1);
  });

  it('(without it, client-node opens one per request — the reason for the fix)', async () => {
    const { info } = await testCluster();
    const plain = new KubeConfig();
    plain.loadFromFile(info.adminKubeconfig);
    const core = plain.makeApiClient(CoreV1Api);
    const opened = await socketsOpenedBy(async () => {
      for (let i = 0; i < 5; i += 1) await core.readNamespace({ name: 'default' });
    });
    assert.equal(opened, 5, 'if this fails, client-node now reuses connections and reuseConnections() can go');
  });
});
