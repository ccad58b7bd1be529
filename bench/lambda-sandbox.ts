// A Lambda sandbox's first event, as near as a process gets to one here (child of the cold-start
// scenario): import bin/lambda.js, hand the named handler a function URL GET /healthz, print the
// status; then, after 2 s idle, the resident set. The parent serves the secrets extension.
//   node bench/lambda-sandbox.ts <export>

import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LambdaHandler } from '../shared/lambda/index.ts';
import { functionUrlEvent, lambdaContext } from '../test/helpers/lambda.ts';

const name = process.argv[2] ?? '';
const entry = (await import(new URL('../bin/lambda.js', import.meta.url).href)) as Record<
  string,
  LambdaHandler | undefined
>;
const handler = entry[name];
if (handler === undefined) throw new Error(`bin/lambda.js exports no handler '${name}'`);
const result = await handler(functionUrlEvent({ method: 'GET', path: '/healthz' }), lambdaContext(name));
process.stdout.write(`${JSON.stringify({ status: result.statusCode })}\n`);
await sleep(2_000);
const kb = Number(/VmRSS:\s+(\d+)/.exec(await readFile('/proc/self/status', 'utf8'))?.[1] ?? Number.NaN);
process.stdout.write(`${JSON.stringify({ rssMb: kb / 1024 })}\n`);
