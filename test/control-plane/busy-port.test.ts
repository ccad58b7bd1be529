// A busy --port is found before anything starts: `cirrus start` would otherwise build or start the
// local control plane first and find the port taken only when it listens, tens of seconds later,
// printing the cause after its "stopped" line.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { main } from '../../app/cli/main.ts';

describe('cirrus start with a busy --port', () => {
  it('refuses before the control plane starts, naming --port', async () => {
    const holder = createServer();
    holder.listen(0, '127.0.0.1');
    await once(holder, 'listening');
    const { port } = holder.address() as AddressInfo;
    let stderr = '';
    let stdout = '';
    const io = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      env: { PATH: process.env['PATH'] ?? '', CIRRUS_CACHE_DIR: process.env['CIRRUS_CACHE_DIR'] ?? '' },
      signal: new AbortController().signal,
    };
    try {
      const started = performance.now();
      const code = await main(
        ['start', '--port', String(port), '--bind-address', '127.0.0.1', '--log-level', 'silent'],
        io,
      );
      const ms = performance.now() - started;
      assert.equal(code, 1, stderr);
      assert.match(
        stderr,
        new RegExp(
          `\\ncirrus start: --port ${port}: 127\\.0\\.0\\.1:${port} is already in use by another process; choose another --port`,
        ),
      );
      assert.doesNotMatch(stderr, /starting the local control plane|kube-apiserver|stopped/, stderr);
      assert.equal(stdout, '');
      assert.ok(ms < 5_000, `refused after ${Math.round(ms)} ms`);
    } finally {
      holder.close();
    }
  });
});
