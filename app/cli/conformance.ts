// `cirrus conformance`: the conformance kit (providers/conformance) from the command line. Builds the
// provider as `serve` does — a cluster connection only when --kubeconfig names one (the static
// provider's load balancers keep their allocations in the cluster) — and runs every check. With
// several providers (`--cloud-provider static,aws`, a hybrid cluster: docs/hybrid.md), each one's
// cloud-config and fixture by name, it runs the kit against each in turn, then the combination's
// checks (providers/conformance/combination.ts); every result names its provider.

import { readFile, writeFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { initCloudProvider } from '../../shared/cloud/registry.ts';
import { ConfigError, type CommandLine } from '../config.ts';
import { pairs, providerPlan } from '../providers.ts';
import {
  checkCombination,
  fixtureFrom,
  FixtureError,
  formatJunit,
  formatResult,
  formatSummary,
  parseFixture,
  runConformance,
  type ConformanceReport,
  type Fixture,
} from '../../providers/conformance/index.ts';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import { createLogger, logDestination } from '../log.ts';
import type { Io } from './io.ts';
import { importProviderModule } from './provider-module.ts';
import { checkProvider, checkReachable } from './preflight.ts';

/** The options `cirrus conformance` takes. */
export type ConformanceCommandOptions =
  | 'cloudProvider'
  | 'cloudConfig'
  | 'defaultProvider'
  | 'providerModule'
  | 'clusterName'
  | 'kubeconfig'
  | 'fixture'
  | 'junit'
  | 'logLevel'
  | 'logFormat';

/** Runs the kit; exit status 0 when no check failed, 1 otherwise. */
export async function runConformanceCommand(line: CommandLine<ConformanceCommandOptions>, io: Io): Promise<number> {
  const { config } = line;
  const plan = providerPlan(config);
  const fixtures = await readFixtures(config.fixture, plan.names);
  if (config.providerModule !== undefined) await importProviderModule(config.providerModule);
  // The provider's log goes to stderr: stdout is the checks' report.
  const pretty = await logDestination(config.logFormat, process.stderr.isTTY, 2);
  const log = createLogger({
    name: 'conformance',
    level: config.logLevel,
    destination: pretty ?? { write: (text: string) => io.stderr.write(text) },
  });
  const kubeConfig = await reachableCluster(config.kubeconfig);
  const lifetime = new AbortController();
  const context: RunContext = { config, io, log, kubeConfig, signal: AbortSignal.any([io.signal, lifetime.signal]) };
  try {
    if (plan.ownership === undefined) {
      const [name = ''] = plan.names;
      const { report } = await checkOne(context, {
        name,
        cloudConfig: plan.cloudConfigs.get(name),
        fixture: fixtures.get(name),
        named: false,
      });
      await writeJunit(context, report);
      return report.failed === 0 ? 0 : 1;
    }
    io.stdout.write(
      `cirrus conformance: the combination ${plan.names.join(',')}, each provider in turn, then together\n\n`,
    );
    const reports: ConformanceReport[] = [];
    const providers = new Map<string, CloudProvider>();
    for (const name of plan.names) {
      const { provider, report } = await checkOne(context, {
        name,
        cloudConfig: plan.cloudConfigs.get(name),
        fixture: fixtures.get(name),
        named: true,
      });
      providers.set(name, provider);
      reports.push(report);
      io.stdout.write('\n');
    }
    const together = checkCombination(providers, new Map([...fixtures].map(([n, f]) => [n, f.fixture])));
    io.stdout.write(`cirrus conformance: the combination ${together.provider}\n\n`);
    for (const result of together.results) io.stdout.write(formatResult(result));
    io.stdout.write(formatSummary(together));
    reports.push(together);
    await writeJunit(context, reports);
    const failing = reports.filter((r) => r.failed > 0).map((r) => (r === together ? 'together' : r.provider));
    io.stdout.write(
      `\nthe combination ${together.provider}: ` +
        (failing.length === 0 ? 'conformant\n' : `NOT conformant (failures: ${failing.join(', ')})\n`),
    );
    return failing.length === 0 ? 0 : 1;
  } finally {
    lifetime.abort();
  }
}

interface RunContext {
  readonly config: CommandLine<ConformanceCommandOptions>['config'];
  readonly io: Io;
  readonly log: Logger;
  readonly kubeConfig: KubeConfig | undefined;
  readonly signal: AbortSignal;
}

/** One provider to check: its name, cloud-config and fixture, and whether results name it. */
interface Target {
  readonly name: string;
  readonly cloudConfig: string | undefined;
  readonly fixture: { path: string | undefined; fixture: Fixture } | undefined;
  readonly named: boolean;
}

// Builds provider `name` and runs the kit against it, writing each result as it comes; with
// `named`, each result names the provider (a combination).
async function checkOne(
  { config, io, log, kubeConfig, signal }: RunContext,
  { name, cloudConfig, fixture, named }: Target,
): Promise<{ provider: CloudProvider; report: ConformanceReport }> {
  const provider = await initCloudProvider(name, cloudConfig, {
    signal,
    log,
    ...(kubeConfig === undefined ? {} : { kubeConfig }),
  });
  // The kit exercises load balancers as service-lb would: the provider prepares for them first.
  if (kubeConfig !== undefined) {
    await checkProvider(provider, { kubeConfig, loadBalancers: true, mayCreate: true, log, signal: io.signal });
  }
  io.stdout.write(
    `cirrus conformance: provider ${name} (providerName() ${provider.providerName()}), ` +
      `cluster name ${config.clusterName}, fixture ${fixture?.path ?? '(none)'}\n\n`,
  );
  const report = await runConformance(provider, fixture?.fixture ?? fixtureFrom({}), {
    clusterName: config.clusterName,
    signal: io.signal,
    onResult: (result) => io.stdout.write(formatResult(named ? { ...result, provider: name } : result)),
  });
  // In a combination, the report is of the name the provider runs under (providerName() is checked apart).
  const results = named ? report.results.map((result) => ({ ...result, provider: name })) : report.results;
  const ofName = { ...report, provider: named ? name : report.provider, results };
  io.stdout.write(formatSummary(ofName));
  return { provider, report: ofName };
}

async function writeJunit(
  { config, io }: RunContext,
  reports: ConformanceReport | readonly ConformanceReport[],
): Promise<void> {
  if (config.junit === undefined) return;
  await writeFile(config.junit, formatJunit(reports));
  io.stdout.write(`JUnit report: ${config.junit}\n`);
}

// The cluster --kubeconfig names, once reached; undefined without one (the kit needs none).
async function reachableCluster(path: string | undefined): Promise<KubeConfig | undefined> {
  if (path === undefined) return undefined;
  const kubeConfig = loadKubeConfig(path);
  await checkReachable(kubeConfig, `--kubeconfig ${path}`);
  return kubeConfig;
}

// Each provider's fixture: with one provider, --fixture's file; with several, each one's as
// name=path (a provider without one runs without a fixture: the checks needing it skip).
async function readFixtures(
  value: string | undefined,
  names: readonly string[],
): Promise<Map<string, { path: string | undefined; fixture: Fixture }>> {
  const paths =
    names.length <= 1
      ? new Map([[names[0] ?? '', value]])
      : new Map<string, string | undefined>(pairs('--fixture', value, names, 'name=path'));
  const fixtures = new Map<string, { path: string | undefined; fixture: Fixture }>();
  for (const [name, path] of paths) fixtures.set(name, { path, fixture: await readFixture(path) });
  return fixtures;
}

async function readFixture(path: string | undefined): Promise<Fixture> {
  if (path === undefined) return fixtureFrom({});
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`--fixture: could not read ${path}: ${(error as Error).message}`, { cause: error });
  }
  try {
    return parseFixture(text, path);
  } catch (error) {
    if (error instanceof FixtureError) throw new ConfigError(`--fixture: ${error.message}`, { cause: error });
    throw error;
  }
}
