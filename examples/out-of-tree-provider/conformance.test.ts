// The provider's own test: the conformance kit that `cirrus conformance` runs, from the package
// (`cirrus-ccm/conformance`), against the provider built here with the cloud-config's pattern.
//   node --test conformance.test.ts

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatResult, runConformance } from 'cirrus-ccm/conformance';
import { namingProvider } from './naming-provider.ts';

test('the naming provider passes the conformance kit', async () => {
  const provider = namingProvider({ pattern: /^(?<zone>[a-z]+-[0-9])-(?<type>[a-z0-9]+)-[0-9]+$/, region: 'eu-west' });
  const report = await runConformance(
    provider,
    {
      instances: {
        known: [
          {
            name: 'fra-1-m5large-1',
            addresses: [{ type: 'InternalIP', address: '10.0.0.11' }],
            expect: { zone: 'fra-1', instanceType: 'm5large', region: 'eu-west' },
          },
        ],
        gone: [{ name: 'not-a-machine-name' }],
      },
    },
    { clusterName: 'kubernetes' },
  );
  const failures = report.results.filter((result) => result.outcome === 'fail');
  assert.equal(report.failed, 0, failures.map(formatResult).join(''));
  assert.ok(report.passed > 0);
});
