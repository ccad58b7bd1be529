import assert from 'node:assert/strict';
import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { AssetsUnavailableError, pinnedVersions, resolveAssets } from '../../tools/control-plane/assets.ts';

async function folderWith(files: string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cirrus-assets-test-'));
  for (const file of files) {
    await writeFile(join(dir, file), '#!/bin/sh\n');
    await chmod(join(dir, file), 0o755);
  }
  return dir;
}

describe('resolveAssets', () => {
  it('reads the pinned versions from go.mod', async () => {
    const pinned = await pinnedVersions();
    assert.match(pinned.kubernetes, /^v1\.\d+\.\d+$/);
    assert.match(pinned.etcd, /^v3\.\d+\.\d+$/);
  });

  it('takes KUBEBUILDER_ASSETS as it is, without building', async () => {
    const dir = await folderWith(['kube-apiserver', 'etcd']);
    const assets = await resolveAssets({ build: true, env: { KUBEBUILDER_ASSETS: dir, PATH: '' } });
    assert.equal(assets.source, 'KUBEBUILDER_ASSETS');
    assert.equal(assets.kubeApiserver, join(dir, 'kube-apiserver'));
    assert.equal(assets.etcd, join(dir, 'etcd'));
  });

  it('refuses a KUBEBUILDER_ASSETS folder that lacks a binary, instead of building', async () => {
    const dir = await folderWith(['kube-apiserver']);
    await assert.rejects(resolveAssets({ build: true, env: { KUBEBUILDER_ASSETS: dir } }), {
      message: `KUBEBUILDER_ASSETS: ${join(dir, 'etcd')} is not an executable file`,
    });
  });

  it('takes TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD over KUBEBUILDER_ASSETS', async () => {
    const dir = await folderWith(['kube-apiserver', 'etcd']);
    const env = {
      TEST_ASSET_KUBE_APISERVER: join(dir, 'kube-apiserver'),
      TEST_ASSET_ETCD: join(dir, 'etcd'),
      KUBEBUILDER_ASSETS: '/nowhere',
    };
    assert.equal((await resolveAssets({ build: false, env })).source, 'TEST_ASSET_*');
  });

  it('refuses one TEST_ASSET_* without the other', async () => {
    await assert.rejects(resolveAssets({ build: false, env: { TEST_ASSET_ETCD: '/bin/sh' } }), {
      message: 'set both TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD, or neither',
    });
  });

  it('says why and how when nothing is cached and Go is missing', async () => {
    const cache = await folderWith([]);
    await assert.rejects(
      resolveAssets({ build: true, env: { CIRRUS_CACHE_DIR: cache, PATH: '' } }),
      (error: unknown) => {
        assert.ok(error instanceof AssetsUnavailableError);
        assert.match(error.message, /Go is not installed and KUBEBUILDER_ASSETS is not set/);
        assert.match(error.message, /install Go >= 1\.26/);
        return true;
      },
    );
  });

  it('does not build when asked not to, and names the command that would', async () => {
    const cache = await folderWith([]);
    await assert.rejects(resolveAssets({ build: false, env: { CIRRUS_CACHE_DIR: cache } }), {
      name: 'AssetsUnavailableError',
      message: new RegExp(
        `^no kube-apiserver/etcd in ${cache}/control-plane/kubernetes-v1\\.\\d+\\.\\d+-etcd-v3\\.\\d+\\.\\d+-[0-9a-f]{12}; run \`npm run control-plane:build\`$`,
      ),
    });
  });
});
