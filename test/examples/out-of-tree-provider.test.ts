// The out-of-tree provider example: registered by importing its module (as --provider-module
// does), built from its cloud-config by the registry, and usable by node-init.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { importProviderModule } from '../../shared/cli/serve.ts';
import { CloudConfigError, findCause, initCloudProvider, InstanceNotFoundError, isCloudProvider } from 'cirrus-ccm';
import { silentLogger } from '../helpers/builders.ts';

const example = (file: string): string =>
  fileURLToPath(new URL(`../../examples/out-of-tree-provider/${file}`, import.meta.url));
const options = { signal: new AbortController().signal, log: silentLogger() };

describe('the out-of-tree provider example', () => {
  it('registers "naming" when --provider-module imports it', async () => {
    assert.equal(isCloudProvider('naming'), false);
    await importProviderModule('examples/out-of-tree-provider/naming-provider.ts');
    assert.equal(isCloudProvider('naming'), true);
  });

  it('reads zone and instance type from node names', async () => {
    await importProviderModule(example('naming-provider.ts'));
    const cloud = await initCloudProvider('naming', example('naming.yaml'), options);
    const v2 = cloud.instancesV2();
    assert.ok(v2);
    const metadata = await v2.instanceMetadata({ metadata: { name: 'fra-1-m5large-3' } });
    assert.deepEqual(metadata, {
      providerId: 'naming://fra-1-m5large-3',
      instanceType: 'm5large',
      zone: 'fra-1',
      region: 'eu-west',
      nodeAddresses: [],
      additionalLabels: {},
    });
    await assert.rejects(v2.instanceMetadata({ metadata: { name: 'no-match' } }), InstanceNotFoundError);
    assert.equal(await v2.instanceExists({ metadata: { name: 'no-match' } }), false);
  });

  it('reports a bad cloud-config with its field', async () => {
    await importProviderModule(example('naming-provider.ts'));
    const bad = example('../../test/examples/fixtures/naming-bad.yaml');
    await assert.rejects(initCloudProvider('naming', bad, options), (error: unknown) => {
      const cause = findCause(error, CloudConfigError);
      assert.equal(cause?.field, 'pattern');
      assert.match(
        (error as Error).message,
        /^could not init cloud provider "naming": .*naming-bad\.yaml: pattern: Invalid regular expression/,
      );
      return true;
    });
  });

  it('names a module that cannot be imported', async () => {
    await assert.rejects(
      importProviderModule('./examples/does-not-exist.ts'),
      /^Error: --provider-module \.\/examples\/does-not-exist\.ts: Cannot find module/,
    );
  });

  it("ships a main of its own that runs cirrus's command line", () => {
    const result = spawnSync(process.execPath, [example('main.ts'), 'serve', '--help'], { encoding: 'utf8' });
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /^Usage: cirrus serve <function> \[flags\]$/m);
  });
});
