// The comparison's figures: one row per figure, one column per CCM, cirrus's ratio to the Go CCM
// at cirrus's width, and the goals of issue 21 on that ratio (or, for the burst rate, on cirrus's
// own figure against the calibrated API server ceiling). Printed as a Markdown table.

import { percentile } from '../../test/harness/kube.ts';
import { contenderNames, contenders, type ContenderName } from './contenders.ts';
import type { ScenarioRun } from './scenarios.ts';

export interface ContenderResult {
  /** VmRSS of the CCM process after it served the sample Node and Service. */
  readonly readyRssMb: number;
  readonly steady: ScenarioRun;
  readonly burst: ScenarioRun;
  readonly ensure: ScenarioRun;
  readonly sync: ScenarioRun;
  /** The most cloud calls of each method in flight at once, over the whole run. */
  readonly maxInFlight: Record<string, number>;
}

export type Results = Partial<Record<ContenderName, ContenderResult>>;

export interface Row {
  readonly scenario: string;
  readonly metric: string;
  readonly unit: string;
  readonly values: Partial<Record<ContenderName, number>>;
  /** cirrus ÷ Go at cirrus's width. */
  readonly ratio: number | undefined;
  readonly goal: string;
  readonly met: boolean | undefined;
}

type Key = 'steady' | 'burst' | 'ensure' | 'sync';

interface Spec {
  readonly metric: string;
  readonly unit: string;
  readonly value: (r: ContenderResult) => number;
  /** Goal on the ratio to Go at cirrus's width. */
  readonly maxRatio?: number;
  /** Goal on cirrus's own figure. */
  readonly absolute?: { readonly text: string; readonly met: (value: number) => boolean };
}

/** The rows of the table, from the results of every CCM that ran. */
export function rows(results: Results, sizes: { nodes: number; burst: number }, ceiling: number): Row[] {
  const scenarios: [Key, string, string][] = [
    ['steady', `${sizes.nodes} Nodes at 20/s, cloud 50 ms`, 'Node'],
    ['burst', `${sizes.burst} Nodes at once, cloud 50 ms`, 'Node'],
    ['ensure', `${sizes.nodes} LoadBalancer Services at 50/s, ensure 1 s`, 'Service'],
    ['sync', `${sizes.nodes} load balancers, one Node excluded, update 1 s`, 'Service'],
  ];
  const out: Row[] = [];
  for (const [key, scenario, noun] of scenarios) {
    for (const spec of [...latencySpecs(key, ceiling), ...costSpecs(key, noun)]) out.push(row(results, scenario, spec));
  }
  const overall: Spec[] = [
    { metric: 'RSS after start-up and one Node and Service', unit: 'MB', value: (r) => r.readyRssMb },
    {
      metric: 'instanceMetadata calls in flight at most',
      unit: '',
      value: (r) => r.maxInFlight['instanceMetadata'] ?? 0,
    },
    {
      metric: 'ensureLoadBalancer calls in flight at most',
      unit: '',
      value: (r) => r.maxInFlight['ensureLoadBalancer'] ?? 0,
    },
    {
      metric: 'updateLoadBalancer calls in flight at most',
      unit: '',
      value: (r) => r.maxInFlight['updateLoadBalancer'] ?? 0,
    },
  ];
  for (const spec of overall) out.push(row(results, 'whole run', spec));
  return out;
}

function latencySpecs(key: Key, ceiling: number): Spec[] {
  const p = (q: number) => (r: ContenderResult) => percentile(r[key].latenciesMs, q);
  switch (key) {
    case 'steady':
      return [
        { metric: 'create → taint removed p50', unit: 'ms', value: p(50) },
        { metric: 'create → taint removed p99', unit: 'ms', value: p(99), maxRatio: 1 },
        { metric: 'Nodes initialized per second', unit: '/s', value: (r) => r.steady.perSecond },
      ];
    case 'burst':
      return [
        { metric: 'last create → last taint removed', unit: 's', value: (r) => r.burst.drainMs / 1000, maxRatio: 1 },
        { metric: 'create → taint removed p99', unit: 'ms', value: p(99) },
        { metric: 'Nodes initialized per second', unit: '/s', value: (r) => r.burst.perSecond },
        {
          metric: `Nodes/s ÷ API server PATCH ceiling (${ceiling.toFixed(0)}/s)`,
          unit: '%',
          value: (r) => (100 * r.burst.perSecond) / ceiling,
          absolute: { text: '≥ 50 %', met: (v) => v >= 50 },
        },
      ];
    case 'ensure':
      return [
        { metric: 'create → ingress set p50', unit: 'ms', value: p(50) },
        { metric: 'create → ingress set p99', unit: 'ms', value: p(99), maxRatio: 1 },
        { metric: 'ingresses set per second', unit: '/s', value: (r) => r.ensure.perSecond },
      ];
    case 'sync':
      return [
        { metric: 'exclude → updateLoadBalancer p50', unit: 's', value: (r) => p(50)(r) / 1000 },
        { metric: 'exclude → updateLoadBalancer p99', unit: 's', value: (r) => p(99)(r) / 1000, maxRatio: 1 },
        { metric: 'exclude → last updateLoadBalancer', unit: 's', value: (r) => r.sync.drainMs / 1000 },
      ];
  }
}

function costSpecs(key: Key, noun: string): Spec[] {
  const per = (value: (run: ScenarioRun) => number) => (r: ContenderResult) => value(r[key]) / r[key].objects;
  return [
    { metric: `CCM CPU per ${noun}`, unit: 'ms', value: per((s) => s.costs.ccmCpuMs), maxRatio: 1.5 },
    { metric: `API requests per ${noun}`, unit: '', value: per((s) => s.costs.requests.all), maxRatio: 1.1 },
    {
      metric: `mutating API requests per ${noun}`,
      unit: '',
      value: per((s) => s.costs.requests.mutating),
      maxRatio: 1,
    },
    { metric: `API server CPU per ${noun}`, unit: 'ms', value: per((s) => s.costs.apiserverCpuMs), maxRatio: 1.1 },
    { metric: 'CCM peak RSS', unit: 'MB', value: (r) => r[key].costs.peakRssMb, maxRatio: 1.5 },
  ];
}

function row(results: Results, scenario: string, spec: Spec): Row {
  const values: Partial<Record<ContenderName, number>> = {};
  for (const name of contenderNames) {
    const result = results[name];
    if (result !== undefined) values[name] = spec.value(result);
  }
  const ratio = ratioOf(values.cirrus, values['go-width']);
  const base = { scenario, metric: spec.metric, unit: spec.unit, values, ratio };
  if (spec.absolute !== undefined) {
    const cirrus = values.cirrus;
    return { ...base, goal: spec.absolute.text, met: cirrus === undefined ? undefined : spec.absolute.met(cirrus) };
  }
  if (spec.maxRatio === undefined) return { ...base, goal: '', met: undefined };
  return { ...base, goal: `≤ ${spec.maxRatio}×`, met: ratio === undefined ? undefined : ratio <= spec.maxRatio };
}

function ratioOf(cirrus: number | undefined, go: number | undefined): number | undefined {
  return cirrus !== undefined && go !== undefined && go !== 0 ? cirrus / go : undefined;
}

/** The rows as a Markdown table: scenario, figure, one column per CCM that ran, ratio, goal, met. */
export function markdown(table: readonly Row[]): string {
  const ran = contenderNames.filter((name) => table.some((r) => r.values[name] !== undefined));
  const header = ['scenario', 'figure', ...ran.map((n) => contenders[n].label), 'cirrus ÷ Go at width', 'goal', 'met'];
  let previous = '';
  const body = table.map((r) => {
    const scenario = r.scenario === previous ? '' : r.scenario;
    previous = r.scenario;
    return [
      scenario,
      r.unit === '' ? r.metric : `${r.metric} (${r.unit})`,
      ...ran.map((n) => format(r.values[n])),
      r.ratio === undefined ? '' : `${r.ratio.toFixed(2)}×`,
      r.goal,
      r.met === undefined ? '' : r.met ? 'met' : 'NOT met',
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => (cells[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c, i) => (i >= 2 && i < 2 + ran.length + 1 ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (i >= 2 && i < 2 + ran.length + 1 ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(header), rule, ...body.map(line)].join('\n');
}

function format(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 100) return value.toFixed(0);
  return Math.abs(value) >= 10 ? value.toFixed(1) : value.toFixed(2);
}
