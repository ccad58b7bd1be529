// deploy/grafana/cirrus.json: every metric a panel or variable queries exists in the /metrics of
// the processes that export them, started for real: `cirrus start` (deploy/standalone: the
// functions and the relay in one process, one /metrics), and each `cirrus serve <function>` with
// `cirrus relay` (the Knative and Lambda deployments: a /metrics each). They run against a control
// plane of this suite's own, so that the relay leads and the periodic passes reconcile. The aws
// provider's series (cloud-provider-aws's names, `cloudprovider_aws_*`) come only from a process
// with that provider: `cirrus serve` with it, against the run's AWS emulator.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { catalogue } from '../../functions/catalogue.ts';
import { awsChildEnv, awsEmulatorSkip, awsWorld, type AwsWorld } from '../harness/aws.ts';
import { controlPlaneSkip, ownControlPlane } from '../harness/cluster.ts';

const dashboardPath = fileURLToPath(new URL('../../deploy/grafana/cirrus.json', import.meta.url));
const cli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));

const targetSchema = z.looseObject({ expr: z.string().min(1), refId: z.string() });
interface Panel {
  readonly title?: string | undefined;
  readonly type: string;
  readonly targets?: unknown[] | undefined;
  readonly panels?: Panel[] | undefined;
}
const panelSchema: z.ZodType<Panel> = z.lazy(() =>
  z.looseObject({
    title: z.string().optional(),
    type: z.string(),
    targets: z.array(z.unknown()).optional(),
    panels: z.array(panelSchema).optional(),
  }),
);
const dashboardSchema = z.looseObject({
  title: z.string(),
  uid: z.string(),
  panels: z.array(panelSchema),
  templating: z.object({
    list: z.array(z.looseObject({ name: z.string(), type: z.string(), definition: z.string().optional() })),
  }),
});

// PromQL's functions, aggregations and keywords: every other name in an expression is a metric.
const promqlWords = new Set([
  ...['sum', 'min', 'max', 'avg', 'count', 'stddev', 'topk', 'bottomk', 'quantile', 'group'],
  ...['rate', 'irate', 'increase', 'delta', 'deriv', 'histogram_quantile', 'abs', 'clamp_min', 'clamp_max'],
  ...['sort', 'sort_desc', 'time', 'vector', 'scalar', 'label_replace', 'absent', 'offset', 'bool'],
  ...['and', 'or', 'unless'],
]);

/** The metric names a PromQL expression (or Grafana's label_values(metric, label)) reads. */
export function metricNames(expr: string): string[] {
  const labelValues = /^label_values\(\s*([a-zA-Z_:][\w:]*)/.exec(expr.trim());
  if (labelValues) return [labelValues[1] ?? ''];
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  return [...stripped.matchAll(/[a-zA-Z_:][\w:]*/g)].map((m) => m[0]).filter((word) => !promqlWords.has(word));
}

/** Every expression of the dashboard: its panels' (rows' panels included) and its variables' queries. */
function queries(): { where: string; expr: string }[] {
  const dashboard = dashboardSchema.parse(JSON.parse(readFileSync(dashboardPath, 'utf8')));
  const fromPanels = (panels: readonly Panel[]): { where: string; expr: string }[] =>
    panels.flatMap((panel) => [
      ...(panel.targets ?? []).map((t) => ({ where: panel.title ?? panel.type, expr: targetSchema.parse(t).expr })),
      ...fromPanels(panel.panels ?? []),
    ]);
  const fromVariables = dashboard.templating.list
    .filter((v) => v.type === 'query' && v.definition !== undefined)
    .map((v) => ({ where: `variable ${v.name}`, expr: v.definition ?? '' }));
  return [...fromPanels(dashboard.panels), ...fromVariables];
}

/** The metric families a /metrics text exports (by `# TYPE`), with their types. */
function families(exposition: string): Map<string, string> {
  return new Map(
    [...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m): [string, string] => [m[1] ?? '', m[2] ?? '']),
  );
}

/** Whether `name` is a series of one of `exported`: a family, or a histogram's _bucket, _sum or _count. */
function exists(name: string, exported: ReadonlyMap<string, string>): boolean {
  if (exported.has(name)) return true;
  const base = /^(.*)_(bucket|sum|count)$/.exec(name)?.[1];
  return base !== undefined && ['histogram', 'summary'].includes(exported.get(base) ?? '');
}

/** The aws provider's series: exported only by a process with that provider. */
const awsOnly = (name: string): boolean => name.startsWith('cloudprovider_aws_');

/** A started cirrus command: its /metrics URL once it logs `<what> serving` (JSON lines: stdout is a pipe). */
async function started(
  args: string[],
  kubeconfig: string,
  children: ChildProcess[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const child = spawn(
    process.execPath,
    [cli, ...args, '--kubeconfig', kubeconfig].concat([
      '--port',
      '0',
      '--bind-address',
      '127.0.0.1',
      '--log-level',
      'info',
    ]),
    { stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit').then(([code, signal]) => {
    throw new Error(`cirrus ${args.join(' ')} exited (${String(code ?? signal)}):\n${stderr}`);
  });
  const address = new Promise<string>((resolve) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (!line.startsWith('{')) return;
      const entry = JSON.parse(line) as { msg?: string; address?: string };
      if (entry.msg?.endsWith(' serving') && entry.address !== undefined) resolve(entry.address);
    });
  });
  return `${await Promise.race([address, exited])}/metrics`;
}

async function scrape(url: string): Promise<string> {
  const response = await fetch(url);
  assert.equal(response.status, 200, url);
  return response.text();
}

describe('deploy/grafana/cirrus.json', () => {
  it('queries metrics by name, and the name check finds them (the check itself works)', () => {
    const all = queries();
    assert.ok(all.length >= 15, 'the panels query something');
    assert.deepEqual(
      metricNames(
        'histogram_quantile(0.99, sum by (le, destination) (rate(cirrus_relay_delivery_latency_seconds_bucket{job=~"$job"}[$__rate_interval])))',
      ),
      ['cirrus_relay_delivery_latency_seconds_bucket'],
    );
    assert.deepEqual(metricNames('label_values(process_resident_memory_bytes, job)'), [
      'process_resident_memory_bytes',
    ]);
    const exported = families('# TYPE cirrus_relay_retries_total counter\n# TYPE x_seconds histogram\n');
    assert.equal(exists('cirrus_relay_retries_total', exported), true);
    assert.equal(exists('x_seconds_bucket', exported), true);
    assert.equal(exists('cirrus_relay_retries', exported), false, 'a misspelt name is missing');
  });
});

describe("deploy/grafana/cirrus.json against cirrus's real /metrics", { skip: controlPlaneSkip }, () => {
  const own = ownControlPlane();
  const children: ChildProcess[] = [];
  let scratch: string;
  let kubeconfig: string;

  before(() => {
    scratch = mkdtempSync(join(tmpdir(), 'cirrus-grafana-'));
    kubeconfig = join(scratch, 'kubeconfig');
    writeFileSync(kubeconfig, own.admin.exportConfig());
  });
  after(async () => {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map(async (child) => (child.exitCode === null ? once(child, 'exit') : undefined)));
    rmSync(scratch, { recursive: true, force: true });
  });

  // Every function, routes included: the fake provider has routes, given the pods' CIDR.
  const provider = ['--cloud-provider', 'fake', '--cluster-cidr', '10.244.0.0/16'];

  // What the dashboard queries that `exported` lacks, of the names `wanted` selects.
  function missingFrom(exported: ReadonlyMap<string, string>, wanted = (name: string) => !awsOnly(name)): string[] {
    return queries().flatMap(({ where, expr }) =>
      metricNames(expr)
        .filter((name) => wanted(name) && !exists(name, exported))
        .map((name) => `${where}: ${name}`),
    );
  }

  it('finds every metric in the /metrics of `cirrus start` (deploy/standalone)', async () => {
    const url = await started(
      ['start', ...provider, '--use-existing-cluster', '--leader-elect=false'],
      kubeconfig,
      children,
    );
    assert.deepEqual(missingFrom(families(await scrape(url))), []);
  });

  it('finds every metric in the /metrics of the functions and the relay, each on its own (Knative, Lambda)', async () => {
    const urls = await Promise.all([
      ...catalogue.map(async (entry) => started(['serve', entry.name, ...provider], kubeconfig, children)),
      started(['relay', '--to', 'node-init=http://127.0.0.1:9', '--leader-elect=false'], kubeconfig, children),
    ]);
    const exported = new Map<string, string>();
    for (const url of urls) for (const [name, type] of families(await scrape(url))) exported.set(name, type);
    assert.deepEqual(missingFrom(exported), []);
  });

  it("finds the aws provider's series in the /metrics of a function with it", { skip: awsEmulatorSkip }, async () => {
    let world: AwsWorld | undefined;
    try {
      world = await awsWorld('grafana');
      const cloudConfig = join(scratch, 'cloud.conf');
      writeFileSync(cloudConfig, world.cloudConfig());
      const url = await started(
        ['serve', 'node-init', '--cloud-provider', 'aws', '--cloud-config', cloudConfig],
        kubeconfig,
        children,
        awsChildEnv(world),
      );
      assert.ok(
        queries().some(({ expr }) => metricNames(expr).some(awsOnly)),
        'the dashboard has AWS panels',
      );
      assert.deepEqual(missingFrom(families(await scrape(url)), awsOnly), []);
    } finally {
      world?.close();
    }
  });
});
