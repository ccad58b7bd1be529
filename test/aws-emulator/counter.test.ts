// The counting proxy (tools/aws-emulator/counter.ts): every call that passes is counted by
// service and operation, errors too, and answered as the emulator answered it.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DescribeInstancesCommand, DescribeVpcsCommand } from '@aws-sdk/client-ec2';
import { DescribeLoadBalancersCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import { callsBetween, isMutating, startCallCounter, sumCalls } from '../../tools/aws-emulator/counter.ts';
import { emulatorClients } from '../../tools/aws-emulator/world.ts';
import { awsEmulatorSkip, testWorld } from '../harness/aws.ts';

describe('the AWS call counter', { skip: awsEmulatorSkip }, () => {
  it('counts each call by service and operation, errors apart, and passes the answers through', async (t) => {
    const world = await testWorld(t, 'counter');
    if (!world) return;
    const counter = await startCallCounter(world.endpoint);
    t.after(() => counter.close());
    const { ec2, elbv2 } = emulatorClients(counter.endpoint, world.region);
    t.after(() => {
      ec2.destroy();
      elbv2.destroy();
    });
    const before = counter.counts();
    const vpcs = await ec2.send(new DescribeVpcsCommand({ VpcIds: [world.vpcId] }));
    assert.equal(vpcs.Vpcs?.[0]?.CidrBlock, world.vpcCidr);
    await ec2.send(new DescribeVpcsCommand({ VpcIds: [world.vpcId] }));
    await elbv2.send(new DescribeLoadBalancersCommand({}));
    await assert.rejects(
      ec2.send(new DescribeInstancesCommand({ InstanceIds: ['i-0000000000000dead'] })),
      (error: Error) => error.name === 'InvalidInstanceID.NotFound',
    );
    const calls = callsBetween(counter.counts(), before);
    assert.deepEqual(calls, {
      'ec2:DescribeVpcs': 2,
      'elasticloadbalancing:DescribeLoadBalancers': 1,
      'ec2:DescribeInstances': 1,
      'ec2:DescribeInstances:error': 1,
    });
    assert.equal(
      sumCalls(calls, () => true),
      4,
    );
    assert.equal(
      sumCalls(calls, (service) => service === 'ec2'),
      3,
    );
  });

  it('tells mutating operations from reads', () => {
    assert.deepEqual(
      [
        'DescribeInstances',
        'GetConsoleOutput',
        'ListTagsForResource',
        'CreateTargetGroup',
        'RegisterTargets',
        'AddTags',
      ].map(isMutating),
      [false, false, false, true, true, true],
    );
  });
});
