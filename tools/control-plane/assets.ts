// Finds or builds the kube-apiserver and etcd binaries the local control plane runs, and the
// kube-scheduler and kube-controller-manager that tests needing a scheduler start beside them.
//
// Order, following envtest's conventions:
//   1. TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD (both), as controller-runtime reads them;
//   2. KUBEBUILDER_ASSETS, a folder holding `kube-apiserver` and `etcd`;
//   3. the per-machine cache, keyed by this folder's go.mod and go.sum;
//   4. a build from the Go module beside this file, when `go` is installed, into that cache.
// An explicit setting (1 or 2) that does not hold both binaries is an error, never a fall-through.
// The scheduler and controller-manager are TEST_ASSET_KUBE_SCHEDULER and
// TEST_ASSET_KUBE_CONTROLLER_MANAGER (both), or else the two files beside kube-apiserver; a cache
// folder is complete only with all four (one build makes them, from the same module and version).
//
// Run directly (`node tools/control-plane/assets.ts`) it ensures the binaries and prints their folder.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { access, constants, mkdir, mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const moduleDir = dirname(fileURLToPath(import.meta.url));

/** The two binaries, where they came from, and the versions they were built at (when known). */
export interface ControlPlaneAssets {
  readonly kubeApiserver: string;
  readonly etcd: string;
  /** kube-scheduler and kube-controller-manager, when found (always from the cache or a build). */
  readonly components?: ComponentBinaries;
  readonly source: 'TEST_ASSET_*' | 'KUBEBUILDER_ASSETS' | 'cache' | 'build';
  readonly pinned: PinnedVersions;
}

/** The binaries of the control plane's other components, built from the same module and version. */
export interface ComponentBinaries {
  readonly kubeScheduler: string;
  readonly kubeControllerManager: string;
}

/** The versions go.mod pins. */
export interface PinnedVersions {
  readonly kubernetes: string;
  readonly etcd: string;
}

/** No binaries can be had on this machine; `message` says why and how to get them. */
export class AssetsUnavailableError extends Error {
  override readonly name = 'AssetsUnavailableError';
}

/** Progress lines for long steps (the first build). */
export type ProgressSink = (line: string) => void;

/** Reads the Kubernetes and etcd versions pinned by the Go module. */
export async function pinnedVersions(): Promise<PinnedVersions> {
  const goMod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const kubernetes = requirement(goMod, 'k8s.io/kubernetes');
  const etcd = requirement(goMod, 'go.etcd.io/etcd/server/v3');
  return { kubernetes, etcd };
}

function requirement(goMod: string, path: string): string {
  const line = goMod.split('\n').find((l) => l.trim().startsWith(`${path} v`));
  const version = line?.trim().split(/\s+/)[1];
  if (version === undefined) throw new Error(`tools/control-plane/go.mod does not require ${path}`);
  return version;
}

/** The cache folder for the pinned versions: `$CIRRUS_CACHE_DIR` or `$XDG_CACHE_HOME/cirrus` or `~/.cache/cirrus`. */
export async function cacheDir(pinned: PinnedVersions, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const hash = createHash('sha256');
  for (const file of ['go.mod', 'go.sum']) hash.update(await readFile(join(moduleDir, file)));
  const key = `kubernetes-${pinned.kubernetes}-etcd-${pinned.etcd}-${hash.digest('hex').slice(0, 12)}`;
  return join(cacheRoot(env), 'control-plane', key);
}

/** Where cirrus keeps per-machine caches. */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env['CIRRUS_CACHE_DIR']) return env['CIRRUS_CACHE_DIR'];
  return join(env['XDG_CACHE_HOME'] || join(homedir(), '.cache'), 'cirrus');
}

/** Options of resolveAssets(). */
export interface ResolveOptions {
  /** Build the binaries with Go when nothing else provides them. */
  readonly build: boolean;
  /** Require kube-scheduler and kube-controller-manager too (an AssetsUnavailableError without them). */
  readonly components?: boolean;
  readonly progress?: ProgressSink;
  /** The environment to read settings from (default process.env). */
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * Returns usable binaries, building them when `build` is set and nothing else provides them.
 * Throws AssetsUnavailableError when none can be had, with the reason and the remedy.
 */
export async function resolveAssets(options: ResolveOptions): Promise<ControlPlaneAssets> {
  const env = options.env ?? process.env;
  const pinned = await pinnedVersions();
  const explicit = await explicitAssets(pinned, env);
  if (explicit) {
    const components = await explicitComponents(explicit.kubeApiserver, env);
    if (options.components === true && components === undefined) {
      throw new AssetsUnavailableError(
        `no kube-scheduler/kube-controller-manager beside ${explicit.kubeApiserver} (${explicit.source}); ` +
          'set TEST_ASSET_KUBE_SCHEDULER and TEST_ASSET_KUBE_CONTROLLER_MANAGER, or put them in that folder',
      );
    }
    return components === undefined ? explicit : { ...explicit, components };
  }

  const dir = await cacheDir(pinned, env);
  const cached = {
    kubeApiserver: join(dir, 'kube-apiserver'),
    etcd: join(dir, 'etcd'),
    components: componentsIn(dir),
    pinned,
  };
  const { kubeScheduler, kubeControllerManager } = cached.components;
  if (await allExecutable([cached.kubeApiserver, cached.etcd, kubeScheduler, kubeControllerManager])) {
    return { ...cached, source: 'cache' };
  }
  if (!options.build) {
    throw new AssetsUnavailableError(`no kube-apiserver/etcd in ${dir}; run \`npm run control-plane:build\``);
  }
  if (!(await commandExists('go', env))) {
    throw new AssetsUnavailableError(
      'no kube-apiserver/etcd: Go is not installed and KUBEBUILDER_ASSETS is not set ' +
        '(install Go >= 1.26 to build them once, or point KUBEBUILDER_ASSETS at a folder holding both)',
    );
  }
  await buildInto(dir, pinned, options.progress ?? (() => {}), env);
  return { ...cached, source: 'build' };
}

async function explicitAssets(pinned: PinnedVersions, env: NodeJS.ProcessEnv): Promise<ControlPlaneAssets | undefined> {
  const apiserver = env['TEST_ASSET_KUBE_APISERVER'];
  const etcd = env['TEST_ASSET_ETCD'];
  if (apiserver || etcd) {
    if (!apiserver || !etcd) throw new Error('set both TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD, or neither');
    await mustBeExecutable(apiserver, 'TEST_ASSET_KUBE_APISERVER');
    await mustBeExecutable(etcd, 'TEST_ASSET_ETCD');
    return { kubeApiserver: apiserver, etcd, source: 'TEST_ASSET_*', pinned };
  }
  const folder = env['KUBEBUILDER_ASSETS'];
  if (!folder) return undefined;
  const assets = { kubeApiserver: join(folder, 'kube-apiserver'), etcd: join(folder, 'etcd') };
  await mustBeExecutable(assets.kubeApiserver, 'KUBEBUILDER_ASSETS');
  await mustBeExecutable(assets.etcd, 'KUBEBUILDER_ASSETS');
  return { ...assets, source: 'KUBEBUILDER_ASSETS', pinned };
}

// TEST_ASSET_KUBE_SCHEDULER and TEST_ASSET_KUBE_CONTROLLER_MANAGER, or the two beside kube-apiserver
// (a KUBEBUILDER_ASSETS folder, or the cache folder global-setup hands to test files); undefined
// when neither holds them.
async function explicitComponents(
  kubeApiserver: string,
  env: NodeJS.ProcessEnv,
): Promise<ComponentBinaries | undefined> {
  const scheduler = env['TEST_ASSET_KUBE_SCHEDULER'];
  const controllerManager = env['TEST_ASSET_KUBE_CONTROLLER_MANAGER'];
  if (scheduler || controllerManager) {
    if (!scheduler || !controllerManager)
      throw new Error('set both TEST_ASSET_KUBE_SCHEDULER and TEST_ASSET_KUBE_CONTROLLER_MANAGER, or neither');
    await mustBeExecutable(scheduler, 'TEST_ASSET_KUBE_SCHEDULER');
    await mustBeExecutable(controllerManager, 'TEST_ASSET_KUBE_CONTROLLER_MANAGER');
    return { kubeScheduler: scheduler, kubeControllerManager: controllerManager };
  }
  const beside = componentsIn(dirname(kubeApiserver));
  return (await allExecutable([beside.kubeScheduler, beside.kubeControllerManager])) ? beside : undefined;
}

function componentsIn(dir: string): ComponentBinaries {
  return { kubeScheduler: join(dir, 'kube-scheduler'), kubeControllerManager: join(dir, 'kube-controller-manager') };
}

async function allExecutable(paths: readonly string[]): Promise<boolean> {
  for (const path of paths) if (!(await isExecutable(path))) return false;
  return true;
}

async function mustBeExecutable(path: string, setting: string): Promise<void> {
  if (!(await isExecutable(path))) throw new Error(`${setting}: ${path} is not an executable file`);
}

/** Whether `path` is a file this process may execute. */
export async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Whether `command` is an executable file in one of PATH's folders. */
export async function commandExists(command: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  const dirs = (env['PATH'] ?? '').split(':').filter(Boolean);
  for (const dir of dirs) if (await isExecutable(join(dir, command))) return true;
  return false;
}

/**
 * Runs `build` into a fresh folder beside `dir`, then renames it into place, so a build that dies
 * half-way (or a concurrent one) never leaves a folder that looks complete. `last`, the file the
 * build writes last, in `dir` means another build finished first, which is as good.
 */
export async function buildFolder(dir: string, last: string, build: (staging: string) => Promise<void>): Promise<void> {
  await mkdir(dirname(dir), { recursive: true });
  const staging = await mkdtemp(`${dir}.building-`);
  try {
    await build(staging);
    await rename(staging, dir).catch(async (error: unknown) => {
      if (!(await isExecutable(join(dir, last)))) throw error;
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

// Builds the four binaries into `dir` (buildFolder).
async function buildInto(
  dir: string,
  pinned: PinnedVersions,
  progress: ProgressSink,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const started = Date.now();
  progress(
    `building kube-apiserver, kube-scheduler and kube-controller-manager ${pinned.kubernetes} and etcd ` +
      `${pinned.etcd} once for this machine (about 3-25 min, depending on the Go build cache) into ${dir}`,
  );
  await buildFolder(dir, 'kube-controller-manager', async (staging) => {
    const build = { dir: moduleDir, env, progress };
    await goBuild({
      ...build,
      pkg: 'go.etcd.io/etcd/server/v3',
      output: join(staging, 'etcd'),
      ldflags: [],
      name: 'etcd',
    });
    // The other three share most of their packages: built one after the other, each reuses the
    // Go build cache the one before filled.
    for (const name of ['kube-apiserver', 'kube-scheduler', 'kube-controller-manager']) {
      await goBuild({
        ...build,
        pkg: `k8s.io/kubernetes/cmd/${name}`,
        output: join(staging, name),
        ldflags: versionStamps(pinned.kubernetes),
        name,
      });
    }
  });
  progress(`built in ${Math.round((Date.now() - started) / 1000)} s`);
}

/** The -ldflags that stamp Kubernetes `version` (as its release build does) into a binary built from these modules. */
export function versionStamps(kubernetes: string): string[] {
  const [, major, minor] = /^v(\d+)\.(\d+)\./.exec(kubernetes) ?? [];
  return ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'].flatMap((pkg) => [
    `-X ${pkg}.gitVersion=${kubernetes}`,
    `-X ${pkg}.gitMajor=${major ?? ''}`,
    `-X ${pkg}.gitMinor=${minor ?? ''}`,
  ]);
}

/** One `go build` of `pkg` in the Go module at `dir` into `output`, statically linked and stripped. */
export interface GoBuild {
  readonly dir: string;
  readonly pkg: string;
  readonly output: string;
  readonly ldflags: readonly string[];
  /** What the progress lines call it. */
  readonly name: string;
  readonly env: NodeJS.ProcessEnv;
  readonly progress: ProgressSink;
}

/**
 * Runs the build; rejects with the last lines of go's output when it fails. `go build -v` names
 * each package as it compiles it; one progress line every 15 s says how far it got.
 */
export async function goBuild(build: GoBuild): Promise<void> {
  const { pkg, output, name, progress } = build;
  const args = ['build', '-v', '-trimpath', '-ldflags', ['-s', '-w', ...build.ldflags].join(' '), '-o', output, pkg];
  const started = Date.now();
  const child = spawn('go', args, {
    cwd: build.dir,
    env: { ...build.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let compiled = 0;
  const tail: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    compiled += 1;
    tail.push(line);
    if (tail.length > 30) tail.shift();
  });
  const timer = setInterval(() => {
    progress(`  ${name}: ${compiled} packages compiled so far`);
  }, 15_000);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) throw new Error(`go build ${pkg} in ${build.dir} failed (exit ${code}):\n${tail.join('\n')}`);
  } finally {
    clearInterval(timer);
  }
  progress(`  ${name}: linked in ${Math.round((Date.now() - started) / 1000)} s`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const assets = await resolveAssets({
    build: true,
    progress: (line) => {
      console.error(line);
    },
  });
  console.log(dirname(assets.kubeApiserver));
}
