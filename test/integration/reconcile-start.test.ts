// `cirrus reconcile` against `cirrus start`: start records its functions' loopback URL and the
// secret that signs requests to them (mode 0600) for as long as it runs; reconcile finds them with no
// flag, signs with that secret, and prints a line per object (or with -o json the report as it came).
// Without the secret a start's function answers 401, and reconcile says what to pass.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { main } from '../../app/cli/main.ts';
import { runningStarts, type RunningStart } from '../../app/cli/running.ts';
import { createNode, newNode } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';

interface Run {
  readonly done: Promise<number>;
  stdout: string;
  stderr: string;
}

function cirrus(argv: string[], env: Record<string, string>, signal = new AbortController().signal): Run {
  const run = { stdout: '', stderr: '' } as Run & { done: Promise<number> };
  const io = {
    stdout: { write: (text: string) => (run.stdout += text) },
    stderr: { write: (text: string) => (run.stderr += text) },
    env,
    signal,
  };
  (run as { done: Promise<number> }).done = main(argv, io);
  return run;
}

async function until(probe: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    assert.ok(Date.now() < deadline, `not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('cirrus reconcile against cirrus start', { skip: controlPlaneSkip }, () => {
  // start's relay watches every Node: a control plane of this suite's own.
  const own = ownControlPlane();

  it('finds the running start with no flag, signs with its secret, and prints a line per object', async () => {
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'cirrus-kc-')), 'admin.kubeconfig');
    writeFileSync(kubeconfig, own.admin.exportConfig());
    const runtime = mkdtempSync(join(tmpdir(), 'cirrus-runtime-'));
    const env = { XDG_RUNTIME_DIR: runtime };
    const name = uniqueName('worker');
    await createNode(own.core, newNode(name));

    const stop = new AbortController();
    const start = cirrus(
      [
        'start',
        '--cloud-provider',
        'fake',
        '--kubeconfig',
        kubeconfig,
        '--use-existing-cluster',
        '--controllers',
        'cloud-node',
        '--leader-elect=false',
        '--port',
        '0',
        '--log-level',
        'silent',
      ],
      env,
      stop.signal,
    );
    try {
      await until(() => start.stderr.includes('cirrus running:'), `start running\n${start.stderr}`);
      const dir = join(runtime, 'cirrus');
      const record = join(dir, `start-${process.pid}.json`);
      // Said in start's summary, with the record's path.
      assert.match(
        start.stderr,
        new RegExp(
          `^ {2}reconcile  cirrus reconcile <function> <name>\\|--all \\[--dry-run\\] \\(finds this start: ${record}\\)$`,
          'm',
        ),
      );
      const recorded = JSON.parse(readFileSync(record, 'utf8')) as RunningStart;
      assert.deepEqual(recorded.functions, ['node-init']);
      assert.match(recorded.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(statSync(dir).mode & 0o777, 0o700);
      assert.equal(statSync(recorded.secretFile).mode & 0o777, 0o600);
      assert.equal(statSync(record).mode & 0o777, 0o600);

      const text = cirrus(['reconcile', 'node', name, '--dry-run'], env);
      assert.equal(await text.done, 0, text.stderr);
      const lines = text.stdout.split('\n');
      assert.equal(lines[0], 'node-init dry run: nothing was changed');
      assert.match(lines[1] ?? '', new RegExp(`^Node/${name}: \\S+`));

      const json = cirrus(['reconcile', 'node-init', name, '-o', 'json'], env);
      assert.equal(await json.done, 0, json.stderr);
      const report = JSON.parse(json.stdout) as { function: string; dryRun: boolean; objects: { key: string }[] };
      assert.equal(report.function, 'node-init');
      assert.equal(report.dryRun, false);
      assert.deepEqual(
        report.objects.map((o) => o.key),
        [`Node/${name}`],
      );

      const all = cirrus(['reconcile', 'node-init', '--all'], env);
      assert.equal(await all.done, 0, all.stderr);
      assert.match(all.stdout, /^node-init: reconciled \d+ objects?\n/);
      assert.match(all.stdout, new RegExp(`^Node/${name}: \\S+$`, 'm'));

      // --url naming start's function: its secret is still found.
      const byUrl = cirrus(['reconcile', 'node', name, '--url', `${recorded.url}/node-init`], env);
      assert.equal(await byUrl.done, 0, byUrl.stderr);

      // A function start does not run is named, with those it runs.
      const absent = cirrus(['reconcile', 'service', 'default/web'], env);
      assert.equal(await absent.done, 2);
      assert.match(
        absent.stderr,
        /^cirrus reconcile: the cirrus start running here \(pid \d+\) does not run service-lb; it runs node-init\n/,
      );

      // What the record says start acts on, for a choice between several starts.
      assert.match(recorded.cluster ?? '', /^https:\/\/127\.0\.0\.1:\d+, context \S+: --kubeconfig /);
      assert.equal(recorded.provider, 'fake');

      // --url naming another function: refused before anything is sent, naming the right one.
      const wrong = cirrus(['reconcile', 'service', 'default/web', '--url', `${recorded.url}/node-init`], env);
      assert.equal(await wrong.done, 2);
      assert.match(wrong.stderr, /^cirrus reconcile: --url names node-init, but Services are reconciled by service-lb/);
      assert.equal(wrong.stdout, '');

      // A function this start does not run, named in --url: said so, not its listener's raw JSON.
      const skipped = cirrus(['reconcile', 'routes', '--url', `${recorded.url}/routes`], env);
      assert.equal(await skipped.done, 2);
      assert.match(skipped.stderr, /does not run routes; it runs node-init\n/);
      // An error reply is printed as its message, not as JSON.
      const nowhere = cirrus(['reconcile', 'node', name, '--url', `${recorded.url}/elsewhere`], env);
      assert.equal(await nowhere.done, 1);
      assert.match(nowhere.stderr, /^cirrus reconcile: node-init answered 404: no route POST \/elsewhere\/reconcile/);
      assert.doesNotMatch(nowhere.stderr, /[{}]/);

      // An object that does not exist: its report, and exit status 1.
      const missing = cirrus(['reconcile', 'node', `${name}-missing`], env);
      assert.equal(await missing.done, 1, missing.stderr);
      assert.match(missing.stdout, new RegExp(`^Node/${name}-missing: not-found$`, 'm'));
      assert.equal(missing.stderr, `cirrus reconcile: Node/${name}-missing does not exist\n`);

      // Elsewhere (no record to read), the secret is missing: 401, and what to pass.
      const elsewhere = { XDG_RUNTIME_DIR: mkdtempSync(join(tmpdir(), 'cirrus-runtime-')) };
      const unsigned = cirrus(['reconcile', 'node', name, '--url', `${recorded.url}/node-init`], elsewhere);
      assert.equal(await unsigned.done, 1);
      assert.match(unsigned.stderr, /^cirrus reconcile: node-init answered 401: /);
      assert.match(
        unsigned.stderr,
        /\nThe function refuses unsigned requests: pass --signing-secret-file with its secret/,
      );
      const signed = cirrus(
        ['reconcile', 'node', name, '--url', `${recorded.url}/node-init`, '--signing-secret-file', recorded.secretFile],
        elsewhere,
      );
      assert.equal(await signed.done, 0, signed.stderr);
    } finally {
      stop.abort();
      assert.equal(await start.done, 0, start.stderr);
    }
    // Stopped: the record and the secret are gone, and reconcile finds no start.
    assert.deepEqual(readdirSync(join(runtime, 'cirrus')), []);
    assert.deepEqual(await runningStarts(env), []);
  });

  it('with several starts here, asks for --url and lists each with its cluster and provider', async () => {
    const runtime = mkdtempSync(join(tmpdir(), 'cirrus-runtime-'));
    const dir = join(runtime, 'cirrus');
    mkdirSync(dir, { mode: 0o700 });
    // Two running processes: this one and a child, each with a record as start writes it.
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      const records: RunningStart[] = [
        {
          pid: process.pid,
          url: 'http://127.0.0.1:1001',
          functions: ['node-init'],
          secretFile: '/nonexistent',
          cluster: 'https://127.0.0.1:6443, context a: --kubeconfig a',
          provider: 'fake',
        },
        {
          pid: other.pid ?? 0,
          url: 'http://127.0.0.1:1002',
          functions: ['node-init', 'service-lb'],
          secretFile: '/nonexistent',
          cluster: 'https://127.0.0.1:7443, context b: the local control plane',
          provider: 'static, cloud-config x.yaml',
        },
      ];
      for (const record of records)
        writeFileSync(join(dir, `start-${record.pid}.json`), JSON.stringify(record), { mode: 0o600 });
      const run = cirrus(['reconcile', 'node', 'web'], { XDG_RUNTIME_DIR: runtime });
      assert.equal(await run.done, 2);
      const [first, ...lines] = run.stderr.split('\n');
      assert.equal(
        first,
        'cirrus reconcile: 2 cirrus start processes run here; pass --url <url>/node-init to say which:',
      );
      const [a, b] = records.map(
        (r) => `  pid ${r.pid}: ${r.url} (${r.functions.join(', ')}), cluster ${r.cluster}, provider ${r.provider}`,
      );
      assert.deepEqual(lines.slice(0, 2), process.pid < (other.pid ?? 0) ? [a, b] : [b, a]);
    } finally {
      other.kill();
    }
  });
});
