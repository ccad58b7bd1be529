// A real etcd and kube-apiserver on loopback, for cirrus's integration tests and `cirrus cluster`;
// on request also kube-scheduler and kube-controller-manager (with the controllers asked for), for
// tests about where Pods are scheduled.
//
// Both listen on free ports of 127.0.0.1. Authorization is RBAC; authentication is by client
// certificate from the control plane's own CA, so an admin (group system:masters) and any other
// user can be minted on demand, and ServiceAccount tokens work through the TokenRequest API.
// What runs is described by `cluster.json` in the run folder, which other processes (test files)
// read with attachControlPlane().

import { rmSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlaneAssets } from './assets.ts';
import {
  startApiserver,
  startComponents,
  startEtcd,
  waitForApiserver,
  waitForEtcd,
  type ApiserverRestart,
  type ApiserverSetup,
  type ComponentOptions,
} from './components.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import type { KeyPair } from './pki.ts';
import { getHttps } from './probe.ts';
import { credentials, portFor } from './kept-run.ts';
import { atExit, isAlive, type ManagedProcess } from './processes.ts';

/** What a running control plane offers to clients; serialized as `cluster.json`. */
export interface ControlPlaneInfo {
  /** The API server's URL, https://127.0.0.1:<port>. */
  readonly server: string;
  /** kube-apiserver's `/version` gitVersion, e.g. v1.36.3. */
  readonly kubernetesVersion: string;
  readonly etcdVersion: string;
  /** The run folder: certificates, kubeconfigs, logs, etcd data. */
  readonly dir: string;
  readonly ca: KeyPair;
  /** A kubeconfig for `cirrus-admin` in group `system:masters`. */
  readonly adminKubeconfig: string;
  readonly logs: {
    readonly etcd: string;
    readonly apiserver: string;
    readonly scheduler?: string;
    readonly controllerManager?: string;
  };
  /** How long start() took, from spawning etcd to the `default` namespace existing. */
  readonly startMs: number;
}

/** Options for ControlPlane.start(). */
export interface StartOptions {
  readonly assets: ControlPlaneAssets;
  /** Run folder; a fresh temporary one by default (removed by stop()). */
  readonly dir?: string;
  /** Name of the cluster and context in written kubeconfigs. */
  readonly clusterName?: string;
  /** Milliseconds to wait for readiness (default 60 s, or KUBEBUILDER_CONTROLPLANE_START_TIMEOUT). */
  readonly timeoutMs?: number;
  /** Components to start beside the API server (their binaries: `assets.components`). */
  readonly components?: ComponentOptions;
  /**
   * Stops the start: the processes started so far are stopped, a temporary run folder removed, and
   * start() rejects with ControlPlaneInterrupted at once.
   */
  readonly signal?: AbortSignal;
}

/** start() was stopped by its signal; nothing it started is left. */
export class ControlPlaneInterrupted extends Error {
  override readonly name = 'ControlPlaneInterrupted';
}

const runDirPrefix = 'cirrus-control-plane-';

/** A running etcd + kube-apiserver pair. */
export class ControlPlane {
  readonly info: ControlPlaneInfo;
  readonly #processes: ManagedProcess[];
  readonly #ownsDir: boolean;
  readonly #apiserver: ApiserverRestart;
  // Processes stopped on purpose by restartApiserver(): their exit is no failure.
  readonly #replaced = new Set<ManagedProcess>();
  // Restarts run one after the other: two at once would start two API servers on one port.
  #restarts: Promise<void> = Promise.resolve();
  #stopping = false;

  private constructor(
    info: ControlPlaneInfo,
    processes: ManagedProcess[],
    ownsDir: boolean,
    apiserver: ApiserverRestart,
  ) {
    this.info = info;
    this.#processes = processes;
    this.#ownsDir = ownsDir;
    this.#apiserver = apiserver;
  }

  /**
   * Starts etcd, then kube-apiserver, and resolves once the API server serves the `default` namespace.
   * A port found free can be taken before the process binds it (another process's outgoing
   * connection gets it from the same ephemeral range): a start that fails with "address already in
   * use" is made again, with new ports, up to three times.
   */
  static async start(options: StartOptions): Promise<ControlPlane> {
    for (let attempt = 1; ; attempt += 1) {
      const started = await ControlPlane.#attempt(options, attempt >= 3);
      if (started !== undefined) return started;
    }
  }

  // One start: the control plane, or undefined when it is to be made again (a port was taken).
  static async #attempt(options: StartOptions, last: boolean): Promise<ControlPlane | undefined> {
    if (isAborted(options.signal)) throw new ControlPlaneInterrupted('interrupted before it started');
    const run = await runDir(options.dir);
    try {
      return await ControlPlane.#startIn(run.dir, options);
    } catch (error) {
      const outcome = failedStart(error, isAborted(options.signal), last);
      // The last failure keeps its folder: the error names its logs.
      if (outcome !== 'fail') await run.remove();
      if (outcome !== 'interrupted') run.forget();
      if (outcome === 'retry') return undefined;
      throw outcome === 'interrupted'
        ? new ControlPlaneInterrupted('interrupted while starting', { cause: error })
        : error;
    }
  }

  static async #startIn(dir: string, options: StartOptions): Promise<ControlPlane> {
    const started = Date.now();
    const ownsDir = options.dir === undefined;
    await mkdir(join(dir, 'logs'), { recursive: true });
    const timeoutMs = options.timeoutMs ?? startTimeoutFromEnv() ?? 60_000;
    const pki = join(dir, 'pki');
    await mkdir(pki, { recursive: true });
    const { previous, ca, serving, admin } = await credentials(dir, ownsDir);
    const processes: ManagedProcess[] = [];
    const forget = stopOnAbort(options.signal, processes);
    try {
      const etcd = await startEtcd(options.assets.etcd, dir, processes);
      const setup: ApiserverSetup = {
        binary: options.assets.kubeApiserver,
        dir,
        etcdUrl: etcd.url,
        certs: { ca, serving },
        port: await portFor(previous),
      };
      const apiserver = await startApiserver(setup, processes);
      const deadline = started + timeoutMs;
      const etcdVersion = await waitForEtcd(etcd.url, processes, deadline);
      const client = { ca: ca.cert, cert: admin.cert, key: admin.key };
      await waitForApiserver(apiserver, client, processes, deadline);
      const version = JSON.parse((await getHttps(apiserver, '/version', client)).body) as { gitVersion: string };
      const components =
        options.components === undefined
          ? {}
          : await startComponents(
              options.components,
              { assets: options.assets, dir, server: apiserver, ca },
              processes,
              deadline,
            );
      const adminKubeconfig = join(dir, 'admin.kubeconfig');
      const info: ControlPlaneInfo = {
        server: apiserver,
        kubernetesVersion: version.gitVersion,
        etcdVersion,
        dir,
        ca,
        adminKubeconfig,
        logs: { etcd: processes[0]?.logFile ?? '', apiserver: processes[1]?.logFile ?? '', ...components },
        startMs: Date.now() - started,
      };
      await writeKubeconfig(info, admin, adminKubeconfig, options.clusterName);
      await writeFile(join(dir, 'cluster.json'), JSON.stringify(info, null, 2));
      return new ControlPlane(info, processes, ownsDir, { setup, client, timeoutMs });
    } catch (error) {
      await Promise.all(processes.map((p) => p.stop(2_000)));
      throw new Error(`${(error as Error).message}\n${await logTails(processes)}`, { cause: error });
    } finally {
      forget();
    }
  }

  /**
   * Settles when kube-apiserver or etcd exits other than through stop(), with a message naming
   * the process and its log; never settles for a control plane that stop() ends.
   */
  get failed(): Promise<string> {
    return Promise.race(
      this.#processes.map(async (p) => {
        const code = await p.exited;
        if (this.#stopping || this.#replaced.has(p)) return new Promise<string>(() => {});
        return `${p.name} exited (${code === null ? 'killed by a signal' : `code ${code}`}); its log: ${p.logFile}`;
      }),
    );
  }

  /** Path of the `cluster.json` describing this control plane. */
  get infoFile(): string {
    return join(this.info.dir, 'cluster.json');
  }

  /**
   * Stops kube-apiserver (SIGTERM, as a rolling restart would) and starts it again on the same
   * port with the same flags; resolves once it is ready again. etcd keeps running, so the data
   * survives, but the new API server's watch cache starts from etcd's current revision: a watch
   * resumed from an older resourceVersion gets 410 Gone. Clients see refused connections while it
   * is down. kube-apiserver drains open watches for about 10 s before it exits; `graceMs` (default
   * 10 s) is how long it may take before it is killed (SIGKILL), as in a crash.
   */
  restartApiserver(options: { graceMs?: number } = {}): Promise<void> {
    const restart = this.#restarts.then(() => this.#restartApiserver(options));
    this.#restarts = restart.catch(() => undefined);
    return restart;
  }

  /** True when kube-apiserver has exited other than through stop() or restartApiserver(): it crashed. */
  get apiserverCrashed(): boolean {
    const apiserver = this.#processes.find((p) => p.name === 'kube-apiserver');
    return !this.#stopping && apiserver !== undefined && !this.#replaced.has(apiserver) && apiserver.hasExited();
  }

  async #restartApiserver(options: { graceMs?: number }): Promise<void> {
    const index = this.#processes.findIndex((p) => p.name === 'kube-apiserver');
    const old = this.#processes[index];
    if (old === undefined) throw new Error('no kube-apiserver to restart');
    this.#replaced.add(old);
    await old.stop(options.graceMs);
    const started: ManagedProcess[] = [];
    await startApiserver(this.#apiserver.setup, started);
    this.#processes.splice(index, 1, ...started);
    await waitForApiserver(
      this.info.server,
      this.#apiserver.client,
      this.#processes,
      Date.now() + this.#apiserver.timeoutMs,
    );
  }

  /** Process ids of kube-apiserver and etcd (for tests and diagnostics). */
  get pids(): number[] {
    return this.#processes.map((p) => p.pid);
  }

  /**
   * Stops kube-controller-manager and kube-scheduler (when started), kube-apiserver, then etcd. A temporary run folder is removed; its logs are first copied
   * to `keepLogsIn` when given.
   */
  async stop(options: { keepLogsIn?: string } = {}): Promise<void> {
    this.#stopping = true;
    for (const process of [...this.#processes].reverse()) await process.stop();
    if (options.keepLogsIn !== undefined) {
      await rm(options.keepLogsIn, { recursive: true, force: true });
      await cp(join(this.info.dir, 'logs'), options.keepLogsIn, { recursive: true });
    }
    if (this.#ownsDir) await rm(this.info.dir, { recursive: true, force: true });
  }
}

/** Reads the `cluster.json` of a control plane started by another process. */
export async function attachControlPlane(infoFile: string): Promise<ControlPlaneInfo> {
  return JSON.parse(await readFile(infoFile, 'utf8')) as ControlPlaneInfo;
}

async function freshRunDir(): Promise<string> {
  await removeAbandonedRunDirs();
  return mkdtemp(join(tmpdir(), `${runDirPrefix}${process.pid}-`));
}

// A run folder whose owner died without stop() (SIGKILL) is left behind; the next start removes it.
async function removeAbandonedRunDirs(): Promise<void> {
  const entries = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const entry of entries) {
    const pid = Number(entry.slice(runDirPrefix.length).split('-')[0]);
    if (!entry.startsWith(runDirPrefix) || !Number.isInteger(pid) || isAlive(pid)) continue;
    await rm(join(tmpdir(), entry), { recursive: true, force: true });
  }
}

// What a failed start leads to: stopped by its signal, made again (a port was taken, but not on
// the last attempt), or a failure.
function failedStart(error: unknown, interrupted: boolean, last: boolean): 'interrupted' | 'retry' | 'fail' {
  if (interrupted) return 'interrupted';
  return !last && (error as Error).message.includes('address already in use') ? 'retry' : 'fail';
}

/** The run folder of one start; a temporary one is removed by remove(), or on exit unless forgotten. */
interface RunDir {
  readonly dir: string;
  remove(): Promise<void>;
  forget(): void;
}

// The given folder (kept whatever happens), or a fresh temporary one that a process exiting at
// once (a second Ctrl-C, while starting or stopping) removes on its way out; stop() removes it
// otherwise, and then the exit finds nothing.
async function runDir(given: string | undefined): Promise<RunDir> {
  if (given !== undefined) return { dir: given, remove: async () => {}, forget: () => {} };
  const dir = await freshRunDir();
  const forget = atExit(() => {
    removeSync(dir);
  });
  return {
    dir,
    remove: () => rm(dir, { recursive: true, force: true }),
    forget: () => {
      forget();
    },
  };
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

// Interrupted: the processes started so far stop now (and one started after, by the wait for
// it), so the wait for them fails at once. Returns what removes the listener.
function stopOnAbort(signal: AbortSignal | undefined, processes: readonly ManagedProcess[]): () => void {
  const interrupt = (): void => {
    for (const p of processes) void p.stop(2_000);
  };
  signal?.addEventListener('abort', interrupt, { once: true });
  return () => signal?.removeEventListener('abort', interrupt);
}

function removeSync(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    // on the way out: nothing more can be done
  }
}

function startTimeoutFromEnv(): number | undefined {
  const value = process.env['KUBEBUILDER_CONTROLPLANE_START_TIMEOUT'];
  if (!value) return undefined;
  const match = /^(\d+)(ms|s|m)$/.exec(value);
  if (!match) throw new Error(`KUBEBUILDER_CONTROLPLANE_START_TIMEOUT: '${value}' is not a duration like 90s`);
  return Number(match[1]) * { ms: 1, s: 1_000, m: 60_000 }[match[2] as 'ms' | 's' | 'm'];
}

async function logTails(processes: ManagedProcess[]): Promise<string> {
  const parts = await Promise.all(
    processes.map(async (p) => {
      const text = await readFile(p.logFile, 'utf8').catch(() => '');
      return `--- last lines of ${p.logFile} ---\n${text.split('\n').slice(-25).join('\n')}`;
    }),
  );
  return parts.join('\n');
}
