// Go durations (`300ms`, `5s`, `1m30s`, `0`), as the Go CCM's flags and cirrus's files take them.

const goDuration = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/;
const unitMs: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** A Go duration in whole milliseconds; undefined when `text` is not one. Surrounding blanks are ignored. */
export function parseDuration(text: string): number | undefined {
  const value = text.trim();
  if (value === '0') return 0;
  if (!goDuration.test(value)) return undefined;
  let total = 0;
  for (const [, amount = '0', , unit = 's'] of value.matchAll(/(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)/g))
    total += Number(amount) * (unitMs[unit] ?? 0);
  return Math.round(total);
}

/** `300000` → `5m`, `1500` → `1.5s`, `0` → `0`: the shortest Go duration for a whole number of ms. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0';
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const)
    if (ms % size === 0) return `${ms / size}${unit}`;
  return ms >= 1000 ? `${ms / 1000}s` : `${ms}ms`;
}
