// A micro-benchmark of per-request logging: one child logger and one `reconciled` line, as
// shared/host/run.ts logs each request, through app/log.ts's createLogger to a sink that drops the
// text. Prints µs per child+line. Run: node scripts/log-bench.ts [iterations]
//
// Measured on the 2-core development machine (Node 24): with pino's `redact` option over the 75
// paths of app/log.ts, 380–485 µs; with the censoring formatter that replaced it, 6–16 µs (the
// machine is shared: the spread is noise).

import { createLogger } from '../app/log.ts';

const iterations = Number(process.argv[2] ?? 200_000);
const log = createLogger({ name: 'bench', destination: { write: () => undefined } });

function once(i: number): void {
  const child = log.child({ reqId: `req-${String(i)}`, key: 'Service/default/web', trigger: 'event', dryRun: false });
  child.info(
    { outcome: 'done', code: 200, durationMs: 1.2, objects: 1, changes: 0, results: { unchanged: 1 } },
    'reconciled',
  );
}

for (let i = 0; i < iterations / 10; i++) once(i);
const started = performance.now();
for (let i = 0; i < iterations; i++) once(i);
const micros = ((performance.now() - started) * 1000) / iterations;
process.stdout.write(`${micros.toFixed(2)} µs per child logger + line (${String(iterations)} iterations)\n`);
