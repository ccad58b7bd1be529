// `cirrus conformance` from the command line, as npm test runs it against the providers that ship
// with cirrus — fake, static (with its load balancers on the test control plane) — and against the
// Python example through the http provider; and against a broken provider, which it must fail.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { main, usageExitCode } from '../../app/cli/main.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: {},
    signal: new AbortController().signal,
  };
  const code = await main(['conformance', ...argv, '--log-level', 'warn'], io);
  return { code, stdout, stderr };
}

function conformant(result: { code: number; stdout: string; stderr: string }): void {
  assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
  assert.match(result.stdout, /: \d+ passed, 0 failed, \d+ skipped \(.*\): conformant\n/);
}

const example = 'examples/http-provider-python';

describe('cirrus conformance', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cirrus-conformance-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('passes the fake provider with examples/fake/conformance.yaml, and writes JUnit', async () => {
    const junit = join(dir, 'fake.xml');
    const result = await run([
      '--cloud-provider',
      'fake',
      '--fixture',
      'examples/fake/conformance.yaml',
      '--junit',
      junit,
    ]);
    conformant(result);
    assert.match(result.stdout, /^PASS {2}load-balancer\.ensure-idempotent {2}ensureLoadBalancer\(\) is idempotent/m);
    assert.match(result.stdout, /^SKIP {2}instances\.metadata .*\n {6}skipped: the fixture names no known instance/m);
    assert.match(
      await readFile(junit, 'utf8'),
      /<testsuite name="cirrus conformance \(fake\)" tests="\d+" failures="0"/,
    );
  });

  it('passes the fake provider with no fixture at all: each load balancer gets its own address', async () => {
    const result = await run(['--cloud-provider', 'fake']);
    conformant(result);
    assert.match(result.stdout, /^PASS {2}load-balancer\.concurrent /m);
  });

  it('passes the static provider without load balancers, needing no cluster', async () => {
    const inventory = await readFile('examples/static/inventory.yaml', 'utf8');
    const machinesOnly = join(dir, 'machines.yaml');
    await writeFile(machinesOnly, inventory.slice(0, inventory.indexOf('\nloadBalancers:')));
    const result = await run([
      '--cloud-provider',
      'static',
      '--cloud-config',
      machinesOnly,
      '--fixture',
      'examples/static/conformance.yaml',
    ]);
    conformant(result);
    assert.match(result.stdout, /^PASS {2}instances\.shutdown /m);
    assert.match(
      result.stdout,
      /^SKIP {2}load-balancer\.ensure-idempotent .*\n {6}skipped: the provider does not support loadBalancer\(\)/m,
    );
  });

  it(
    'passes the static provider with examples/static/inventory.yaml, its load balancers on the cluster',
    { skip: controlPlaneSkip },
    async () => {
      const cluster = await testCluster();
      const ns = uniqueName('conformance');
      await cluster.admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
      const inventory = await readFile('examples/static/inventory.yaml', 'utf8');
      const config = join(dir, 'inventory.yaml');
      await writeFile(config, `${inventory}\n  allocations: { namespace: ${ns} }\n`);
      const result = await run([
        ...['--cloud-provider', 'static', '--cloud-config', config, '--fixture', 'examples/static/conformance.yaml'],
        ...['--kubeconfig', cluster.info.adminKubeconfig],
      ]);
      conformant(result);
      assert.match(result.stdout, /^PASS {2}load-balancer\.concurrent /m);
    },
  );

  describe('the Python example through the http provider', () => {
    let python: ChildProcess;
    let endpoint: string;
    before(async () => {
      python = spawn(
        'python3',
        [join(example, 'provider.py'), '--inventory', join(example, 'inventory.json'), '--port', '0'],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      const lines = createInterface({ input: python.stdout ?? process.stdin });
      const [line] = (await once(lines, 'line')) as [string];
      endpoint = /^listening on (http:\/\/\S+)$/.exec(line)?.[1] ?? assert.fail(`provider.py said: ${line}`);
    });
    after(() => {
      python.kill();
    });

    it('passes', async () => {
      const config = join(dir, 'http.yaml');
      await writeFile(config, `endpoint: ${endpoint}\n`);
      const result = await run([
        '--cloud-provider',
        'http',
        '--cloud-config',
        config,
        '--fixture',
        join(example, 'conformance.yaml'),
      ]);
      conformant(result);
      assert.match(result.stdout, /provider http \(providerName\(\) example\)/);
      for (const id of [
        'instances.provider-id-accepted',
        'load-balancer.concurrent',
        'routes.blackhole',
        'errors.cancellation',
      ])
        assert.match(result.stdout, new RegExp(`^PASS {2}${id.replace('.', '\\.')} `, 'm'));
    });
  });

  it('fails a broken provider, naming the rule, and exits 1', async () => {
    const result = await run([
      ...['--provider-module', 'test/conformance/fixtures/broken-module.ts', '--cloud-provider', 'broken-ensure'],
      ...['--fixture', 'test/conformance/fixtures/seeded.yaml'],
    ]);
    assert.equal(result.code, 1, result.stdout);
    assert.match(
      result.stdout,
      /^FAIL {2}load-balancer\.ensure-idempotent {2}ensureLoadBalancer\(\) is idempotent: a second call with the same Service and nodes answers the same status.*\n {6}broken: a second ensureLoadBalancer\(Service cirrus-conformance\/\S+\) answered another ingress: got \[\{"ip":"192\.0\.2\.\d+"\}\], want/m,
    );
    assert.match(result.stdout, /: \d+ passed, [1-9]\d* failed, \d+ skipped .*: NOT conformant\n/);
  });

  describe('a combination of providers (docs/hybrid.md)', () => {
    const module = ['--provider-module', 'test/conformance/fixtures/combination-module.ts'];

    it('runs the kit against static and fake in turn, each result naming its provider, then checks them together', async () => {
      const inventory = await readFile('examples/static/inventory.yaml', 'utf8');
      const machinesOnly = join(dir, 'combination-machines.yaml');
      await writeFile(machinesOnly, inventory.slice(0, inventory.indexOf('\nloadBalancers:')));
      const junit = join(dir, 'combination.xml');
      const result = await run([
        ...['--cloud-provider', 'static,fake', '--cloud-config', `static=${machinesOnly}`],
        ...['--fixture', 'static=examples/static/conformance.yaml,fake=examples/fake/conformance.yaml'],
        ...['--junit', junit],
      ]);
      assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, /^PASS {2}\[static\] instances\.shutdown /m);
      assert.match(result.stdout, /^PASS {2}\[fake\] load-balancer\.ensure-idempotent /m);
      assert.match(result.stdout, /^provider static: \d+ passed, 0 failed/m);
      assert.match(result.stdout, /^provider fake: \d+ passed, 0 failed/m);
      for (const name of ['static', 'fake'])
        assert.match(result.stdout, new RegExp(`^PASS {2}\\[${name}\\] combination\\.name-is-scheme `, 'm'));
      assert.match(result.stdout, /^PASS {2}\[static,fake\] combination\.distinct-names /m);
      assert.match(result.stdout, /\nthe combination static,fake: conformant\n$/);
      const xml = await readFile(junit, 'utf8');
      for (const suite of ['static', 'fake', 'static,fake'])
        assert.match(xml, new RegExp(`<testsuite name="cirrus conformance \\(${suite}\\)" tests="\\d+" failures="0"`));
    });

    it('passes two fakes whose names are their schemes', async () => {
      const result = await run([...module, '--cloud-provider', 'fake,second-fake']);
      assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, /provider second-fake \(providerName\(\) second-fake\)/);
      assert.match(result.stdout, /^PASS {2}\[second-fake\] combination\.name-is-scheme /m);
    });

    it('fails a provider whose name is not its scheme, and two that answer to one name, and exits 1', async () => {
      const result = await run([...module, '--cloud-provider', 'fake,misnamed']);
      assert.equal(result.code, 1, result.stdout);
      // The kit alone passes it: a working fake, under the wrong name.
      assert.match(result.stdout, /^provider misnamed: \d+ passed, 0 failed/m);
      assert.match(
        result.stdout,
        /^FAIL {2}\[misnamed\] combination\.name-is-scheme .*\n {6}broken: runs as misnamed, but providerName\(\) answers fake: its Nodes' provider IDs \(fake:\/\/…\)/m,
      );
      assert.match(result.stdout, /^PASS {2}\[fake\] combination\.name-is-scheme /m);
      assert.match(
        result.stdout,
        /^FAIL {2}\[fake,misnamed\] combination\.distinct-names .*\n {6}broken: fake and misnamed both answer providerName\(\) fake/m,
      );
      assert.match(result.stdout, /\nthe combination fake,misnamed: NOT conformant \(failures: together\)\n$/);
    });

    it('fails a fixture whose provider IDs name another provider', async () => {
      const fixture = join(dir, 'foreign.yaml');
      await writeFile(
        fixture,
        'instances:\n  gone:\n    - { name: worker-gone, providerID: "static://worker-gone" }\n',
      );
      const result = await run([...module, '--cloud-provider', 'fake,second-fake', '--fixture', `fake=${fixture}`]);
      assert.equal(result.code, 1, result.stdout);
      assert.match(
        result.stdout,
        /^FAIL {2}\[fake\] combination\.name-is-scheme .*\n {6}broken: the fixture gives fake's Nodes provider IDs of another scheme: static:\/\/worker-gone/m,
      );
    });

    it('refuses a fixture not given by provider name, or by a name not among --cloud-provider', async () => {
      const plain = await run(['--cloud-provider', 'static,fake', '--fixture', 'examples/fake/conformance.yaml']);
      assert.equal(plain.code, usageExitCode);
      assert.match(plain.stderr, /--fixture: with several providers, give each one's as name=path, comma-separated/);
      const other = await run(['--cloud-provider', 'static,fake', '--fixture', 'aws=examples/fake/conformance.yaml']);
      assert.equal(other.code, usageExitCode);
      assert.match(other.stderr, /--fixture: aws is not one of --cloud-provider static,fake/);
    });
  });

  it('refuses a fixture it cannot use, naming the field', async () => {
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'loadBalancer:\n  concurrency: 1\n');
    const result = await run(['--cloud-provider', 'fake', '--fixture', bad]);
    assert.equal(result.code, usageExitCode);
    assert.match(result.stderr, new RegExp(`--fixture: ${bad}: loadBalancer\\.concurrency: Too small`));
    const missing = await run(['--cloud-provider', 'fake', '--fixture', join(dir, 'nope.yaml')]);
    assert.equal(missing.code, usageExitCode);
    assert.match(missing.stderr, /--fixture: could not read .*nope\.yaml: ENOENT/);
  });
});
