// Cluster worlds in the run's AWS emulator (tools/aws-emulator/world.ts): tagged as
// cloud-provider-aws expects, isolated from each other, with instances whose state the helpers
// change, a foreign load balancer, a cloud-config, and an environment that points the SDK at them.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DescribeInstancesCommand,
  DescribeRouteTablesCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  EC2Client,
  type Tag,
} from '@aws-sdk/client-ec2';
import { DeleteLoadBalancerCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import { awsEmulatorSkip, awsTestEnv, testWorld, useAwsEnv, type AwsWorld } from '../harness/aws.ts';

function tags(list: Tag[] | undefined): Record<string, string> {
  return Object.fromEntries((list ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
}

async function instanceIdsByTag(world: AwsWorld, clusterId: string): Promise<string[]> {
  const answer = await world.ec2.send(
    new DescribeInstancesCommand({ Filters: [{ Name: 'tag-key', Values: [`kubernetes.io/cluster/${clusterId}`] }] }),
  );
  return (answer.Reservations ?? []).flatMap((r) => r.Instances ?? []).map((i) => i.InstanceId ?? '');
}

async function tagsAndGroups(
  world: AwsWorld,
  instanceId: string,
): Promise<{ tags: Record<string, string>; groups: string[] }> {
  const described = await world.ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
  const instance = described.Reservations?.[0]?.Instances?.[0];
  return { tags: tags(instance?.Tags), groups: (instance?.SecurityGroups ?? []).map((g) => g.GroupId ?? '') };
}

describe('an AWS emulator world', { skip: awsEmulatorSkip }, () => {
  it('has public subnets in two zones and a private one, tagged for the cluster and its load balancers', async (t) => {
    const world = await testWorld(t, 'subnets');
    if (!world) return;
    const subnets = await world.ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [world.vpcId] }] }),
    );
    const found = (subnets.Subnets ?? []).map((s) => ({ id: s.SubnetId, az: s.AvailabilityZone, tags: tags(s.Tags) }));
    const owned = { [world.clusterTagKey]: 'owned' };
    const expected = [
      ...world.publicSubnets.map((s) => ({ id: s.id, az: s.az, role: 'kubernetes.io/role/elb' })),
      ...world.privateSubnets.map((s) => ({ id: s.id, az: s.az, role: 'kubernetes.io/role/internal-elb' })),
    ];
    assert.equal(found.length, 3);
    assert.equal(new Set(world.publicSubnets.map((s) => s.az)).size, 2);
    for (const { id, az, role } of expected) {
      const subnet = found.find((s) => s.id === id);
      assert.equal(subnet?.az, az);
      assert.partialDeepStrictEqual(subnet.tags, { ...owned, [role]: '1' });
    }
  });

  it('routes the public subnets to an internet gateway, and has one cluster-tagged route table for pod routes', async (t) => {
    const world = await testWorld(t, 'tables');
    if (!world) return;
    const answer = await world.ec2.send(
      new DescribeRouteTablesCommand({ Filters: [{ Name: 'vpc-id', Values: [world.vpcId] }] }),
    );
    const tables = (answer.RouteTables ?? []).map((rt) => ({
      id: rt.RouteTableId,
      tags: tags(rt.Tags),
      subnets: (rt.Associations ?? []).flatMap((a) => (a.SubnetId === undefined ? [] : [a.SubnetId])).sort(),
      gateways: (rt.Routes ?? []).map((r) => `${r.DestinationCidrBlock ?? ''}>${r.GatewayId ?? ''}`),
    }));
    const clusterTables = tables.filter((rt) => rt.tags[world.clusterTagKey] === 'owned');
    assert.deepEqual(
      clusterTables.map((rt) => rt.id),
      [world.routeTableId],
      'exactly one table carries the cluster tag: the one RouteTableID names',
    );
    const [clusterTable] = clusterTables;
    assert.ok(clusterTable);
    assert.deepEqual(
      clusterTable.subnets,
      world.privateSubnets.map((s) => s.id),
    );
    assert.deepEqual(clusterTable.gateways, [`${world.vpcCidr}>local`], 'the private subnet has no way out');
    const publicTable = tables.find((rt) => rt.id === world.publicRouteTableId);
    assert.deepEqual(publicTable?.subnets, world.publicSubnets.map((s) => s.id).sort());
    assert.ok(publicTable.gateways.includes(`0.0.0.0/0>${world.internetGatewayId}`), String(publicTable.gateways));
  });

  it('writes the cloud-config in cloud-provider-aws’s INI format', async (t) => {
    const world = await testWorld(t, 'config');
    if (!world) return;
    assert.equal(
      world.cloudConfig({ NodeIPFamilies: 'ipv4' }),
      [
        '[Global]',
        `Region = ${world.region}`,
        `VPC = ${world.vpcId}`,
        `SubnetID = ${world.publicSubnets[0]?.id ?? ''}`,
        `KubernetesClusterID = ${world.clusterId}`,
        `RouteTableID = ${world.routeTableId}`,
        'DefaultLoadBalancerType = nlb',
        'NodeIPFamilies = ipv4',
        '',
      ].join('\n'),
    );
    assert.throws(() => world.cloudConfig({ 'Bad Key': 'x' }), /"Bad Key" is not an INI key/);
    assert.throws(() => world.cloudConfig({ Region: 'a\nVPC = b' }), /value of Region spans lines/);
  });

  it('is isolated from another world: by VPC and by cluster tag each sees only its own instances', async (t) => {
    const [one, two] = await Promise.all([testWorld(t, 'iso-one'), testWorld(t, 'iso-two')]);
    if (!one || !two) return;
    assert.notEqual(one.vpcCidr, two.vpcCidr);
    const a = await Promise.all([one.runInstance(), one.runInstance({ az: one.publicSubnets[1]?.az ?? '' })]);
    const b = await two.runInstance();
    const ids = (list: { instanceId: string }[]): string[] => list.map((i) => i.instanceId).sort();
    assert.deepEqual(ids(await one.instances()), ids(a));
    assert.deepEqual(ids(await two.instances()), [b.instanceId]);
    assert.deepEqual((await instanceIdsByTag(one, one.clusterId)).sort(), ids(a));
    assert.deepEqual(await instanceIdsByTag(two, two.clusterId), [b.instanceId]);
    // Node names (private DNS names) are unique across worlds, so a lookup by name finds one instance.
    const names = new Set([...a, b].map((i) => i.privateDnsName));
    assert.equal(names.size, 3);
  });

  it('runs instances as a cluster’s nodes: tagged, named by private DNS, with a provider ID; public IPs when asked', async (t) => {
    const world = await testWorld(t, 'run');
    if (!world) return;
    const node = await world.runInstance({ publicIp: true, instanceType: 'm5.large', tags: { role: 'worker' } });
    assert.partialDeepStrictEqual(node, {
      state: 'running',
      instanceType: 'm5.large',
      az: world.publicSubnets[0]?.az,
      providerId: `aws:///${node.az}/${node.instanceId}`,
      privateDnsName: `ip-${node.privateIp.replaceAll('.', '-')}.ec2.internal`,
    });
    assert.match(node.publicIp ?? '', /^\d+\.\d+\.\d+\.\d+$/);
    assert.match(node.publicDnsName ?? '', /^ec2-.*\.amazonaws\.com$/);
    assert.deepEqual(await tagsAndGroups(world, node.instanceId), {
      tags: { [world.clusterTagKey]: 'owned', role: 'worker' },
      groups: [world.securityGroupId],
    });
  });

  it('runs instances without the cluster tag or public IP, in the private subnet, and refuses subnets and zones it lacks', async (t) => {
    const world = await testWorld(t, 'run-other');
    if (!world) return;
    const privateSubnet = world.privateSubnets[0]?.id ?? '';
    const foreign = await world.runInstance({ subnet: privateSubnet, clusterTag: false });
    assert.equal(foreign.publicIp, undefined);
    assert.equal(foreign.subnetId, privateSubnet);
    assert.deepEqual(await instanceIdsByTag(world, world.clusterId), []);
    assert.deepEqual(
      (await world.instances()).map((i) => i.instanceId),
      [foreign.instanceId],
    );
    await assert.rejects(world.runInstance({ subnet: 'subnet-0000' }), /not one of this world's/);
    await assert.rejects(world.runInstance({ az: 'us-east-1z' }), /no public subnet in us-east-1z/);
  });

  it('stops, starts and terminates instances, as the next DescribeInstances shows', async (t) => {
    const world = await testWorld(t, 'states');
    if (!world) return;
    const { instanceId } = await world.runInstance();
    const state = async (): Promise<string> => (await world.describeInstance(instanceId)).state;
    await world.stopInstance(instanceId);
    assert.equal(await state(), 'stopped');
    await world.startInstance(instanceId);
    assert.equal(await state(), 'running');
    await world.terminateInstance(instanceId);
    assert.equal(await state(), 'terminated');
  });

  it('holds a foreign NLB (target group, listener, no cluster tag) whose existence can be checked', async (t) => {
    const world = await testWorld(t, 'foreign');
    if (!world) return;
    const foreign = await world.createForeignLoadBalancer();
    assert.match(foreign.dnsName, new RegExp(`^${foreign.name}-`));
    assert.equal(await foreign.exists(), true);
    await world.elbv2.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: foreign.arn }));
    assert.equal(await foreign.exists(), false);
  });

  it('gives the environment that points an SDK client configured by nothing else at the world', async (t) => {
    const world = await testWorld(t, 'env');
    if (!world) return;
    const env = awsTestEnv(world);
    assert.equal(env['AWS_ENDPOINT_URL'], world.endpoint);
    assert.equal(env['AWS_REGION'], world.region);
    const profile = process.env['AWS_PROFILE'];
    process.env['AWS_PROFILE'] = 'someone-elses'; // would make the SDK skip the environment's keys
    useAwsEnv(t, world);
    t.after(() => {
      if (profile === undefined) delete process.env['AWS_PROFILE'];
      else process.env['AWS_PROFILE'] = profile;
    });
    assert.equal(process.env['AWS_PROFILE'], undefined);
    const client = new EC2Client({ maxAttempts: 1 });
    t.after(() => {
      client.destroy();
    });
    const vpcs = await client.send(new DescribeVpcsCommand({ VpcIds: [world.vpcId] }));
    assert.equal(vpcs.Vpcs?.[0]?.CidrBlock, world.vpcCidr);
  });
});
