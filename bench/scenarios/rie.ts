// Issue 41's goals: each function's cold start and memory under AWS's Lambda Runtime Interface
// Emulator (tools/rie/, test/harness/rie/), as Lambda runs it, beside a bare handler under the same
// emulator and the sandbox harness (../lambda-sandbox.ts) in the same run. Per run and variant, a
// fresh emulator, one GET /healthz invoke, then ten more and 2 s idle:
//   - init: the emulator's `(rapid) INIT REPORT(durationMs: …)` (its REPORT line's "Init Duration"
//     times only a non-blocking call, and "Max Memory Used" repeats the configured size: neither is
//     a measurement);
//   - first invoke: the first `INVOKE RTDONE(… duration: …ms)`, against the warm ones' median;
//   - cold start: init + first invoke (what a caller of a cold sandbox waits for, but the emulator's
//     own start);
//   - RSS: VmRSS of the runtime process (/proc/<pid>/status) after the invokes and 2 s idle.
// The functions run the build (dist/functions/<name>/, what a package for aws holds) with the http
// provider against an empty cloud of the bench's, their secrets from a stand-in of the secrets
// extension; the bare handler is Fastify answering /healthz behind @fastify/aws-lambda. The sandbox
// harness's figures come from the same build. Goals: cold start ≤ 1.3× the bare handler's, idle RSS
// ≤ 1.2×, the first invoke ≤ 1.5× a warm one.

import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { catalogue } from '../../functions/catalogue.ts';
import { build } from '../../scripts/build.ts';
import type { Bench } from '../../test/harness/context.ts';
import { percentile, sleep } from '../../test/harness/kube.ts';
import { functionUrlEvent, startSecretsExtension, type SecretsExtension } from '../../test/harness/lambda.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { emptyHttpCloud } from '../../test/harness/rie/empty-cloud.ts';
import { findRie, startRie } from '../../test/harness/rie/rie.ts';
import { lambdaSandboxStart } from './coldstart.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const functions = catalogue.map((entry) => entry.name);

// The bare handler: the least a Fastify app behind @fastify/aws-lambda answering /healthz does,
// its app ready in the init phase. Resolved from the repository's node_modules.
const bareHandler = `
import Fastify from ${JSON.stringify(join(repoRoot, 'node_modules/fastify/fastify.js'))};
import awsLambdaFastify from ${JSON.stringify(join(repoRoot, 'node_modules/@fastify/aws-lambda/index.js'))};
const app = Fastify();
app.get('/healthz', () => 'ok');
export const handler = awsLambdaFastify(app);
await app.ready();
`;

interface Sample {
  readonly initMs: number;
  readonly firstMs: number;
  readonly warmMs: number;
  readonly rssMb: number;
}

interface Variant {
  readonly label: string;
  readonly taskRoot: string;
  readonly handler: string;
  readonly env: Record<string, string>;
  readonly shipped: boolean;
}

export async function underRie(bench: Bench, kubeconfig: string): Promise<ScenarioResult | undefined> {
  const rie = await findRie();
  if (rie.binary === undefined) {
    bench.progress(`rie: skipped (${String(rie.skip)})`);
    return undefined;
  }
  const runs = bench.full ? 10 : 3;
  const out = await mkdtemp(join(tmpdir(), 'cirrus-bench-rie-'));
  const cloud = await emptyHttpCloud();
  const extension = await startSecretsExtension({
    kubeconfig: await readFile(kubeconfig, 'utf8'),
    'cloud-config': `endpoint: ${cloud.url}\n`,
    signing: 'bench-signing-secret',
  });
  try {
    bench.progress('rie: building the functions (scripts/build.ts)');
    await build(['functions'], join(out, 'dist'));
    await writeFile(join(out, 'bare.mjs'), bareHandler);
    const variants = allVariants(out, extension);
    const samples = new Map<Variant, Sample[]>(variants.map((v) => [v, []]));
    const harness = new Map<string, { startMs: number; rssMb: number }[]>(functions.map((f) => [f, []]));
    for (let i = 0; i < runs; i++) {
      for (const variant of variants) samples.get(variant)?.push(await measure(rie.binary, variant));
      for (const fn of functions)
        harness
          .get(fn)
          ?.push(
            await lambdaSandboxStart(
              { module: join(out, `dist/functions/${fn}/lambda.js`), exported: 'handler' },
              kubeconfig,
            ),
          );
      bench.progress(`rie: run ${String(i + 1)} of ${String(runs)}`);
    }
    return report(samples, harness, runs);
  } finally {
    await extension.close();
    await cloud.close();
    await rm(out, { recursive: true, force: true });
  }
}

function allVariants(out: string, extension: SecretsExtension): Variant[] {
  const sandboxEnv = {
    AWS_SESSION_TOKEN: extension.token,
    PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(extension.port),
  };
  return [
    {
      label: 'bare handler (Fastify behind @fastify/aws-lambda)',
      taskRoot: out,
      handler: 'bare.handler',
      env: {},
      shipped: false,
    },
    ...functions.map((fn) => ({
      label: fn,
      taskRoot: out,
      handler: `dist/functions/${fn}/lambda.handler`,
      shipped: true,
      env: {
        ...sandboxEnv,
        CIRRUS_CLOUD_PROVIDER: 'http',
        CIRRUS_CLOUD_CONFIG_SECRET_ID: 'cloud-config',
        CIRRUS_KUBECONFIG_SECRET_ID: 'kubeconfig',
        CIRRUS_SIGNING_SECRET_ID: 'signing',
        CIRRUS_CLUSTER_CIDR: '10.244.0.0/16',
        CIRRUS_LOG_LEVEL: 'warn',
      },
    })),
  ];
}

async function measure(binary: string, variant: Variant): Promise<Sample> {
  const fn = await startRie({
    binary,
    taskRoot: variant.taskRoot,
    handler: variant.handler,
    env: variant.env,
    functionName: `cirrus-bench-${variant.label.split(' ')[0] ?? ''}`,
  });
  try {
    for (let i = 0; i < 11; i++) {
      const { status, body } = await fn.invoke(functionUrlEvent({ method: 'GET', path: '/healthz' }));
      const answer = JSON.parse(body) as { statusCode?: number };
      if (status !== 200 || answer.statusCode !== 200)
        throw new Error(`${variant.label}: /healthz answered ${body}\n${fn.log()}`);
    }
    await sleep(2_000);
    const pid = await fn.runtimePid();
    const rss = pid === undefined ? Number.NaN : await rssMb(pid);
    const init = Number(/INIT REPORT\(.*?durationMs: ([\d.]+)/.exec(fn.log())?.[1]);
    const [first = Number.NaN, ...warm] = fn
      .lines(/INVOKE RTDONE/)
      .map((l) => Number(/duration(?:Ms)?: ([\d.]+)/.exec(l)?.[1]));
    return { initMs: init, firstMs: first, warmMs: percentile(warm, 50), rssMb: rss };
  } finally {
    await fn.stop();
  }
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024;
}

function report(
  samples: ReadonlyMap<Variant, Sample[]>,
  harness: ReadonlyMap<string, { startMs: number; rssMb: number }[]>,
  runs: number,
): ScenarioResult {
  const figures: Figure[] = [];
  const detail: Record<string, string> = {};
  const p50 = (s: readonly Sample[], f: (x: Sample) => number): number => percentile(s.map(f), 50);
  const [bare = []] = samples.values();
  const bareCold = p50(bare, (x) => x.initMs + x.firstMs);
  const bareRss = p50(bare, (x) => x.rssMb);
  for (const [variant, s] of samples) {
    const scenario = `under the RIE: ${variant.label} (${String(runs)} runs)`;
    const cold = p50(s, (x) => x.initMs + x.firstMs);
    const rss = p50(s, (x) => x.rssMb);
    const firstRatio = p50(s, (x) => x.firstMs / x.warmMs);
    detail[variant.label] = JSON.stringify(s.map((x) => ({ ...x })));
    const shipped = variant.shipped;
    figures.push(
      { scenario, metric: 'INIT REPORT durationMs p50', value: p50(s, (x) => x.initMs), unit: 'ms' },
      { scenario, metric: 'first invoke p50', value: p50(s, (x) => x.firstMs), unit: 'ms' },
      { scenario, metric: 'warm invoke p50', value: p50(s, (x) => x.warmMs), unit: 'ms' },
      {
        scenario,
        metric: 'first invoke ÷ warm p50',
        value: firstRatio,
        unit: '×',
        ...(shipped ? { goal: 'issue 41 ≤ 1.5×', met: firstRatio <= 1.5 } : {}),
      },
      { scenario, metric: 'cold start (init + first invoke) p50', value: cold, unit: 'ms' },
      { scenario, metric: 'runtime RSS after 11 invokes and 2 s idle p50', value: rss, unit: 'MB' },
    );
    if (!shipped) continue;
    figures.push(
      {
        scenario,
        metric: 'cold start ÷ bare handler',
        value: cold / bareCold,
        unit: '×',
        goal: 'issue 41 ≤ 1.3×',
        met: cold / bareCold <= 1.3,
      },
      {
        scenario,
        metric: 'RSS ÷ bare handler',
        value: rss / bareRss,
        unit: '×',
        goal: 'issue 41 ≤ 1.2×',
        met: rss / bareRss <= 1.2,
      },
    );
    const h = harness.get(variant.label) ?? [];
    figures.push(
      {
        scenario: `sandbox harness: ${variant.label} (${String(runs)} runs)`,
        metric: 'spawn → first 200 p50',
        value: percentile(
          h.map((x) => x.startMs),
          50,
        ),
        unit: 'ms',
      },
      {
        scenario: `sandbox harness: ${variant.label} (${String(runs)} runs)`,
        metric: 'RSS after 2 s idle p50',
        value: percentile(
          h.map((x) => x.rssMb),
          50,
        ),
        unit: 'MB',
      },
    );
  }
  return { figures, detail };
}
