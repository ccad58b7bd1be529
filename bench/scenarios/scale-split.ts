// What the scale scenario (./scale.ts) reads of a CCM made of several processes, the Knative shape
// (`cirrus relay` and one `cirrus serve` per function, bench/compare/contenders.ts): each process's
// own CPU and resident set, and for every cirrus the requests each function answered, from
// `cirrus_reconcile_requests_total` on its /metrics (`cirrus start`'s one, or each serve's).

import type { RunningCcm } from '../compare/contenders.ts';
import type { Costs } from '../compare/scenarios.ts';

type FigureOf = (metric: string, value: number | undefined, unit: string, note?: string) => void;

/**
 * Each process's CPU (% of a core) and peak RSS over `costs`' windows, for a CCM of several
 * processes (`relay: CPU, waves`, `serve node-init: peak RSS, at rest`); nothing for one process,
 * whose figures are the CCM's.
 */
export function processFigures(figure: FigureOf, ccm: RunningCcm, phase: string, costs: readonly Costs[]): void {
  if (ccm.processes.length < 2) return;
  const seconds = costs.reduce((s, c) => s + c.seconds, 0);
  for (const { role } of ccm.processes) {
    const own = costs.map((c) => c.byProcess[role]).filter((p) => p !== undefined);
    if (own.length === 0) continue;
    figure(`${role}: CPU, ${phase}`, own.reduce((s, p) => s + p.cpuMs, 0) / seconds / 10, '%');
    figure(`${role}: peak RSS, ${phase}`, Math.max(...own.map((p) => p.peakRssMb)), 'MB');
  }
}

/**
 * The reconcile requests each function has answered so far, by function name, summed over trigger
 * and status code; empty for a CCM without cirrus's /metrics (the Go CCM).
 */
export async function answeredByFunction(ccm: RunningCcm): Promise<Map<string, number>> {
  const urls = Object.values(ccm.functionMetrics);
  if (urls.length === 0 && ccm.metricsUrl !== undefined) urls.push(ccm.metricsUrl);
  const counts = new Map<string, number>();
  for (const url of urls) addCounts(counts, await (await fetch(url)).text());
  return counts;
}

// Adds each `cirrus_reconcile_requests_total` series of a /metrics text to its function's count.
function addCounts(counts: Map<string, number>, text: string): void {
  for (const line of text.split('\n')) {
    const series = /^cirrus_reconcile_requests_total\{(.*)\} (\S+)$/.exec(line);
    const name = /(?:^|,)function="([^"]*)"/.exec(series?.[1] ?? '')?.[1];
    if (series === null || name === undefined) continue;
    counts.set(name, (counts.get(name) ?? 0) + Number(series[2]));
  }
}

/** `invocations/min at rest, <function>` for each function that answered over `seconds`. */
export function invocationFigures(
  figure: FigureOf,
  before: ReadonlyMap<string, number>,
  after: ReadonlyMap<string, number>,
  seconds: number,
): void {
  for (const [name, count] of [...after].sort(([a], [b]) => a.localeCompare(b)))
    figure(
      `invocations/min at rest, ${name}`,
      ((count - (before.get(name) ?? 0)) / seconds) * 60,
      '/min',
      'reconcile requests the function answered (cirrus_reconcile_requests_total)',
    );
}
