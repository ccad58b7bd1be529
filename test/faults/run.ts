// `npm run chaos`: issue 20's fault suite — faults of the relay, the API server and cirrus during
// churn, with what was lost, what was doubled and how long convergence took, against each row's
// goal. Starts its own control plane; runs cirrus as real processes (test/faults/cirrus.ts) with
// the chaos cloud (test/faults/provider.ts); prints a table; writes JSON to bench/results/<time>.json
// and, beside it, <time>.md: the table with its heading, ready to paste into docs/faults.md (not
// written there by the run: a --only or --quick run would replace the full table, and the notes
// under each table are a person's reading of the run).
//
//   npm run chaos                     default sizes (a few minutes on 2 cores)
//   npm run chaos -- --full           the issue's sizes (1,000 Nodes and Services, 500-node burst, …)
//   npm run chaos -- --quick          the small profile `npm test` runs (test/faults/quick.test.ts)
//   npm run chaos -- --only 1,3       some rows
//   npm run chaos -- --log-level info cirrus's log level (its logs: the run folder printed at start)
//
// Exits 1 when a measured row misses its goal.

import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runHeading, writeResults } from '../harness/report.ts';
import { chaosTable, runChaos } from './suite.ts';

const { values } = parseArgs({
  options: {
    full: { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    'log-level': { type: 'string', default: 'warn' },
  },
});
if (values.full && values.quick) throw new Error('--full and --quick: choose one');
const only = values.only?.split(',').map((n) => {
  const row = Number(n);
  if (!Number.isInteger(row)) throw new Error(`--only: '${n}' is not a row number`);
  return row;
});
const run = await runChaos({
  profile: values.full ? 'full' : values.quick ? 'quick' : 'default',
  ...(only === undefined ? {} : { only }),
  logLevel: values['log-level'],
  progress: (line) => process.stderr.write(`chaos: ${line}\n`),
});
const file = await writeResults(fileURLToPath(new URL('../../bench/results/', import.meta.url)), {
  chaos: true,
  ...run,
});
const crashes =
  run.apiserverCrashes.length === 0 ? '' : `\nkube-apiserver crashes, restarted: ${run.apiserverCrashes.join('; ')}`;
const minutes = Math.round((Date.now() - Date.parse(run.startedAt)) / 60_000);
const options = process.argv.slice(2).join(' ');
const heading = `The ${run.profile.name} run${options === '' ? '' : ` (\`${options}\`)`}, ${runHeading(run.startedAt, run.machine, run.kubernetes)}, ${minutes} minutes:`;
const pasteable = file.replace(/\.json$/, '.md');
await writeFile(pasteable, `${heading}\n\n${chaosTable(run.results)}\n${crashes}\n`);
process.stdout.write(
  `\n${chaosTable(run.results)}\n${crashes}\nJSON: ${file}\ntable for docs/faults.md: ${pasteable}\n`,
);
if (run.results.some((r) => r.ok === false)) process.exitCode = 1;
