// The figures of a run: a table on stdout and a JSON file under bench/results/.

import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import type { Counts } from './kube.ts';

export interface Figure {
  readonly scenario: string;
  readonly metric: string;
  readonly value: number | undefined;
  readonly unit: string;
  /** The goal it is read against, as the scenario that measures it states it, e.g. "G1 p50 ≤ 250 ms". */
  readonly goal?: string;
  /** Whether it meets the goal, where the goal is a bound on this figure. */
  readonly met?: boolean;
  readonly note?: string;
}

export interface ScenarioResult {
  readonly figures: Figure[];
  /** Anything else worth keeping: API request deltas by verb and resource, settings. */
  readonly detail?: Record<string, Counts | number | string | boolean>;
}

export function machine(): Record<string, string | number> {
  const cpu = cpus();
  return {
    cpus: cpu.length,
    cpuModel: cpu[0]?.model ?? '',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: process.platform,
  };
}

/** A run's time and machine for a table's heading: "2026-11-25 04:21 UTC, on a 2-core, 24 GiB machine (…)". */
export function runHeading(startedAt: string, machine: Record<string, string | number>, kubernetes: string): string {
  const platform = [machine['cpuModel'], machine['platform'], `Node.js ${String(machine['node'])}`];
  const described = [...platform.filter((p) => p !== undefined && p !== ''), `kube-apiserver ${kubernetes}`].join(', ');
  const when = `${startedAt.slice(0, 10)} ${startedAt.slice(11, 16)} UTC`;
  return `${when}, on a ${String(machine['cpus'])}-core, ${String(machine['memoryGiB'])} GiB machine (${described})`;
}

export function table(figures: readonly Figure[]): string {
  const rows = figures.map((f) => [
    f.scenario,
    f.metric,
    format(f.value),
    f.unit,
    f.goal ?? '',
    verdict(f),
    f.note ?? '',
  ]);
  const header = ['scenario', 'metric', 'value', 'unit', 'goal', 'ok', 'note'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === 2 ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export async function writeResults(dir: string, content: unknown): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = join(
    dir,
    `${new Date()
      .toISOString()
      .replaceAll(':', '-')
      .replace(/\.\d+Z$/, 'Z')}.json`,
  );
  await writeFile(file, `${JSON.stringify(content, null, 2)}\n`);
  return file;
}

export function format(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return 'n/a';
  if (Math.abs(value) >= 100) return value.toFixed(0);
  return Math.abs(value) >= 10 ? value.toFixed(1) : value.toFixed(2);
}

function verdict(f: Figure): string {
  if (f.met === undefined) return '';
  return f.met ? 'yes' : 'NO';
}
