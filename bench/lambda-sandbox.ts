// A Lambda sandbox's first event, as near as a process gets to one here (for the cold-start
// scenario): a fresh Node imports a handler module, hands its handler a function URL GET /healthz
// and prints the status; then, after 2 s idle, the resident set. The parent serves the secrets
// extension.
//
// The harness is JavaScript run with `node --input-type=module -e`, not a .ts file: a .ts entry
// would load Node's type stripper (17 MB resident, ~30 ms here), which Lambda's own JavaScript
// bootstrap never does, and charge it to the handler.

import { functionUrlEvent, lambdaContext } from '../test/harness/lambda.ts';

/** What the harness imports: a handler module and its export, or `bare` (Fastify behind @fastify/aws-lambda). */
export type SandboxTarget = { readonly module: string; readonly exported: string } | 'bare';

const harness = `
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const target = JSON.parse(process.env.CIRRUS_BENCH_TARGET);
const event = JSON.parse(process.env.CIRRUS_BENCH_EVENT);
const context = { ...JSON.parse(process.env.CIRRUS_BENCH_CONTEXT), getRemainingTimeInMillis: () => 300000 };
let handler;
if (target === 'bare') {
  const { default: Fastify } = await import('fastify');
  const { default: awsLambdaFastify } = await import('@fastify/aws-lambda');
  const app = Fastify();
  app.get('/healthz', () => 'ok');
  handler = awsLambdaFastify(app);
  await app.ready();
} else {
  handler = (await import(pathToFileURL(target.module).href))[target.exported];
  if (handler === undefined) throw new Error(target.module + ' exports no ' + target.exported);
}
const result = await handler(event, context);
process.stdout.write(JSON.stringify({ status: result.statusCode }) + '\\n');
await new Promise((resolve) => setTimeout(resolve, 2000));
const kb = Number(/VmRSS:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]);
process.stdout.write(JSON.stringify({ rssMb: kb / 1024 }) + '\\n');
`;

/** The arguments and environment of a Node process that is the sandbox of `target`; run it from the repository. */
export function sandbox(target: SandboxTarget): { args: string[]; env: Record<string, string> } {
  return {
    args: ['--input-type=module', '-e', harness],
    env: {
      CIRRUS_BENCH_TARGET: JSON.stringify(target),
      CIRRUS_BENCH_EVENT: JSON.stringify(functionUrlEvent({ method: 'GET', path: '/healthz' })),
      CIRRUS_BENCH_CONTEXT: JSON.stringify(lambdaContext('cirrus-bench')),
    },
  };
}
