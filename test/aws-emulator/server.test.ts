// The AWS emulator harness (tools/aws-emulator/server.ts): moto installed once per machine and
// reused, a server that answers, stops, and dies with the process that started it, and install
// failures that name the command and show its output.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import {
  emulatorDir,
  EmulatorUnavailableError,
  ensureEmulatorInstalled,
  motoVersion,
  startEmulator,
} from '../../tools/aws-emulator/server.ts';
import { awsEmulatorSkip } from '../harness/aws.ts';
import { isRunning } from '../harness/processes.ts';

const serverModule = new URL('../../tools/aws-emulator/server.ts', import.meta.url).pathname;

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// A folder for CIRRUS_CACHE_DIR and fake commands, removed after the test.
async function scratch(t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'cirrus-emulator-test-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe('the AWS emulator install', () => {
  it(
    'is reused once installed: a second call installs nothing and takes well under a second',
    { skip: awsEmulatorSkip },
    async () => {
      // test/global-setup.ts installed it (or found it) before this file ran.
      const install = await ensureEmulatorInstalled();
      assert.equal(install.installedNow, false);
      assert.ok(install.ms < 1_000, `reusing the install took ${install.ms} ms`);
      assert.equal(install.dir, emulatorDir());
      assert.ok(install.dir.endsWith(join('aws-emulator', `moto-${motoVersion}`)), install.dir);
    },
  );

  it('lives under the cache root the control plane uses (CIRRUS_CACHE_DIR, XDG_CACHE_HOME)', () => {
    assert.equal(emulatorDir({ CIRRUS_CACHE_DIR: '/c' }), `/c/aws-emulator/moto-${motoVersion}`);
    assert.equal(emulatorDir({ XDG_CACHE_HOME: '/x' }), `/x/cirrus/aws-emulator/moto-${motoVersion}`);
  });

  it('is not taken from a folder without its marker (an install that died): it installs again', async (t) => {
    const cache = await scratch(t);
    const dir = emulatorDir({ CIRRUS_CACHE_DIR: cache });
    await mkdir(join(dir, 'bin'), { recursive: true });
    await symlink(process.execPath, join(dir, 'bin', 'python'));
    // No python3 on PATH: an install is attempted, and says what is missing.
    const env = { CIRRUS_CACHE_DIR: cache, PATH: join(cache, 'empty') };
    await assert.rejects(ensureEmulatorInstalled({ env }), (error: Error) => {
      assert.ok(error instanceof EmulatorUnavailableError, String(error));
      assert.match(error.message, /python3 is not on PATH/);
      assert.match(error.message, /python3-venv/);
      return true;
    });
  });

  it('fails with the pip command and the tail of its output when the install fails', async (t) => {
    const cache = await scratch(t);
    const bin = join(cache, 'bin');
    await mkdir(bin);
    // A python3 that has venv, and whose virtualenv's pip cannot find moto (as offline, or on an old Python).
    const fakePython = [
      '#!/bin/sh',
      'if [ "$1" = "-m" ] && [ "$2" = venv ]; then',
      '  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0',
      'fi',
      'if [ "$1" = "-m" ] && [ "$2" = pip ]; then',
      '  echo "Collecting moto[server]==5.2.5"',
      '  echo "ERROR: Could not find a version that satisfies the requirement moto[server]==5.2.5" >&2',
      '  exit 1',
      'fi',
      'exit 0',
    ].join('\n');
    await writeFile(join(bin, 'python3'), `${fakePython}\n`);
    await chmod(join(bin, 'python3'), 0o755);
    const env = { CIRRUS_CACHE_DIR: cache, PATH: `${bin}:/usr/bin:/bin` };
    await assert.rejects(ensureEmulatorInstalled({ env }), (error: Error) => {
      assert.ok(error instanceof EmulatorUnavailableError, String(error));
      assert.match(error.message, /could not be installed/);
      assert.match(error.message, /-m pip install .*moto\[server\]==5\.2\.5/);
      assert.match(error.message, /Could not find a version that satisfies/);
      return true;
    });
    // Nothing that looks installed is left behind.
    const again = ensureEmulatorInstalled({ env: { ...env, PATH: join(cache, 'empty') } });
    await assert.rejects(again, /python3 is not on PATH/);
  });
});

describe('the AWS emulator server', { skip: awsEmulatorSkip }, () => {
  it('answers GET /moto-api/ on loopback, and stop() ends it', async () => {
    const emulator = await startEmulator();
    assert.match(emulator.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await fetch(`${emulator.endpoint}/moto-api/`);
    await response.arrayBuffer();
    assert.equal(response.status, 200);
    assert.ok(isRunning(emulator.pid));
    await emulator.stop();
    assert.equal(isRunning(emulator.pid), false);
    await assert.rejects(fetch(`${emulator.endpoint}/moto-api/`));
  });

  it('says why when it cannot start (its port is taken), with moto’s own output', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const { port } = taken.address() as { port: number };
    try {
      await assert.rejects(startEmulator({ port }), (error: Error) => {
        assert.match(error.message, new RegExp(`moto server .* -p ${port}\\) did not start`));
        assert.match(error.message, /already in use/i);
        return true;
      });
    } finally {
      taken.close();
    }
  });

  it('dies with the process that started it, however that process dies', async () => {
    const script = [
      `const { startEmulator } = await import(${JSON.stringify(serverModule)});`,
      'const emulator = await startEmulator();',
      'console.log(emulator.pid);',
      'setInterval(() => {}, 1000);',
    ].join('\n');
    const parent = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(createInterface({ input: parent.stdout }), 'line')) as [string];
    const moto = Number(line);
    assert.ok(isRunning(moto), `moto (pid ${moto}) runs`);
    parent.kill('SIGKILL');
    await until(() => !isRunning(moto), 5_000, `moto (pid ${moto}) to die with its parent`);
  });
});
