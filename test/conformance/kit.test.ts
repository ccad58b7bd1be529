// The conformance kit, run programmatically: a conformant provider passes every check it can be
// asked, and each deliberately broken provider (fixtures/broken-providers.ts) fails the check of
// the rule it breaks, with a message that says so.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  allChecks,
  fixtureFrom,
  FixtureError,
  formatJunit,
  formatResult,
  parseFixture,
  runConformance,
  type ConformanceReport,
} from '../../providers/conformance/index.ts';
import { brokenProviders, seededFake, seededFixture } from './fixtures/broken-providers.ts';

function failures(report: ConformanceReport): string {
  return report.results
    .filter((r) => r.outcome === 'fail')
    .map(formatResult)
    .join('');
}

describe('runConformance', () => {
  it('passes a seeded fake on every check but the RetryError delay (nothing threw one)', async () => {
    const report = await runConformance(seededFake(), seededFixture);
    assert.equal(report.failed, 0, failures(report));
    assert.deepEqual(
      report.results.filter((r) => r.outcome === 'skip').map((r) => r.id),
      ['errors.retry-delay'],
    );
    assert.equal(report.results.length, allChecks.length);
  });

  it('skips, with the reason, what an empty fixture cannot ask, and passes nothing it did not check', async () => {
    const cloud = seededFake();
    cloud.disabled.add('routes');
    const report = await runConformance(cloud, { loadBalancer: { ingressMayRepeat: true } });
    const skipped = new Map(report.results.filter((r) => r.outcome === 'skip').map((r) => [r.id, r.message]));
    assert.match(skipped.get('instances.metadata') ?? '', /the fixture names no known instance/);
    assert.match(skipped.get('routes.create-list') ?? '', /does not support routes\(\)/);
    assert.match(skipped.get('load-balancer.update-keeps-address') ?? '', /no load balancer nodes/);
    assert.equal(report.failed, 0, failures(report));
  });

  for (const broken of brokenProviders) {
    it(`fails ${broken.check} for a provider where ${broken.name}`, async () => {
      const report = await runConformance(broken.build(), seededFixture);
      const result = report.results.find((r) => r.id === broken.check);
      assert.equal(
        result?.outcome,
        'fail',
        `${broken.check} did not fail:\n${report.results.map(formatResult).join('')}`,
      );
      assert.match(result.message ?? '', broken.message);
      // The line printed for it names the rule.
      const check = allChecks.find((c) => c.id === broken.check);
      assert.ok(formatResult(result).includes(check?.rule ?? '(no such check)'));
    });
  }

  it('runs only the checks asked for, and refuses a name that is no check', async () => {
    const report = await runConformance(seededFake(), seededFixture, { only: ['routes', 'capabilities.identity'] });
    assert.deepEqual(
      report.results.map((r) => r.id),
      ['capabilities.identity', 'routes.create-list', 'routes.delete', 'routes.delete-missing', 'routes.blackhole'],
    );
    await assert.rejects(
      runConformance(seededFake(), {}, { only: ['route'] }),
      /no check is named route; the checks are/,
    );
  });

  it('writes JUnit XML with one testcase per check, failures and skips marked', async () => {
    const broken = brokenProviders.find((b) => b.check === 'load-balancer.delete-missing');
    const report = await runConformance(broken?.build() ?? seededFake(), seededFixture);
    const xml = formatJunit(report);
    assert.equal(xml.match(/<testcase /g)?.length, allChecks.length);
    assert.match(xml, /<testsuite name="cirrus conformance \(fake\)" tests="\d+" failures="1"/);
    assert.match(xml, /name="load-balancer.delete-missing"[^]*?<failure message="[^"]*never existed threw/);
    assert.match(xml, /name="errors.retry-delay"[^]*?<skipped message="no call threw RetryError/);
  });
});

describe('docs/conformance.md', () => {
  it('has a row for every check, with its rule', () => {
    const doc = readFileSync('docs/conformance.md', 'utf8');
    for (const check of allChecks)
      assert.ok(doc.includes(`| \`${check.id}\` | ${check.rule} |`), `no row for ${check.id}`);
  });
});

describe('the fixture', () => {
  it('applies defaults and resolves the Nodes named by instance', () => {
    const fixture = parseFixture('instances:\n  known: [{ name: a, providerID: x://a }]\n', 'f.yaml');
    assert.equal(fixture.loadBalancer.namespace, 'cirrus-conformance');
    assert.equal(fixture.cancellation.boundMs, 1000);
    assert.deepEqual(fixture.instances.gone, []);
    assert.deepEqual(parseFixture('', 'empty.yaml'), fixtureFrom({}));
  });

  it('names the file and the field of a problem', () => {
    assert.throws(() => parseFixture('instances:\n  known: [{ nam: a }]\n', 'f.yaml'), {
      name: 'FixtureError',
      message: /^f\.yaml: instances\.known\[0\]\.name: /,
    });
    assert.throws(() => parseFixture('routes: { targets: [{ node: a, podCidr: nope }] }', 'f.yaml'), {
      message: 'f.yaml: routes.targets[0].podCidr: must be a CIDR like 10.244.1.0/24',
    });
    assert.throws(() => parseFixture('[1, 2]', 'f.yaml'), FixtureError);
    assert.throws(() => parseFixture('a: [', 'f.yaml'), /f\.yaml: is not valid YAML/);
  });
});
