// How `cirrus reconcile` finds a `cirrus start` on this machine: start records its functions' loopback
// URL and the file of the secret that signs requests to them in a folder of the user's own (mode
// 0700; the secret file 0600), one record per process, removed when it stops; reconcile reads the
// records of the processes still running.

import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A running `cirrus start`, as it recorded itself. */
export interface RunningStart {
  readonly pid: number;
  /** The functions' listener: `<url>/<function>` is each function. */
  readonly url: string;
  readonly functions: readonly string[];
  /** The file holding the secret its functions check requests against. */
  readonly secretFile: string;
  /** The cluster it acts on (server, context, where its kubeconfig comes from), as its summary says. */
  readonly cluster?: string;
  /** Its provider (and cloud-config), as its summary says. */
  readonly provider?: string;
}

/** The folder of the records: $XDG_RUNTIME_DIR/cirrus, else cirrus-<uid> in the system's temporary folder. */
export function runtimeDir(env: NodeJS.ProcessEnv): string {
  const xdg = env['XDG_RUNTIME_DIR'];
  return xdg !== undefined && xdg !== ''
    ? join(xdg, 'cirrus')
    : join(tmpdir(), `cirrus-${process.getuid?.() ?? 'user'}`);
}

// The folder, made if missing; refused unless it is a folder of this user's that only they can use
// (in a shared temporary folder, someone else could have made it first).
async function ownDir(env: NodeJS.ProcessEnv): Promise<string> {
  const dir = runtimeDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const stat = await lstat(dir);
  const uid = process.getuid?.();
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid) || (stat.mode & 0o077) !== 0)
    throw new Error(`${dir} is not a folder of this user's that only they can use (mode 0700)`);
  return dir;
}

/** What start prints and how it removes its record. */
export interface Announcement {
  /** How to reconcile, for start's summary. */
  readonly hint: string;
  readonly what: string;
  stop(): Promise<void>;
}

/**
 * Records this process's functions for `cirrus reconcile`: their URL and the secret's file (the
 * secret is written to one, mode 0600, unless it came from `secretFile`). Never fails start: where
 * nothing can be written, the hint says so and how to reconcile by hand.
 */
export async function announceStart(options: {
  readonly url: string;
  readonly functions: readonly string[];
  readonly secret: string;
  readonly secretFile: string | undefined;
  readonly env: NodeJS.ProcessEnv;
  /** What it acts on, for reconcile to tell several starts apart. */
  readonly cluster: string;
  readonly provider: string;
}): Promise<Announcement> {
  const { url, functions, secret, env, cluster, provider } = options;
  const example = `cirrus reconcile <function> <name>|--all [--dry-run]`;
  const written: string[] = [];
  try {
    const dir = await ownDir(env);
    const secretFile = options.secretFile ?? join(dir, `start-${process.pid}.secret`);
    if (options.secretFile === undefined) {
      await rm(secretFile, { force: true });
      await writeFile(secretFile, `${secret}\n`, { mode: 0o600, flag: 'wx' });
      written.push(secretFile);
    }
    const record: RunningStart = { pid: process.pid, url, functions, secretFile, cluster, provider };
    const file = join(dir, `start-${process.pid}.json`);
    // Written whole, then renamed in place: a reader never sees half a record.
    const partial = `${file}.${randomBytes(4).toString('hex')}`;
    await writeFile(partial, `${JSON.stringify(record)}\n`, { mode: 0o600 });
    await rename(partial, file);
    written.push(file);
    return {
      hint: `${example} (finds this start: ${file})`,
      what: 'reconcile record',
      stop: () => removeAll(written),
    };
  } catch (error) {
    await removeAll(written);
    return {
      hint:
        `${example} --url ${url}/<function> --signing-secret-file <file> ` +
        `(this start could not record itself for reconcile: ${(error as Error).message})`,
      what: 'reconcile record',
      stop: async () => {},
    };
  }
}

async function removeAll(files: readonly string[]): Promise<void> {
  await Promise.all(files.map((file) => rm(file, { force: true })));
}

/** The `cirrus start` processes of this user that run now; records of stopped ones are removed. */
export async function runningStarts(env: NodeJS.ProcessEnv): Promise<RunningStart[]> {
  const dir = runtimeDir(env);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const found: RunningStart[] = [];
  for (const name of names) {
    const pid = Number(/^start-(\d+)\.json$/.exec(name)?.[1]);
    if (!Number.isInteger(pid)) continue;
    let record: RunningStart;
    try {
      record = JSON.parse(await readFile(join(dir, name), 'utf8')) as RunningStart;
    } catch {
      continue;
    }
    if (isRunning(pid)) found.push(record);
    else await removeAll([join(dir, name), join(dir, `start-${pid}.secret`)]);
  }
  return found.sort((a, b) => a.pid - b.pid);
}

/** A start in a few words, for a choice between several: `pid 12: <url> (node-init, …), cluster …, provider …`. */
export function describeStart(start: RunningStart): string {
  const acts = [
    ...(start.cluster === undefined ? [] : [`cluster ${start.cluster}`]),
    ...(start.provider === undefined ? [] : [`provider ${start.provider}`]),
  ];
  return `pid ${start.pid}: ${start.url} (${start.functions.join(', ')})${acts.length === 0 ? '' : `, ${acts.join(', ')}`}`;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
