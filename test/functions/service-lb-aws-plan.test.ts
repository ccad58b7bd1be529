// service-lb's dry run with the aws provider, against the real API server and the AWS emulator
// (moto): the report says per Service what the ensure would do — create, adopt a Classic ELB made
// as cloud-provider-aws makes it, refuse (why), update (the node added) — and the dry run makes no
// mutating AWS call (counted by tools/aws-emulator/counter.ts) and writes nothing to the cluster.
// The Services' target nodes are chosen by a label of this file's own, so that Nodes other test
// files create meanwhile are no targets.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ElasticLoadBalancingClient } from '@aws-sdk/client-elastic-load-balancing';
import { CoreV1Api, type V1Service } from '@kubernetes/client-node';
import { serviceLbFunction } from '../../functions/service-lb/index.ts';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancerPlan } from '../../shared/cloud/provider.ts';
import type { FunctionDefinition, Report } from '../../shared/host/function.ts';
import { callsBetween, isMutating, type CallCounter } from '../../tools/aws-emulator/counter.ts';
import {
  awsEmulatorSkip,
  makeUpstreamClassicElb,
  type AwsWorld,
  type WorldInstance,
  countedWorld,
  upstreamLoadBalancerName,
} from '../harness/aws.ts';
import { createNode, firstResult, newNode, silentLogger, withLabels } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const A = 'service.beta.kubernetes.io/aws-load-balancer-';
const run = { dryRun: false, log: silentLogger(), signal: new AbortController().signal };
const dry = { ...run, dryRun: true };

describe('service-lb dry run with the aws provider', { skip: controlPlaneSkip || awsEmulatorSkip }, () => {
  const counted = countedWorld('lb-plan');
  const { instances } = counted;
  let world: AwsWorld;
  let counter: CallCounter;
  let elb: ElasticLoadBalancingClient;
  let core: CoreV1Api;
  let fn: FunctionDefinition;
  const namespace = uniqueName('lbplan');
  const label = 'cirrus.test/plan-target';
  const nodeNames: string[] = [];

  before(async () => {
    ({ world, counter, elb } = counted);
    core = (await testCluster()).admin.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    // The third instance's Node joins in a test.
    for (const instance of instances.slice(0, 2)) await join(instance);
    const loadBalancer = createAwsProvider({
      config: world.cloudConfig({ DisableSecurityGroupIngress: 'false', DefaultLoadBalancerType: 'classic' }),
      configPath: 'cloud.conf',
      signal: new AbortController().signal,
      log: silentLogger(),
      kubeConfig: undefined,
    }).loadBalancer();
    assert.ok(loadBalancer);
    fn = serviceLbFunction({ core, loadBalancer, clusterName: 'kubernetes' });
  });
  after(async () => {
    for (const name of nodeNames) await core.deleteNode({ name }).catch(() => undefined);
  });

  /** A Node for `instance`, a target of this file's Services. */
  async function join(instance: WorldInstance): Promise<void> {
    const name = uniqueName('plan-node');
    nodeNames.push(name);
    const node = newNode(name, withLabels({ [label]: namespace }));
    await createNode(core, { ...node, spec: { providerID: instance.providerId } });
  }

  const targetsOurs = { [`${A}target-node-labels`]: `${label}=${namespace}` };
  const createService = (name: string, annotations: Record<string, string> = {}): Promise<V1Service> =>
    core.createNamespacedService({
      namespace,
      body: {
        metadata: { name, annotations: { ...targetsOurs, ...annotations } },
        spec: { type: 'LoadBalancer', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
      },
    });
  const lbName = upstreamLoadBalancerName;
  const planOf = (report: Report): LoadBalancerPlan | undefined =>
    report.objects[0]?.changes.find((c) => c.action === 'plan')?.detail as LoadBalancerPlan | undefined;

  /** The dry run's report for Service `name`, and the mutating AWS calls made meanwhile. */
  async function dryRun(name: string): Promise<{ report: Report; mutations: string[] }> {
    const before = counter.counts();
    const report = await fn.reconcileOne({ kind: 'Service', namespace, name }, dry);
    const delta = callsBetween(counter.counts(), before);
    return { report, mutations: Object.keys(delta).filter((key) => isMutating(key.split(':')[1] ?? '')) };
  }

  it('reports create for a new Service, and writes nothing', async () => {
    const svc = await createService(uniqueName('new'));
    const name = svc.metadata?.name ?? '';
    const { report, mutations } = await dryRun(name);
    assert.deepEqual(mutations, []);
    assert.equal(firstResult(report), 'create');
    const plan = planOf(report);
    assert.equal(plan?.name, lbName(svc));
    assert.ok(plan.changes.some((c) => c.setting === 'load balancer' && c.change.startsWith('CreateLoadBalancer')));
    const after = await core.readNamespacedService({ namespace, name });
    assert.equal(after.metadata?.resourceVersion, svc.metadata?.resourceVersion, 'nothing written to the Service');
  });

  it('reports adopt for a Classic ELB made as cloud-provider-aws makes it', async () => {
    const svc = await createService(uniqueName('adopt'));
    const name = lbName(svc);
    const nodePort = svc.spec?.ports?.[0]?.nodePort ?? 0;
    await makeUpstreamClassicElb(world, elb, {
      name,
      serviceName: `${namespace}/${svc.metadata?.name ?? ''}`,
      groupDescription: `Security group for Kubernetes ELB ${name}`,
      ports: [{ port: 80, nodePort }],
      instanceIds: instances.slice(0, 2).map((i) => i.instanceId),
    });
    const { report, mutations } = await dryRun(svc.metadata?.name ?? '');
    assert.deepEqual(mutations, []);
    assert.equal(firstResult(report), 'adopt');
    assert.deepEqual(planOf(report), { action: 'adopt', name, changes: [] });
  });

  it('reports refuse, saying why, for an annotation cirrus does not offer', async () => {
    const svc = await createService(uniqueName('refuse'), {
      [`${A}type`]: 'nlb',
      [`${A}eip-allocations`]: 'eipalloc-1',
    });
    const { report, mutations } = await dryRun(svc.metadata?.name ?? '');
    assert.deepEqual(mutations, []);
    assert.equal(firstResult(report), 'refuse');
    assert.match(planOf(report)?.reason ?? '', /eip-allocations/);
  });

  it('reports update naming the node added to a load balancer cirrus made', async () => {
    const svc = await createService(uniqueName('grow'), { [`${A}type`]: 'nlb' });
    const name = svc.metadata?.name ?? '';
    assert.equal(firstResult(await fn.reconcileOne({ kind: 'Service', namespace, name }, run)), 'ensured');
    await join(instances[2] as WorldInstance);
    const { report, mutations } = await dryRun(name);
    assert.deepEqual(mutations, []);
    assert.equal(firstResult(report), 'update');
    const added = instances[2]?.instanceId ?? '';
    assert.deepEqual(
      planOf(report)?.changes.map((c) => c.setting),
      ['targets'],
      JSON.stringify(planOf(report)),
    );
    assert.match(planOf(report)?.changes[0]?.change ?? '', new RegExp(`^RegisterTargets .*\\[${added}:`));
  });
});
