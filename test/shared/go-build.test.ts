// The first build of a Go tool (the control plane's binaries, Helm, …): only what the caller needs,
// one build per cache entry (a second run waits and says so), progress out of `go list -deps`'s
// total with the time left, and Ctrl-C said in one line. The Go build here is a tiny module in a
// temporary folder with a Go cache of its own: nothing of the real builds runs.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cacheDir, pinnedVersions, resolveAssets } from '../../tools/control-plane/assets.ts';
import {
  BuildInterrupted,
  goBuild,
  packageCount,
  progressLine,
  withBuildLock,
} from '../../tools/control-plane/go-build.ts';

const hasGo = (process.env['PATH'] ?? '').split(':').some((dir) => dir !== '' && existsSync(join(dir, 'go')));

describe('the first build', () => {
  it('says the packages done out of the total and the time left', () => {
    assert.equal(progressLine(328, 1914, 60_000), '328 of 1914 packages (17 %), about 5 min left');
    assert.equal(progressLine(900, 1000, 45_000), '900 of 1000 packages (90 %), about 5 s left');
    assert.equal(progressLine(0, 1000, 15_000), '0 of 1000 packages');
    assert.equal(progressLine(12, undefined, 15_000), '12 packages compiled so far');
  });

  it('builds only kube-apiserver and etcd for a caller that runs only those', async () => {
    const cache = await mkdtemp(join(tmpdir(), 'cirrus-go-build-test-'));
    const env = { CIRRUS_CACHE_DIR: cache, PATH: '' };
    const dir = await cacheDir(await pinnedVersions(), env);
    await mkdir(dir, { recursive: true });
    for (const file of ['kube-apiserver', 'etcd']) {
      await writeFile(join(dir, file), '#!/bin/sh\n');
      await chmod(join(dir, file), 0o755);
    }
    // The demo: found, no build (PATH is empty: a build would fail for want of Go).
    const assets = await resolveAssets({ build: true, env });
    assert.equal(assets.source, 'cache');
    assert.equal(assets.components, undefined);
    // The scheduling tests: their two components are missing.
    await assert.rejects(resolveAssets({ build: true, components: true, env }), /Go is not installed/);
  });

  it('waits for the build in progress of the same cache entry, and says so once', async () => {
    const entry = join(await mkdtemp(join(tmpdir(), 'cirrus-go-build-test-')), 'tool');
    const lines: string[] = [];
    const order: string[] = [];
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    // The lock holds a live pid: a process that is not this one, as a second `npm start` sees it.
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      await writeFile(`${entry}.lock`, `${other.pid}\n`);
      const waiting = withBuildLock(
        entry,
        (line) => lines.push(line),
        () => Promise.resolve(order.push('second')),
        {
          pollMs: 20,
        },
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(order.length, 0, 'ran while the lock was held');
      assert.deepEqual(lines, [
        `waiting for the build in progress (pid ${other.pid}) of ${entry}; it holds ${entry}.lock`,
      ]);
      other.kill();
      await once(other, 'exit');
      // Its owner gone, the lock is stale: taken over.
      await waiting;
      assert.deepEqual(order, ['second']);
      // Two in this process: the second waits for the first's build to end.
      const first = withBuildLock(
        entry,
        () => {},
        async () => {
          await held;
          order.push('first');
        },
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal((await readFile(`${entry}.lock`, 'utf8')).trim(), String(process.pid));
      release();
      await first;
      assert.deepEqual(order, ['second', 'first']);
      await assert.rejects(readFile(`${entry}.lock`), { code: 'ENOENT' });
    } finally {
      other.kill();
    }
  });

  it(
    'says only "interrupted; the next run resumes from the Go cache" on Ctrl-C',
    { skip: !hasGo && 'no go on PATH' },
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'cirrus-go-build-test-'));
      await writeFile(join(dir, 'go.mod'), 'module example.com/tiny\n\ngo 1.26\n');
      await writeFile(
        join(dir, 'main.go'),
        'package main\n\nimport (\n\t"fmt"\n\t"net/http"\n)\n\nfunc main() { fmt.Println(http.StatusOK) }\n',
      );
      // A Go cache of its own, empty: the build compiles the standard library and takes seconds.
      const env = { ...process.env, GOCACHE: join(dir, 'gocache'), GOFLAGS: '', GOPATH: join(dir, 'gopath') };
      const total = await packageCount({ dir, pkg: '.', env });
      assert.ok(total !== undefined && total > 50, `go list -deps: ${total}`);
      const controller = new AbortController();
      const lines: string[] = [];
      const build = goBuild({
        dir,
        pkg: '.',
        output: join(dir, 'tiny'),
        ldflags: [],
        name: 'tiny',
        env,
        progress: (l) => lines.push(l),
        signal: controller.signal,
      });
      setTimeout(() => {
        controller.abort();
      }, 1_500);
      await assert.rejects(build, (error: unknown) => {
        assert.ok(error instanceof BuildInterrupted);
        assert.equal((error as Error).message, 'interrupted; the next run resumes from the Go cache');
        return true;
      });
      assert.deepEqual(lines, []);
    },
  );
});
