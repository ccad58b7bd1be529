import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { usageExitCode } from '../../app/cli/main.ts';
import { runCommandLine } from '../harness/command-line.ts';

const run = runCommandLine;

describe('cirrus', () => {
  for (const argv of [[], ['--help'], ['-h'], ['help']]) {
    it(`'cirrus ${argv.join(' ')}' lists the commands`, async () => {
      const { code, stdout, stderr } = await run(argv);
      assert.equal(code, 0);
      assert.equal(stderr, '');
      assert.match(stdout, /^Usage: cirrus <command> \[flags\]$/m);
      assert.match(stdout, /^ {2}cluster {6}Run a local kube-apiserver and etcd/m);
      assert.match(stdout, /^ {2}serve {8}Serve one function over HTTP/m);
      assert.match(stdout, /^ {2}reconcile {4}Ask a function \(of cirrus start, or served\) to reconcile/m);
      assert.match(stdout, /^ {2}relay {8}Watch Nodes and Services/m);
      assert.match(stdout, /^ {2}conformance {2}\S/m);
      assert.match(stdout, /^ {2}version {6}Print cirrus's version/m);
      assert.match(stdout, /^ {2}completion {3}Print a shell completion script/m);
    });
  }

  for (const argv of [
    ['cluster', '--help'],
    ['help', 'cluster'],
    ['cluster', '-h'],
  ]) {
    it(`'cirrus ${argv.join(' ')}' shows the command's flags, variables and defaults`, async () => {
      const { code, stdout } = await run(argv);
      assert.equal(code, 0);
      assert.match(stdout, /^Usage: cirrus cluster \[flags\]$/m);
      assert.match(stdout, /^ {2}--cluster-name <name>\n.*Default: kubernetes\.\n {6}Env: CIRRUS_CLUSTER_NAME$/m);
      assert.match(stdout, /^ {2}--data-dir <path>$/m);
    });
  }

  it("'cirrus serve --help' shows its argument, the required provider and Knative's PORT", async () => {
    const { code, stdout } = await run(['serve', '--help']);
    assert.equal(code, 0);
    assert.match(stdout, /^Usage: cirrus serve <function> \[flags\]$/m);
    assert.match(stdout, /^ {2}--cloud-provider <name\[,name\]> \(required\)$/m);
    assert.match(stdout, /^ {2}--port <port>\n.*Default: 8080\.\n {6}Env: PORT$/m);
  });

  it("'cirrus start --help' shows the loopback default and --use-existing-cluster; serve keeps every interface", async () => {
    const { stdout } = await run(['start', '--help']);
    assert.match(stdout, /^ {2}--bind-address <ip>\n.*Default: 127\.0\.0\.1\.\n/m);
    assert.match(stdout, /^ {2}--use-existing-cluster\n {6}Run against the cluster .*example inventory/m);
    assert.match(stdout, /runs only against a local control plane it starts, unless --use-existing-cluster/);
    assert.match((await run(['serve', '--help'])).stdout, /^ {2}--bind-address <ip>\n.*Default: 0\.0\.0\.0\.\n/m);
  });

  it("'cirrus reconcile --help' shows the optional name and the boolean flags", async () => {
    const { stdout } = await run(['reconcile', '--help']);
    assert.match(stdout, /^Usage: cirrus reconcile <function> \[<name>\] \[flags\]$/m);
    assert.match(stdout, /^ {2}--dry-run$/m);
  });

  for (const argv of [['version'], ['--version']]) {
    it(`'cirrus ${argv.join(' ')}' names cirrus's version, the Kubernetes release it targets, Node.js's and the providers`, async () => {
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
        version: string;
      };
      // The release the repository pins: k8s.io/kubernetes in the control plane's go.mod.
      const goMod = readFileSync(new URL('../../tools/control-plane/go.mod', import.meta.url), 'utf8');
      const pinned = /^\s*k8s\.io\/kubernetes (v1\.\d+\.\d+)/m.exec(goMod)?.[1];
      assert.ok(pinned !== undefined, 'tools/control-plane/go.mod pins k8s.io/kubernetes');
      const { code, stdout, stderr } = await run(argv);
      assert.equal(code, 0);
      assert.equal(stderr, '');
      const lines = stdout.split('\n');
      assert.equal(lines[0], `cirrus ${pkg.version}`);
      assert.match(lines[1] ?? '', new RegExp(`^kubernetes ${pinned.replaceAll('.', '\\.')} \\(`));
      assert.equal(lines[2], `node ${process.version}`);
      assert.equal(lines[3], 'providers aws, fake, http, static');
    });
  }

  const usage: { argv: string[]; env?: Record<string, string>; message: string }[] = [
    { argv: ['frobnicate'], message: "cirrus: unknown command 'frobnicate'\nRun 'cirrus --help' for usage.\n" },
    { argv: ['--frobnicate'], message: "cirrus: unknown flag '--frobnicate'\nRun 'cirrus --help' for usage.\n" },
    { argv: ['help', 'frobnicate'], message: "cirrus: unknown command 'frobnicate'\nRun 'cirrus --help' for usage.\n" },
    {
      argv: ['cluster', '--cloud-provider', 'fake'],
      message: "cirrus cluster: Unknown option '--cloud-provider'\nRun 'cirrus cluster --help' for usage.\n",
    },
    {
      argv: ['serve', 'node-init'],
      message:
        "cirrus serve: --cloud-provider is required (or set CIRRUS_CLOUD_PROVIDER)\nRun 'cirrus serve --help' for usage.\n",
    },
    { argv: ['serve'], message: "cirrus serve: missing argument <function>\nRun 'cirrus serve --help' for usage.\n" },
    {
      argv: ['serve', 'routing', '--cloud-provider', 'fake'],
      message:
        "cirrus serve: unknown function 'routing' (known: node-init, cloud-node-controller, cloud-node, node-lifecycle, " +
        'cloud-node-lifecycle-controller, cloud-node-lifecycle, service-lb, service-lb-controller, service, routes, ' +
        "node-route-controller, route)\nRun 'cirrus serve --help' for usage.\n",
    },
    {
      argv: ['reconcile', 'node'],
      message:
        "cirrus reconcile: name one object, or pass --all (not both)\nRun 'cirrus reconcile --help' for usage.\n",
    },
    {
      argv: ['reconcile', 'node', 'w1', '--all'],
      message:
        "cirrus reconcile: name one object, or pass --all (not both)\nRun 'cirrus reconcile --help' for usage.\n",
    },
    {
      argv: ['reconcile', 'service', 'web'],
      message:
        "cirrus reconcile: name a Service as <namespace>/<name>, not 'web'\nRun 'cirrus reconcile --help' for usage.\n",
    },
    {
      argv: ['relay'],
      message:
        "cirrus relay: invalid relay routing: no destination: pass --to <function>=<url>, a routing file, or set K_SINK\nRun 'cirrus relay --help' for usage.\n",
    },
    {
      argv: ['start', '--use-existing-cluster'],
      message:
        'cirrus start: --use-existing-cluster: no cluster is configured (--kubeconfig, KUBECONFIG or a pod ServiceAccount)\n' +
        "Run 'cirrus start --help' for usage.\n",
    },
    {
      argv: ['start', '--kubeconfig', '/home/me/.kube/config'],
      message:
        'cirrus start: --kubeconfig /home/me/.kube/config: the demo (no --cloud-provider given) acts on an existing ' +
        'cluster only with --use-existing-cluster; against that cluster it would initialize and delete Nodes as if they ' +
        'were the example machines, and hand out its addresses. Give --cloud-provider and --cloud-config for it, and add ' +
        '--use-existing-cluster (CIRRUS_USE_EXISTING_CLUSTER=true) to run it there, or leave --kubeconfig out to run on ' +
        'a local control plane\n' +
        "Run 'cirrus start --help' for usage.\n",
    },
    {
      // A hybrid cluster whose static provider is given the example inventory by name is the demo too.
      argv: [
        'start',
        '--cloud-provider',
        'static,aws',
        '--cloud-config',
        'static=examples/static/inventory.yaml,aws=aws.conf',
        '--default-provider',
        'aws',
        '--kubeconfig',
        '/home/me/.kube/config',
      ],
      message:
        'cirrus start: --kubeconfig /home/me/.kube/config: the demo (the example inventory) acts on an existing ' +
        'cluster only with --use-existing-cluster; against that cluster it would initialize and delete Nodes as if they ' +
        'were the example machines, and hand out its addresses. Give --cloud-provider and --cloud-config for it, and add ' +
        '--use-existing-cluster (CIRRUS_USE_EXISTING_CLUSTER=true) to run it there, or leave --kubeconfig out to run on ' +
        'a local control plane\n' +
        "Run 'cirrus start --help' for usage.\n",
    },
    {
      // Any provider, not only the demo (issue 38, finding 5).
      argv: ['start', '--cloud-provider', 'fake', '--kubeconfig', '/home/me/.kube/config'],
      message:
        'cirrus start: --kubeconfig /home/me/.kube/config: cirrus start (provider fake) acts on an existing cluster ' +
        "only with --use-existing-cluster; against that cluster it would initialize, taint and delete that cluster's " +
        'Nodes and manage its load balancers as its cloud says. Add --use-existing-cluster ' +
        '(CIRRUS_USE_EXISTING_CLUSTER=true) to run it there, or leave --kubeconfig out to run on a local control plane\n' +
        "Run 'cirrus start --help' for usage.\n",
    },
    {
      argv: ['reconcile', 'relay', 'x'],
      message:
        "cirrus reconcile: unknown function 'relay' (functions: node-init, node-lifecycle, service-lb, routes; or a Go " +
        "controller's name or alias; node for node-init)\nRun 'cirrus reconcile --help' for usage.\n",
    },
    {
      argv: ['cluster'],
      env: { CIRRUS_CLUSTER_NAME: 'bad name' },
      message:
        'cirrus cluster: --cluster-name (from CIRRUS_CLUSTER_NAME): must be 1 to 63 letters, digits, "-", "_" or ".", ' +
        "starting and ending with a letter or digit\nRun 'cirrus cluster --help' for usage.\n",
    },
  ];
  for (const { argv, env, message } of usage) {
    it(`refuses 'cirrus ${argv.join(' ')}' with a usage error${env ? ' from the environment' : ''}`, async () => {
      assert.deepEqual(await run(argv, env), { code: usageExitCode, stdout: '', stderr: message });
    });
  }
});

// bin/cirrus.js under a Node.js older than 24 (the system's, where it is one): a message instead of
// a syntax error, with advice for where it runs. In the repository npm ci installed Node.js 24 (the
// `node` devDependency); the package's dist/lib/cirrus.js, built from the same file, runs in a
// project of its own, where that advice does not apply (issue 43).
const olderNode = ['/usr/bin/node', '/usr/local/bin/node'].find((path) => {
  const ran = spawnSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' });
  return ran.status === 0 && Number(ran.stdout.split('.')[0]) < 24;
});

describe('cirrus under an older Node.js', { skip: olderNode === undefined && 'no Node.js older than 24 here' }, () => {
  const bin = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));

  it('in the repository: says npm run cirrus uses the Node.js 24 npm ci installed', () => {
    const ran = spawnSync(olderNode ?? '', [bin, 'version'], { encoding: 'utf8' });
    assert.equal(ran.status, 1);
    assert.match(ran.stderr, /^cirrus needs Node\.js 24 or newer; this is v\d+\.\d+\.\d+\.\n/);
    assert.match(ran.stderr, /In the repository, 'npm run cirrus -- <command>' runs it with the Node\.js 24/);
  });

  it("as the package's command (dist/lib/cirrus.js): says to install Node.js 24, nothing about npm ci", () => {
    const lib = join(mkdtempSync(join(tmpdir(), 'cirrus-package-')), 'lib');
    mkdirSync(lib);
    copyFileSync(bin, join(lib, 'cirrus.js'));
    writeFileSync(join(lib, '..', 'package.json'), '{ "type": "module" }\n');
    const ran = spawnSync(olderNode ?? '', [join(lib, 'cirrus.js'), 'version'], { encoding: 'utf8' });
    assert.equal(ran.status, 1);
    assert.match(ran.stderr, /^cirrus needs Node\.js 24 or newer; this is v\d+/);
    assert.match(ran.stderr, /Install Node\.js 24 or newer .* and run cirrus with it first on the PATH\.\n$/);
    assert.doesNotMatch(ran.stderr, /npm (ci|run)|repository/);
  });
});
