// One `go build` of a tool this repository builds once per machine (the control plane, Helm,
// cloud-provider-aws, kwok): progress as a fraction of the packages with an estimate of the time
// left, Ctrl-C said in one line, and one lock per cache entry so that a second run waits for the
// build in progress instead of starting another.

import { spawn } from 'node:child_process';
import { open, readFile, rm, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { isAlive } from './processes.ts';

/** Progress lines for long steps (the first build). */
export type ProgressSink = (line: string) => void;

/** What a build stopped by Ctrl-C (or its signal) says, and nothing else. */
export const interruptedMessage = 'interrupted; the next run resumes from the Go cache';

/** A build stopped by Ctrl-C: its message is the one line to print. */
export class BuildInterrupted extends Error {
  override readonly name = 'BuildInterrupted';
  constructor() {
    super(interruptedMessage);
  }
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
  /** Stops the build (BuildInterrupted). */
  readonly signal?: AbortSignal | undefined;
}

/**
 * `compiled of total packages (n %), about m min left`: the time left assumes the packages still to
 * compile take as long on average as those compiled so far (the estimate is absent before the first).
 */
export function progressLine(compiled: number, total: number | undefined, elapsedMs: number): string {
  if (total === undefined || total === 0) return `${compiled} packages compiled so far`;
  const done = Math.min(compiled, total);
  const percent = Math.floor((done / total) * 100);
  if (done === 0) return `0 of ${total} packages`;
  const leftS = ((elapsedMs / done) * (total - done)) / 1000;
  const left =
    leftS < 90 ? `about ${Math.max(1, Math.round(leftS))} s left` : `about ${Math.round(leftS / 60)} min left`;
  return `${done} of ${total} packages (${percent} %), ${left}`;
}

/** How many packages `pkg` builds from (`go list -deps`), or undefined when go cannot say. */
export async function packageCount(build: Pick<GoBuild, 'dir' | 'pkg' | 'env'>): Promise<number | undefined> {
  const child = spawn('go', ['list', '-deps', build.pkg], {
    cwd: build.dir,
    env: { ...build.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let count = 0;
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.trim() !== '') count += 1;
  });
  const code = await new Promise<number | null>((resolve) => {
    child.once('error', () => {
      resolve(null);
    });
    child.once('close', resolve);
  });
  return code === 0 ? count : undefined;
}

/**
 * Runs the build; rejects with the last lines of go's output when it fails, and with
 * BuildInterrupted when Ctrl-C (or `signal`) stopped it. `go build -v` names each package as it
 * compiles it; one progress line every 15 s says how far it got out of the total.
 */
export async function goBuild(build: GoBuild): Promise<void> {
  const { pkg, output, name, progress, signal } = build;
  const total = await packageCount(build);
  if (signal?.aborted === true) throw new BuildInterrupted();
  const args = ['build', '-v', '-trimpath', '-ldflags', ['-s', '-w', ...build.ldflags].join(' '), '-o', output, pkg];
  const started = Date.now();
  const child = spawn('go', args, {
    cwd: build.dir,
    env: { ...build.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stop = (): void => {
    child.kill('SIGINT');
  };
  signal?.addEventListener('abort', stop, { once: true });
  let compiled = 0;
  const tail: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    compiled += 1;
    tail.push(line);
    if (tail.length > 30) tail.shift();
  });
  const timer = setInterval(() => {
    progress(`  ${name}: ${progressLine(compiled, total, Date.now() - started)}`);
  }, 15_000);
  try {
    const [code, killedBy] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (c: number | null, s: NodeJS.Signals | null) => {
        resolve([c, s]);
      });
    });
    // Ctrl-C in a terminal reaches go too: it dies of the signal (or exits 2 having caught it).
    if (killedBy !== null || isAborted(signal)) throw new BuildInterrupted();
    if (code !== 0) throw new Error(`go build ${pkg} in ${build.dir} failed (exit ${code}):\n${tail.join('\n')}`);
  } finally {
    clearInterval(timer);
    signal?.removeEventListener('abort', stop);
  }
  progress(`  ${name}: linked in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * Runs `build` holding the lock of one cache entry (`<entry>.lock`, holding the owner's pid): a
 * second run waits for the build in progress and says so once, then `build` runs (it should find
 * the result and return). A lock whose owner no longer runs is stale and taken over.
 */
export async function withBuildLock<T>(
  entry: string,
  progress: ProgressSink,
  build: () => Promise<T>,
  options: { readonly pollMs?: number; readonly signal?: AbortSignal | undefined } = {},
): Promise<T> {
  const lock = `${entry}.lock`;
  let said = false;
  for (;;) {
    if (options.signal?.aborted === true) throw new BuildInterrupted();
    const owner = await takeLock(lock);
    if (owner === 'taken') break;
    if (owner !== 'retry' && !said) {
      progress(`waiting for the build in progress (pid ${owner}) of ${entry}; it holds ${lock}`);
      said = true;
    }
    await new Promise((resolve) => setTimeout(resolve, owner === 'retry' ? 50 : (options.pollMs ?? 1_000)));
  }
  try {
    return await build();
  } finally {
    await rm(lock, { force: true });
  }
}

// Takes the lock, or answers the pid of the running process that holds it, or 'retry' when it
// removed a stale lock (its process no longer runs, or it stayed empty for 5 s) or one is being written.
async function takeLock(lock: string): Promise<'taken' | 'retry' | number> {
  try {
    const file = await open(lock, 'wx');
    await file.writeFile(`${process.pid}\n`);
    await file.close();
    return 'taken';
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const text = await readFile(lock, 'utf8').catch(() => undefined);
  if (text === undefined) return 'retry';
  const owner = liveOwner(text);
  if (owner !== undefined) return owner;
  const age = Date.now() - ((await stat(lock).catch(() => undefined))?.mtimeMs ?? 0);
  if (text === '' && age < 5_000) return 'retry';
  await rm(lock, { force: true });
  return 'retry';
}

// The pid a lock file holds, when that process runs (and is not this one: a lock of this pid is
// left over from an earlier process that had it).
function liveOwner(text: string): number | undefined {
  const pid = Number(text.trim());
  return text !== '' && Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid) ? pid : undefined;
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}
