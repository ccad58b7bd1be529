// The aws provider against the AWS emulator (moto, started once per run by test/global-setup.ts),
// through the contract: instances, Network Load Balancers and routes, in a world (VPC, subnets,
// route table, cluster ID) of this file's own. Every AWS call is recorded by operation, so the
// tests also hold the provider to its call budget (issue 17's goals).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  CreateLoadBalancerCommand,
  type TargetGroup,
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { CreateSubnetCommand, DeleteSubnetCommand, DescribeRouteTablesCommand } from '@aws-sdk/client-ec2';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import type {
  CloudProvider,
  InstanceMetadata,
  InstancesV2,
  LoadBalancer,
  Route,
  Routes,
} from '../../shared/cloud/provider.ts';
import { createAwsProvider } from '../../providers/aws/index.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld, type WorldInstance } from '../harness/aws.ts';

interface Call {
  readonly service: string;
  readonly operation: string;
  readonly outcome: string;
}

const mutating = (c: Call): boolean => !/^Describe/.test(c.operation);

describe('aws provider against the emulator', { skip: awsEmulatorSkip }, () => {
  let world: AwsWorld;
  let cloud: CloudProvider;
  let lb: LoadBalancer;
  const calls: Call[] = [];
  const since = (mark: number): Call[] => calls.slice(mark);
  const instances: WorldInstance[] = [];

  before(async () => {
    world = await awsWorld('aws-provider');
    // This process's SDK clients (the provider's) go to the emulator; the file runs in a process of its own.
    Object.assign(process.env, awsTestEnv(world));
    cloud = createAwsProvider(
      {
        config: world.cloudConfig(),
        configPath: 'cloud.conf',
        signal: new AbortController().signal,
        log: pino({ level: 'silent' }),
        kubeConfig: undefined,
      },
      { observe: (service, operation, outcome) => calls.push({ service, operation, outcome }) },
    );
    const loadBalancer = cloud.loadBalancer();
    assert.ok(loadBalancer, 'the aws provider has a LoadBalancer');
    lb = loadBalancer;
    for (let i = 0; i < 3; i += 1) {
      const subnet = world.publicSubnets[i % 2];
      assert.ok(subnet, `the world has public subnet ${i % 2}`);
      instances.push(await world.runInstance({ az: subnet.az, publicIp: i === 0 }));
    }
  });
  after(() => {
    // `before` may have failed before the world existed.
    (world as AwsWorld | undefined)?.close();
  });

  /** The i-th instance `before` started. */
  const instance = (i: number): WorldInstance => {
    const found = instances[i];
    assert.ok(found, `instance ${i} was started`);
    return found;
  };
  const instancesV2 = (): InstancesV2 => {
    const v2 = cloud.instancesV2();
    assert.ok(v2, 'the aws provider has InstancesV2');
    return v2;
  };
  const metadataOf = async (node: V1Node): Promise<InstanceMetadata> => {
    const meta = await instancesV2().instanceMetadata(node);
    assert.ok(meta, `metadata for Node ${node.metadata?.name ?? ''}`);
    return meta;
  };

  const nodeOf = (instance: WorldInstance, withProviderId = true): V1Node => ({
    metadata: { name: instance.privateDnsName, labels: {} },
    spec: withProviderId ? { providerID: instance.providerId } : {},
  });

  describe('instances', () => {
    it('finds a Node without a provider ID by its private DNS name, with its addresses, type, zone and zone ID', async () => {
      const first = instance(0);
      const meta = await metadataOf(nodeOf(first, false));
      assert.equal(meta.providerId, `aws:///${first.az}/${first.instanceId}`);
      assert.equal(meta.instanceType, first.instanceType);
      assert.equal(meta.zone, first.az);
      assert.equal(meta.region, world.region);
      assert.match(meta.additionalLabels['topology.k8s.aws/zone-id'] ?? '', /^use1-az\d$/);
      assert.deepEqual(
        meta.nodeAddresses.map((a) => a.type),
        ['InternalIP', 'ExternalIP', 'InternalDNS', 'Hostname', 'ExternalDNS'],
      );
      assert.equal(meta.nodeAddresses[0]?.address, first.privateIp);
      assert.equal(meta.nodeAddresses[1]?.address, first.publicIp);
      assert.equal(meta.nodeAddresses[2]?.address, first.privateDnsName);
    });

    it('keeps a Node’s own provider ID, in any form upstream accepts', async () => {
      const second = instance(1);
      for (const providerID of [second.providerId, `aws:////${second.instanceId}`, second.instanceId]) {
        const meta = await metadataOf({ metadata: { name: 'x' }, spec: { providerID } });
        assert.equal(meta.providerId, providerID);
        assert.equal(meta.instanceType, second.instanceType);
      }
    });

    it('asks AWS once for what one reconcile asks twice (instanceShutdown, then instanceExists)', async () => {
      const fresh = await world.runInstance();
      const v2 = instancesV2();
      const mark = calls.length;
      assert.equal(await v2.instanceShutdown(nodeOf(fresh)), false);
      assert.equal(await v2.instanceExists(nodeOf(fresh)), true);
      assert.deepEqual(
        since(mark).map((c) => c.operation),
        ['DescribeInstances'],
      );
    });

    it('answers lookups by ID that arrive together with one DescribeInstances', async () => {
      const mark = calls.length;
      const answers = await Promise.all(instances.map((i) => instancesV2().instanceExists(nodeOf(i))));
      assert.deepEqual(answers, [true, true, true]);
      assert.deepEqual(
        since(mark).map((c) => c.operation),
        ['DescribeInstances'],
      );
    });

    it('tells a stopped instance (exists, shut down) from a terminated or unknown one (does not exist)', async () => {
      const stopped = await world.runInstance();
      const gone = await world.runInstance();
      await world.stopInstance(stopped.instanceId);
      await world.terminateInstance(gone.instanceId);
      const v2 = instancesV2();
      assert.equal(await v2.instanceExists(nodeOf(stopped)), true);
      assert.equal(await v2.instanceShutdown(nodeOf(stopped)), true);
      assert.equal(await v2.instanceShutdown(nodeOf(instance(0))), false);
      assert.equal(await v2.instanceExists(nodeOf(gone)), false);
      const unknown: V1Node = {
        metadata: { name: 'n' },
        spec: { providerID: 'aws:///us-east-1a/i-0123456789abcdef0' },
      };
      const fresh = await world.runInstance(); // not asked about yet: not answered from memory
      const mark = calls.length;
      const [a, b] = await Promise.all([v2.instanceExists(unknown), v2.instanceExists(nodeOf(fresh))]);
      assert.deepEqual([a, b], [false, true], 'one unknown ID in a batch does not fail the others');
      assert.ok(since(mark).length >= 2, 'the failed batch was asked again ID by ID');
      await assert.rejects(v2.instanceMetadata(nodeOf(gone)), InstanceNotFoundError);
      await assert.rejects(
        v2.instanceMetadata({ metadata: { name: 'ip-10-9-9-9.ec2.internal' }, spec: {} }),
        InstanceNotFoundError,
      );
    });

    it('refuses a provider ID that is not an EC2 instance’s, naming it', async () => {
      await assert.rejects(
        instancesV2().instanceExists({ metadata: { name: 'n' }, spec: { providerID: 'gce://p/z/n' } }),
        /provider ID "gce:\/\/p\/z\/n" is not an EC2 instance's/,
      );
    });
  });

  describe('load balancers', () => {
    const service = (name: string, ports = [80], annotations: Record<string, string> = {}): V1Service => ({
      metadata: { name, namespace: 'default', uid: `${name}-0000-1111-2222-333344445555`.slice(0, 36), annotations },
      spec: {
        type: 'LoadBalancer',
        ports: ports.map((port, i) => ({ name: `p${port}`, port, protocol: 'TCP', nodePort: 30000 + port + i })),
      },
    });

    /** The load balancer `name` as the emulator has it: listeners, target groups, their targets by port, tags. */
    async function state(name: string) {
      const out = await world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] })).catch(() => undefined);
      const nlb = out?.LoadBalancers?.[0];
      if (nlb?.LoadBalancerArn === undefined) return undefined;
      const arn = nlb.LoadBalancerArn;
      const listeners =
        (await world.elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: arn }))).Listeners ?? [];
      const groups = await targetGroupsOf(arn);
      return { nlb, listeners, groups, targets: await targetsByPort(groups), tags: await tagsOf(arn) };
    }

    async function targetGroupsOf(arn: string): Promise<TargetGroup[]> {
      const out = await world.elbv2
        .send(new DescribeTargetGroupsCommand({ LoadBalancerArn: arn }))
        .catch(() => undefined); // moto: TargetGroupNotFound for a load balancer without any
      return out?.TargetGroups ?? [];
    }

    async function targetsByPort(groups: readonly TargetGroup[]): Promise<Map<number | undefined, string[]>> {
      const targets = new Map<number | undefined, string[]>();
      for (const g of groups) {
        const health = await world.elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: g.TargetGroupArn }));
        targets.set(g.Port, (health.TargetHealthDescriptions ?? []).map((d) => d.Target?.Id ?? '').sort());
      }
      return targets;
    }

    async function tagsOf(arn: string): Promise<Record<string, string | undefined>> {
      const tags = (await world.elbv2.send(new DescribeTagsCommand({ ResourceArns: [arn] }))).TagDescriptions?.[0]
        ?.Tags;
      return Object.fromEntries((tags ?? []).map((t) => [t.Key ?? '', t.Value]));
    }

    it('ensures an NLB with a target group and a listener per port, tagged, within the call budget; again with no mutating call', async () => {
      const svc = service('web', [80, 443]);
      const name = lb.getLoadBalancerName('kubernetes', svc);
      const nodes = instances.slice(0, 2).map((i) => nodeOf(i));
      let mark = calls.length;
      const status = await lb.ensureLoadBalancer('kubernetes', svc, nodes);
      const created = since(mark).filter((c) => c.service === 'elbv2');
      assert.ok(created.length <= 6 * 2, `ELBv2 calls for 2 ports: ${created.map((c) => c.operation).join(', ')}`);
      const s = await state(name);
      assert.ok(s);
      assert.equal(status.ingress?.[0]?.hostname, s.nlb.DNSName);
      assert.equal(s.nlb.Type, 'network');
      assert.deepEqual(
        s.listeners.map((l) => l.Port ?? 0).sort((x, y) => x - y),
        [80, 443],
      );
      assert.deepEqual([...s.targets.keys()].sort(), [30080, 30444]);
      for (const ids of s.targets.values())
        assert.deepEqual(ids, nodes.map((n) => (n.spec?.providerID ?? '').split('/').pop()).sort());
      assert.equal(s.tags[world.clusterTagKey], 'owned');
      assert.equal(s.tags['kubernetes.io/service-name'], 'default/web');
      assert.deepEqual(await lb.getLoadBalancer('kubernetes', svc), status);

      mark = calls.length;
      assert.deepEqual(await lb.ensureLoadBalancer('kubernetes', svc, nodes), status);
      assert.deepEqual(since(mark).filter(mutating), [], 'an unchanged Service costs no mutating call');
      assert.equal((await state(name))?.groups.length, 2, 'no second target group');
    });

    it('updates targets only when a node joins or leaves', async () => {
      const svc = service('web', [80, 443]);
      const name = lb.getLoadBalancerName('kubernetes', svc);
      const before = await state(name);
      const mark = calls.length;
      await lb.updateLoadBalancer('kubernetes', svc, [nodeOf(instance(1)), nodeOf(instance(2))]);
      assert.deepEqual(
        [
          ...new Set(
            since(mark)
              .filter(mutating)
              .map((c) => c.operation),
          ),
        ].sort(),
        ['DeregisterTargets', 'RegisterTargets'],
      );
      const after = await state(name);
      assert.equal(after?.nlb.DNSName, before?.nlb.DNSName);
      assert.ok(after);
      for (const ids of after.targets.values())
        assert.deepEqual(ids, [instance(1).instanceId, instance(2).instanceId].sort());
    });

    it('still brings a refused Service’s load balancer to the node set, and says what was not applied', async () => {
      const refused = service('web', [80, 443, 8443], {
        'service.beta.kubernetes.io/aws-load-balancer-extra-security-groups': 'sg-0123456789abcdef0',
      });
      const name = lb.getLoadBalancerName('kubernetes', refused);
      await assert.rejects(lb.ensureLoadBalancer('kubernetes', refused, [nodeOf(instance(0))]), {
        name: 'ServiceSettingError',
        message: new RegExp(
          `aws-load-balancer-extra-security-groups: extra security groups are not supported.*not applied to load balancer ${name}.*targets follow the 1 current target node`,
        ),
      });
      const s = await state(name);
      assert.ok(s);
      assert.deepEqual(
        s.listeners.map((l) => l.Port ?? 0).sort((x, y) => x - y),
        [80, 443],
        'no listener added for the refused change',
      );
      for (const ids of s.targets.values()) assert.deepEqual(ids, [instance(0).instanceId]);
      await assert.rejects(
        lb.ensureLoadBalancer(
          'kubernetes',
          service('never-made', [80], {
            'service.beta.kubernetes.io/aws-load-balancer-extra-security-groups': 'sg-0123456789abcdef0',
          }),
          [],
        ),
        /aws-load-balancer-extra-security-groups: extra security groups are not supported.*nothing was applied/,
      );
    });

    it('deletes everything it created and nothing else; a second delete succeeds', async () => {
      const foreign = await world.createForeignLoadBalancer();
      const svc = service('web', [80, 443]);
      const name = lb.getLoadBalancerName('kubernetes', svc);
      const created = await state(name);
      assert.ok(created, `load balancer ${name} exists before the delete`);
      const groups = created.groups.map((g) => g.TargetGroupName);
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      assert.equal(await state(name), undefined);
      for (const g of groups) {
        assert.ok(g, 'a target group has a name');
        await assert.rejects(
          world.elbv2.send(new DescribeTargetGroupsCommand({ Names: [g] })),
          /TargetGroupNotFound|not found/i,
        );
      }
      assert.equal(await lb.getLoadBalancer('kubernetes', svc), undefined);
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      assert.equal(await foreign.exists(), true, 'the foreign NLB survives');
    });

    it('neither takes over nor deletes a load balancer of its name that lacks the cluster’s tags', async () => {
      const svc = service('squat');
      const name = lb.getLoadBalancerName('kubernetes', svc);
      const subnet = world.publicSubnets[0];
      assert.ok(subnet, 'the world has a public subnet');
      await world.elbv2.send(new CreateLoadBalancerCommand({ Name: name, Type: 'network', Subnets: [subnet.id] }));
      await assert.rejects(lb.ensureLoadBalancer('kubernetes', svc, [nodeOf(instance(0))]), {
        name: 'ForeignResourceError',
        message: new RegExp(
          `load balancer ${name} exists but is not tagged ${world.clusterTagKey}=owned.*will not take it over`,
        ),
      });
      await assert.rejects(lb.updateLoadBalancer('kubernetes', service('nowhere'), [nodeOf(instance(0))]), {
        name: 'LoadBalancerNotFoundError',
      });
      assert.equal(await lb.getLoadBalancer('kubernetes', svc), undefined);
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      assert.ok(await state(name), 'the untagged load balancer is still there');
    });

    it('leaves nlb-ip and external to the AWS Load Balancer Controller, and names a bad annotation', async () => {
      for (const type of ['nlb-ip', 'external']) {
        const svc = service(`ext-${type}`, [80], { 'service.beta.kubernetes.io/aws-load-balancer-type': type });
        await assert.rejects(lb.ensureLoadBalancer('kubernetes', svc, []), { name: 'ImplementedElsewhereError' });
        assert.equal(await lb.getLoadBalancer('kubernetes', svc), undefined);
        await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      }
      const bad = service('bad', [80], {
        'service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval': 'often',
      });
      await assert.rejects(
        lb.ensureLoadBalancer('kubernetes', bad, []),
        /aws-load-balancer-healthcheck-interval: "often"/,
      );
      const clb = service('clb', [80], { 'service.beta.kubernetes.io/aws-load-balancer-type': 'clb' });
      await assert.rejects(
        lb.ensureLoadBalancer('kubernetes', clb, []),
        /aws-load-balancer-type: "clb" is not supported/,
      );
    });

    // A subnet of the VPC (10.<vpc>.<third>.0/24, in the first public subnet's zone) with `tag` and a Name; its ID.
    async function otherClustersSubnet(
      third: number,
      tag: { Key: string; Value: string },
      name: string,
    ): Promise<string> {
      const octet = world.vpcCidr.split('.')[1] ?? '';
      const created = await world.ec2.send(
        new CreateSubnetCommand({
          VpcId: world.vpcId,
          CidrBlock: `10.${octet}.${third}.0/24`,
          AvailabilityZone: world.publicSubnets[0]?.az ?? '',
          TagSpecifications: [{ ResourceType: 'subnet', Tags: [tag, { Key: 'Name', Value: name }] }],
        }),
      );
      return created.Subnet?.SubnetId ?? '';
    }

    it('refuses ownership tags among the additional tags, and a subnet tagged for another cluster', async () => {
      for (const key of [
        'KubernetesCluster',
        `kubernetes.io/cluster/${world.clusterId}`,
        'kubernetes.io/service-name',
      ]) {
        const svc = service('tagger', [80], {
          'service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags': `team=a,${key}=someone`,
        });
        await assert.rejects(lb.ensureLoadBalancer('kubernetes', svc, [nodeOf(instance(0))]), {
          name: 'ServiceSettingError',
          message: new RegExp(`additional-resource-tags: "${key}" is set by cirrus and cannot be given`),
        });
        assert.equal(await state(lb.getLoadBalancerName('kubernetes', svc)), undefined, 'nothing was made');
      }
      // Another cluster's subnet, and one of a cluster whose ID came from the legacy KubernetesClusterTag
      // (tagged that way alone).
      const theirs = await otherClustersSubnet(
        200,
        { Key: 'kubernetes.io/cluster/someone-else', Value: 'owned' },
        'theirs',
      );
      const legacy = await otherClustersSubnet(
        201,
        { Key: 'KubernetesCluster', Value: 'someone-older' },
        'theirs-legacy',
      );
      for (const named of ['theirs', theirs, 'theirs-legacy', legacy]) {
        const svc = service('placed', [80], { 'service.beta.kubernetes.io/aws-load-balancer-subnets': named });
        await assert.rejects(lb.ensureLoadBalancer('kubernetes', svc, [nodeOf(instance(0))]), {
          name: 'ServiceSettingError',
          message: /aws-load-balancer-subnets: subnet ".*" \(subnet-.*\) is tagged for another cluster/,
        });
        assert.equal(await state(lb.getLoadBalancerName('kubernetes', svc)), undefined, 'nothing was made');
      }
      // Out of the later tests' way: the legacy-tagged one is a candidate when no subnet is named, as upstream.
      for (const subnet of [theirs, legacy]) await world.ec2.send(new DeleteSubnetCommand({ SubnetId: subnet }));
    });

    it('makes an internal NLB in the private subnet when asked', async () => {
      const svc = service('inside', [80], { 'service.beta.kubernetes.io/aws-load-balancer-internal': 'true' });
      await lb.ensureLoadBalancer('kubernetes', svc, [nodeOf(instance(0))]);
      const s = await state(lb.getLoadBalancerName('kubernetes', svc));
      assert.equal(s?.nlb.Scheme, 'internal');
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
    });
  });

  describe('routes', () => {
    const route = (node: string, cidr: string): Route => ({
      name: '',
      targetNode: node,
      enableNodeAddresses: false,
      targetNodeAddresses: [],
      destinationCidr: cidr,
      blackhole: false,
    });
    const routesOf = (): Routes => {
      const routes = cloud.routes();
      assert.ok(routes, 'the aws provider has Routes');
      return routes;
    };
    const routeTo = (listed: readonly Route[], cidr: string): Route => {
      const found = listed.find((r) => r.destinationCidr === cidr);
      assert.ok(found, `a route to ${cidr} is listed`);
      return found;
    };

    it('creates a route per pod CIDR to the node’s instance, lists it, deletes it, and a missing route’s delete succeeds', async () => {
      const routes = routesOf();
      const [a, b] = [instance(0), instance(1)];
      await routes.createRoute('kubernetes', 'uid-a', route(a.privateDnsName, '10.244.1.0/24'));
      await routes.createRoute('kubernetes', 'uid-b', route(b.privateDnsName, '10.244.2.0/24'));
      await routes.createRoute('kubernetes', 'uid-a', route(a.privateDnsName, '10.244.1.0/24'));
      const listed = await routes.listRoutes('kubernetes');
      assert.deepEqual(listed.map((r) => [r.destinationCidr, r.targetNode, r.blackhole]).sort(), [
        ['10.244.1.0/24', a.privateDnsName, false],
        ['10.244.2.0/24', b.privateDnsName, false],
      ]);
      const table = await world.ec2.send(new DescribeRouteTablesCommand({ RouteTableIds: [world.routeTableId] }));
      assert.equal(
        table.RouteTables?.[0]?.Routes?.find((r) => r.DestinationCidrBlock === '10.244.1.0/24')?.InstanceId,
        a.instanceId,
      );
      await routes.deleteRoute('kubernetes', routeTo(listed, '10.244.2.0/24'));
      await routes.deleteRoute('kubernetes', routeTo(listed, '10.244.2.0/24'));
      assert.deepEqual(
        (await routes.listRoutes('kubernetes')).map((r) => r.destinationCidr),
        ['10.244.1.0/24'],
      );
    });

    it('reports a route whose instance is gone as a blackhole', async () => {
      const routes = routesOf();
      const doomed = await world.runInstance();
      await routes.createRoute('kubernetes', 'uid-d', route(doomed.privateDnsName, '10.244.9.0/24'));
      await world.terminateInstance(doomed.instanceId);
      const listed = await routes.listRoutes('kubernetes');
      const hole = routeTo(listed, '10.244.9.0/24');
      assert.equal(hole.blackhole, true);
      await routes.deleteRoute('kubernetes', hole);
    });

    it('refuses a route for a Node without an instance, naming it', async () => {
      await assert.rejects(
        routesOf().createRoute('kubernetes', 'uid-x', route('ip-10-1-2-3.ec2.internal', '10.244.7.0/24')),
        InstanceNotFoundError,
      );
    });
  });
});
