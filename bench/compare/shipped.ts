// What ships, for the contenders that run it: the image's cirrus (scripts/build.ts's `image`
// target, the folder deploy/Dockerfile copies to /app), built into a temporary folder at every
// comparison so that it is never stale, with Node's compile cache warmed as the Dockerfile warms it
// and the image's environment (the ENV of deploy/Dockerfile's last stage, read from the file, with
// NODE_COMPILE_CACHE pointing at the warmed cache). The benchmark cloud
// (provider.ts) is bundled beside it as a provider module of your own would be: everything in it,
// except cirrus's own contract (shared/cloud/), which it imports as 'cirrus-ccm' — the running
// cirrus then hands it its own registry and error classes (app/cli/provider-module.ts).

import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as esbuild from 'esbuild';
import { build } from '../../scripts/build.ts';
import { warmCompileCache } from '../scenarios/coldstart.ts';

export interface Shipped {
  /** The image's entry, /app/cirrus.js in the container. */
  readonly cli: string;
  /** The benchmark cloud, bundled, for --provider-module. */
  readonly providerModule: string;
  /** The environment deploy/Dockerfile sets. */
  readonly env: Readonly<Record<string, string>>;
  readonly dir: string;
  remove(): Promise<void>;
}

const contract = fileURLToPath(new URL('../../shared/cloud/', import.meta.url));
const dockerfile = fileURLToPath(new URL('../../deploy/Dockerfile', import.meta.url));
const repository = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The environment a Dockerfile's last stage sets: its ENV instructions (`KEY=value` pairs, a value
 * quoted when it holds spaces; continuation lines joined), in order, a later one winning.
 */
export function imageEnvironment(text: string): Record<string, string> {
  const lines = text.replace(/\\\n/g, ' ').split('\n');
  const last = lines.findLastIndex((line) => /^FROM\s/i.test(line));
  const env: Record<string, string> = {};
  for (const line of lines.slice(last + 1)) {
    const instruction = /^ENV\s+(.*)$/i.exec(line.trim());
    if (instruction === null) continue;
    for (const pair of instruction[1]?.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("([^"]*)"|\S*)/g) ?? [])
      env[pair[1] ?? ''] = pair[3] ?? pair[2] ?? '';
  }
  return env;
}

/**
 * What ships: built from the working tree, or with `revision` from that commit (`--baseline`: the
 * same comparison's "before"), whose files are taken with `git archive` and built by its own
 * scripts/build.ts, on this checkout's node_modules, and run with its own Dockerfile's environment.
 */
export async function buildShipped(progress: (line: string) => void, revision?: string): Promise<Shipped> {
  const dir = await mkdtemp(join(tmpdir(), 'cirrus-compare-build-'));
  try {
    let environment: string;
    if (revision === undefined) {
      progress(`building what ships (scripts/build.ts image) into ${dir}`);
      await build(['image'], dir);
      environment = await readFile(dockerfile, 'utf8');
    } else {
      progress(`building what shipped at ${revision} (its scripts/build.ts image) into ${dir}`);
      environment = await buildRevision(revision, dir);
    }
    const image = join(dir, 'image');
    const compileCache = join(dir, 'compile-cache');
    await warmCompileCache(image, compileCache);
    const providerModule = join(dir, 'bench-provider', 'provider.js');
    await esbuild.build({
      entryPoints: [fileURLToPath(new URL('provider.ts', import.meta.url))],
      outfile: providerModule,
      bundle: true,
      format: 'esm',
      platform: 'node',
      target: 'node24',
      plugins: [contractFromCirrus],
      logLevel: 'warning',
    });
    return {
      cli: join(image, 'cirrus.js'),
      providerModule,
      env: { ...imageEnvironment(environment), NODE_COMPILE_CACHE: compileCache },
      dir,
      remove: () => rm(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

// The image of commit `revision`, built into `dir`/image by that commit's own build script; its
// Dockerfile's text.
async function buildRevision(revision: string, dir: string): Promise<string> {
  const source = join(dir, 'source');
  await mkdir(source);
  const run = promisify(execFile);
  const commit = (
    await run('git', ['rev-parse', '--verify', `${revision}^{commit}`], { cwd: repository })
  ).stdout.trim();
  await run('sh', ['-c', `git archive ${commit} | tar -x -C "$0"`, source], { cwd: repository });
  await symlink(join(repository, 'node_modules'), join(source, 'node_modules'));
  await run(process.execPath, ['scripts/build.ts', 'image', '--out-dir', dir], { cwd: source });
  return readFile(join(source, 'deploy', 'Dockerfile'), 'utf8');
}

// shared/cloud/*.ts → 'cirrus-ccm', left to the running cirrus to resolve.
const contractFromCirrus: esbuild.Plugin = {
  name: 'contract-from-cirrus',
  setup(b) {
    b.onResolve({ filter: /\/shared\/cloud\/[^/]+\.ts$/ }, (args) =>
      join(args.resolveDir, args.path).startsWith(contract) ? { path: 'cirrus-ccm', external: true } : undefined,
    );
  },
};
