// The aws provider against the AWS emulator (moto, tools/aws-emulator/): node init and load
// balancer ensure with cirrus in this process, fed by the relay, as the other scenarios run it.
// Cloud calls are counted where the cloud sees them, by a counting proxy between the provider and
// moto (tools/aws-emulator/counter.ts): per operation, retries included. When the provider also
// exports `cirrus_aws_api_calls_total{service,operation,outcome}` to prom-client's global registry,
// its totals are kept beside the proxy's, and a difference is noted.
//
// Goals (issue 17): node init 1 DescribeInstances per node; ensure of a new Service <= 6 ELBv2 calls
// per port; ensure of an unchanged Service 0 mutating calls.
//   1. N instances; N Nodes named by their private DNS names (no provider ID), tainted: time from
//      create to taint removed; DescribeInstances calls per node.
//   2. M Services of type LoadBalancer (NLB, one port) over those nodes: time from create to
//      status.loadBalancer.ingress; ELBv2 calls per port.
//   3. Each Service annotated (its load balancer unchanged, but service-lb ensures it again, the
//      annotations being part of what it compares): mutating calls per Service.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LevelWithSilent } from 'pino';
import { register } from 'prom-client';
import { registerBuiltInProviders } from '../../providers/index.ts';
import { initCloudProvider, isCloudProvider } from '../../shared/cloud/registry.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { createLogger } from '../../app/log.ts';
import {
  callsBetween,
  isMutating,
  startCallCounter,
  sumCalls,
  type CallCounter,
  type CallCounts,
} from '../../tools/aws-emulator/counter.ts';
import { EmulatorUnavailableError, startEmulator, type Emulator } from '../../tools/aws-emulator/server.ts';
import { awsProcessEnv, createWorld, type AwsWorld, type WorldInstance } from '../../tools/aws-emulator/world.ts';
import { startCirrus } from '../../test/harness/cirrus.ts';
import { deleteNodes, listVersion, nodeObject, uninitializedTaint, type Bench } from '../../test/harness/context.ts';
import { percentile, sleep, until, type KubeObject } from '../../test/harness/kube.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { watch } from '../compare/scenarios.ts';

const group = 'aws';
const servicesPath = '/api/v1/namespaces/default/services';
const touchAnnotation = 'bench.cirrus/touched';
const syncedAnnotation = 'service-lb.cirrus-ccm.dev/synced';
const metricName = 'cirrus_aws_api_calls_total';

export interface AwsRun {
  readonly nodes: number;
  readonly services: number;
  readonly logLevel: LevelWithSilent;
}

/** The scenario cannot run here: no emulator (no python3, no network for its first install) or no aws provider. */
export class AwsScenarioUnavailableError extends Error {
  override readonly name = 'AwsScenarioUnavailableError';
}

/** awsScenario(), or undefined (with a progress line saying why) when it cannot run here. */
export async function awsIfAvailable(bench: Bench, run: AwsRun): Promise<ScenarioResult | undefined> {
  try {
    return await awsScenario(bench, run);
  } catch (error) {
    if (!(error instanceof AwsScenarioUnavailableError)) throw error;
    bench.progress(`aws: not measured: ${error.message}`);
    return undefined;
  }
}

/** The whole scenario: emulator, world, provider, cirrus; everything stopped and restored after. */
export async function awsScenario(bench: Bench, run: AwsRun): Promise<ScenarioResult> {
  if (!isCloudProvider('aws') && !isCloudProvider('static')) registerBuiltInProviders();
  if (!isCloudProvider('aws'))
    throw new AwsScenarioUnavailableError('no cloud provider "aws" is registered (providers/index.ts)');
  const emulator = await startEmulator({ progress: bench.progress }).catch((error: unknown) => {
    if (error instanceof EmulatorUnavailableError)
      throw new AwsScenarioUnavailableError(error.message, { cause: error });
    throw error;
  });
  bench.progress(`aws: moto at ${emulator.endpoint} (install ${emulator.install.ms} ms, start ${emulator.startMs} ms)`);
  const counter = await startCallCounter(emulator.endpoint);
  const savedEnv = { ...process.env };
  const scratch = await mkdtemp(join(tmpdir(), 'cirrus-bench-aws-'));
  try {
    const world = await createWorld(emulator.endpoint, { clusterId: `bench-${process.pid}` });
    const instances = await runInstances(world, run.nodes);
    const provider = await awsProvider(world, counter, scratch, run.logLevel);
    const cirrus = await startCirrus(bench.kubeConfig, provider, run.logLevel);
    try {
      return await measure(bench, { run, instances, counter, emulator });
    } finally {
      await cirrus.stop();
      world.close();
    }
  } finally {
    restoreEnv(savedEnv);
    await counter.close();
    await emulator.stop();
    await rm(scratch, { recursive: true, force: true });
  }
}

async function runInstances(world: AwsWorld, count: number): Promise<WorldInstance[]> {
  const instances: WorldInstance[] = [];
  for (let i = 0; i < count; i++) {
    const az = world.publicSubnets[i % world.publicSubnets.length]?.az ?? '';
    instances.push(await world.runInstance({ az }));
  }
  return instances;
}

// The provider as `cirrus start --cloud-provider aws --cloud-config <file>` builds it, its SDK
// pointed at the counting proxy through the standard variables.
async function awsProvider(
  world: AwsWorld,
  counter: CallCounter,
  scratch: string,
  logLevel: LevelWithSilent,
): Promise<CloudProvider> {
  const configPath = join(scratch, 'cloud.conf');
  await writeFile(configPath, world.cloudConfig());
  const wanted = awsProcessEnv(counter.endpoint, world.region, process.env);
  for (const key of Object.keys(process.env)) if (!(key in wanted)) Reflect.deleteProperty(process.env, key);
  Object.assign(process.env, wanted);
  return initCloudProvider('aws', configPath, {
    signal: new AbortController().signal,
    log: createLogger({ name: 'cirrus', level: logLevel }),
  });
}

function restoreEnv(saved: NodeJS.ProcessEnv): void {
  for (const key of Object.keys(process.env)) if (!(key in saved)) Reflect.deleteProperty(process.env, key);
  Object.assign(process.env, saved);
}

interface Context {
  readonly run: AwsRun;
  readonly instances: readonly WorldInstance[];
  readonly counter: CallCounter;
  readonly emulator: Emulator;
}

async function measure(bench: Bench, context: Context): Promise<ScenarioResult> {
  const metricBefore = await providerMetric();
  const wireBefore = context.counter.counts();
  const nodes = await nodeInit(bench, context);
  const services = await ensureNew(bench, context);
  const unchanged = await ensureUnchanged(bench, context);
  const metricAfter = await providerMetric();
  const wire = callsBetween(context.counter.counts(), wireBefore);
  await cleanUp(bench, context.run.services);
  const metric = metricAfter === undefined ? undefined : callsBetween(metricAfter, metricBefore ?? {});
  return {
    figures: [...nodes.figures, ...services.figures, ...unchanged.figures],
    detail: {
      nodes: context.run.nodes,
      services: context.run.services,
      emulatorStartMs: context.emulator.startMs,
      callsNodeInit: nodes.calls,
      callsEnsureNew: services.calls,
      callsEnsureUnchanged: unchanged.calls,
      callsMeasured: wire,
      ...(metric === undefined
        ? { providerMetric: `${metricName} not in prom-client's global registry` }
        : { providerMetricMeasured: metric, providerMetricMatchesWire: sameTotals(metric, wire) }),
    },
  };
}

interface Phase {
  readonly figures: Figure[];
  readonly calls: CallCounts;
}

// 1. Nodes as kubelets register them on AWS: named by private DNS name, tainted, no provider ID, Ready.
async function nodeInit(bench: Bench, context: Context): Promise<Phase> {
  const { kube } = bench;
  const { instances, counter } = context;
  const created = new Map<string, number>();
  const cleared = new Map<string, number>();
  const names = new Set(instances.map((i) => i.privateDnsName));
  const abort = new AbortController();
  const watching = watch(
    kube,
    { path: '/api/v1/nodes', resourceVersion: await listVersion(kube, '/api/v1/nodes') },
    ({ object }) => {
      const name = object.metadata.name;
      if (names.has(name) && !cleared.has(name) && !tainted(object)) cleared.set(name, performance.now());
    },
    abort.signal,
  );
  const before = counter.counts();
  await kube.createAll(
    '/api/v1/nodes',
    // Ready, as a running kubelet reports its Node: what is counted is node-init's work, not
    // node-lifecycle's questions about NotReady Nodes (a stopped or gone instance's).
    instances.map((i) => ({
      ...nodeObject(i.privateDnsName, group, true),
      status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady' }] },
    })),
    { concurrency: 8, ratePerSecond: 20, created: (name) => created.set(name, performance.now()) },
  );
  await until(() => cleared.size >= instances.length, 60_000 + instances.length * 500, 'aws nodes initialized');
  const calls = callsBetween(counter.counts(), before);
  abort.abort();
  await watching;
  const latencies = [...cleared].map(([name, at]) => at - (created.get(name) ?? at));
  const describes = sumCalls(calls, (s, op) => s === 'ec2' && op === 'DescribeInstances') / instances.length;
  const scenario = `aws: node init (${instances.length} at 20/s, moto)`;
  return {
    calls,
    figures: [
      { scenario, metric: 'create → taint removed p50', value: percentile(latencies, 50), unit: 'ms' },
      { scenario, metric: 'create → taint removed p99', value: percentile(latencies, 99), unit: 'ms' },
      {
        scenario,
        metric: 'DescribeInstances per node',
        value: describes,
        unit: 'calls',
        goal: '1 DescribeInstances',
        met: describes <= 1,
      },
      {
        scenario,
        metric: 'cloud calls per node (all)',
        value: sumCalls(calls, () => true) / instances.length,
        unit: 'calls',
      },
    ],
  };
}

function tainted(node: KubeObject): boolean {
  const taints = (node.spec?.['taints'] ?? []) as { key?: string }[];
  return taints.some((t) => t.key === uninitializedTaint);
}

// 2. New Services: an NLB, a target group and a listener each.
async function ensureNew(bench: Bench, context: Context): Promise<Phase> {
  const { kube } = bench;
  const count = context.run.services;
  const served = new Map<string, number>();
  const created = new Map<string, number>();
  const abort = new AbortController();
  const watching = watch(
    kube,
    { path: servicesPath, resourceVersion: await listVersion(kube, servicesPath) },
    ({ object }) => {
      const name = object.metadata.name;
      if (name.startsWith(`${group}-`) && !served.has(name) && hasIngress(object)) served.set(name, performance.now());
    },
    abort.signal,
  );
  const before = context.counter.counts();
  const services = Array.from({ length: count }, (_, i) => serviceObject(`${group}-${i}`));
  await kube.createAll(servicesPath, services, {
    concurrency: 8,
    ratePerSecond: 20,
    created: (name) => created.set(name, performance.now()),
  });
  await until(() => served.size >= count, 60_000 + count * 2_000, `${count} NLBs in Service status`);
  await sleep(2_000); // the last ensures' trailing calls (attributes) and the status writes' echoes
  const calls = callsBetween(context.counter.counts(), before);
  abort.abort();
  await watching;
  const latencies = [...served].map(([name, at]) => at - (created.get(name) ?? at));
  const elbv2PerPort = sumCalls(calls, (s) => s === 'elasticloadbalancing') / count;
  const scenario = `aws: new LoadBalancer Services (${count}, 1 port, ${context.instances.length} nodes)`;
  return {
    calls,
    figures: [
      { scenario, metric: 'create → status.loadBalancer p50', value: percentile(latencies, 50), unit: 'ms' },
      { scenario, metric: 'create → status.loadBalancer p99', value: percentile(latencies, 99), unit: 'ms' },
      {
        scenario,
        metric: 'ELBv2 calls per port',
        value: elbv2PerPort,
        unit: 'calls',
        goal: '≤ 6 ELBv2 calls per port',
        met: elbv2PerPort <= 6,
      },
      {
        scenario,
        metric: 'EC2 calls per Service',
        value: sumCalls(calls, (s) => s === 'ec2') / count,
        unit: 'calls',
      },
    ],
  };
}

// 3. The same Services, ensured again with nothing about their load balancers changed.
async function ensureUnchanged(bench: Bench, context: Context): Promise<Phase> {
  const { kube } = bench;
  const count = context.run.services;
  const synced = new Map<string, string>();
  const resynced = new Set<string>();
  for (let i = 0; i < count; i++) {
    const service = await kube.call('GET', `${servicesPath}/${group}-${i}`);
    synced.set(service.metadata.name, syncRecordOf(service) ?? '');
  }
  const abort = new AbortController();
  const watching = watch(
    kube,
    { path: servicesPath, resourceVersion: await listVersion(kube, servicesPath) },
    ({ object }) => {
      const record = syncRecordOf(object);
      const { name } = object.metadata;
      if (synced.has(name) && record !== undefined && record !== synced.get(name)) resynced.add(name);
    },
    abort.signal,
  );
  const before = context.counter.counts();
  for (const name of synced.keys()) {
    const patch = { metadata: { annotations: { [touchAnnotation]: String(Date.now()) } } };
    await kube.call('PATCH', `${servicesPath}/${name}`, patch, 'application/merge-patch+json');
  }
  await until(() => resynced.size >= count, 60_000 + count * 1_000, `${count} Services ensured again`);
  await sleep(1_000);
  const calls = callsBetween(context.counter.counts(), before);
  abort.abort();
  await watching;
  const mutating = sumCalls(calls, (_, op) => isMutating(op)) / count;
  const scenario = `aws: unchanged Services ensured again (${count})`;
  return {
    calls,
    figures: [
      {
        scenario,
        metric: 'mutating cloud calls per Service',
        value: mutating,
        unit: 'calls',
        goal: '0 mutating calls',
        met: mutating === 0,
      },
      { scenario, metric: 'cloud calls per Service (all)', value: sumCalls(calls, () => true) / count, unit: 'calls' },
    ],
  };
}

// Services first (their finalizers go once the provider deleted the NLBs), then the Nodes.
async function cleanUp(bench: Bench, count: number): Promise<void> {
  const { kube } = bench;
  const selected = `${servicesPath}?labelSelector=bench.cirrus%2Fgroup%3D${group}`;
  await kube.call('DELETE', selected);
  const deadline = Date.now() + 60_000 + count * 1_000;
  while ((await kube.call<{ items: unknown[] }>('GET', selected)).items.length > 0) {
    if (Date.now() > deadline) throw new Error('bench aws: Services not deleted (their load balancers not deleted?)');
    await sleep(250);
  }
  await deleteNodes(kube, group);
  await sleep(2_000);
}

function serviceObject(name: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      labels: { 'bench.cirrus/group': group },
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb' },
    },
    spec: { type: 'LoadBalancer', selector: { app: name }, ports: [{ port: 80, targetPort: 8080, protocol: 'TCP' }] },
  };
}

function syncRecordOf(service: KubeObject): string | undefined {
  const annotations = service.metadata['annotations'] as Record<string, string> | undefined;
  return annotations?.[syncedAnnotation];
}

function hasIngress(service: KubeObject): boolean {
  const lb = service.status?.['loadBalancer'] as { ingress?: unknown[] } | undefined;
  return (lb?.ingress?.length ?? 0) > 0;
}

// The provider's counter, as `<service>:<operation>` counts like the proxy's (errors as `:error`).
async function providerMetric(): Promise<CallCounts | undefined> {
  const metric = register.getSingleMetric(metricName);
  if (metric === undefined) return undefined;
  const counts: CallCounts = {};
  for (const { labels, value } of (await metric.get()).values) {
    const service = labels['service'] === 'elbv2' ? 'elasticloadbalancing' : String(labels['service']);
    const key = `${service}:${String(labels['operation'])}`;
    counts[key] = (counts[key] ?? 0) + value;
    if (labels['outcome'] === 'error') counts[`${key}:error`] = (counts[`${key}:error`] ?? 0) + value;
  }
  return counts;
}

function sameTotals(metric: CallCounts, wire: CallCounts): boolean {
  const all = (counts: CallCounts): number => sumCalls(counts, () => true);
  return all(metric) === all(wire);
}
