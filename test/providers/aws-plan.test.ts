// planLoadBalancer of the aws provider against the AWS emulator (moto): for Classic ELBs and NLBs,
// what an ensure would do — create, adopt, update (naming what changes), unchanged, refuse — and
// never a mutating AWS call while finding out. Every call passes through the emulator's call
// counter (tools/aws-emulator/counter.ts), which is what holds the plan to reads.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { ElasticLoadBalancingClient } from '@aws-sdk/client-elastic-load-balancing';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancer, LoadBalancerPlan } from '../../shared/cloud/provider.ts';
import { callsBetween, isMutating, type CallCounter } from '../../tools/aws-emulator/counter.ts';
import {
  awsEmulatorSkip,
  makeUpstreamClassicElb,
  type AwsWorld,
  type WorldInstance,
  countedWorld,
  nodeOfInstance,
  upstreamLoadBalancerName,
} from '../harness/aws.ts';

const A = 'service.beta.kubernetes.io/aws-load-balancer-';
let uidCounter = 0;

function service(name: string, annotations: Record<string, string> = {}, status?: V1LoadBalancerStatus): V1Service {
  uidCounter += 1;
  const uid = `91a40${String(uidCounter).padStart(3, '0')}-0000-1111-2222-${name.padEnd(12, '0').slice(0, 12)}`;
  return withStatus(
    {
      metadata: { name, namespace: 'default', uid, annotations },
      spec: {
        type: 'LoadBalancer',
        ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 }],
      },
    },
    status,
  );
}

/** The Service as the API server has it after cirrus wrote `status`. */
function withStatus(svc: V1Service, status: V1LoadBalancerStatus | undefined): V1Service {
  return status === undefined ? svc : { ...svc, status: { loadBalancer: status } };
}

const nameOf = upstreamLoadBalancerName;
const nodeOf = nodeOfInstance;

describe('aws provider: planLoadBalancer against the emulator', { skip: awsEmulatorSkip }, () => {
  const counted = countedWorld('aws-plan');
  const { instances } = counted;
  let world: AwsWorld;
  let counter: CallCounter;
  let elb: ElasticLoadBalancingClient;
  before(() => {
    ({ world, counter, elb } = counted);
  });

  const provider = (): LoadBalancer => {
    const lb = createAwsProvider({
      config: world.cloudConfig({ DisableSecurityGroupIngress: 'false', DefaultLoadBalancerType: 'classic' }),
      configPath: 'cloud.conf',
      signal: new AbortController().signal,
      log: pino({ level: 'silent' }),
      kubeConfig: undefined,
    }).loadBalancer();
    assert.ok(lb, 'the aws provider has a LoadBalancer');
    return lb;
  };
  const nodes = (...which: number[]): V1Node[] => which.map((i) => nodeOf(instances[i] as WorldInstance));
  const instanceId = (i: number): string => (instances[i] as WorldInstance).instanceId;

  /** The plan, and the mutating calls (by `service:Operation`) made while planning. */
  async function plan(svc: V1Service, on: V1Node[]): Promise<{ plan: LoadBalancerPlan; mutations: string[] }> {
    const lb = provider();
    const before = counter.counts();
    const made = await lb.planLoadBalancer?.('kubernetes', svc, on);
    assert.ok(made, 'the aws provider offers planLoadBalancer');
    const delta = callsBetween(counter.counts(), before);
    return { plan: made, mutations: Object.keys(delta).filter((key) => isMutating(key.split(':')[1] ?? '')) };
  }

  const settings = (p: LoadBalancerPlan): string[] => [...new Set(p.changes.map((c) => c.setting))].sort();

  it('plans a create for a new Service, Classic and NLB alike, with no mutating call and nothing made', async () => {
    for (const svc of [service('new-classic'), service('new-nlb', { [`${A}type`]: 'nlb' })]) {
      const { plan: made, mutations } = await plan(svc, nodes(0, 1));
      assert.deepEqual(mutations, []);
      assert.equal(made.action, 'create', JSON.stringify(made));
      assert.equal(made.name, nameOf(svc));
      assert.ok(settings(made).includes('load balancer'));
      assert.ok(settings(made).includes('targets'), 'the nodes would be registered');
      assert.ok(
        made.changes.some((c) => c.setting === 'targets' && c.change.includes(instanceId(1))),
        JSON.stringify(made.changes),
      );
      assert.equal(await provider().getLoadBalancer('kubernetes', svc), undefined, 'nothing was made');
    }
  });

  it('plans adopt for a Classic ELB made as cloud-provider-aws makes it, with no mutating call', async () => {
    const svc = service('adopted');
    const name = nameOf(svc);
    await makeUpstreamClassicElb(world, elb, {
      name,
      serviceName: 'default/adopted',
      groupDescription: `Security group for Kubernetes ELB ${name} (default/adopted)`,
      ports: [{ port: 80, nodePort: 30080 }],
      instanceIds: [instanceId(0), instanceId(1)],
    });
    const { plan: made, mutations } = await plan(svc, nodes(0, 1));
    assert.deepEqual(mutations, []);
    assert.deepEqual(made, { action: 'adopt', name, changes: [] });
  });

  it('plans a refusal for an annotation cirrus does not offer, saying why, with no mutating call', async () => {
    const svc = service('refused', { [`${A}type`]: 'nlb', [`${A}eip-allocations`]: 'eipalloc-1' });
    const { plan: made, mutations } = await plan(svc, nodes(0, 1));
    assert.deepEqual(mutations, []);
    assert.equal(made.action, 'refuse');
    assert.match(made.reason ?? '', /eip-allocations/);
    assert.deepEqual(made.changes, [], 'no load balancer to bring to the nodes');
  });

  it('plans a refusal that still brings the load balancer the Service has to the nodes, with no mutating call', async () => {
    const svc = service('refused-grown', { [`${A}type`]: 'nlb' });
    const status = await provider().ensureLoadBalancer('kubernetes', svc, nodes(0, 1));
    const refused = withStatus(
      {
        ...svc,
        metadata: { ...svc.metadata, annotations: { [`${A}type`]: 'nlb', [`${A}eip-allocations`]: 'eipalloc-1' } },
      },
      status,
    );
    const { plan: made, mutations } = await plan(refused, nodes(0, 1, 2));
    assert.deepEqual(mutations, []);
    assert.equal(made.action, 'refuse');
    assert.match(made.reason ?? '', /eip-allocations.*its targets follow the 3 current target node/);
    assert.deepEqual(settings(made), ['targets']);
    assert.ok(
      made.changes.every((c) => c.change.includes(instanceId(2))),
      JSON.stringify(made.changes),
    );
  });

  it('plans an update naming the node added, then unchanged once applied, for Classic and NLB, with no mutating call', async () => {
    for (const svc of [service('grown-classic'), service('grown-nlb', { [`${A}type`]: 'nlb' })]) {
      const status = await provider().ensureLoadBalancer('kubernetes', svc, nodes(0, 1));
      const current = withStatus(svc, status);
      const same = await plan(current, nodes(0, 1));
      assert.deepEqual(same.mutations, []);
      assert.deepEqual(same.plan, { action: 'unchanged', name: nameOf(svc), changes: [] });

      const { plan: made, mutations } = await plan(current, nodes(0, 1, 2));
      assert.deepEqual(mutations, []);
      assert.equal(made.action, 'update', JSON.stringify(made));
      const targets = made.changes.filter((c) => c.setting === 'targets');
      assert.ok(targets.length > 0, JSON.stringify(made.changes));
      assert.ok(
        targets.every((c) => c.change.includes(instanceId(2)) && !c.change.includes(instanceId(0))),
        JSON.stringify(targets),
      );
    }
  });
});
