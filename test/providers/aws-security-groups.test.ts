// The aws provider's ingress rules on the nodes' security group for Network Load Balancers,
// against the emulator: the rules cloud-provider-aws writes (same ports, ranges and descriptions),
// `spec.loadBalancerSourceRanges` and the source-ranges annotation enforced, rules removed with the
// Service, nothing of anyone else's touched, and no mutating call for an unchanged Service (counted
// at the emulator's door by tools/aws-emulator/counter.ts).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DescribeSecurityGroupsCommand,
  ModifyInstanceAttributeCommand,
  type IpPermission,
} from '@aws-sdk/client-ec2';
import { CoreV1Api, type KubeConfig, type V1Node, type V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import {
  callsBetween,
  isMutating,
  startCallCounter,
  sumCalls,
  type CallCounter,
} from '../../tools/aws-emulator/counter.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld, type WorldInstance } from '../harness/aws.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

/** One rule as the group has it: `tcp 30080 203.0.113.0/24 kubernetes.io/rule/nlb/client=a…`. */
type Rule = string;

function rulesOf(permissions: readonly IpPermission[]): Rule[] {
  return permissions
    .flatMap((p) =>
      (p.IpRanges ?? []).map((r) => `${p.IpProtocol} ${p.FromPort}-${p.ToPort} ${r.CidrIp} ${r.Description ?? ''}`),
    )
    .sort();
}

describe('aws provider: node security group rules for NLBs', { skip: awsEmulatorSkip || controlPlaneSkip }, () => {
  let world: AwsWorld;
  let counter: CallCounter;
  let nodes: V1Node[];
  let instances: WorldInstance[];
  let admin: KubeConfig;

  const provider = (extra: Record<string, string> = {}): LoadBalancer => {
    const lb = createAwsProvider({
      config: world.cloudConfig(extra),
      configPath: 'cloud.conf',
      signal: new AbortController().signal,
      log: pino({ level: 'silent' }),
      kubeConfig: admin,
    }).loadBalancer();
    assert.ok(lb, 'the aws provider has a LoadBalancer');
    return lb;
  };

  before(async () => {
    world = await awsWorld('aws-sg');
    counter = await startCallCounter(world.endpoint);
    // The provider's clients go through the counter to the emulator.
    Object.assign(process.env, awsTestEnv({ endpoint: counter.endpoint, region: world.region }));
    admin = (await testCluster()).admin;
    instances = [await world.runInstance(), await world.runInstance({ az: world.publicSubnets[1]?.az ?? '' })];
    nodes = instances.map((i) => ({ metadata: { name: i.privateDnsName }, spec: { providerID: i.providerId } }));
  });
  after(async () => {
    await (counter as CallCounter | undefined)?.close();
    (world as AwsWorld | undefined)?.close();
  });

  const groupRules = async (): Promise<Rule[]> => {
    const out = await world.ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [world.securityGroupId] }));
    return rulesOf(out.SecurityGroups?.[0]?.IpPermissions ?? []);
  };
  const service = (name: string, nodePort: number, extra: Partial<V1Service> = {}): V1Service => ({
    metadata: {
      name,
      namespace: 'default',
      uid: `${name}-0000-1111-2222-333344445555`.slice(0, 36),
      ...extra.metadata,
    },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, nodePort, protocol: 'TCP' }], ...extra.spec },
  });
  const lbName = (svc: V1Service): string => `a${(svc.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);
  const subnetCidrs = (): string[] => world.publicSubnets.map((s) => s.cidr).sort();

  it('admits the Service’s source range and only it on the NodePort, health checks from the NLB’s subnets, and ICMP for path MTU', async () => {
    const lb = provider();
    const svc = service('ranged', 30101, { spec: { loadBalancerSourceRanges: ['203.0.113.7/24'] } });
    const before = await groupRules();
    await lb.ensureLoadBalancer('kubernetes', svc, nodes);
    const added = (await groupRules()).filter((r) => !before.includes(r));
    const name = lbName(svc);
    assert.deepEqual(
      added,
      [
        'icmp 3-4 203.0.113.0/24 kubernetes.io/rule/nlb/mtu',
        'tcp 30101-30101 203.0.113.0/24 kubernetes.io/rule/nlb/client=' + name,
        ...subnetCidrs().map((c) => `tcp 30101-30101 ${c} kubernetes.io/rule/nlb/health=${name}`),
      ].sort(),
    );
    const onPort = (await groupRules()).filter((r) => r.startsWith('tcp 30101-30101 ')).map((r) => r.split(' ')[2]);
    assert.deepEqual(onPort.sort(), ['203.0.113.0/24', ...subnetCidrs()].sort(), 'no one else is admitted');
  });

  it('makes no mutating AWS call when the Service is unchanged', async () => {
    const lb = provider();
    const svc = service('ranged', 30101, { spec: { loadBalancerSourceRanges: ['203.0.113.7/24'] } });
    const mark = counter.counts();
    await lb.ensureLoadBalancer('kubernetes', svc, nodes);
    const calls = callsBetween(counter.counts(), mark);
    assert.equal(
      sumCalls(calls, (_, op) => isMutating(op)),
      0,
      JSON.stringify(calls),
    );
    assert.ok((calls['ec2:DescribeSecurityGroups'] ?? 0) >= 1, 'the rules were checked');
  });

  it('follows a changed range (the annotation when the spec has none), and leaves rules it did not write', async () => {
    const lb = provider();
    const mine = {
      IpProtocol: 'tcp',
      FromPort: 30101,
      ToPort: 30101,
      IpRanges: [{ CidrIp: '198.51.100.0/24', Description: 'the operator’s' }],
    };
    await world.ec2.send(
      new AuthorizeSecurityGroupIngressCommand({ GroupId: world.securityGroupId, IpPermissions: [mine] }),
    );
    const svc = service('ranged', 30101, {
      metadata: {
        annotations: { 'service.beta.kubernetes.io/load-balancer-source-ranges': '192.0.2.0/25, 192.0.2.128/25' },
      },
    });
    await lb.ensureLoadBalancer('kubernetes', svc, nodes);
    const rules = await groupRules();
    const name = lbName(svc);
    assert.deepEqual(
      rules.filter((r) => r.includes(`nlb/client=${name}`)),
      [
        `tcp 30101-30101 192.0.2.0/25 kubernetes.io/rule/nlb/client=${name}`,
        `tcp 30101-30101 192.0.2.128/25 kubernetes.io/rule/nlb/client=${name}`,
      ],
    );
    assert.ok(!rules.some((r) => r.includes('203.0.113.0/24')), 'the old range and its MTU rule are gone');
    assert.ok(rules.includes('tcp 30101-30101 198.51.100.0/24 the operator’s'), 'the operator’s rule stays');
  });

  it('removes the load balancer’s rules, and only them, when the Service goes', async () => {
    const lb = provider();
    const other = service('other', 30102);
    await lb.ensureLoadBalancer('kubernetes', other, nodes);
    const svc = service('ranged', 30101);
    await lb.ensureLoadBalancerDeleted('kubernetes', svc);
    const rules = await groupRules();
    assert.deepEqual(
      rules.filter((r) => r.includes(lbName(svc))),
      [],
    );
    assert.ok(rules.includes('tcp 30101-30101 198.51.100.0/24 the operator’s'), 'the operator’s rule stays');
    // Clients are everyone over TCP on the health check port: upstream writes no health rule then.
    assert.deepEqual(
      rules.filter((r) => r.includes('kubernetes.io/rule/nlb/') && !r.includes('operator')),
      [
        'icmp 3-4 0.0.0.0/0 kubernetes.io/rule/nlb/mtu',
        `tcp 30102-30102 0.0.0.0/0 kubernetes.io/rule/nlb/client=${lbName(other)}`,
      ],
    );
    await lb.ensureLoadBalancerDeleted('kubernetes', other);
    assert.deepEqual(
      (await groupRules()).filter((r) => r.includes('kubernetes.io/rule/nlb/')),
      [],
    );
  });

  it('puts the rules on a node’s only group when it carries no cluster tag, as upstream, and removes them with the Service', async () => {
    const created = await world.ec2.send(
      new CreateSecurityGroupCommand({ GroupName: uniqueName('untagged'), Description: 'nodes', VpcId: world.vpcId }),
    );
    const groupId = created.GroupId ?? '';
    const instance = await world.runInstance();
    await world.ec2.send(new ModifyInstanceAttributeCommand({ InstanceId: instance.instanceId, Groups: [groupId] }));
    const untagged = async (): Promise<Rule[]> => {
      const out = await world.ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [groupId] }));
      return rulesOf(out.SecurityGroups?.[0]?.IpPermissions ?? []);
    };
    const lb = provider();
    const svc = service('untagged', 30104);
    const node = { metadata: { name: instance.privateDnsName }, spec: { providerID: instance.providerId } };
    await lb.ensureLoadBalancer('kubernetes', svc, [node]);
    assert.ok(
      (await untagged()).includes(`tcp 30104-30104 0.0.0.0/0 kubernetes.io/rule/nlb/client=${lbName(svc)}`),
      (await untagged()).join(' | '),
    );
    await lb.ensureLoadBalancerDeleted('kubernetes', svc);
    assert.deepEqual(
      (await untagged()).filter((r) => r.includes(lbName(svc))),
      [],
    );
  });

  it('with DisableSecurityGroupIngress writes no rule, and warns on the Service that its source ranges are not enforced', async () => {
    const lb = provider({ DisableSecurityGroupIngress: 'true' });
    const core = admin.makeApiClient(CoreV1Api);
    const name = uniqueName('unenforced');
    const created = await core.createNamespacedService({
      namespace: 'default',
      body: {
        metadata: { name },
        spec: {
          type: 'LoadBalancer',
          loadBalancerSourceRanges: ['203.0.113.0/24'],
          // The node port the API server allocates: a fixed one may be another test's (issue 43).
          ports: [{ port: 80 }],
        },
      },
    });
    const before = await groupRules();
    await lb.ensureLoadBalancer('kubernetes', created, nodes);
    assert.deepEqual(await groupRules(), before);
    const events = await core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${name}`,
    });
    const warning = events.items.find((e) => e.reason === 'SourceRangesNotEnforced');
    assert.ok(warning, 'a SourceRangesNotEnforced Event');
    assert.equal(warning.type, 'Warning');
    assert.match(warning.message ?? '', /203\.0\.113\.0\/24.*not enforced.*DisableSecurityGroupIngress/);
    await lb.ensureLoadBalancerDeleted('kubernetes', created);
  });
});
