// A tool some tests run, built with Go once per machine into the cache (tools/cloud-provider-aws/,
// tools/helm/): found there, or built when the caller allows it, or an AssetsUnavailableError that
// says what is missing and the command that builds it.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AssetsUnavailableError, buildFolder, commandExists, isExecutable, type ProgressSink } from './assets.ts';
import { withBuildLock } from './go-build.ts';

/** The binary, the release it was built from, and whether this call built it. */
export interface GoToolBinary {
  readonly binary: string;
  readonly version: string;
  readonly source: 'cache' | 'build';
}

/** Options of a tool's resolve function. */
export interface GoToolOptions {
  /** Build it with Go when the cache has none (minutes); otherwise an AssetsUnavailableError. */
  readonly build: boolean;
  readonly progress?: ProgressSink;
  readonly env?: NodeJS.ProcessEnv;
}

/** What a tool is and how it is built. */
export interface GoTool {
  /** The binary's file name, and what messages call it. */
  readonly name: string;
  readonly version: string;
  /** Its cache folder (versioned). */
  readonly dir: string;
  /** The npm script that builds it. */
  readonly script: string;
  /** Builds the binary into `staging/<name>` (goBuild). */
  readonly build: (staging: string, progress: ProgressSink, env: NodeJS.ProcessEnv) => Promise<void>;
}

/**
 * The cached binary, built first when `options.build` is set. Throws AssetsUnavailableError when
 * there is none and none can be built here.
 */
export async function resolveGoTool(tool: GoTool, options: GoToolOptions): Promise<GoToolBinary> {
  const env = options.env ?? process.env;
  const { name, version, dir } = tool;
  const binary = join(dir, name);
  if (await isExecutable(binary)) return { binary, version, source: 'cache' };
  if (!options.build) {
    throw new AssetsUnavailableError(
      `no ${name} ${version} in ${dir}: run \`npm run ${tool.script}\` ` +
        '(it needs Go >= 1.26 and the Go module proxy, once per machine)',
    );
  }
  if (!(await commandExists('go', env))) {
    throw new AssetsUnavailableError(
      `no ${name} ${version}: Go is not installed (install Go >= 1.26 to build it once)`,
    );
  }
  const progress = options.progress ?? (() => {});
  // One build per cache entry: a second run waits for it, then finds what it built.
  return withBuildLock(dir, progress, async () => {
    if (await isExecutable(binary)) return { binary, version, source: 'cache' as const };
    const started = performance.now();
    progress(
      `building ${name} ${version} once for this machine into ${dir} (minutes with an empty Go cache: ` +
        'progress every 15 s with the time left; Ctrl-C stops, and the next run resumes from the Go cache)',
    );
    await buildFolder(dir, name, (staging) => tool.build(staging, progress, env));
    progress(`built ${name} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    return { binary, version, source: 'build' as const };
  });
}

/**
 * Runs `build` in a temporary Go module whose one requirement is `module` at `version`, with the
 * environment `go build -mod=mod` needs there (go completes the module with the requirements the
 * tool's own go.mod names, and their sums); the folder is removed afterwards.
 */
export async function inRequirementModule<T>(
  requirement: { readonly name: string; readonly module: string; readonly version: string },
  env: NodeJS.ProcessEnv,
  build: (moduleDir: string, goEnv: NodeJS.ProcessEnv) => Promise<T>,
): Promise<T> {
  const moduleDir = await mkdtemp(join(tmpdir(), `cirrus-${requirement.name}-module-`));
  const goEnv = { ...env, GOFLAGS: `${env['GOFLAGS'] ?? ''} -mod=mod`.trim() };
  try {
    await writeFile(
      join(moduleDir, 'go.mod'),
      `module cirrus.local/${requirement.name}-build\n\ngo 1.26.0\n\nrequire ${requirement.module} ${requirement.version}\n`,
    );
    return await build(moduleDir, goEnv);
  } finally {
    await rm(moduleDir, { recursive: true, force: true });
  }
}
