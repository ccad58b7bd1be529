// What `npm start` prints: its first line says what runs where; on a terminal the log is readable
// lines (pino-pretty), piped it is JSON (`npm start | cat`), and --log-format chooses. The JSON
// path never loads pino-pretty (every function's cold start takes it).
//
// `cirrus start` runs against a control plane of the suite's own (it checks at start that it can
// reach its cluster, and exits 1 when it cannot): with an empty inventory, node-lifecycle would
// delete other tests' NotReady Nodes on the shared one.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { resolveLogFormat } from '../../app/log.ts';
import { controlPlaneSkip, ownControlPlane } from '../harness/cluster.ts';

const cli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));
const logModule = fileURLToPath(new URL('../../app/log.ts', import.meta.url));

// eslint-disable-next-line no-control-regex
const ansi = /\u001b\[[0-9;]*m/g;

/** Runs `command` until it prints `until` (or 20 s), then SIGTERM; everything it wrote, stdout then stderr. */
async function output(command: string, args: string[], until: RegExp): Promise<string> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '' } });
  let text = '';
  const seen = new Promise<void>((resolve) => {
    const onData = (chunk: Buffer): void => {
      text += chunk.toString();
      if (until.test(text.replace(ansi, ''))) resolve();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
  });
  const exited = once(child, 'exit');
  await Promise.race([seen, exited, new Promise((resolve) => setTimeout(resolve, 20_000))]);
  child.kill('SIGTERM');
  await exited;
  return text;
}

describe('cirrus start output', { skip: controlPlaneSkip }, () => {
  const own = ownControlPlane();
  let scratch: string;
  let args: string[];
  before(() => {
    scratch = mkdtempSync(join(tmpdir(), 'cirrus-start-output-'));
    writeFileSync(join(scratch, 'kubeconfig'), own.admin.exportConfig());
    writeFileSync(join(scratch, 'inventory.yaml'), 'instances: []\n');
    args = [cli, 'start', '--kubeconfig', join(scratch, 'kubeconfig'), '--use-existing-cluster'].concat(
      ['--cloud-provider', 'static', '--cloud-config', join(scratch, 'inventory.yaml')],
      ['--port', '0', '--bind-address', '127.0.0.1', '--log-level', 'info'],
    );
  });
  after(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  it('says first what runs where', async () => {
    const text = await output(process.execPath, args, /cirrus serving/);
    const [first] = text.split('\n').filter((line) => !line.startsWith('{'));
    assert.match(
      first ?? '',
      /^cirrus start: node-init, node-lifecycle, service-lb, routes and the relay feeding them, in this process; provider static \(.*inventory\.yaml\); cluster: --kubeconfig .*kubeconfig$/,
    );
  });

  it('logs JSON lines when stdout is not a terminal (npm start | cat)', async () => {
    const text = await output(process.execPath, args, /cirrus serving/);
    const serving = text.split('\n').find((line) => line.includes('cirrus serving'));
    assert.ok(serving, text);
    const entry = JSON.parse(serving) as Record<string, unknown>;
    assert.equal(entry['level'], 'info');
    assert.equal(entry['fn'], 'cirrus');
  });

  it('logs readable lines on a terminal', async () => {
    // util-linux's script(1) runs the command on a pseudo-terminal.
    const quoted = [process.execPath, ...args].map((a) => `'${a}'`).join(' ');
    const text = (await output('script', ['-qfec', quoted, '/dev/null'], /cirrus: cirrus serving/)).replace(ansi, '');
    assert.match(
      text,
      /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: cirrus: cirrus serving \{"address":"http:\/\/127\.0\.0\.1:\d+"/m,
    );
    assert.equal(
      text.split(/\r?\n/).some((line) => line.startsWith('{"level"')),
      false,
      `no JSON line on a terminal:\n${text}`,
    );
  });

  it('cirrus serve too logs readable lines on a terminal, JSON elsewhere (docs/logs-and-dashboards.md)', async () => {
    const serve = [cli, 'serve', 'node-init', '--kubeconfig', join(scratch, 'kubeconfig')].concat(
      ['--cloud-provider', 'static', '--cloud-config', join(scratch, 'inventory.yaml')],
      ['--port', '0', '--bind-address', '127.0.0.1', '--log-level', 'info'],
    );
    const quoted = [process.execPath, ...serve].map((a) => `'${a}'`).join(' ');
    const onTerminal = (await output('script', ['-qfec', quoted, '/dev/null'], /node-init: node-init serving/)).replace(
      ansi,
      '',
    );
    assert.match(onTerminal, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: node-init: node-init serving \{/m);
    const piped = await output(process.execPath, serve, /node-init serving/);
    const serving = piped.split('\n').find((line) => line.includes('node-init serving'));
    assert.equal((JSON.parse(serving ?? '{}') as Record<string, unknown>)['fn'], 'node-init');
  });

  it('takes --log-format to choose, and auto is pretty only on a terminal', async () => {
    const text = await output(process.execPath, [...args, '--log-format', 'pretty'], /cirrus: cirrus serving/);
    assert.match(text.replace(ansi, ''), /INFO: cirrus: cirrus serving/);
    assert.equal(resolveLogFormat('auto', true), 'pretty');
    assert.equal(resolveLogFormat('auto', false), 'json');
    assert.equal(resolveLogFormat('json', true), 'json');
    assert.equal(resolveLogFormat('pretty', false), 'pretty');
  });

  it('does not load pino-pretty for JSON, and does for pretty', async () => {
    const probe = (format: string): string =>
      [
        `const { createLogger, logDestination } = await import(${JSON.stringify(logModule)});`,
        `const destination = await logDestination(${JSON.stringify(format)}, false);`,
        "createLogger({ name: 't', level: 'silent', destination });",
        "const { createRequire } = await import('node:module');",
        'const loaded = Object.keys(createRequire(import.meta.url).cache).some((p) => p.includes("/pino-pretty/"));',
        'process.stdout.write(String(loaded));',
      ].join('\n');
    for (const [format, loaded] of [
      ['json', 'false'],
      ['auto', 'false'],
      ['pretty', 'true'],
    ] as const) {
      const child = spawn(process.execPath, ['--input-type=module', '-e', probe(format)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let text = '';
      child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
      await once(child, 'exit');
      assert.equal(text, loaded, `--log-format ${format}: pino-pretty loaded`);
    }
  });
});
