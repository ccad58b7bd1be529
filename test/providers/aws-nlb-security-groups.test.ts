// NLB security groups (`[Global] NLBSecurityGroupMode = Managed`) against the emulator, as
// cloud-provider-aws v1.36 makes them (pkg/providers/v1/aws.go, ensureNLBSecurityGroup): a new
// NLB gets a group of its own by upstream's name, admitting the Service's client ranges on the
// listener ports; the nodes' rules stay upstream's for an NLB; an unchanged Service costs no
// mutating call; the group goes with the Service; without the mode nothing changes.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { DescribeSecurityGroupsCommand, type IpPermission, type SecurityGroup } from '@aws-sdk/client-ec2';
import { DescribeLoadBalancersCommand, type LoadBalancer as Nlb } from '@aws-sdk/client-elastic-load-balancing-v2';
import { CoreV1Api, type KubeConfig, type V1Node, type V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { parseAwsConfig } from '../../providers/aws/config.ts';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import {
  callsBetween,
  isMutating,
  startCallCounter,
  sumCalls,
  type CallCounter,
} from '../../tools/aws-emulator/counter.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld } from '../harness/aws.ts';
import { controlPlaneSkip, testCluster } from '../harness/cluster.ts';

const MANAGED = { NLBSecurityGroupMode: 'Managed' };
const TYPE = 'service.beta.kubernetes.io/aws-load-balancer-type';

function rulesOf(permissions: readonly IpPermission[]): string[] {
  return permissions
    .flatMap((p) =>
      [...(p.IpRanges ?? []).map((r) => r.CidrIp), ...(p.UserIdGroupPairs ?? []).map((g) => g.GroupId)].map(
        (source) => `${p.IpProtocol} ${p.FromPort}-${p.ToPort} ${source}`,
      ),
    )
    .sort();
}

/** Upstream's GetSecurityGroupNameForNLB, written out independently of the provider. */
function upstreamName(cluster: string, svc: V1Service): string {
  const { name = '', namespace = '', uid = '' } = svc.metadata ?? {};
  const hash = createHash('sha256')
    .update(cluster + name + namespace + uid)
    .digest('hex');
  return `k8s-${namespace.replace(/[^a-z0-9]/gi, '').slice(0, 8)}-${name.replace(/[^a-z0-9]/gi, '').slice(0, 8)}-${hash.slice(0, 10)}`;
}

describe(
  'aws provider: NLB security groups (NLBSecurityGroupMode)',
  { skip: awsEmulatorSkip || controlPlaneSkip },
  () => {
    let world: AwsWorld;
    let counter: CallCounter;
    let nodes: V1Node[];
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
      world = await awsWorld('aws-nlbsg');
      counter = await startCallCounter(world.endpoint);
      Object.assign(process.env, awsTestEnv({ endpoint: counter.endpoint, region: world.region }));
      admin = (await testCluster()).admin;
      const instance = await world.runInstance();
      nodes = [{ metadata: { name: instance.privateDnsName }, spec: { providerID: instance.providerId } }];
    });
    after(async () => {
      await (counter as CallCounter | undefined)?.close();
      (world as AwsWorld | undefined)?.close();
    });

    const service = (name: string, nodePort: number, ranges?: string[]): V1Service => ({
      metadata: {
        name,
        namespace: 'default',
        uid: `${name}-0000-1111-2222-333344445555`.slice(0, 36),
        annotations: { [TYPE]: 'nlb' },
      },
      spec: {
        type: 'LoadBalancer',
        ports: [{ port: 80, nodePort, protocol: 'TCP' }],
        ...(ranges === undefined ? {} : { loadBalancerSourceRanges: ranges }),
      },
    });
    const lbName = (svc: V1Service): string => `a${(svc.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);
    const nlbOf = async (svc: V1Service): Promise<Nlb | undefined> => {
      try {
        const out = await world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [lbName(svc)] }));
        return out.LoadBalancers?.[0];
      } catch {
        return undefined;
      }
    };
    const groupNamed = async (name: string): Promise<SecurityGroup | undefined> => {
      const out = await world.ec2.send(
        new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-name', Values: [name] }] }),
      );
      return out.SecurityGroups?.[0];
    };
    const nodeRules = async (port: number): Promise<string[]> => {
      const out = await world.ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [world.securityGroupId] }));
      return rulesOf(out.SecurityGroups?.[0]?.IpPermissions ?? []).filter((r) => r.startsWith(`tcp ${port}-`));
    };
    const mutations = async (act: () => Promise<unknown>): Promise<number> => {
      const mark = counter.counts();
      await act();
      return sumCalls(callsBetween(counter.counts(), mark), (_, op) => isMutating(op));
    };

    const svc = service('guarded', 30201, ['203.0.113.0/24']);

    it('plans a new NLB under the mode without sending a write (the group is created, then the load balancer with it)', async () => {
      const lb = provider(MANAGED);
      let plan: Awaited<ReturnType<NonNullable<LoadBalancer['planLoadBalancer']>>> | undefined;
      const writes = await mutations(async () => {
        plan = await lb.planLoadBalancer?.('kubernetes', svc, nodes);
      });
      assert.equal(writes, 0);
      assert.equal(plan?.action, 'create', JSON.stringify(plan));
      assert.equal(await groupNamed(upstreamName('kubernetes', svc)), undefined);
    });

    it('gives a new NLB a group of its own, by upstream’s name, admitting the source range on the listener port', async () => {
      await provider(MANAGED).ensureLoadBalancer('kubernetes', svc, nodes);
      const group = await groupNamed(upstreamName('kubernetes', svc));
      assert.ok(group?.GroupId, 'the group exists by upstream’s name');
      assert.equal(group.Description, '[k8s] Managed SecurityGroup for LoadBalancer');
      assert.ok(
        group.Tags?.some((t) => t.Key === `kubernetes.io/cluster/${world.clusterId}` && t.Value === 'owned'),
        JSON.stringify(group.Tags),
      );
      assert.deepEqual((await nlbOf(svc))?.SecurityGroups, [group.GroupId]);
      assert.deepEqual(rulesOf(group.IpPermissions ?? []), ['icmp 3-4 203.0.113.0/24', 'tcp 80-80 203.0.113.0/24']);
      // The nodes' rules are upstream's for an NLB: the client range and the subnets' health checks.
      const nodeSources = (await nodeRules(30201)).map((r) => r.split(' ')[2]);
      assert.ok(nodeSources.includes('203.0.113.0/24'), JSON.stringify(nodeSources));
    });

    it('makes no mutating AWS call when the Service is unchanged', async () => {
      assert.equal(await mutations(() => provider(MANAGED).ensureLoadBalancer('kubernetes', svc, nodes)), 0);
    });

    it('follows a changed source range on the group', async () => {
      const changed = service('guarded', 30201, ['198.51.100.0/24']);
      await provider(MANAGED).ensureLoadBalancer('kubernetes', changed, nodes);
      const group = await groupNamed(upstreamName('kubernetes', svc));
      assert.deepEqual(rulesOf(group?.IpPermissions ?? []), ['icmp 3-4 198.51.100.0/24', 'tcp 80-80 198.51.100.0/24']);
    });

    it('deletes the group and the nodes’ rules with the Service', async () => {
      await provider(MANAGED).ensureLoadBalancerDeleted('kubernetes', svc);
      assert.equal(await nlbOf(svc), undefined);
      assert.equal(await groupNamed(upstreamName('kubernetes', svc)), undefined, 'the group is gone');
      assert.deepEqual(await nodeRules(30201), [], 'the nodes’ rules are gone');
    });

    it('without the mode, a new NLB gets no group, as before', async () => {
      const plain = service('plain', 30202);
      await provider().ensureLoadBalancer('kubernetes', plain, nodes);
      assert.deepEqual((await nlbOf(plain))?.SecurityGroups ?? [], []);
      assert.equal(await groupNamed(upstreamName('kubernetes', plain)), undefined);
    });

    it('keeps an NLB made without groups as it is under the mode, with a Warning that says why', async () => {
      const plain = service('plain', 30202);
      assert.equal(await mutations(() => provider(MANAGED).ensureLoadBalancer('kubernetes', plain, nodes)), 0);
      assert.deepEqual((await nlbOf(plain))?.SecurityGroups ?? [], []);
      const events = await admin.makeApiClient(CoreV1Api).listNamespacedEvent({
        namespace: 'default',
        fieldSelector: `involvedObject.uid=${plain.metadata?.uid ?? ''}`,
      });
      assert.ok(
        events.items.some((e) => e.reason === 'SecurityGroupNotApplied' && /cannot add them/.test(e.message ?? '')),
        JSON.stringify(events.items.map((e) => e.message)),
      );
      await provider().ensureLoadBalancerDeleted('kubernetes', plain);
    });
  },
);

describe('aws cloud-config: NLBSecurityGroupMode', () => {
  const config = (mode: string): string =>
    `[Global]\nRegion = us-east-1\nVPC = vpc-0123456789abcdef0\nKubernetesClusterID = c1\nNLBSecurityGroupMode = ${mode}\n`;

  it('takes Managed, and refuses any other value naming the key (upstream compares it exactly)', () => {
    assert.equal(parseAwsConfig(config('Managed'), 'cloud.conf').nlbSecurityGroupManaged, true);
    assert.throws(() => parseAwsConfig(config('managed'), 'cloud.conf'), /Global\.NLBSecurityGroupMode.*"managed"/);
  });
});
