// A packaged function under AWS's Lambda Runtime Interface Emulator (tools/rie/): the emulator
// started with only the environment Lambda gives a function (`env -i`), its runtime the Runtime
// API loop beside this file (runtime-client.js) running the handler serverless.yml names, from the
// unzipped package as the task root. Optionally with an external extension registered (one that
// only waits for SHUTDOWN), as the secrets extension layer is on AWS: the emulator then sends the
// runtime SIGTERM at shutdown, as Lambda does. Extensions must be executables in /opt/extensions;
// the emulator runs in a mount namespace of its own (unshare) where a temporary folder is
// bind-mounted over /opt, so the machine's /opt is never touched.
//
// Invokes are serialised here: the emulator panics on a second concurrent invoke (ReserveFailed:
// AlreadyReserved) and the whole process dies. Its log (stdout and stderr, one stream) is kept,
// with the lines the measurements read: `INIT REPORT(durationMs: …)`, `INVOKE RTDONE(…
// durationMs: …)`, and "did not exit after deadline" at a shutdown that had to kill the runtime.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetsUnavailableError } from '../../../tools/control-plane/index.ts';
import { freePort } from '../../../tools/control-plane/processes.ts';
import { resolveRie } from '../../../tools/rie/assets.ts';

const clientPath = fileURLToPath(new URL('runtime-client.js', import.meta.url));

/** The emulator's binary, or why the suites needing it skip (with CIRRUS_TEST_REQUIRE_CONTROL_PLANE=1, none: a failure). */
export async function findRie(
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ binary?: string; skip: string | false }> {
  try {
    return { binary: (await resolveRie({ build: false, env })).binary, skip: false };
  } catch (error) {
    if (!(error instanceof AssetsUnavailableError) || env['CIRRUS_TEST_REQUIRE_CONTROL_PLANE'] === '1') throw error;
    return { skip: `no aws-lambda-rie: ${error.message}` };
  }
}

/** What to run under the emulator. */
export interface RieOptions {
  readonly binary: string;
  /** The unzipped package: LAMBDA_TASK_ROOT. */
  readonly taskRoot: string;
  /** serverless.yml's handler, e.g. `dist/functions/<name>/lambda.handler`. */
  readonly handler: string;
  /** The function's own variables (the template's), beside those Lambda sets (below). */
  readonly env: Readonly<Record<string, string>>;
  readonly functionName: string;
  readonly memoryMb?: number;
  /** Register an external extension, so that the emulator sends SIGTERM at shutdown. */
  readonly extension?: boolean;
}

/** One invoke's answer: the handler's result (or its error body) and the emulator's HTTP status. */
export interface InvokeResult {
  readonly status: number;
  readonly body: string;
}

/** A running emulator. */
export interface Rie {
  /** POST the event to the emulator's invoke endpoint; one at a time (queued). */
  invoke(event: unknown): Promise<InvokeResult>;
  /** The emulator's log so far. */
  log(): string;
  /** Lines of the log matching `pattern`. */
  lines(pattern: RegExp): string[];
  /** The runtime's pid (the Node process running the client), once it has started. */
  runtimePid(): Promise<number | undefined>;
  /** SIGTERM to the emulator (a shutdown); resolves with how long it took to exit. */
  stop(): Promise<{ ms: number }>;
}

// An external extension that registers for SHUTDOWN only and waits for it.
const extensionSource = `
import { request } from 'node:http';
const [host, port] = process.env.AWS_LAMBDA_RUNTIME_API.split(':');
const call = (method, path, headers, body) => new Promise((resolve, reject) => {
  const req = request({ host, port: Number(port), method, path: '/2020-01-01/extension' + path, headers }, (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks).toString() }));
  });
  req.on('error', reject);
  req.end(body);
});
const registered = await call('POST', '/register', { 'lambda-extension-name': 'cirrus-test-extension' }, JSON.stringify({ events: ['SHUTDOWN'] }));
const id = registered.headers['lambda-extension-identifier'];
for (;;) {
  const event = JSON.parse((await call('GET', '/event/next', { 'lambda-extension-identifier': id })).body);
  if (event.eventType === 'SHUTDOWN') process.exit(0);
}
`;

// /opt for the emulator's namespace: /opt/extensions/<one executable>.
async function optFolder(dir: string): Promise<string> {
  const opt = join(dir, 'opt');
  await mkdir(join(opt, 'extensions'), { recursive: true });
  await writeFile(join(dir, 'extension.mjs'), extensionSource);
  const script = join(opt, 'extensions', 'cirrus-test-extension');
  await writeFile(script, `#!/bin/sh\nexec '${process.execPath}' '${join(dir, 'extension.mjs')}'\n`);
  await chmod(script, 0o755);
  return opt;
}

/** Starts the emulator (it starts the runtime at the first invoke, as Lambda inits on demand). */
export async function startRie(options: RieOptions): Promise<Rie> {
  const dir = await mkdtemp(join(tmpdir(), 'cirrus-rie-'));
  const [invokePort, apiPort] = [await freePort(), await freePort()];
  const env: Record<string, string> = {
    PATH: '/usr/bin:/bin',
    LAMBDA_TASK_ROOT: options.taskRoot,
    AWS_LAMBDA_FUNCTION_NAME: options.functionName,
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(options.memoryMb ?? 1024),
    AWS_LAMBDA_FUNCTION_TIMEOUT: '300',
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: 'ASIATESTTESTTESTTEST',
    AWS_SECRET_ACCESS_KEY: 'test-secret-access-key',
    ...options.env,
  };
  const command = [
    'env',
    '-i',
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    options.binary,
    '--runtime-interface-emulator-address',
    `127.0.0.1:${String(invokePort)}`,
    '--runtime-api-address',
    `127.0.0.1:${String(apiPort)}`,
    process.execPath,
    clientPath,
    options.handler,
  ];
  const child =
    options.extension === true
      ? spawn(
          'unshare',
          [
            ...(process.getuid?.() === 0 ? ['-m'] : ['-Urm']),
            '--propagation',
            'private',
            'sh',
            '-c',
            'mount --bind "$0" /opt && exec "$@"',
            await optFolder(dir),
            ...command,
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        )
      : spawn(command[0] ?? 'env', command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const exited = once(child, 'exit');
  await listening(invokePort, child, () => log);
  let queue: Promise<unknown> = Promise.resolve();
  const invokeOnce = async (event: unknown): Promise<InvokeResult> => {
    const response = await fetch(`http://127.0.0.1:${String(invokePort)}/2015-03-31/functions/function/invocations`, {
      method: 'POST',
      body: JSON.stringify(event),
    });
    return { status: response.status, body: await response.text() };
  };
  return {
    invoke: (event) => {
      const result = queue.then(() => invokeOnce(event));
      queue = result.catch(() => undefined);
      return result;
    },
    log: () => log,
    lines: (pattern) => log.split('\n').filter((line) => pattern.test(line)),
    runtimePid: () => runtimePid(clientPath),
    stop: async () => {
      const started = performance.now();
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      const ms = performance.now() - started;
      await rm(dir, { recursive: true, force: true });
      return { ms };
    },
  };
}

// Waits until the emulator accepts connections on its invoke port (it listens within ~0.4 s).
async function listening(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const answered = await fetch(`http://127.0.0.1:${String(port)}/`).then(
      () => true,
      () => false,
    );
    if (answered) return;
    if (child.exitCode !== null) throw new Error(`aws-lambda-rie exited with ${String(child.exitCode)}:\n${log()}`);
    if (Date.now() > deadline) throw new Error(`aws-lambda-rie did not listen in 15 s:\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// The pid of the runtime: the Node process running `script` (the emulator's own command line
// names the script too, as an argument).
async function runtimePid(script: string): Promise<number | undefined> {
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const [command = '', ...args] = (await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (command === process.execPath && args[0] === script) return Number(entry);
  }
  return undefined;
}
