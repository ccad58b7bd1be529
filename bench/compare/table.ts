// The comparison's figures: one row per figure and size, one column per CCM, the ratio of what
// ships (`cirrus start` built, contenders.ts's shippedContender) to the Go CCM at cirrus's width,
// the ratio of the split (node-init served alone, fed by the relay) to `cirrus start` built, and
// the goals of issue 30 on the first ratio. Run at several sizes, it adds each figure's growth from
// one size to the next beside the growth of the object count, and issue 30's goal that no figure
// grows faster than the objects. Printed as a Markdown table.

import { percentile } from '../../test/harness/kube.ts';
import { contenderNames, contenders, shippedContender, type CcmProcess, type ContenderName } from './contenders.ts';
import type { ScenarioRun } from './scenarios.ts';

export interface ContenderResult {
  /** VmRSS of the CCM's processes (summed, and each) after it served the sample Node and Service. */
  readonly readyRssMb: number;
  readonly readyByProcess: Partial<Record<CcmProcess['role'], number>>;
  readonly steady: ScenarioRun;
  readonly burst: ScenarioRun;
  /** Undefined for a contender that runs the Node scenarios only. */
  readonly ensure: ScenarioRun | undefined;
  readonly sync: ScenarioRun | undefined;
  /** The most cloud calls of each method in flight at once, over the whole run. */
  readonly maxInFlight: Record<string, number>;
}

export type Results = Partial<Record<ContenderName, ContenderResult>>;

/** One size of the comparison: the objects of the Node-at-a-rate and load-balancer scenarios, and of the Node burst. */
export interface Size {
  readonly nodes: number;
  readonly burst: number;
}

export interface SizedResults {
  readonly size: Size;
  readonly results: Results;
}

export interface Row {
  readonly scenario: string;
  readonly metric: string;
  readonly unit: string;
  readonly values: Partial<Record<ContenderName, number>>;
  /** `cirrus start` built ÷ Go at cirrus's width. */
  readonly ratio: number | undefined;
  /** The split ÷ `cirrus start` built. */
  readonly splitRatio: number | undefined;
  /** `cirrus start` built ÷ the same built at the baseline commit (`--baseline`): after ÷ before. */
  readonly baselineRatio?: number | undefined;
  readonly goal: string;
  readonly met: boolean | undefined;
}

/**
 * How far a figure may grow from one size to the next beyond the object count's growth: "grows
 * faster than the object count" is read with this much room for run-to-run noise (±20 % on the
 * busy 2-core development machine).
 */
export const growthTolerance = 1.25;

type Key = 'steady' | 'burst' | 'ensure' | 'sync';

/**
 * How a figure follows the object count: a total (time, memory) may grow as fast as the objects,
 * a figure per object not at all, a rate may not fall; 'none' for figures bounded otherwise.
 */
type Growth = 'total' | 'per-object' | 'rate' | 'none';

interface Spec {
  readonly metric: string;
  readonly unit: string;
  readonly value: (r: ContenderResult) => number | undefined;
  readonly growth: Growth;
  /** Goal on the ratio of what ships to Go at cirrus's width. */
  readonly maxRatio?: number;
}

const scenarioTitles: Record<Key, (n: number) => string> = {
  steady: (n) => `${n} Nodes at 20/s, cloud 50 ms`,
  burst: (n) => `${n} Nodes at once, cloud 50 ms`,
  ensure: (n) => `${n} LoadBalancer Services at 50/s, ensure 1 s`,
  sync: (n) => `${n} load balancers, one Node excluded, update 1 s`,
};
const shortTitles: Record<Key, string> = {
  steady: 'Nodes at 20/s',
  burst: 'Nodes at once',
  ensure: 'LoadBalancer Services at 50/s',
  sync: 'load balancers, one Node excluded',
};
const nouns: Record<Key, string> = { steady: 'Node', burst: 'Node', ensure: 'Service', sync: 'Service' };
const keys = Object.keys(scenarioTitles) as Key[];
const objectsOf = (size: Size, key: Key): number => (key === 'burst' ? size.burst : size.nodes);

/** The rows of the table: every size's, then (at several sizes) each figure's growth between consecutive sizes. */
export function rows(sized: readonly SizedResults[], ceiling: number): Row[] {
  const out = sized.flatMap(({ size, results }) => sizeRows(size, results, ceiling, sized.length === 1));
  for (let i = 1; i < sized.length; i++) {
    const [small, large] = [sized[i - 1], sized[i]];
    if (small !== undefined && large !== undefined) out.push(...growthRows(small, large, ceiling));
  }
  // The split's own rows when it did not run, say.
  return out.filter((r) => Object.keys(r.values).length > 0);
}

function sizeRows(size: Size, results: Results, ceiling: number, only: boolean): Row[] {
  const out: Row[] = [];
  for (const key of keys) {
    for (const spec of specs(key, ceiling)) out.push(row(results, scenarioTitles[key](objectsOf(size, key)), spec));
  }
  const whole = only ? 'whole run' : `whole run, ${size.nodes} objects`;
  for (const spec of overall) out.push(row(results, whole, spec));
  return out;
}

function growthRows(small: SizedResults, large: SizedResults, ceiling: number): Row[] {
  const out: Row[] = [];
  for (const key of keys) {
    const [from, to] = [objectsOf(small.size, key), objectsOf(large.size, key)];
    const scenario = `${shortTitles[key]}, ${from} → ${to}: growth ÷ object-count growth`;
    for (const spec of specs(key, ceiling)) {
      if (spec.growth === 'none') continue;
      const values: Row['values'] = {};
      for (const name of contenderNames) {
        const [a, b] = [small.results[name], large.results[name]];
        const grew = a && b && growth(spec, [spec.value(a), spec.value(b)], to / from);
        if (grew !== undefined) values[name] = grew;
      }
      out.push(growthRow(scenario, spec, values));
    }
  }
  return out;
}

const overall: Spec[] = [
  { metric: 'RSS after start-up and one Node and Service', unit: 'MB', value: (r) => r.readyRssMb, growth: 'none' },
  { metric: '… of it, the function', unit: 'MB', value: (r) => r.readyByProcess.function, growth: 'none' },
  { metric: '… of it, the relay', unit: 'MB', value: (r) => r.readyByProcess.relay, growth: 'none' },
  ...['instanceMetadata', 'ensureLoadBalancer', 'updateLoadBalancer'].map((method): Spec => ({
    metric: `${method} calls in flight at most`,
    unit: '',
    // A CCM without load balancers (the split) has no figure for their calls.
    value: (r) => r.maxInFlight[method] ?? (r.ensure === undefined && method !== 'instanceMetadata' ? undefined : 0),
    growth: 'none',
  })),
];

function specs(key: Key, ceiling: number): Spec[] {
  return [
    ...latencySpecs(key, ceiling),
    ...costSpecs(key),
    ...(key === 'steady' || key === 'burst' ? splitSpecs(key) : []),
  ];
}

function latencySpecs(key: Key, ceiling: number): Spec[] {
  const run = (r: ContenderResult): ScenarioRun | undefined => r[key];
  const p =
    (q: number, scale = 1) =>
    (r: ContenderResult) => {
      const s = run(r);
      return s === undefined ? undefined : percentile(s.latenciesMs, q) / scale;
    };
  const perSecond = (r: ContenderResult): number | undefined => run(r)?.perSecond;
  switch (key) {
    case 'steady':
      return [
        { metric: 'create → taint removed p50', unit: 'ms', value: p(50), growth: 'total' },
        { metric: 'create → taint removed p99', unit: 'ms', value: p(99), growth: 'total', maxRatio: 1.1 },
        { metric: 'Nodes initialized per second', unit: '/s', value: perSecond, growth: 'rate' },
      ];
    case 'burst':
      return [
        {
          metric: 'last create → last taint removed',
          unit: 's',
          value: (r) => r.burst.drainMs / 1000,
          growth: 'total',
          maxRatio: 1.5,
        },
        { metric: 'create → taint removed p99', unit: 'ms', value: p(99), growth: 'total', maxRatio: 1.1 },
        { metric: 'Nodes initialized per second', unit: '/s', value: perSecond, growth: 'rate' },
        {
          metric: `Nodes/s ÷ API server PATCH ceiling (${ceiling.toFixed(0)}/s)`,
          unit: '%',
          value: (r) => (100 * r.burst.perSecond) / ceiling,
          // Nodes initialized per second, scaled: its growth is theirs.
          growth: 'none',
        },
      ];
    case 'ensure':
      return [
        { metric: 'create → ingress set p50', unit: 'ms', value: p(50), growth: 'total' },
        { metric: 'create → ingress set p99', unit: 'ms', value: p(99), growth: 'total', maxRatio: 1.1 },
        { metric: 'ingresses set per second', unit: '/s', value: perSecond, growth: 'rate' },
      ];
    case 'sync':
      return [
        { metric: 'exclude → updateLoadBalancer p50', unit: 's', value: p(50, 1000), growth: 'total' },
        { metric: 'exclude → updateLoadBalancer p99', unit: 's', value: p(99, 1000), growth: 'total', maxRatio: 1.1 },
        {
          metric: 'exclude → last updateLoadBalancer',
          unit: 's',
          value: (r) => (r.sync === undefined ? undefined : r.sync.drainMs / 1000),
          growth: 'total',
        },
      ];
  }
}

// Issue 30: API requests per object ≤ 1.05× for Node init and load-balancer ensure, ≤ 2× for the
// node sync (its sync record, ADR 0012); CPU per object and peak RSS ≤ 1.5× everywhere.
function costSpecs(key: Key): Spec[] {
  const noun = nouns[key];
  const per = (value: (run: ScenarioRun) => number) => (r: ContenderResult) => {
    const s = r[key];
    return s === undefined ? undefined : value(s) / s.objects;
  };
  return [
    {
      metric: `CCM CPU per ${noun}`,
      unit: 'ms',
      value: per((s) => s.costs.ccmCpuMs),
      growth: 'per-object',
      maxRatio: 1.5,
    },
    {
      metric: `API requests per ${noun}`,
      unit: '',
      value: per((s) => s.costs.requests.all),
      growth: 'per-object',
      maxRatio: key === 'sync' ? 2 : 1.05,
    },
    {
      metric: `mutating API requests per ${noun}`,
      unit: '',
      value: per((s) => s.costs.requests.mutating),
      growth: 'per-object',
    },
    {
      metric: `API server CPU per ${noun}`,
      unit: 'ms',
      value: per((s) => s.costs.apiserverCpuMs),
      growth: 'per-object',
    },
    { metric: 'CCM peak RSS', unit: 'MB', value: (r) => r[key]?.costs.peakRssMb, growth: 'total', maxRatio: 1.5 },
  ];
}

// The split's processes apart: what one function costs served alone, and what its relay costs.
function splitSpecs(key: 'steady' | 'burst'): Spec[] {
  const of = (role: 'function' | 'relay', figure: 'cpuMs' | 'peakRssMb') => (r: ContenderResult) => {
    const value = r[key].costs.byProcess[role]?.[figure];
    return value === undefined || figure === 'peakRssMb' ? value : value / r[key].objects;
  };
  return [
    { metric: '… of the CPU, the function per Node', unit: 'ms', value: of('function', 'cpuMs'), growth: 'per-object' },
    { metric: '… of the CPU, the relay per Node', unit: 'ms', value: of('relay', 'cpuMs'), growth: 'per-object' },
    { metric: '… of the peak RSS, the function', unit: 'MB', value: of('function', 'peakRssMb'), growth: 'total' },
    { metric: '… of the peak RSS, the relay', unit: 'MB', value: of('relay', 'peakRssMb'), growth: 'total' },
  ];
}

function valuesOf(results: Results, value: (r: ContenderResult) => number | undefined): Row['values'] {
  const values: Row['values'] = {};
  for (const name of contenderNames) {
    const result = results[name];
    const v = result === undefined ? undefined : value(result);
    if (v !== undefined) values[name] = v;
  }
  return values;
}

function row(results: Results, scenario: string, spec: Spec): Row {
  const values = valuesOf(results, spec.value);
  const ratio = ratioOf(values[shippedContender], values['go-width']);
  const splitRatio = ratioOf(values['cirrus-split'], values[shippedContender]);
  const baselineRatio = ratioOf(values[shippedContender], values['cirrus-baseline']);
  const base = { scenario, metric: spec.metric, unit: spec.unit, values, ratio, splitRatio, baselineRatio };
  if (spec.maxRatio === undefined) return { ...base, goal: '', met: undefined };
  return { ...base, goal: `≤ ${spec.maxRatio}×`, met: ratio === undefined ? undefined : ratio <= spec.maxRatio };
}

// A figure's growth from the smaller size to the larger, divided by the growth it may have: 1 = in
// step with the objects (a total), flat (per object), or as fast (a rate).
function growth(spec: Spec, [from, to]: (number | undefined)[], objects: number): number | undefined {
  if (from === undefined || to === undefined || from === 0 || to === 0) return undefined;
  if (spec.growth === 'rate') return from / to;
  return spec.growth === 'total' ? to / from / objects : to / from;
}

function growthRow(scenario: string, spec: Spec, values: Row['values']): Row {
  const shipped = values[shippedContender];
  return {
    scenario,
    metric: spec.metric,
    unit: '×',
    values,
    ratio: undefined,
    splitRatio: undefined,
    // The goal is read on what ships; the split's own processes are shown, not judged.
    goal: shipped === undefined ? '' : `≤ ${growthTolerance}×`,
    met: shipped === undefined ? undefined : shipped <= growthTolerance,
  };
}

function ratioOf(numerator: number | undefined, denominator: number | undefined): number | undefined {
  return numerator !== undefined && denominator !== undefined && denominator !== 0
    ? numerator / denominator
    : undefined;
}

/**
 * The rows as a Markdown table: scenario, figure, one column per CCM that ran, what ships ÷ Go at
 * width, the split ÷ what ships (when the split ran), what ships ÷ the baseline (when it ran), goal, met.
 */
export function markdown(table: readonly Row[]): string {
  const ran = contenderNames.filter((name) => table.some((r) => r.values[name] !== undefined));
  const split = ran.includes('cirrus-split');
  const baseline = ran.includes('cirrus-baseline');
  const ratios = [
    `${contenders[shippedContender].label} ÷ Go at width`,
    ...(split ? ['split ÷ start, build'] : []),
    ...(baseline ? ['build ÷ baseline'] : []),
  ];
  const header = ['scenario', 'figure', ...ran.map((n) => contenders[n].label), ...ratios, 'goal', 'met'];
  const times = (x: number | undefined): string => (x === undefined ? '' : `${x.toFixed(2)}×`);
  let previous = '';
  const body = table.map((r) => {
    const scenario = r.scenario === previous ? '' : r.scenario;
    previous = r.scenario;
    return [
      scenario,
      r.unit === '' ? r.metric : `${r.metric} (${r.unit})`,
      ...ran.map((n) => format(r.values[n], r.unit)),
      times(r.ratio),
      ...(split ? [times(r.splitRatio)] : []),
      ...(baseline ? [times(r.baselineRatio)] : []),
      r.goal,
      r.met === undefined ? '' : r.met ? 'met' : 'NOT met',
    ];
  });
  const numeric = (i: number): boolean => i >= 2 && i < 2 + ran.length + ratios.length;
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => (cells[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c, i) => (numeric(i) ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (numeric(i) ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(header), rule, ...body.map(line)].join('\n');
}

function format(value: number | undefined, unit: string): string {
  if (value === undefined || !Number.isFinite(value)) return 'n/a';
  if (unit === '×') return `${value.toFixed(2)}×`;
  if (Math.abs(value) >= 100) return value.toFixed(0);
  return Math.abs(value) >= 10 ? value.toFixed(1) : value.toFixed(2);
}
