// `cirrus conformance`: the conformance kit (providers/conformance) from the command line. Builds the
// provider as `serve` does — a cluster connection only when --kubeconfig names one (the static
// provider's load balancers keep their allocations in the cluster) — and runs every check.

import { readFile, writeFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { initCloudProvider } from '../../shared/cloud/registry.ts';
import { ConfigError, type CommandLine } from '../config.ts';
import {
  fixtureFrom,
  FixtureError,
  formatJunit,
  formatResult,
  formatSummary,
  parseFixture,
  runConformance,
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
  const fixture = await readFixture(config.fixture);
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
  try {
    const provider = await initCloudProvider(config.cloudProvider ?? '', config.cloudConfig, {
      signal: AbortSignal.any([io.signal, lifetime.signal]),
      log,
      ...(kubeConfig === undefined ? {} : { kubeConfig }),
    });
    // The kit exercises load balancers as service-lb would: the provider prepares for them first.
    if (kubeConfig !== undefined) {
      await checkProvider(provider, { kubeConfig, loadBalancers: true, mayCreate: true, log, signal: io.signal });
    }
    io.stdout.write(
      `cirrus conformance: provider ${config.cloudProvider ?? ''} (providerName() ${provider.providerName()}), ` +
        `cluster name ${config.clusterName}, fixture ${config.fixture ?? '(none)'}\n\n`,
    );
    const report = await runConformance(provider, fixture, {
      clusterName: config.clusterName,
      signal: io.signal,
      onResult: (result) => io.stdout.write(formatResult(result)),
    });
    io.stdout.write(formatSummary(report));
    if (config.junit !== undefined) {
      await writeFile(config.junit, formatJunit(report));
      io.stdout.write(`JUnit report: ${config.junit}\n`);
    }
    return report.failed === 0 ? 0 : 1;
  } finally {
    lifetime.abort();
  }
}

// The cluster --kubeconfig names, once reached; undefined without one (the kit needs none).
async function reachableCluster(path: string | undefined): Promise<KubeConfig | undefined> {
  if (path === undefined) return undefined;
  const kubeConfig = loadKubeConfig(path);
  await checkReachable(kubeConfig, `--kubeconfig ${path}`);
  return kubeConfig;
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
