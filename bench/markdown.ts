// A run's tables as Markdown in docs/figures.md's format, written beside its JSON as
// bench/results/<time>.md and copied to bench/results/latest.md, ready to paste into the page.
// The run does not write the page itself: one run is one sample on one machine (±20 % on a busy
// 2-core machine), a run of some scenarios (--only) or of the default sizes would replace a fuller
// table, and the text around each table says what its figures mean; so a person reads the run and
// commits the table with that text.

import { format, runHeading, type Figure } from '../test/harness/report.ts';

/** What a run's heading says: when, which sizes and scenarios, on what. */
export interface RunFacts {
  readonly startedAt: string;
  readonly full: boolean;
  /** The --only list as given, if any. */
  readonly only?: string;
  /** The size flags given other than --full (--objects n, --scale n), if any. */
  readonly sizeFlags?: string;
  readonly machine: Record<string, string | number>;
  readonly kubernetes: string;
}

/** The run's section: a heading line, then the figures' table (scenario, figure, value, goal, met, note). */
export function runSection(facts: RunFacts, figures: readonly Figure[]): string {
  const sizes = facts.full ? '`--full` sizes' : 'default sizes';
  const flags = facts.sizeFlags === undefined ? '' : ` but \`${facts.sizeFlags}\``;
  const scenarios = facts.only === undefined ? '' : `, \`--only ${facts.only}\``;
  return `Run ${heading(facts)}; ${sizes}${flags}${scenarios}:\n\n${figuresTable(figures)}\n`;
}

/** A comparison's section: a heading line, then the table bench/compare/table.ts made. */
export function comparisonSection(facts: RunFacts, content: Record<string, unknown>, table: string): string {
  const sizes = (content['sizes'] ?? []) as { nodes?: number; burst?: number }[];
  const ceiling = content['apiserverPatchCeiling'];
  const objects = sizes
    .map((size) => `${String(size.nodes)} objects (a burst of ${String(size.burst)} Nodes)`)
    .join(' and ');
  const apiserver = typeof ceiling === 'number' ? `; API server ceiling ${ceiling.toFixed(0)} Node PATCH/s` : '';
  return `Run ${heading(facts)}; \`--compare go\`, ${objects}${apiserver}:\n\n${table}\n`;
}

/** One row per figure; the scenario is written once for its rows, as in docs/figures.md. */
export function figuresTable(figures: readonly Figure[]): string {
  let previous = '';
  const rows = figures.map((f) => {
    const scenario = f.scenario === previous ? '' : f.scenario;
    previous = f.scenario;
    const value = `${format(f.value)}${f.unit === '' ? '' : ` ${f.unit}`}`;
    const met = f.met === undefined ? '' : f.met ? 'met' : 'not met';
    return [scenario, f.metric, value, f.goal ?? '', met, f.note ?? ''];
  });
  const line = (cells: readonly string[]): string => `| ${cells.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`;
  const header = [
    line(['scenario', 'figure', 'value', 'goal', 'met', 'note']),
    '| --- | --- | ---: | --- | --- | --- |',
  ];
  return [...header, ...rows.map(line)].join('\n');
}

function heading(facts: RunFacts): string {
  return runHeading(facts.startedAt, facts.machine, facts.kubernetes);
}
