// The fault suite (issue 20): its own control plane, each row of the table in turn, a table on
// stdout and the JSON under bench/results/. `npm run chaos` (run.ts) and the quick profile's test
// (test/faults/quick.test.ts) both call runChaos().

import { mkdtemp } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import { ControlPlane, resolveAssets } from '../../tools/control-plane/index.ts';
import { Kube } from '../harness/kube.ts';
import { machine } from '../harness/report.ts';
import { featureRows } from './features.ts';
import { notReadyWithoutLeader } from './lifecycle.ts';
import { profiles, type Profile, type RowContext, type RowResult } from './rows.ts';
import { apiserverRestarts, deletedWhileDown, forcedGone, leaderKills, relayKills } from './scenarios.ts';
import { competingWriter, tripleDelivery } from './writes.ts';
import { ensureNamespace } from './workload.ts';

type Row = (ctx: RowContext) => Promise<RowResult>;

/** Rows 1–12, run in their order. */
export const rows: ReadonlyMap<number, Row> = new Map<number, Row>([
  [1, relayKills],
  [2, apiserverRestarts],
  [3, forcedGone],
  [4, tripleDelivery],
  [5, competingWriter],
  [6, deletedWhileDown],
  [8, leaderKills],
  ...featureRows,
  [12, notReadyWithoutLeader],
]);

/** The rows the quick profile runs inside `npm test` (under a minute on 2 cores). */
export const quickRows: readonly number[] = [1, 3, 4, 6];

export interface ChaosOptions {
  readonly profile: Profile['name'];
  /** Row numbers; default every row (quick: quickRows). */
  readonly only?: readonly number[];
  readonly logLevel?: string;
  readonly progress?: (line: string) => void;
}

export interface ChaosRun {
  readonly startedAt: string;
  readonly profile: Profile;
  readonly machine: Record<string, string | number>;
  readonly kubernetes: string;
  /** The run folder: each row's process logs and cloud file. */
  readonly dir: string;
  readonly results: RowResult[];
  /** kube-apiserver crashes the suite restarted it after (not the restarts a row makes). */
  readonly apiserverCrashes: string[];
}

export async function runChaos(options: ChaosOptions): Promise<ChaosRun> {
  const profile = profiles[options.profile];
  const progress = options.progress ?? (() => undefined);
  const chosen = options.only ?? (options.profile === 'quick' ? quickRows : [...rows.keys()]);
  for (const n of chosen)
    if (!rows.has(n)) throw new Error(`--only: no row ${n}; rows: ${[...rows.keys()].join(', ')}`);
  const startedAt = new Date().toISOString();
  const dir = await mkdtemp(join(tmpdir(), 'cirrus-chaos-'));
  const assets = await resolveAssets({ build: true, progress });
  const controlPlane = await ControlPlane.start({ assets });
  const results: RowResult[] = [];
  const apiserverCrashes: string[] = [];
  const supervising = new AbortController();
  void superviseApiserver(controlPlane, supervising.signal, (crash) => {
    apiserverCrashes.push(crash);
    progress(`  ${crash}; restarting it, as a kubelet restarts a crashed static Pod`);
  });
  try {
    const kube = await Kube.connect(loadKubeConfig(controlPlane.info.adminKubeconfig));
    await ensureNamespace(kube);
    const ctx: RowContext = { kube, controlPlane, profile, dir, logLevel: options.logLevel ?? 'warn', progress };
    progress(`kube-apiserver ${controlPlane.info.kubernetesVersion}; logs and cloud files in ${dir}`);
    for (const n of [...rows.keys()].sort((a, b) => a - b).filter((k) => chosen.includes(k))) {
      const run = rows.get(n);
      if (run === undefined) continue;
      progress(`row ${n}`);
      const started = performance.now();
      const result = await run(ctx).catch((error: unknown) => failed(n, error));
      progress(
        `row ${n}: ${verdictWord(result.ok)} (${((performance.now() - started) / 1000).toFixed(0)} s) ${result.note}`,
      );
      results.push(result);
    }
  } finally {
    supervising.abort();
    await controlPlane.stop();
  }
  return {
    startedAt,
    profile,
    machine: machine(),
    kubernetes: controlPlane.info.kubernetesVersion,
    dir,
    results,
    apiserverCrashes,
  };
}

// Under this suite's load on 2 cores, kube-apiserver has exited on its own after a restart (a
// fatal "unable to perform initial IP and Port allocation check" of its service IP repair), which
// would fail every later row for a reason that is not cirrus's. A cluster's kubelet restarts it;
// here the suite does, every crash is reported with the run, and the rows go on.
async function superviseApiserver(
  controlPlane: ControlPlane,
  signal: AbortSignal,
  crashed: (what: string) => void,
): Promise<void> {
  for (;;) {
    await sleep(1_000);
    if (signal.aborted) return;
    if (!controlPlane.apiserverCrashed) continue;
    crashed(`kube-apiserver exited on its own at ${new Date().toISOString()}`);
    await controlPlane.restartApiserver({ graceMs: 0 }).catch((error: unknown) => {
      crashed(`kube-apiserver could not be restarted: ${(error as Error).message.split('\n')[0] ?? ''}`);
    });
  }
}

// A row that threw is a failed row, with the error as its note: the others still run.
function failed(n: number, error: unknown): RowResult {
  return {
    row: n,
    fault: `row ${n}`,
    lost: undefined,
    doubled: undefined,
    convergenceS: undefined,
    goal: '',
    ok: false,
    note: `failed: ${(error as Error).message}`,
  };
}

export function verdictWord(ok: boolean | undefined): string {
  return ok === undefined ? 'not measurable' : ok ? 'yes' : 'NO';
}

/** The table: row, fault, lost, doubled, convergence, goal, ok (and a note). */
export function chaosTable(results: readonly RowResult[]): string {
  const header = ['#', 'fault', 'lost', 'doubled', 'convergence', 'goal', 'ok', 'note'];
  const cells = results.map((r) => [
    String(r.row),
    r.fault,
    r.lost === undefined ? 'n/a' : String(r.lost),
    r.doubled === undefined ? 'n/a' : String(r.doubled),
    r.convergenceS === undefined ? 'n/a' : `${r.convergenceS.toFixed(1)} s`,
    r.goal,
    verdictWord(r.ok),
    r.note,
  ]);
  const line = (c: readonly string[]): string => `| ${c.map((x) => x.replaceAll('|', '\\|')).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...cells.map(line)].join('\n');
}
