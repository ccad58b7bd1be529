// What a cluster's VPC in the emulator holds, as text (`npm run aws:emulator -- --show`): the AWS
// CLI's view without the AWS CLI. Instances, the VPC's load balancers with their tags, listeners,
// target groups and targets' health, the cluster route table's routes, and the node security
// group's ingress rules: what the aws provider creates and changes.

import {
  DescribeInstancesCommand,
  DescribeRouteTablesCommand,
  DescribeSecurityGroupsCommand,
  type EC2Client,
} from '@aws-sdk/client-ec2';
import {
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  type ElasticLoadBalancingV2Client,
  type LoadBalancer,
  type TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { emulatorClients } from './world.ts';

/** The parts of a world --show reads. */
export interface ShownWorld {
  readonly endpoint: string;
  readonly region: string;
  readonly clusterId: string;
  readonly vpcId: string;
  readonly routeTableId: string;
  readonly securityGroupId: string;
}

type Print = (line: string) => void;

/** Prints the world's instances, load balancers, routes and node security group rules. */
export async function showWorld(world: ShownWorld, print: Print): Promise<void> {
  const { ec2, elbv2 } = emulatorClients(world.endpoint, world.region);
  try {
    print(`cluster ${world.clusterId}, VPC ${world.vpcId}, ${world.region} at ${world.endpoint}`);
    await showInstances(ec2, world, print);
    await showLoadBalancers(elbv2, world, print);
    await showRoutes(ec2, world, print);
    await showIngress(ec2, world, print);
  } finally {
    ec2.destroy();
    elbv2.destroy();
  }
}

async function showInstances(ec2: EC2Client, world: ShownWorld, print: Print): Promise<void> {
  const answer = await ec2.send(new DescribeInstancesCommand({ Filters: [{ Name: 'vpc-id', Values: [world.vpcId] }] }));
  const instances = (answer.Reservations ?? []).flatMap((r) => r.Instances ?? []);
  print(`\ninstances (${instances.length}):`);
  for (const i of instances) {
    const fields = [i.InstanceId, i.State?.Name, i.PrivateDnsName, i.PrivateIpAddress, i.PublicIpAddress];
    print(`  ${cols(...fields, i.Placement?.AvailabilityZone, i.InstanceType)}`);
  }
}

async function showLoadBalancers(elbv2: ElasticLoadBalancingV2Client, world: ShownWorld, print: Print): Promise<void> {
  const answer = await elbv2.send(new DescribeLoadBalancersCommand({}));
  const mine = (answer.LoadBalancers ?? []).filter((lb) => lb.VpcId === world.vpcId);
  print(`\nload balancers (${mine.length}):`);
  for (const lb of mine) await showLoadBalancer(elbv2, lb, print);
}

async function showLoadBalancer(elbv2: ElasticLoadBalancingV2Client, lb: LoadBalancer, print: Print): Promise<void> {
  const arn = lb.LoadBalancerArn ?? '';
  print(`  ${cols(lb.LoadBalancerName, lb.Type, lb.Scheme ?? '(scheme unset)', lb.State?.Code, lb.DNSName)}`);
  print(`    tags: ${await tagsOf(elbv2, arn)}`);
  const listeners = await elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: arn }));
  for (const l of listeners.Listeners ?? []) {
    const to = (l.DefaultActions ?? []).map((a) => (a.TargetGroupArn ?? '').split(':').pop());
    print(`    listener ${cols(l.Protocol)}:${cols(l.Port)} -> ${to.join(', ')}`);
  }
  const groups = await elbv2.send(new DescribeTargetGroupsCommand({ LoadBalancerArn: arn }));
  for (const group of groups.TargetGroups ?? []) await showTargetGroup(elbv2, group, print);
}

async function showTargetGroup(elbv2: ElasticLoadBalancingV2Client, group: TargetGroup, print: Print): Promise<void> {
  const arn = group.TargetGroupArn ?? '';
  const check = `${cols(group.HealthCheckProtocol)}:${cols(group.HealthCheckPort, group.HealthCheckPath)}`;
  const every = `every ${cols(group.HealthCheckIntervalSeconds)} s`;
  print(
    `    target group ${cols(group.TargetGroupName, `${cols(group.Protocol)}:${cols(group.Port)}`, group.TargetType)}`,
  );
  print(`      health check ${check} ${every}`);
  print(`      tags: ${await tagsOf(elbv2, arn)}`);
  const health = await elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: arn }));
  const targets = (health.TargetHealthDescriptions ?? []).map(
    (t) => `${cols(t.Target?.Id)}:${cols(t.Target?.Port)} ${cols(t.TargetHealth?.State)}`,
  );
  print(`      targets: ${targets.join(', ') || 'none'}`);
}

async function tagsOf(elbv2: ElasticLoadBalancingV2Client, arn: string): Promise<string> {
  const answer = await elbv2.send(new DescribeTagsCommand({ ResourceArns: [arn] }));
  const tags = answer.TagDescriptions?.[0]?.Tags ?? [];
  return tags.map((t) => `${cols(t.Key)}=${cols(t.Value)}`).join(', ') || 'none';
}

async function showRoutes(ec2: EC2Client, world: ShownWorld, print: Print): Promise<void> {
  const answer = await ec2.send(new DescribeRouteTablesCommand({ RouteTableIds: [world.routeTableId] }));
  const routes = answer.RouteTables?.[0]?.Routes ?? [];
  print(`\nroutes in the cluster route table ${world.routeTableId} (${routes.length}):`);
  for (const r of routes) {
    const destination = r.DestinationCidrBlock ?? r.DestinationIpv6CidrBlock;
    const target = r.InstanceId ?? r.GatewayId ?? r.NetworkInterfaceId;
    print(`  ${cols(destination)} -> ${cols(target, r.State)}`);
  }
}

async function showIngress(ec2: EC2Client, world: ShownWorld, print: Print): Promise<void> {
  const answer = await ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [world.securityGroupId] }));
  const rules = answer.SecurityGroups?.[0]?.IpPermissions ?? [];
  print(`\ningress rules of the nodes' security group ${world.securityGroupId} (${rules.length}):`);
  for (const rule of rules) {
    const ports = rule.FromPort === rule.ToPort ? cols(rule.FromPort) : `${cols(rule.FromPort)}-${cols(rule.ToPort)}`;
    const from = (rule.IpRanges ?? []).map((r) => cols(r.CidrIp, r.Description && `(${r.Description})`));
    print(`  ${cols(rule.IpProtocol, ports)} from ${from.join(', ') || '-'}`);
  }
}

/** The values that are there, joined by two spaces. */
function cols(...values: (string | number | undefined)[]): string {
  return values.filter((v) => v !== undefined && v !== '').join('  ');
}
