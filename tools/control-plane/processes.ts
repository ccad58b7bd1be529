// Child processes that cannot outlive their parent: on Linux each binary is started through
// util-linux's `setpriv --pdeathsig SIGKILL`, so the kernel kills it the moment the process that
// started it dies, however it dies (a SIGKILLed test runner included). A normal exit also kills
// them synchronously from an 'exit' hook; stop() is the graceful path.

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { open } from 'node:fs/promises';
import { createServer } from 'node:net';

/** A started binary: its pid, its log file, and a promise that settles with its exit code. */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly exited: Promise<number | null>;
  hasExited(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

let setprivAvailable: boolean | undefined;

function deathSignalPrefix(): string[] {
  setprivAvailable ??= spawnSync('setpriv', ['--help'], { stdio: 'ignore' }).status === 0;
  return setprivAvailable ? ['setpriv', '--pdeathsig', 'SIGKILL', '--'] : [];
}

const running = new Set<ManagedProcess>();
const cleanups = new Set<() => void>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of running) {
      try {
        process.kill(child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const cleanup of cleanups) cleanup();
  });
}

/**
 * Runs `cleanup` (synchronous) when this process exits without undoing it first (a second Ctrl-C
 * exits at once), after the children are killed; the returned function undoes the registration.
 */
export function atExit(cleanup: () => void): () => void {
  installExitHook();
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/** Starts `binary args…` with stdout and stderr appended to `logFile`. */
export async function startProcess(
  name: string,
  binary: string,
  args: string[],
  logFile: string,
): Promise<ManagedProcess> {
  const log = await open(logFile, 'a');
  const [command, ...prefixArgs] = [...deathSignalPrefix(), binary, ...args];
  // A process group of its own: Ctrl-C in a terminal signals the whole foreground group, and the
  // control plane must outlive its clients' clean stop (a relay releasing its Lease), so only its
  // owner stops it, last. The death signal above still ends it with the owner.
  const child = spawn(command as string, prefixArgs, { stdio: ['ignore', log.fd, log.fd], detached: true });
  const spawned = once(child, 'spawn');
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve(signal ? null : code);
    }),
  );
  await log.close();
  await Promise.race([
    spawned,
    exited.then(() => {
      throw new Error(`${name}: ${binary} exited at once`);
    }),
  ]);
  let done = false;
  const handle: ManagedProcess = {
    name,
    pid: child.pid as number,
    logFile,
    exited,
    hasExited: () => done,
    stop: async (graceMs = 10_000) => {
      if (done) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  void exited.then(() => {
    done = true;
    running.delete(handle);
  });
  installExitHook();
  running.add(handle);
  return handle;
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (address === null || typeof address === 'string') throw new Error('could not allocate a port');
  return address.port;
}

/** Whether `port` of 127.0.0.1 can be listened on now. */
export async function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => {
      resolve(false);
    });
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => {
      resolve(true);
    });
  });
  if (listening) {
    server.close();
    await once(server, 'close');
  }
  return listening;
}

/** Whether process `pid` exists (one of another user's, which cannot be signalled, counts). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
