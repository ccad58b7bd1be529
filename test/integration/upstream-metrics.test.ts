// The metrics cirrus exports under upstream's names (issue 39): the list below is upstream's, each
// with its type, help, labels and buckets as upstream's /metrics shows them (component-base puts
// an ALPHA metric's stability level before its help). Upstream's definitions, as of:
//
// - k8s.io/cloud-provider v0.36.2 (Kubernetes 1.36.2): controllers/node/metrics.go,
//   controllers/service/metrics.go, controllers/route/metrics.go;
// - kubernetes/cloud-provider-aws v1.36.1: pkg/providers/v1/aws_metrics.go.
//
// Each is checked against what a served /metrics exports after a reconcile of each kind: node-init
// initializing a Node and service-lb ensuring a load balancer, updating its hosts and failing to,
// against the real API server with the fake provider; and the aws provider's against the
// emulator, with one call throttled beyond the SDK's retries by a proxy in front of it.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import { createAwsProvider } from '../../providers/aws/index.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { findCause, RetryError } from '../../shared/cloud/errors.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { buildMultiApp } from '../../shared/host/index.ts';
import type { FunctionDefinition } from '../../shared/host/function.ts';
import { LeanCore } from '../../shared/kube/core.ts';
import { awsEmulatorSkip, awsWorld, useAwsEnv, type AwsWorld } from '../harness/aws.ts';
import { createNode, firstResult, newNode, silentLogger, uninitialized, withProviderId } from '../harness/builders.ts';
import { loadFunction } from '../harness/cirrus.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { startThrottlingProxy } from '../harness/throttling-proxy.ts';

/** One upstream metric: what its /metrics says of it. */
interface Upstream {
  readonly name: string;
  readonly type: 'counter' | 'histogram';
  readonly help: string;
  /** Its labels (a histogram's `le` aside), sorted. */
  readonly labels: readonly string[];
  /** A histogram's buckets' upper bounds (+Inf aside). */
  readonly buckets?: readonly number[];
}

// ExponentialBuckets(start, factor, count) of client_golang.
const exponential = (start: number, factor: number, count: number): number[] =>
  Array.from({ length: count }, (_, i) => start * factor ** i);
// client_golang's DefBuckets: a HistogramOpts without Buckets.
const defaultBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** k8s.io/cloud-provider's controller metrics (node, service, route). */
const controllers: readonly Upstream[] = [
  {
    name: 'node_controller_cloud_provider_taint_removal_delay_seconds',
    type: 'histogram',
    help: '[ALPHA] Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.',
    labels: [],
    buckets: exponential(1, 4, 6),
  },
  {
    name: 'node_controller_initial_node_sync_delay_seconds',
    type: 'histogram',
    help: '[ALPHA] Number of seconds after node creation when NodeController finished the initial synchronization of a single node.',
    labels: [],
    buckets: exponential(1, 4, 6),
  },
  {
    name: 'service_controller_loadbalancer_sync_total',
    type: 'counter',
    help: '[ALPHA] A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster',
    labels: [],
  },
  {
    name: 'service_controller_nodesync_error_total',
    type: 'counter',
    help: '[ALPHA] A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster',
    labels: [],
  },
  {
    name: 'service_controller_nodesync_latency_seconds',
    type: 'histogram',
    help: '[ALPHA] A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.',
    labels: [],
    buckets: exponential(1, 2, 15),
  },
  {
    name: 'service_controller_update_loadbalancer_host_latency_seconds',
    type: 'histogram',
    help: '[ALPHA] A metric measuring the latency for updating each load balancer hosts.',
    labels: [],
    buckets: exponential(1, 2, 15),
  },
];

/**
 * route/metrics.go's one metric, by name and type only: its labels (`trigger`, `outcome`) and help
 * are the routes function's own work, pinned by its tests.
 */
const routeSync = { name: 'route_controller_route_sync_total', type: 'counter' } as const;

/** cloud-provider-aws's AWS API metrics. */
const aws: readonly Upstream[] = [
  {
    name: 'cloudprovider_aws_api_request_duration_seconds',
    type: 'histogram',
    help: '[ALPHA] Latency of AWS API calls',
    labels: ['request'],
    buckets: defaultBuckets,
  },
  {
    name: 'cloudprovider_aws_api_request_errors',
    type: 'counter',
    help: '[ALPHA] AWS API errors',
    labels: ['request'],
  },
  {
    name: 'cloudprovider_aws_api_throttled_requests_total',
    type: 'counter',
    help: '[ALPHA] AWS API throttled requests',
    labels: ['operation_name'],
  },
  {
    name: 'cloudprovider_aws_api_response_status_total',
    type: 'counter',
    help: '[ALPHA] AWS API response status code counts',
    labels: ['operation', 'service', 'status_code'],
  },
];

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** One family of an exposition: its HELP, TYPE and samples. */
interface Family {
  readonly help: string;
  readonly type: string;
  readonly samples: Sample[];
}

type MutableFamily = { help: string; type: string; samples: Sample[] };

/** The families of a Prometheus text exposition, by name (a histogram's _bucket, _sum and _count in its own). */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, MutableFamily>();
  const family = (name: string): MutableFamily => {
    let found = families.get(name);
    if (found === undefined) families.set(name, (found = { help: '', type: '', samples: [] }));
    return found;
  };
  for (const line of text.split('\n')) {
    const meta = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (meta !== null) family(meta[2] ?? '')[meta[1] === 'HELP' ? 'help' : 'type'] = unescapeHelp(meta[3] ?? '');
    else {
      const sample = parseSample(line);
      if (sample !== undefined) family(ownerOf(families, sample.name)).samples.push(sample);
    }
  }
  return families;
}

// The family a sample is of: a histogram's for its _bucket, _sum and _count.
function ownerOf(families: ReadonlyMap<string, Family>, sample: string): string {
  const base = /^(.*)_(bucket|sum|count)$/.exec(sample)?.[1];
  return base !== undefined && families.get(base)?.type === 'histogram' ? base : sample;
}

function unescapeHelp(help: string): string {
  return help.replace(/\\(n|\\)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
}

// One sample line (`name{a="b"} 1`), or undefined for a blank line.
function parseSample(line: string): Sample | undefined {
  const sample = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
  if (sample === null) return undefined;
  const labels: Record<string, string> = {};
  for (const m of (sample[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1] ?? ''] = m[2] ?? '';
  return { name: sample[1] ?? '', labels, value: Number(sample[3]) };
}

/** What the exposition shows of `metric`, in the shape of {@link Upstream}; undefined when it is not there. */
function exported(families: ReadonlyMap<string, Family>, name: string): Upstream | undefined {
  const family = families.get(name);
  if (family === undefined) return undefined;
  const labels = new Set(family.samples.flatMap((s) => Object.keys(s.labels)).filter((l) => l !== 'le'));
  const bounds = family.samples.filter((s) => s.name === `${name}_bucket`).map((s) => s.labels['le'] ?? '');
  const buckets = [...new Set(bounds)].filter((le) => le !== '+Inf').map(Number);
  return {
    name,
    type: family.type as Upstream['type'],
    help: family.help,
    labels: [...labels].sort(),
    ...(family.type === 'histogram' ? { buckets: buckets.sort((a, b) => a - b) } : {}),
  };
}

/** The sum of `metric`'s samples (a histogram's counts) whose labels include `labels`. */
function total(families: ReadonlyMap<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const family = families.get(name);
  const sampleName = family?.type === 'histogram' ? `${name}_count` : name;
  return (family?.samples ?? [])
    .filter((s) => s.name === sampleName && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** The app `cirrus serve` builds for `definitions`, its /metrics parsed on each call. */
async function served(
  definitions: readonly FunctionDefinition[],
  registry?: Registry,
): Promise<() => Promise<Map<string, Family>>> {
  const app = await buildMultiApp(definitions, {
    logger: silentLogger(),
    processMetrics: false,
    ...(registry === undefined ? {} : { registry }),
  });
  return async () => {
    const response = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(response.statusCode, 200);
    return parseExposition(response.body);
  };
}

const run = { dryRun: false, log: silentLogger(), signal: new AbortController().signal };

describe('the exposition parser', () => {
  it('reads families, a histogram with its buckets and labels, and escaped help', () => {
    const families = parseExposition(
      [
        '# HELP a_seconds Some \\\\ help',
        '# TYPE a_seconds histogram',
        'a_seconds_bucket{le="1",x="y"} 1',
        'a_seconds_bucket{le="+Inf",x="y"} 2',
        'a_seconds_sum{x="y"} 3.5',
        'a_seconds_count{x="y"} 2',
        '# HELP b_total B',
        '# TYPE b_total counter',
        'b_total 4',
      ].join('\n'),
    );
    assert.deepEqual(exported(families, 'a_seconds'), {
      name: 'a_seconds',
      type: 'histogram',
      help: 'Some \\ help',
      labels: ['x'],
      buckets: [1],
    });
    assert.equal(total(families, 'a_seconds'), 2);
    assert.equal(total(families, 'b_total'), 4);
    assert.equal(exported(families, 'c_total'), undefined);
  });
});

describe("upstream's controller metrics, after reconciles against the API server", { skip: controlPlaneSkip }, () => {
  let core: CoreV1Api;
  let lean: LeanCore;
  const cloud = new FakeCloud();
  const namespace = uniqueName('upstream-metrics');
  // Only Services of this class: a pass over all of them leaves the other files' alone.
  const loadBalancerClass = `cirrus.test/${namespace}`;
  let nodeInit: FunctionDefinition;
  let serviceLb: FunctionDefinition;
  let scrape: () => Promise<Map<string, Family>>;

  before(async () => {
    const cluster = await testCluster();
    core = cluster.admin.makeApiClient(CoreV1Api);
    lean = new LeanCore(cluster.admin);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const deps = { core: lean, cloud: cloud as CloudProvider };
    nodeInit = await loadFunction('node-init', deps);
    serviceLb = await loadFunction('service-lb', deps, { loadBalancerClass });
    const routes = await loadFunction('routes', deps);
    scrape = await served([nodeInit, serviceLb, routes]);
  });

  it('exports each under its name, type, help, labels and buckets', async () => {
    // node-init initializes a Node: both of the node controller's delays.
    const nodeName = uniqueName('upstream-metrics-node');
    cloud.machines.push({
      id: nodeName,
      nodeName,
      instanceType: 'm1.large',
      zone: 'zone-a',
      region: 'region-1',
      addresses: [{ type: 'InternalIP', address: '10.9.0.5' }],
    });
    await createNode(core, newNode(nodeName, uninitialized));
    assert.equal(firstResult(await nodeInit.reconcileOne({ kind: 'Node', name: nodeName }, run)), 'initialized');

    // service-lb ensures a load balancer (no host update: upstream counts none for an ensure)…
    const name = 'web';
    await core.createNamespacedService({
      namespace,
      body: {
        metadata: { name },
        spec: { type: 'LoadBalancer', loadBalancerClass, ports: [{ port: 80, protocol: 'TCP' }] },
      },
    });
    assert.equal(firstResult(await serviceLb.reconcileOne({ kind: 'Service', namespace, name }, run)), 'ensured');
    let families = await scrape();
    assert.equal(total(families, 'service_controller_loadbalancer_sync_total'), 0);
    // …then a pass after a node joined updates its hosts…
    await createNode(core, newNode(uniqueName('upstream-metrics-joined'), withProviderId(`fake://${nodeName}`)));
    const pass = await serviceLb.reconcileAll(run);
    assert.equal(pass.objects.find((o) => o.key === `Service/${namespace}/${name}`)?.result, 'hosts-updated');
    families = await scrape();
    assert.equal(total(families, 'service_controller_loadbalancer_sync_total'), 1);
    assert.equal(total(families, 'service_controller_nodesync_error_total'), 0);
    // …and a pass after another joined fails to, so the load balancer is ensured in full.
    cloud.errors.set('updateLoadBalancer', new Error('the cloud refused the update'));
    await createNode(core, newNode(uniqueName('upstream-metrics-joined'), withProviderId(`fake://${nodeName}`)));
    const failing = await serviceLb.reconcileAll(run);
    assert.equal(failing.objects.find((o) => o.key === `Service/${namespace}/${name}`)?.result, 'ensured');
    families = await scrape();

    for (const metric of controllers) assert.deepEqual(exported(families, metric.name), metric, metric.name);
    assert.equal(exported(families, routeSync.name)?.type, routeSync.type);
    assert.equal(total(families, 'node_controller_cloud_provider_taint_removal_delay_seconds'), 1);
    assert.equal(total(families, 'node_controller_initial_node_sync_delay_seconds'), 1);
    assert.equal(total(families, 'service_controller_loadbalancer_sync_total'), 2);
    assert.equal(total(families, 'service_controller_nodesync_error_total'), 1);
    assert.equal(total(families, 'service_controller_update_loadbalancer_host_latency_seconds'), 2);
    assert.equal(total(families, 'service_controller_nodesync_latency_seconds'), 2);
  });

  it('records nothing for a dry run, which calls no provider', async () => {
    const before = await scrape();
    await serviceLb.reconcileAll({ ...run, dryRun: true });
    const after = await scrape();
    for (const name of ['service_controller_nodesync_latency_seconds', 'service_controller_loadbalancer_sync_total'])
      assert.equal(total(after, name), total(before, name), name);
  });
});

describe(
  "cloud-provider-aws's API metrics, after a reconcile against the emulator",
  { skip: controlPlaneSkip || awsEmulatorSkip },
  () => {
    let world: AwsWorld;
    before(async () => {
      world = await awsWorld('upstream-metrics');
    });
    after(() => {
      (world as AwsWorld | undefined)?.close();
    });

    it('exports each under its name, type, help, labels and buckets', async (t) => {
      const instance = await world.runInstance();
      // The first three DescribeInstances are throttled: the SDK's three attempts of node-init's first call.
      const proxy = await startThrottlingProxy(world.endpoint, { action: 'DescribeInstances', times: 3 });
      t.after(() => proxy.close());
      useAwsEnv(t, { endpoint: proxy.endpoint, region: world.region });
      const registry = new Registry();
      const cluster = await testCluster();
      const cloud = createAwsProvider({
        config: world.cloudConfig(),
        configPath: 'cloud.conf',
        signal: new AbortController().signal,
        log: pino({ level: 'silent' }),
        kubeConfig: undefined,
        metrics: registry,
      });
      const nodeInit = await loadFunction('node-init', { core: new LeanCore(cluster.admin), cloud });
      const scrape = await served([nodeInit], registry);
      const core = cluster.admin.makeApiClient(CoreV1Api);
      const nodeName = uniqueName('upstream-metrics-aws');
      await createNode(core, newNode(nodeName, uninitialized, withProviderId(instance.providerId)));

      await assert.rejects(nodeInit.reconcileOne({ kind: 'Node', name: nodeName }, run), (error: unknown) => {
        assert.ok(findCause(error, RetryError), `throttled beyond the retries: ${String(error)}`);
        return true;
      });
      assert.equal(proxy.throttled(), 3);
      assert.equal(firstResult(await nodeInit.reconcileOne({ kind: 'Node', name: nodeName }, run)), 'initialized');
      const families = await scrape();

      for (const metric of aws) assert.deepEqual(exported(families, metric.name), metric, metric.name);
      assert.equal(total(families, 'cloudprovider_aws_api_request_errors', { request: 'describe_instance' }), 1);
      assert.ok(
        total(families, 'cloudprovider_aws_api_request_duration_seconds', { request: 'describe_instance' }) >= 1,
      );
      assert.equal(
        total(families, 'cloudprovider_aws_api_throttled_requests_total', { operation_name: 'DescribeInstances' }),
        1,
      );
      assert.equal(
        total(families, 'cloudprovider_aws_api_response_status_total', {
          service: 'EC2',
          operation: 'DescribeInstances',
          status_code: '503',
        }),
        3,
      );
      // cirrus's own series stays beside them.
      assert.ok(
        total(families, 'cirrus_aws_api_calls_total', { operation: 'DescribeInstances', outcome: 'error' }) >= 1,
      );
    });
  },
);
