// The local AWS emulator: moto's server (EC2, ELBv2 and the rest of AWS in one process, state in
// memory), pinned, installed once per machine into a virtualenv under cirrus's cache folder and
// started on a free loopback port, for the aws provider's tests, the bench and the walk-through
// (docs/providers/aws.md, "Against a local emulator", says where it differs from AWS).
//
// The install is built in a temporary folder beside its final place and renamed into it, with a
// marker written last: an install that dies half-way is never taken for a complete one, and two
// processes installing at once each finish their own and keep whichever came first. The server is
// started with `python -m moto.server` (a venv's console scripts name the folder they were
// installed in, which the rename changes) and dies with the process that started it.
//
// Run directly (`node tools/aws-emulator/server.ts`) it installs moto if needed and prints where.

import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot, isExecutable } from '../control-plane/index.ts';
import { freePort, startProcess, type ManagedProcess } from '../control-plane/processes.ts';

/** The moto version the emulator runs (the one the aws provider's tests were measured against). */
export const motoVersion = '5.2.5';
const requirement = `moto[server]==${motoVersion}`;
const markerName = 'cirrus-installed.json';
/** `python -m moto.server` with the AWS behaviours moto lacks that cloud-provider-aws relies on (the file says which). */
const motoServer = fileURLToPath(new URL('moto-server.py', import.meta.url));
/** A staging folder this old belongs to an install that died (one takes about 30 s). */
const staleStagingMs = 30 * 60_000;

/** The emulator cannot be had on this machine; `message` says why and what to install. */
export class EmulatorUnavailableError extends Error {
  override readonly name = 'EmulatorUnavailableError';
}

/** Progress lines for the long step (the first install). */
export type ProgressSink = (line: string) => void;

/** What ensureEmulatorInstalled() found or did. */
export interface EmulatorInstall {
  /** The virtualenv's interpreter; `<python> -m moto.server` runs the server. */
  readonly python: string;
  readonly dir: string;
  /** True when this call installed it (false: reused the cached install). */
  readonly installedNow: boolean;
  /** How long this call took. */
  readonly ms: number;
}

export interface InstallOptions {
  readonly progress?: ProgressSink;
  /** The environment to read CIRRUS_CACHE_DIR, XDG_CACHE_HOME and PATH from (default process.env). */
  readonly env?: NodeJS.ProcessEnv;
}

/** The install's folder: `<cacheRoot>/aws-emulator/moto-<version>`. */
export function emulatorDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheRoot(env), 'aws-emulator', `moto-${motoVersion}`);
}

/**
 * Returns the cached install, installing moto into it first when there is none (about 30 s, once).
 * Throws EmulatorUnavailableError when python3, its venv module or the install fails, with the
 * command and its output's last lines.
 */
export async function ensureEmulatorInstalled(options: InstallOptions = {}): Promise<EmulatorInstall> {
  const started = Date.now();
  const env = options.env ?? process.env;
  const dir = emulatorDir(env);
  const python = join(dir, 'bin', 'python');
  if (await isInstalled(dir)) return { python, dir, installedNow: false, ms: Date.now() - started };
  await installInto(dir, options.progress ?? (() => {}), env);
  return { python, dir, installedNow: true, ms: Date.now() - started };
}

async function isInstalled(dir: string): Promise<boolean> {
  try {
    const marker = JSON.parse(await readFile(join(dir, markerName), 'utf8')) as { moto?: string };
    return marker.moto === motoVersion && (await isExecutable(join(dir, 'bin', 'python')));
  } catch {
    return false;
  }
}

async function installInto(dir: string, progress: ProgressSink, env: NodeJS.ProcessEnv): Promise<void> {
  const python3 = await findPython(env);
  await mkdir(dirname(dir), { recursive: true });
  await removeStaleStaging(dir);
  const staging = await mkdtemp(`${dir}.installing-`);
  const started = Date.now();
  progress(`installing ${requirement} once for this machine (about 30 s) into ${dir}`);
  const timer = setInterval(() => {
    progress(`  still installing moto (${Math.round((Date.now() - started) / 1000)} s)`);
  }, 15_000);
  try {
    await run(python3, ['-m', 'venv', staging], env, 'the virtualenv for the AWS emulator could not be created');
    const pip = [join(staging, 'bin', 'python'), '-m', 'pip'];
    const quiet = ['--disable-pip-version-check', '--no-input'];
    await run(
      pip[0] as string,
      [...pip.slice(1), 'install', ...quiet, requirement],
      env,
      `${requirement} could not be installed`,
    );
    const freeze = await run(pip[0] as string, [...pip.slice(1), 'freeze', ...quiet], env, 'pip freeze failed');
    const marker = {
      moto: motoVersion,
      installedAt: new Date().toISOString(),
      ms: Date.now() - started,
      freeze: freeze.split('\n').filter(Boolean),
    };
    await writeFile(join(staging, markerName), `${JSON.stringify(marker, null, 2)}\n`);
    await moveIntoPlace(staging, dir);
  } finally {
    clearInterval(timer);
    await rm(staging, { recursive: true, force: true });
  }
  progress(`installed moto ${motoVersion} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

async function moveIntoPlace(staging: string, dir: string): Promise<void> {
  try {
    await rename(staging, dir);
  } catch (error) {
    // Another process finished first: its install is as good as ours.
    if (await isInstalled(dir)) return;
    // A folder without the marker was not put there by a rename of ours (that moves complete
    // installs only): a copy or a hand-made folder, replaced.
    if ((error as NodeJS.ErrnoException).code !== 'ENOTEMPTY' && (error as NodeJS.ErrnoException).code !== 'EEXIST')
      throw error;
    await rm(dir, { recursive: true, force: true });
    await rename(staging, dir);
  }
}

// python3 with the venv module and ensurepip (Debian and Ubuntu ship them apart, as python3-venv).
async function findPython(env: NodeJS.ProcessEnv): Promise<string> {
  const python3 = await onPath('python3', env);
  if (python3 === undefined) {
    throw new EmulatorUnavailableError(
      `python3 is not on PATH: the AWS emulator (moto ${motoVersion}) needs Python >= 3.9 with its venv module ` +
        '(Debian/Ubuntu: apt-get install python3 python3-venv)',
    );
  }
  const check = 'import sys, venv, ensurepip; assert sys.version_info >= (3, 9), sys.version';
  await run(
    python3,
    ['-c', check],
    env,
    `${python3} cannot run the AWS emulator: it needs Python >= 3.9 with venv and ensurepip (Debian/Ubuntu: apt-get install python3-venv)`,
  );
  return python3;
}

async function onPath(command: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  for (const dir of (env['PATH'] ?? '').split(':').filter(Boolean)) {
    if (await isExecutable(join(dir, command))) return join(dir, command);
  }
  return undefined;
}

async function removeStaleStaging(dir: string): Promise<void> {
  const parent = dirname(dir);
  const prefix = `${dir.slice(parent.length + 1)}.installing-`;
  for (const name of await readdir(parent)) {
    if (!name.startsWith(prefix)) continue;
    const info = await stat(join(parent, name)).catch(() => undefined);
    if (info !== undefined && Date.now() - info.mtimeMs > staleStagingMs) {
      await rm(join(parent, name), { recursive: true, force: true });
    }
  }
}

/** Runs a command to completion; its stdout, or EmulatorUnavailableError with the command and its output's tail. */
async function run(command: string, args: string[], env: NodeJS.ProcessEnv, failure: string): Promise<string> {
  const child = spawn(command, args, { env: { ...env, PIP_NO_INPUT: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    output = (output + chunk.toString()).slice(-20_000);
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  }).catch((error: unknown) => {
    throw new EmulatorUnavailableError(`${failure}: ${command}: ${(error as Error).message}`, { cause: error });
  });
  if (code !== 0) {
    const tail = output.trimEnd().split('\n').slice(-20).join('\n');
    throw new EmulatorUnavailableError(`${failure}: \`${[command, ...args].join(' ')}\` exited ${code}:\n${tail}`);
  }
  return stdout;
}

/** A running moto server. */
export interface Emulator {
  /** `http://127.0.0.1:<port>`: the endpoint of every service (the SigV4 scope names the service and region). */
  readonly endpoint: string;
  readonly pid: number;
  /** The server's output (werkzeug logs every request). */
  readonly logFile: string;
  /** How long the start took, from spawn to the first answer (the install not included). */
  readonly startMs: number;
  readonly install: EmulatorInstall;
  /** Stops the server (SIGTERM, then SIGKILL) and removes its log, first copied to `<keepLogIn>/moto.log` when given. */
  stop(options?: { keepLogIn?: string }): Promise<void>;
}

export interface StartOptions extends InstallOptions {
  /** The port to listen on; default a free one. */
  readonly port?: number;
  /** How long to wait for the server's first answer (default 30 s). */
  readonly timeoutMs?: number;
}

/** Installs moto if needed and starts one server on 127.0.0.1; it dies with this process. */
export async function startEmulator(options: StartOptions = {}): Promise<Emulator> {
  const install = await ensureEmulatorInstalled(options);
  const logDir = await mkdtemp(join(tmpdir(), 'cirrus-aws-emulator-'));
  try {
    // A free port can be taken between our look and moto's bind: then try another one.
    for (let attempt = 1; ; attempt++) {
      const port = options.port ?? (await freePort());
      const logFile = join(logDir, `moto-${port}.log`);
      const started = performance.now();
      const server = await startProcess(
        'moto',
        install.python,
        [motoServer, '-H', '127.0.0.1', '-p', String(port)],
        logFile,
      );
      const endpoint = `http://127.0.0.1:${port}`;
      const answered = await waitForAnswer(endpoint, server, options.timeoutMs ?? 30_000);
      if (answered) {
        const startMs = Math.round(performance.now() - started);
        return {
          endpoint,
          pid: server.pid,
          logFile,
          startMs,
          install,
          stop: (stopOptions) => stopServer(server, logDir, stopOptions?.keepLogIn),
        };
      }
      const log = await logTail(logFile);
      if (options.port !== undefined || attempt >= 3 || !/address already in use/i.test(log)) {
        await server.stop(1_000);
        throw new Error(`moto server (${install.python} -m moto.server -p ${port}) did not start:\n${log}`);
      }
    }
  } catch (error) {
    await rm(logDir, { recursive: true, force: true });
    throw error;
  }
}

// True once GET /moto-api/ answers 200; false when the server exits first; throws after `timeoutMs`.
async function waitForAnswer(endpoint: string, server: ManagedProcess, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!server.hasExited()) {
    try {
      const response = await fetch(`${endpoint}/moto-api/`, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.ok) return true;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await server.stop(1_000);
      throw new Error(
        `moto server at ${endpoint} did not answer GET /moto-api/ within ${timeoutMs} ms:\n${await logTail(server.logFile)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

async function logTail(file: string): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.trimEnd().split('\n').slice(-20).join('\n');
}

async function stopServer(server: ManagedProcess, logDir: string, keepLogIn: string | undefined): Promise<void> {
  await server.stop(5_000);
  if (keepLogIn !== undefined) {
    await mkdir(keepLogIn, { recursive: true });
    await copyFile(server.logFile, join(keepLogIn, 'moto.log'));
  }
  await rm(logDir, { recursive: true, force: true });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const install = await ensureEmulatorInstalled({
    progress: (line) => {
      console.error(line);
    },
  });
  console.error(install.installedNow ? `installed in ${(install.ms / 1000).toFixed(1)} s` : 'already installed');
  console.log(install.dir);
}
