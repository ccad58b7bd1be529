// reuseConnections (shared/kube/client.ts): one undici dispatcher per cluster and set of TLS
// settings, compared by content, so a KubeConfig that reads its certificates again for every
// request reuses its pool, and a rotated certificate gets a new one.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { reuseConnections } from '../../shared/kube/client.ts';

type CreateDispatcher = (cluster: unknown, agentOptions: Record<string, unknown>) => unknown;

function configWith(certData: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromClusterAndUser(
    { name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from('ca').toString('base64'), skipTLSVerify: false },
    { name: 'u', certData: Buffer.from(certData).toString('base64'), keyData: Buffer.from('key').toString('base64') },
  );
  return reuseConnections(config);
}

async function dispatcherOf(config: KubeConfig): Promise<unknown> {
  const context = new RequestContext('https://127.0.0.1:6443/api/v1/nodes', HttpMethod.GET);
  await config.applySecurityAuthentication(context);
  return context.getDispatcher();
}

describe('reuseConnections', () => {
  it('hands out one dispatcher for the same settings, read again for every request', async () => {
    const config = configWith('cert-1');
    const first = await dispatcherOf(config);
    assert.notEqual(first, undefined);
    assert.equal(await dispatcherOf(config), first);
  });

  it('builds a new one when a setting changes: a rotated certificate, verification, the cluster', () => {
    const config = configWith('cert-1');
    const create = (config as unknown as { createDispatcher: CreateDispatcher }).createDispatcher.bind(config);
    const cluster = config.getCurrentCluster();
    const options = { ca: Buffer.from('ca'), cert: Buffer.from('cert-1'), key: Buffer.from('key') };
    const first = create(cluster, options);
    assert.equal(create(cluster, { ...options, cert: Buffer.from('cert-1') }), first, 'equal bytes, another Buffer');
    const rotated = create(cluster, { ...options, cert: Buffer.from('cert-2') });
    assert.notEqual(rotated, first);
    assert.equal(create(cluster, { ...options, cert: Buffer.from('cert-2') }), rotated);
    assert.notEqual(create(cluster, { ...options, rejectUnauthorized: false }), first);
    assert.notEqual(create(cluster, { ...options, servername: 'other' }), first);
    assert.notEqual(create({ ...cluster, server: 'https://127.0.0.1:7443' }, options), first);
    assert.equal(create(cluster, options), first, 'the first is still cached');
  });
});
