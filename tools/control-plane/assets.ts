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
// TEST_ASSET_KUBE_CONTROLLER_MANAGER (both), or else the two files beside kube-apiserver; they are
// built only for a caller that asks for them (`components`: the scheduling tests; the demo never
// runs them), into the same cache folder, from the same module and version.
//
// Run directly (`node tools/control-plane/assets.ts`) it ensures the binaries and prints their folder.

import { createHash } from 'node:crypto';
import { access, constants, mkdir, mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { goBuild, withBuildLock, type ProgressSink } from './go-build.ts';

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

export { BuildInterrupted, goBuild, interruptedMessage, type GoBuild, type ProgressSink } from './go-build.ts';

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
  /** Stops a build (BuildInterrupted: `interrupted; the next run resumes from the Go cache`). */
  readonly signal?: AbortSignal;
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
  const found = await cachedAssets(dir, pinned, options.components === true);
  if (found !== undefined) return found;
  if (!options.build) {
    throw new AssetsUnavailableError(`no kube-apiserver/etcd in ${dir}; run \`npm run control-plane:build\``);
  }
  if (!(await commandExists('go', env))) {
    throw new AssetsUnavailableError(
      'no kube-apiserver/etcd: Go is not installed and KUBEBUILDER_ASSETS is not set ' +
        '(install Go >= 1.26 to build them once, or point KUBEBUILDER_ASSETS at a folder holding both)',
    );
  }
  const progress = options.progress ?? (() => {});
  // One build per cache entry: a second run waits for it, then finds what it built.
  return withBuildLock(
    dir,
    progress,
    async () => {
      const built = await cachedAssets(dir, pinned, options.components === true);
      if (built !== undefined) return built;
      await buildInto(dir, { pinned, progress, env, components: options.components === true, signal: options.signal });
      const assets = await cachedAssets(dir, pinned, options.components === true);
      if (assets === undefined) throw new Error(`the build left no kube-apiserver/etcd in ${dir}`);
      return { ...assets, source: 'build' as const };
    },
    { signal: options.signal },
  );
}

// The cache folder's binaries, when it holds kube-apiserver and etcd (and, when `components` is
// asked for, kube-scheduler and kube-controller-manager); those two are named when present.
async function cachedAssets(
  dir: string,
  pinned: PinnedVersions,
  components: boolean,
): Promise<ControlPlaneAssets | undefined> {
  const base = {
    kubeApiserver: join(dir, 'kube-apiserver'),
    etcd: join(dir, 'etcd'),
    pinned,
    source: 'cache' as const,
  };
  if (!(await allExecutable([base.kubeApiserver, base.etcd]))) return undefined;
  const beside = componentsIn(dir);
  if (await allExecutable([beside.kubeScheduler, beside.kubeControllerManager])) return { ...base, components: beside };
  return components ? undefined : base;
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

/** What buildInto() builds, and how. */
interface BuildRequest {
  readonly pinned: PinnedVersions;
  readonly progress: ProgressSink;
  readonly env: NodeJS.ProcessEnv;
  /** Also kube-scheduler and kube-controller-manager (only tests about scheduling run them). */
  readonly components: boolean;
  readonly signal: AbortSignal | undefined;
}

// Builds what is missing of kube-apiserver and etcd (and, when asked for, kube-scheduler and
// kube-controller-manager) into `dir`: a first build into a fresh folder renamed into place
// (buildFolder); the two components later into a folder beside it, each file renamed in.
async function buildInto(dir: string, request: BuildRequest): Promise<void> {
  const { pinned, progress, env, signal } = request;
  const started = Date.now();
  const first = !(await allExecutable([join(dir, 'kube-apiserver'), join(dir, 'etcd')]));
  const names = [
    ...(first ? ['etcd', 'kube-apiserver'] : []),
    ...(request.components ? ['kube-scheduler', 'kube-controller-manager'] : []),
  ];
  progress(
    `building ${names.join(', ')} (Kubernetes ${pinned.kubernetes}, etcd ${pinned.etcd}) once for this machine ` +
      `into ${dir}: ${buildEstimate(first, request.components)}; Ctrl-C stops, and the next run resumes from the Go cache`,
  );
  const build = async (staging: string): Promise<void> => {
    // kube-apiserver and the components share most of their packages: built one after the other,
    // each reuses the Go build cache the one before filled.
    for (const name of names) {
      const etcd = name === 'etcd';
      await goBuild({
        dir: moduleDir,
        env,
        progress,
        signal,
        pkg: etcd ? 'go.etcd.io/etcd/server/v3' : `k8s.io/kubernetes/cmd/${name}`,
        output: join(staging, name),
        ldflags: etcd ? [] : versionStamps(pinned.kubernetes),
        name,
      });
    }
  };
  if (first) await buildFolder(dir, names.at(-1) ?? 'kube-apiserver', build);
  else await addToFolder(dir, build);
  progress(`built in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * How long the build takes, said before it starts; the README and docs/testing.md give the same
 * figures (measured on a 2-core machine with empty Go caches: 2 min 24 s for etcd and
 * kube-apiserver, 4 min 5 s with the two components, which add about 1 min on a warm build cache).
 */
export function buildEstimate(first: boolean, components: boolean): string {
  const busy = 'longer while other builds run, less with a warm Go cache';
  if (!first) return 'about 1 min on the Go build cache kube-apiserver filled';
  return components
    ? `about 4 min on 2 cores with empty Go caches, ${busy}`
    : `about 2.5 min on 2 cores with empty Go caches, ${busy}`;
}

// Builds into a fresh folder beside `dir`, then renames each file it made into `dir`.
async function addToFolder(dir: string, build: (staging: string) => Promise<void>): Promise<void> {
  const staging = await mkdtemp(`${dir}.building-`);
  try {
    await build(staging);
    for (const name of await readdir(staging)) await rename(join(staging, name), join(dir, name));
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
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

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // `npm run control-plane:build`: everything the tests run, the scheduling tests' components too.
  const assets = await resolveAssets({
    build: true,
    components: true,
    progress: (line) => {
      console.error(line);
    },
  });
  console.log(dirname(assets.kubeApiserver));
}
