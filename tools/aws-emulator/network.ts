// The network of a cluster world: a VPC with a /16 of its own, an internet gateway, two public
// subnets and one private one (tagged with the cluster and the load balancer roles), the public
// route table, the cluster's route table, and the nodes' security group.

import { randomInt } from 'node:crypto';
import {
  AssociateRouteTableCommand,
  AttachInternetGatewayCommand,
  CreateInternetGatewayCommand,
  CreateRouteCommand,
  CreateRouteTableCommand,
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DeleteVpcCommand,
  DescribeAvailabilityZonesCommand,
  DescribeVpcsCommand,
  type EC2Client,
  type ResourceType,
  type Tag,
} from '@aws-sdk/client-ec2';
import { step } from './env.ts';

/** Second octets left out of the VPC choice: 10.96.0.0/12 (Services) and 10.244.0.0/16 (pods), the usual cluster ranges. */
const reservedOctets = new Set([...Array.from({ length: 16 }, (_, i) => 96 + i), 244]);

export interface WorldSubnet {
  readonly id: string;
  readonly az: string;
  readonly cidr: string;
}

export interface Network {
  readonly vpcId: string;
  readonly vpcCidr: string;
  readonly internetGatewayId: string;
  readonly publicSubnets: WorldSubnet[];
  readonly privateSubnets: WorldSubnet[];
  readonly routeTableId: string;
  readonly publicRouteTableId: string;
  readonly securityGroupId: string;
}

export async function buildNetwork(ec2: EC2Client, clusterId: string): Promise<Network> {
  const owned = { [`kubernetes.io/cluster/${clusterId}`]: 'owned' };
  const [zoneA, zoneB] = await zones(ec2);
  const { vpcId, octet } = await createVpc(ec2, { ...owned, Name: `cirrus-${clusterId}` });
  const vpcCidr = `10.${octet}.0.0/16`;
  const igw = await step(
    'CreateInternetGateway',
    ec2.send(
      new CreateInternetGatewayCommand({
        TagSpecifications: tagged('internet-gateway', { Name: `cirrus-${clusterId}` }),
      }),
    ),
  );
  const internetGatewayId = must(igw.InternetGateway?.InternetGatewayId, 'CreateInternetGateway: no ID');
  await step(
    'AttachInternetGateway',
    ec2.send(new AttachInternetGatewayCommand({ InternetGatewayId: internetGatewayId, VpcId: vpcId })),
  );
  const subnet = (cidr: string, az: string, tags: Record<string, string>): Promise<WorldSubnet> =>
    createSubnet(ec2, vpcId, { cidr, az }, { ...owned, ...tags });
  const publicSubnets = await Promise.all([
    subnet(`10.${octet}.1.0/24`, zoneA, { 'kubernetes.io/role/elb': '1', Name: `${clusterId}-public-${zoneA}` }),
    subnet(`10.${octet}.2.0/24`, zoneB, { 'kubernetes.io/role/elb': '1', Name: `${clusterId}-public-${zoneB}` }),
  ]);
  const privateSubnets = [
    await subnet(`10.${octet}.128.0/24`, zoneA, {
      'kubernetes.io/role/internal-elb': '1',
      Name: `${clusterId}-private-${zoneA}`,
    }),
  ];
  const publicRouteTableId = await createRouteTable(ec2, vpcId, { Name: `${clusterId}-public` });
  await step(
    'CreateRoute',
    ec2.send(
      new CreateRouteCommand({
        RouteTableId: publicRouteTableId,
        DestinationCidrBlock: '0.0.0.0/0',
        GatewayId: internetGatewayId,
      }),
    ),
  );
  const routeTableId = await createRouteTable(ec2, vpcId, { ...owned, Name: `${clusterId}-pods` });
  const associations = [
    ...publicSubnets.map((s) => ({ RouteTableId: publicRouteTableId, SubnetId: s.id })),
    ...privateSubnets.map((s) => ({ RouteTableId: routeTableId, SubnetId: s.id })),
  ];
  for (const association of associations)
    await step('AssociateRouteTable', ec2.send(new AssociateRouteTableCommand(association)));
  const group = await step(
    'CreateSecurityGroup',
    ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: `${clusterId}-nodes`,
        Description: `nodes of cluster ${clusterId}`,
        VpcId: vpcId,
        TagSpecifications: tagged('security-group', { ...owned, Name: `${clusterId}-nodes` }),
      }),
    ),
  );
  const securityGroupId = must(group.GroupId, 'CreateSecurityGroup: no ID');
  return {
    vpcId,
    vpcCidr,
    internetGatewayId,
    publicSubnets,
    privateSubnets,
    routeTableId,
    publicRouteTableId,
    securityGroupId,
  };
}

async function zones(ec2: EC2Client): Promise<[string, string]> {
  const answer = await step('DescribeAvailabilityZones', ec2.send(new DescribeAvailabilityZonesCommand({})));
  const names = (answer.AvailabilityZones ?? [])
    .filter((z) => z.State === 'available' && (z.ZoneType ?? 'availability-zone') === 'availability-zone')
    .map((z) => z.ZoneName)
    .filter((n): n is string => n !== undefined)
    .sort();
  const [a, b] = names;
  if (a === undefined || b === undefined)
    throw new Error(`createWorld: the region has ${names.length} availability zones, 2 are needed`);
  return [a, b];
}

// A VPC whose 10.<octet>.0.0/16 no other VPC in the region has. Two worlds created at the same
// moment may pick the same octet: each then sees the other's VPC, deletes its own and picks again.
async function createVpc(ec2: EC2Client, tags: Record<string, string>): Promise<{ vpcId: string; octet: number }> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const octet = pickOctet(await vpcCidrs(ec2));
    const cidr = `10.${octet}.0.0/16`;
    const created = await step(
      'CreateVpc',
      ec2.send(new CreateVpcCommand({ CidrBlock: cidr, TagSpecifications: tagged('vpc', tags) })),
    );
    const vpcId = must(created.Vpc?.VpcId, 'CreateVpc: no ID');
    if ((await vpcCidrs(ec2)).filter((c) => c === cidr).length === 1) return { vpcId, octet };
    await step('DeleteVpc', ec2.send(new DeleteVpcCommand({ VpcId: vpcId })));
  }
  throw new Error('createWorld: no free 10.<n>.0.0/16 for a VPC after 5 attempts');
}

async function vpcCidrs(ec2: EC2Client): Promise<string[]> {
  const answer = await step('DescribeVpcs', ec2.send(new DescribeVpcsCommand({})));
  return (answer.Vpcs ?? []).map((v) => v.CidrBlock ?? '');
}

function pickOctet(taken: readonly string[]): number {
  const used = new Set(taken.map((cidr) => /^10\.(\d+)\./.exec(cidr)?.[1]).map(Number));
  const free = Array.from({ length: 254 }, (_, i) => i + 1).filter((n) => !used.has(n) && !reservedOctets.has(n));
  const octet = free[randomInt(free.length)];
  if (octet === undefined) throw new Error('createWorld: every 10.<n>.0.0/16 is taken by a VPC in this region');
  return octet;
}

async function createSubnet(
  ec2: EC2Client,
  vpcId: string,
  where: { cidr: string; az: string },
  tags: Record<string, string>,
): Promise<WorldSubnet> {
  const answer = await step(
    'CreateSubnet',
    ec2.send(
      new CreateSubnetCommand({
        VpcId: vpcId,
        CidrBlock: where.cidr,
        AvailabilityZone: where.az,
        TagSpecifications: tagged('subnet', tags),
      }),
    ),
  );
  return { id: must(answer.Subnet?.SubnetId, 'CreateSubnet: no ID'), az: where.az, cidr: where.cidr };
}

async function createRouteTable(ec2: EC2Client, vpcId: string, tags: Record<string, string>): Promise<string> {
  const answer = await step(
    'CreateRouteTable',
    ec2.send(new CreateRouteTableCommand({ VpcId: vpcId, TagSpecifications: tagged('route-table', tags) })),
  );
  return must(answer.RouteTable?.RouteTableId, 'CreateRouteTable: no ID');
}

export function tagged(
  resource: ResourceType,
  tags: Readonly<Record<string, string>>,
): { ResourceType: ResourceType; Tags: Tag[] }[] {
  return [{ ResourceType: resource, Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) }];
}

export function must<T>(value: T | undefined, message: string): T {
  if (value === undefined) throw new Error(`createWorld: ${message}`);
  return value;
}
