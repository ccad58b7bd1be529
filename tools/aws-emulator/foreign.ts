// A load balancer in a world's VPC that is not the cluster's (no cluster tag): an NLB with a target
// group and a listener, which a provider must never touch.

import { randomBytes } from 'node:crypto';
import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  type ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { step } from './env.ts';
import { must, type WorldSubnet } from './network.ts';

export interface ForeignLoadBalancer {
  readonly name: string;
  readonly arn: string;
  readonly dnsName: string;
  readonly targetGroupArn: string;
  readonly listenerArn: string;
  /** Whether the NLB, its target group and its listener all still exist. */
  exists(): Promise<boolean>;
}

/** Creates a foreign NLB named `name` in `where`'s VPC and public subnets. */
export async function createForeignLoadBalancer(
  elbv2: ElasticLoadBalancingV2Client,
  where: { readonly vpcId: string; readonly publicSubnets: readonly WorldSubnet[] },
  name = `foreign-${randomBytes(4).toString('hex')}`,
): Promise<ForeignLoadBalancer> {
  if (!/^[A-Za-z0-9]([-A-Za-z0-9]{0,25}[A-Za-z0-9])?$/.test(name))
    throw new Error(
      `createForeignLoadBalancer: "${name}" must be 1-27 letters, digits or "-" (its target group adds "-tg")`,
    );
  const lb = await step(
    'CreateLoadBalancer',
    elbv2.send(
      new CreateLoadBalancerCommand({
        Name: name,
        Type: 'network',
        Subnets: where.publicSubnets.map((s) => s.id),
        Tags: foreignTags,
      }),
    ),
  );
  const arn = must(lb.LoadBalancers?.[0]?.LoadBalancerArn, 'CreateLoadBalancer: no ARN');
  const dnsName = must(lb.LoadBalancers?.[0]?.DNSName, 'CreateLoadBalancer: no DNS name');
  const { targetGroupArn, listenerArn } = await forwardTo(elbv2, arn, { name: `${name}-tg`, vpcId: where.vpcId });
  return {
    name,
    arn,
    dnsName,
    targetGroupArn,
    listenerArn,
    exists: () => foreignExists(elbv2, { arn, targetGroupArn, listenerArn }),
  };
}

const foreignTags = [{ Key: 'owner', Value: 'not-this-cluster' }];

// A TCP target group on NodePort 30080 and a TCP :80 listener forwarding to it.
async function forwardTo(
  elbv2: ElasticLoadBalancingV2Client,
  loadBalancerArn: string,
  group: { name: string; vpcId: string },
): Promise<{ targetGroupArn: string; listenerArn: string }> {
  const created = await step(
    'CreateTargetGroup',
    elbv2.send(
      new CreateTargetGroupCommand({
        Name: group.name,
        Protocol: 'TCP',
        Port: 30080,
        VpcId: group.vpcId,
        TargetType: 'instance',
        Tags: foreignTags,
      }),
    ),
  );
  const targetGroupArn = must(created.TargetGroups?.[0]?.TargetGroupArn, 'CreateTargetGroup: no ARN');
  const listener = await step(
    'CreateListener',
    elbv2.send(
      new CreateListenerCommand({
        LoadBalancerArn: loadBalancerArn,
        Port: 80,
        Protocol: 'TCP',
        DefaultActions: [{ Type: 'forward', TargetGroupArn: targetGroupArn }],
        Tags: foreignTags,
      }),
    ),
  );
  return { targetGroupArn, listenerArn: must(listener.Listeners?.[0]?.ListenerArn, 'CreateListener: no ARN') };
}

// Each Describe by ARN fails with a *NotFound error once the resource is gone.
async function foreignExists(
  elbv2: ElasticLoadBalancingV2Client,
  arns: { arn: string; targetGroupArn: string; listenerArn: string },
): Promise<boolean> {
  const found = (call: Promise<unknown>): Promise<boolean> =>
    call.then(
      () => true,
      (error: unknown) => {
        if (/NotFound/.test((error as Error).name)) return false;
        throw error;
      },
    );
  const all = await Promise.all([
    found(elbv2.send(new DescribeLoadBalancersCommand({ LoadBalancerArns: [arns.arn] }))),
    found(elbv2.send(new DescribeTargetGroupsCommand({ TargetGroupArns: [arns.targetGroupArn] }))),
    found(elbv2.send(new DescribeListenersCommand({ ListenerArns: [arns.listenerArn] }))),
  ]);
  return all.every(Boolean);
}
