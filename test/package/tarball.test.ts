// The npm package, as a provider author gets it: `npm pack` of the built library (scripts/build.ts
// lib, what the package's prepack runs), installed into a fresh project outside the repository —
// examples/out-of-tree-provider, with only the tarball and the registry (npm's cache keeps it fast).
// There its TypeScript type checks against the package's .d.ts, its own main imports cirrus-ccm,
// registers its provider and serves node-init against the real control plane, which initializes a
// Node. The build and the pack happen in a temporary folder, so that concurrent runs and the
// repository's own dist/ never meet.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { z } from 'zod';
import { createNode, newNode, ownTaints, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster } from '../harness/cluster.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const example = join(repoRoot, 'examples/out-of-tree-provider');

const manifestSchema = z.object({
  name: z.string(),
  version: z.string(),
  private: z.boolean().optional(),
  files: z.array(z.string()),
  bin: z.record(z.string(), z.string()),
  exports: z.record(z.string(), z.union([z.string(), z.object({ types: z.string(), default: z.string() })])),
  scripts: z.record(z.string(), z.string()),
});
const manifest = manifestSchema.parse(JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8')));

// npm, as a person would run it, without the settings of the npm that runs this test (npm_config_*),
// and a `node --test` of the project's as its own run, not a child reporting to this test runner.
function cleanEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('npm_') && name !== 'NODE_TEST_CONTEXT'),
  );
  return { ...env, npm_config_update_notifier: 'false', npm_config_audit: 'false', npm_config_fund: 'false' };
}

/** Runs `command` in `cwd`; its stdout, or an error with everything it printed. */
async function run(command: string, args: readonly string[], cwd: string): Promise<string> {
  const child = spawn(command, args, { cwd, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0)
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) exited ${String(code)}:\n${stdout}\n${stderr}`);
  return stdout;
}

const packSchema = z.array(z.object({ filename: z.string(), files: z.array(z.object({ path: z.string() })) }));

describe('the cirrus-ccm package, installed from its tarball into a project of its own', () => {
  let work: string;
  let project: string;
  let packed: string[];

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'cirrus-package-'));
    // What the repository root packs: package.json, README.md, the files it lists; dist/ built here.
    const stage = join(work, 'stage');
    await run(
      process.execPath,
      [join(repoRoot, 'scripts/build.ts'), 'lib', '--out-dir', join(stage, 'dist')],
      repoRoot,
    );
    for (const file of ['package.json', 'README.md', ...manifest.files.filter((f) => !f.startsWith('dist/'))]) {
      await mkdir(dirname(join(stage, file)), { recursive: true });
      await cp(join(repoRoot, file), join(stage, file), { recursive: true });
    }
    const pack = packSchema.parse(
      JSON.parse(await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], stage)),
    );
    const [tarball] = pack;
    assert.ok(tarball);
    packed = tarball.files.map((f) => f.path);
    // The example project, as its author would have it, depending on that tarball.
    project = join(work, 'naming');
    await cp(example, project, { recursive: true, filter: (source) => !source.includes('node_modules') });
    const pkg = JSON.parse(await readFile(join(project, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    pkg.dependencies[manifest.name] = `file:${join(work, tarball.filename)}`;
    await writeFile(join(project, 'package.json'), JSON.stringify(pkg, null, 2));
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], project);
  });
  after(async () => {
    await rm(work, { recursive: true, force: true });
  });

  // Any kubeconfig will do where nothing calls the API server.
  const anyKubeconfig = async (): Promise<string> => {
    const file = join(work, 'kubeconfig');
    await writeFile(
      file,
      'apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\n' +
        'users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n',
    );
    return file;
  };

  it('is cirrus-ccm, publishable, with JavaScript and .d.ts behind its exports, and no TypeScript source', () => {
    assert.equal(manifest.name, 'cirrus-ccm');
    assert.notEqual(manifest.private, true, 'a package provider authors install');
    assert.match(manifest.scripts['prepack'] ?? '', /scripts\/build\.ts lib/, 'npm pack builds what it packs');
    const targets = [
      ...Object.values(manifest.bin),
      ...Object.values(manifest.exports).flatMap((target) =>
        typeof target === 'string' ? [target] : [target.types, target.default],
      ),
    ].map((path) => path.replace(/^\.\//, ''));
    for (const target of targets) assert.ok(packed.includes(target), `${target} is in the tarball`);
    for (const [subpath, target] of Object.entries(manifest.exports)) {
      if (typeof target === 'string') continue;
      assert.match(target.types, /\.d\.ts$/, subpath);
      assert.match(target.default, /\.js$/, subpath);
    }
    assert.deepEqual(
      packed.filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts')),
      [],
      'Node strips no types under node_modules',
    );
    assert.deepEqual(packed.filter((path) => !path.startsWith('dist/lib/') && !path.startsWith('dist/types/')).sort(), [
      'README.md',
      'examples/static/inventory.yaml',
      'package.json',
    ]);
  });

  it("type checks the project's provider and main against the package's declarations", async () => {
    await run(process.execPath, [join(project, 'node_modules/typescript/bin/tsc'), '-p', project], project);
  });

  it("runs the conformance kit from the package's cirrus-ccm/conformance in the project's own test", async () => {
    const output = await run(process.execPath, ['--test', '--test-reporter=tap', 'conformance.test.ts'], project);
    assert.match(output, /^# pass 1$/m);
    assert.match(output, /^# fail 0$/m);
  });

  it("installs the package's command line, which serves with the project's provider given as --provider-module", async () => {
    const cirrus = join(project, 'node_modules/.bin/cirrus');
    const version = await run(cirrus, ['--version'], project);
    assert.match(version, new RegExp(`^cirrus ${manifest.version.replaceAll('.', '\\.')}\n`));
    assert.match(version, /^providers aws, fake, http, static$/m);
    // serve checks at start that it reaches its cluster: the suite's API server, when there is one.
    if (controlPlaneSkip !== false) return;
    const kubeconfig = (await testCluster()).info.adminKubeconfig;
    const argv = ['serve', 'node-init', '--provider-module', './naming-provider.ts', '--cloud-provider', 'naming'];
    const child = spawn(
      cirrus,
      [
        ...argv,
        '--cloud-config',
        'naming.yaml',
        '--kubeconfig',
        kubeconfig,
        '--port',
        '0',
        '--bind-address',
        '127.0.0.1',
      ],
      { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = once(child, 'exit') as Promise<[number | null]>;
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await Promise.race([
        servingAt(child.stdout, 'naming'),
        exited.then(() => {
          throw new Error(`cirrus exited before serving:\n${stderr}`);
        }),
      ]);
    } finally {
      child.kill('SIGTERM');
      assert.equal((await exited)[0], 0, stderr);
    }
  });

  it("refuses the provider's bad cloud-config, naming the field, from the project's main", async () => {
    const bad = join(work, 'bad.yaml');
    await writeFile(bad, "pattern: '(unclosed'\n");
    const kubeconfig = await anyKubeconfig();
    const args = ['main.ts', 'serve', 'node-init', '--cloud-provider', 'naming', '--cloud-config', bad];
    await assert.rejects(run(process.execPath, [...args, '--kubeconfig', kubeconfig], project), (error: Error) => {
      assert.match(error.message, /exited 1/);
      assert.match(error.message, /bad\.yaml: pattern: Invalid regular expression/);
      return true;
    });
  });

  describe('against the control plane', { skip: controlPlaneSkip }, () => {
    it("serves node-init from the project's main, whose provider initializes a Node", async () => {
      const cluster = await testCluster();
      const core = cluster.admin.makeApiClient(CoreV1Api);
      // naming.yaml's pattern: <zone>-<type>-<number>.
      const name = `fra-1-m5large-${String(randomInt(1e9))}`;
      await createNode(core, newNode(name, uninitialized));
      const argv = ['main.ts', 'serve', 'node-init', '--cloud-provider', 'naming', '--cloud-config', 'naming.yaml'];
      const child = spawn(
        process.execPath,
        [...argv, '--kubeconfig', cluster.info.adminKubeconfig, '--port', '0', '--bind-address', '127.0.0.1'],
        { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = once(child, 'exit') as Promise<[number | null]>;
      try {
        const url = await Promise.race([
          servingAt(child.stdout),
          exited.then(() => {
            throw new Error(`the project's main exited before serving:\n${stderr}`);
          }),
        ]);
        const reply = await fetch(`${url}/reconcile`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name }),
        });
        assert.equal(reply.status, 200, await reply.clone().text());
        const node = await core.readNode({ name });
        assert.equal(node.spec?.providerID, `naming://${name}`);
        const labels = node.metadata?.labels ?? {};
        assert.equal(labels['topology.kubernetes.io/zone'], 'fra-1');
        assert.equal(labels['node.kubernetes.io/instance-type'], 'm5large');
        assert.deepEqual(ownTaints(node), []);
      } finally {
        child.kill('SIGTERM');
        assert.equal((await exited)[0], 0, stderr);
      }
    });
  });
});

// The address of the first "<function> serving" log line (with `provider`, when given).
async function servingAt(stdout: NodeJS.ReadableStream, provider?: string): Promise<string> {
  for await (const line of createInterface({ input: stdout })) {
    const entry = JSON.parse(line) as { msg?: string; address?: string; provider?: string };
    if (entry.msg?.endsWith(' serving') !== true || entry.address === undefined) continue;
    assert.equal(entry.provider, provider ?? entry.provider);
    return entry.address;
  }
  throw new Error('no "serving" line');
}
