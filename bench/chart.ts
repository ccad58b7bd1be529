// The bench's figures as an SVG chart, written next to their JSON (bench/results/<time>.svg) and
// as bench/results/latest.svg (a chart worth keeping is copied to docs/figures/). One horizontal bar per figure, grouped by
// scenario: a run's figures are scaled within their unit (so that milliseconds are compared with
// milliseconds), green where a figure meets its goal, red where it does not, grey without one; a
// comparison (--compare go) draws one bar per contender for each figure, scaled within the figure.
//
//   node bench/chart.ts bench/results/<time>.json     draws that run (the SVG beside it)

import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const figureSchema = z.object({
  scenario: z.string(),
  metric: z.string(),
  value: z.number().nullable().optional(),
  unit: z.string(),
  goal: z.string().optional(),
  met: z.boolean().optional(),
});
const runSchema = z.looseObject({
  startedAt: z.string(),
  results: z.record(z.string(), z.looseObject({ figures: z.array(figureSchema) })),
});
const comparisonSchema = z.looseObject({
  startedAt: z.string(),
  rows: z.array(
    z.looseObject({
      scenario: z.string(),
      metric: z.string(),
      unit: z.string(),
      values: z.record(z.string(), z.number().nullable()),
      goal: z.string().optional(),
      met: z.boolean().optional(),
    }),
  ),
});

/** One bar: what it measures, its value, and how long it is drawn (0..1). */
interface Bar {
  readonly label: string;
  readonly value: number | undefined;
  readonly unit: string;
  readonly length: number;
  readonly colour: string;
}

/** One chart line: a figure and its bars (one, or one per contender), under its scenario. */
interface Line {
  readonly scenario: string;
  readonly metric: string;
  readonly note: string;
  readonly bars: readonly Bar[];
}

const colours = { met: '#2e7d32', missed: '#c62828', none: '#78909c' };
const contenderColours = ['#90a4ae', '#5c6bc0', '#26a69a', '#ef6c00', '#8d6e63', '#ab47bc'];

/** The SVG of a results file's content (a run or a comparison); throws naming what it does not recognize. */
export function chartSvg(content: unknown): string {
  const comparison = comparisonSchema.safeParse(content);
  if (comparison.success)
    return render(`cirrus bench: comparison, ${comparison.data.startedAt}`, compared(comparison.data));
  const run = runSchema.safeParse(content);
  if (run.success) return render(`cirrus bench, ${run.data.startedAt}`, figures(run.data));
  throw new Error(`not a bench result (results or rows): ${run.error.message}`);
}

function figures(run: z.infer<typeof runSchema>): Line[] {
  const all = Object.values(run.results).flatMap((r) => r.figures);
  // Each unit's largest value is a full bar.
  const largest = new Map<string, number>();
  for (const f of all) largest.set(f.unit, Math.max(largest.get(f.unit) ?? 0, Math.abs(f.value ?? 0)));
  return all.map((f) => {
    const value = f.value ?? undefined;
    const colour = f.met === undefined ? colours.none : f.met ? colours.met : colours.missed;
    const max = largest.get(f.unit) ?? 0;
    return {
      scenario: f.scenario,
      metric: f.metric,
      note: f.goal === undefined ? '' : `${f.goal}${f.met === false ? ' (missed)' : ''}`,
      bars: [{ label: '', value, unit: f.unit, length: max > 0 ? Math.abs(value ?? 0) / max : 0, colour }],
    };
  });
}

function compared(comparison: z.infer<typeof comparisonSchema>): Line[] {
  const contenders = [...new Set(comparison.rows.flatMap((r) => Object.keys(r.values)))];
  return comparison.rows.map((row) => {
    const max = Math.max(0, ...Object.values(row.values).map((v) => Math.abs(v ?? 0)));
    return {
      scenario: row.scenario,
      metric: row.metric,
      note: row.goal ? `${row.goal}${row.met === false ? ' (missed)' : ''}` : '',
      bars: contenders.map((name, i) => {
        const value = row.values[name] ?? undefined;
        return {
          label: name,
          value,
          unit: row.unit,
          length: max > 0 ? Math.abs(value ?? 0) / max : 0,
          colour: contenderColours[i % contenderColours.length] ?? colours.none,
        };
      }),
    };
  });
}

const width = 1000;
const labelWidth = 430;
const barWidth = 360;
const barHeight = 14;
const font = 'font-family="system-ui, sans-serif" font-size="12"';

function render(title: string, lines: readonly Line[]): string {
  const out: string[] = [];
  let y = 40;
  let scenario: string | undefined;
  for (const line of lines) {
    if (line.scenario !== scenario) {
      scenario = line.scenario;
      y += 14;
      out.push(`<text x="10" y="${y}" ${font} font-weight="bold">${escape(scenario)}</text>`);
      y += 8;
    }
    const top = y;
    out.push(`<text x="20" y="${top + barHeight - 2}" ${font}>${escape(line.metric)}</text>`);
    for (const bar of line.bars) {
      const length = Math.max(bar.value === undefined ? 0 : 1, Math.round(bar.length * barWidth));
      const text = `${bar.label === '' ? '' : `${bar.label}: `}${formatValue(bar.value)}${bar.unit === '' ? '' : ` ${bar.unit}`}`;
      out.push(
        `<rect x="${labelWidth}" y="${y}" width="${length}" height="${barHeight}" fill="${bar.colour}"><title>${escape(text)}</title></rect>`,
        `<text x="${labelWidth + length + 6}" y="${y + barHeight - 2}" ${font}>${escape(text)}</text>`,
      );
      y += barHeight + 3;
    }
    // The goal under the metric's name, in the label column, where no bar text can reach it.
    if (line.note !== '') {
      const colour = line.note.endsWith('(missed)') ? colours.missed : '#455a64';
      out.push(
        `<text x="32" y="${top + 2 * barHeight + 1}" font-family="system-ui, sans-serif" font-size="11" fill="${colour}">${escape(line.note)}</text>`,
      );
      y = Math.max(y, top + 2 * barHeight + 6);
    }
    y += 5;
  }
  const height = y + 20;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="24" font-family="system-ui, sans-serif" font-size="16" font-weight="bold">${escape(title)}</text>`,
    ...out,
    '</svg>',
    '',
  ].join('\n');
}

function formatValue(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return 'n/a';
  if (Math.abs(value) >= 100) return value.toFixed(0);
  return Math.abs(value) >= 10 ? value.toFixed(1) : value.toFixed(2);
}

function escape(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

/** Draws the results file `json` into the SVG beside it (same name, .svg); returns its path. */
export async function drawChart(json: string): Promise<string> {
  const svg = chartSvg(JSON.parse(await readFile(json, 'utf8')));
  const path = json.replace(/\.json$/, '') + '.svg';
  await writeFile(path, svg);
  return path;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file] = process.argv.slice(2);
  if (file === undefined || file === '--help' || file === '-h') {
    process.stdout.write('Usage: node bench/chart.ts bench/results/<time>.json   (writes <time>.svg beside it)\n');
    process.exitCode = file === undefined ? 2 : 0;
  } else {
    process.stdout.write(`${await drawChart(file)}\n`);
  }
}
