// A "cluster world" in the AWS emulator: the VPC, subnets, route tables and security group a
// cluster has on AWS, tagged as cloud-provider-aws expects, plus helpers to run, stop and terminate
// instances and to write the cloud-config a provider reads. Built through the AWS SDK, as a user's
// tooling would build it.
//
// Every world has a VPC of its own with a /16 no other VPC in the region has (10.<n>.0.0/16), so
// worlds built by parallel test files in one emulator never see each other's instances by VPC or
// cluster tag, and their instances' private DNS names (ip-10-<n>-….ec2.internal) never collide.
// moto keeps state per region and answers HTTP 500 to anything it does not implement (an action
// or a filter name; reference §6.2), so the clients make one attempt and this file filters only
// by what moto implements.

import { randomBytes, randomInt } from 'node:crypto';
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
  DescribeInstancesCommand,
  DescribeVpcsCommand,
  EC2Client,
  RunInstancesCommand,
  StartInstancesCommand,
  StopInstancesCommand,
  TerminateInstancesCommand,
  type _InstanceType,
  type Instance,
  type ResourceType,
  type RunInstancesCommandInput,
  type Tag,
} from '@aws-sdk/client-ec2';
import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';

/** moto accepts any key; these are the ones its docs and the SDK examples use. */
export const emulatorCredentials = { accessKeyId: 'testing', secretAccessKey: 'testing' } as const;
export const defaultRegion = 'us-east-1';
/** An Amazon Linux 2 image from moto's catalogue (moto accepts any ID; this one looks like a node's). */
const imageId = 'ami-04681a1dbd79675a5';
/** Second octets left out of the VPC choice: 10.96.0.0/12 (Services) and 10.244.0.0/16 (pods), the usual cluster ranges. */
const reservedOctets = new Set([...Array.from({ length: 16 }, (_, i) => 96 + i), 244]);

/** An EC2 and an ELBv2 client for the emulator, making one attempt per call (moto's 500s are not worth retrying). */
export function emulatorClients(
  endpoint: string,
  region: string,
): { ec2: EC2Client; elbv2: ElasticLoadBalancingV2Client } {
  const config = { endpoint, region, credentials: emulatorCredentials, maxAttempts: 1 };
  return { ec2: new EC2Client(config), elbv2: new ElasticLoadBalancingV2Client(config) };
}

/**
 * The environment that points the AWS SDK (and so the aws provider) at the emulator: the standard
 * variables, nothing cirrus-specific. Apply it with awsProcessEnv() to drop variables that would
 * override it (a profile, a web-identity role, service-specific endpoints).
 */
export function awsEnv(endpoint: string, region: string): Record<string, string> {
  return {
    AWS_ACCESS_KEY_ID: emulatorCredentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: emulatorCredentials.secretAccessKey,
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
    AWS_ENDPOINT_URL: endpoint,
    // No instance-metadata lookups (1 s timeouts) for a region or credentials the environment gives.
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

/** Variables of `base` that would win over awsEnv()'s or send the SDK elsewhere. */
const overriding = [
  'AWS_PROFILE',
  'AWS_SESSION_TOKEN',
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
  'AWS_IGNORE_CONFIGURED_ENDPOINT_URLS',
];

/** `base` (default process.env) with awsEnv() applied and the variables that would override it removed: a child process's env. */
export function awsProcessEnv(
  endpoint: string,
  region: string,
  base: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) {
    if (!overriding.includes(key) && !key.startsWith('AWS_ENDPOINT_URL_')) env[key] = value;
  }
  return { ...env, ...awsEnv(endpoint, region) };
}

/**
 * Makes the emulator load its EC2 and ELBv2 backends for `region` (moto loads them on first use:
 * ~1 s for EC2), so that second is not spent inside the first test that calls it.
 */
export async function warmEmulator(endpoint: string, region: string = defaultRegion): Promise<void> {
  const { ec2, elbv2 } = emulatorClients(endpoint, region);
  try {
    await step('DescribeAvailabilityZones', ec2.send(new DescribeAvailabilityZonesCommand({})));
    await step('DescribeLoadBalancers', elbv2.send(new DescribeLoadBalancersCommand({})));
  } finally {
    ec2.destroy();
    elbv2.destroy();
  }
}

export interface WorldOptions {
  /** The cluster ID: the `kubernetes.io/cluster/<id>` tag and the cloud-config's KubernetesClusterID. */
  readonly clusterId: string;
  /** Default us-east-1 (private DNS names `ip-….ec2.internal`; elsewhere `ip-….<region>.compute.internal`). */
  readonly region?: string;
}

export interface WorldSubnet {
  readonly id: string;
  readonly az: string;
  readonly cidr: string;
}

export interface RunInstanceOptions {
  /** The zone: the world's public subnet there (default the first public subnet's). */
  readonly az?: string;
  /** A subnet ID of the world (wins over `az`). */
  readonly subnet?: string;
  /** Extra tags; the cluster tag is added unless `clusterTag` is false. */
  readonly tags?: Readonly<Record<string, string>>;
  /** Tag the instance `kubernetes.io/cluster/<clusterId>=owned` (default true). */
  readonly clusterTag?: boolean;
  /** Default t3.medium. */
  readonly instanceType?: string;
  /** A public IP and DNS name (moto gives them only when asked, outside the default VPC). */
  readonly publicIp?: boolean;
}

export interface WorldInstance {
  readonly instanceId: string;
  readonly privateDnsName: string;
  readonly privateIp: string;
  readonly publicIp?: string;
  readonly publicDnsName?: string;
  readonly az: string;
  readonly subnetId: string;
  readonly instanceType: string;
  /** `pending`, `running`, `stopped`, `terminated`, … */
  readonly state: string;
  /** `aws:///<az>/<instance-id>`, as cloud-provider-aws writes it. */
  readonly providerId: string;
}

export interface ForeignLoadBalancer {
  readonly name: string;
  readonly arn: string;
  readonly dnsName: string;
  readonly targetGroupArn: string;
  readonly listenerArn: string;
  /** Whether the NLB, its target group and its listener all still exist. */
  exists(): Promise<boolean>;
}

/** One cluster's slice of the emulator. */
export interface AwsWorld {
  readonly endpoint: string;
  readonly region: string;
  readonly clusterId: string;
  /** `kubernetes.io/cluster/<clusterId>`. */
  readonly clusterTagKey: string;
  readonly vpcId: string;
  readonly vpcCidr: string;
  readonly internetGatewayId: string;
  /** Two, in two zones, routed to the internet gateway, tagged with the cluster and `kubernetes.io/role/elb`. */
  readonly publicSubnets: readonly WorldSubnet[];
  /** One, associated with the cluster's route table, tagged with the cluster and `kubernetes.io/role/internal-elb`. */
  readonly privateSubnets: readonly WorldSubnet[];
  /** The cluster's route table (pod routes): tagged with the cluster, named by the cloud-config's RouteTableID. */
  readonly routeTableId: string;
  /** The public subnets' table (0.0.0.0/0 → the internet gateway); no cluster tag. */
  readonly publicRouteTableId: string;
  /** The nodes' security group, tagged with the cluster (the group the upstream CCM opens NodePorts in). */
  readonly securityGroupId: string;
  readonly ec2: EC2Client;
  readonly elbv2: ElasticLoadBalancingV2Client;
  runInstance(options?: RunInstanceOptions): Promise<WorldInstance>;
  stopInstance(instanceId: string): Promise<void>;
  startInstance(instanceId: string): Promise<void>;
  terminateInstance(instanceId: string): Promise<void>;
  /** One instance as DescribeInstances reports it now. */
  describeInstance(instanceId: string): Promise<WorldInstance>;
  /** The instances in this world's VPC, terminated ones included. */
  instances(): Promise<WorldInstance[]>;
  /** cloud-provider-aws's INI cloud-config for this world; `extra` adds keys to [Global]. */
  cloudConfig(extra?: Readonly<Record<string, string>>): string;
  /** An NLB (with a target group and a listener) in this VPC without the cluster tag: a provider must never touch it. */
  createForeignLoadBalancer(name?: string): Promise<ForeignLoadBalancer>;
  /** Closes the clients' connections. */
  close(): void;
}

/** Builds a world (about 15 calls, ~0.1 s once the emulator's EC2 backend is loaded; the first EC2 call loads it in ~1 s). */
export async function createWorld(endpoint: string, options: WorldOptions): Promise<AwsWorld> {
  const region = options.region ?? defaultRegion;
  checkClusterId(options.clusterId);
  if (!/^[a-z]{2}(-[a-z]+)+-\d+$/.test(region))
    throw new Error(`createWorld: region "${region}" is not an AWS region name`);
  const { ec2, elbv2 } = emulatorClients(endpoint, region);
  const network = await buildNetwork(ec2, options.clusterId);
  return new World({ endpoint, region, clusterId: options.clusterId, ec2, elbv2, ...network });
}

function checkClusterId(clusterId: string): void {
  if (!/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(clusterId)) {
    throw new Error(
      `createWorld: cluster ID "${clusterId}" must be 1-63 letters, digits, "-", "_" or "." (it is part of a tag key)`,
    );
  }
}

interface Network {
  readonly vpcId: string;
  readonly vpcCidr: string;
  readonly internetGatewayId: string;
  readonly publicSubnets: WorldSubnet[];
  readonly privateSubnets: WorldSubnet[];
  readonly routeTableId: string;
  readonly publicRouteTableId: string;
  readonly securityGroupId: string;
}

async function buildNetwork(ec2: EC2Client, clusterId: string): Promise<Network> {
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

function tagged(
  resource: ResourceType,
  tags: Readonly<Record<string, string>>,
): { ResourceType: ResourceType; Tags: Tag[] }[] {
  return [{ ResourceType: resource, Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) }];
}

function must<T>(value: T | undefined, message: string): T {
  if (value === undefined) throw new Error(`createWorld: ${message}`);
  return value;
}

/** Runs one SDK call; a failure names the operation (moto's HTML 500s otherwise read as an XML parse error). */
async function step<T>(operation: string, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw new Error(`emulator: ${operation} failed: ${(error as Error).name}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

interface WorldState extends Network {
  readonly endpoint: string;
  readonly region: string;
  readonly clusterId: string;
  readonly ec2: EC2Client;
  readonly elbv2: ElasticLoadBalancingV2Client;
}

class World implements AwsWorld {
  readonly endpoint: string;
  readonly region: string;
  readonly clusterId: string;
  readonly clusterTagKey: string;
  readonly vpcId: string;
  readonly vpcCidr: string;
  readonly internetGatewayId: string;
  readonly publicSubnets: readonly WorldSubnet[];
  readonly privateSubnets: readonly WorldSubnet[];
  readonly routeTableId: string;
  readonly publicRouteTableId: string;
  readonly securityGroupId: string;
  readonly ec2: EC2Client;
  readonly elbv2: ElasticLoadBalancingV2Client;

  constructor(state: WorldState) {
    this.endpoint = state.endpoint;
    this.region = state.region;
    this.clusterId = state.clusterId;
    this.clusterTagKey = `kubernetes.io/cluster/${state.clusterId}`;
    this.ec2 = state.ec2;
    this.elbv2 = state.elbv2;
    this.vpcId = state.vpcId;
    this.vpcCidr = state.vpcCidr;
    this.internetGatewayId = state.internetGatewayId;
    this.publicSubnets = state.publicSubnets;
    this.privateSubnets = state.privateSubnets;
    this.routeTableId = state.routeTableId;
    this.publicRouteTableId = state.publicRouteTableId;
    this.securityGroupId = state.securityGroupId;
  }

  async runInstance(options: RunInstanceOptions = {}): Promise<WorldInstance> {
    const subnetId = this.subnetFor(options);
    const tags = { ...(options.clusterTag === false ? {} : { [this.clusterTagKey]: 'owned' }), ...options.tags };
    // moto reports an interface's groups on the interface only (AWS also on the instance, where
    // the upstream CCM looks): name them at both levels, which moto accepts (AWS would not).
    const placement: Partial<RunInstancesCommandInput> = options.publicIp
      ? {
          NetworkInterfaces: [{ DeviceIndex: 0, SubnetId: subnetId, AssociatePublicIpAddress: true }],
          SecurityGroupIds: [this.securityGroupId],
        }
      : { SubnetId: subnetId, SecurityGroupIds: [this.securityGroupId] };
    const answer = await step(
      'RunInstances',
      this.ec2.send(
        new RunInstancesCommand({
          ImageId: imageId,
          MinCount: 1,
          MaxCount: 1,
          InstanceType: (options.instanceType ?? 't3.medium') as _InstanceType,
          ...placement,
          ...(Object.keys(tags).length > 0 ? { TagSpecifications: tagged('instance', tags) } : {}),
        }),
      ),
    );
    const instanceId = must(answer.Instances?.[0]?.InstanceId, 'RunInstances: no instance ID');
    return this.describeInstance(instanceId);
  }

  private subnetFor(options: RunInstanceOptions): string {
    const subnets = [...this.publicSubnets, ...this.privateSubnets];
    if (options.subnet !== undefined) {
      const subnet = subnets.find((s) => s.id === options.subnet);
      if (subnet === undefined)
        throw new Error(
          `runInstance: subnet ${options.subnet} is not one of this world's (${subnets.map((s) => s.id).join(', ')})`,
        );
      if (options.az !== undefined && options.az !== subnet.az)
        throw new Error(`runInstance: subnet ${subnet.id} is in ${subnet.az}, not ${options.az}`);
      return subnet.id;
    }
    const az = options.az ?? (this.publicSubnets[0] as WorldSubnet).az;
    const subnet = this.publicSubnets.find((s) => s.az === az);
    if (subnet === undefined)
      throw new Error(
        `runInstance: this world has no public subnet in ${az} (zones: ${this.publicSubnets.map((s) => s.az).join(', ')})`,
      );
    return subnet.id;
  }

  async stopInstance(instanceId: string): Promise<void> {
    await step('StopInstances', this.ec2.send(new StopInstancesCommand({ InstanceIds: [instanceId] })));
  }

  async startInstance(instanceId: string): Promise<void> {
    await step('StartInstances', this.ec2.send(new StartInstancesCommand({ InstanceIds: [instanceId] })));
  }

  async terminateInstance(instanceId: string): Promise<void> {
    await step('TerminateInstances', this.ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] })));
  }

  async describeInstance(instanceId: string): Promise<WorldInstance> {
    const answer = await step(
      'DescribeInstances',
      this.ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] })),
    );
    const instance = answer.Reservations?.[0]?.Instances?.[0];
    if (instance === undefined) throw new Error(`describeInstance: ${instanceId} not found`);
    return worldInstance(instance);
  }

  async instances(): Promise<WorldInstance[]> {
    const filter = { Filters: [{ Name: 'vpc-id', Values: [this.vpcId] }] };
    const answer = await step('DescribeInstances', this.ec2.send(new DescribeInstancesCommand(filter)));
    return (answer.Reservations ?? []).flatMap((r) => r.Instances ?? []).map(worldInstance);
  }

  cloudConfig(extra: Readonly<Record<string, string>> = {}): string {
    const global: Record<string, string> = {
      Region: this.region,
      VPC: this.vpcId,
      SubnetID: (this.publicSubnets[0] as WorldSubnet).id,
      KubernetesClusterID: this.clusterId,
      RouteTableID: this.routeTableId,
      // cirrus does not edit the nodes' security groups and requires the file to say so (docs/providers/aws.md).
      DisableSecurityGroupIngress: 'true',
      // The suites written for NLBs keep them; Classic ELB suites pass DefaultLoadBalancerType = classic.
      DefaultLoadBalancerType: 'nlb',
      ...extra,
    };
    for (const [key, value] of Object.entries(global)) {
      if (!/^[A-Za-z][A-Za-z0-9]*$/.test(key)) throw new Error(`cloudConfig: "${key}" is not an INI key`);
      if (/[\r\n]/.test(value)) throw new Error(`cloudConfig: the value of ${key} spans lines`);
    }
    return ['[Global]', ...Object.entries(global).map(([key, value]) => `${key} = ${value}`), ''].join('\n');
  }

  async createForeignLoadBalancer(name = `foreign-${randomBytes(4).toString('hex')}`): Promise<ForeignLoadBalancer> {
    if (!/^[A-Za-z0-9]([-A-Za-z0-9]{0,25}[A-Za-z0-9])?$/.test(name))
      throw new Error(
        `createForeignLoadBalancer: "${name}" must be 1-27 letters, digits or "-" (its target group adds "-tg")`,
      );
    const elbv2 = this.elbv2;
    const lb = await step(
      'CreateLoadBalancer',
      elbv2.send(
        new CreateLoadBalancerCommand({
          Name: name,
          Type: 'network',
          Subnets: this.publicSubnets.map((s) => s.id),
          Tags: foreignTags,
        }),
      ),
    );
    const arn = must(lb.LoadBalancers?.[0]?.LoadBalancerArn, 'CreateLoadBalancer: no ARN');
    const dnsName = must(lb.LoadBalancers?.[0]?.DNSName, 'CreateLoadBalancer: no DNS name');
    const { targetGroupArn, listenerArn } = await forwardTo(elbv2, arn, { name: `${name}-tg`, vpcId: this.vpcId });
    return {
      name,
      arn,
      dnsName,
      targetGroupArn,
      listenerArn,
      exists: () => foreignExists(elbv2, { arn, targetGroupArn, listenerArn }),
    };
  }

  close(): void {
    this.ec2.destroy();
    this.elbv2.destroy();
  }
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

function worldInstance(instance: Instance): WorldInstance {
  const instanceId = text(instance.InstanceId);
  const az = text(instance.Placement?.AvailabilityZone);
  return {
    instanceId,
    privateDnsName: text(instance.PrivateDnsName),
    privateIp: text(instance.PrivateIpAddress),
    ...publicAddresses(instance),
    az,
    subnetId: text(instance.SubnetId),
    instanceType: text(instance.InstanceType),
    state: text(instance.State?.Name),
    providerId: `aws:///${az}/${instanceId}`,
  };
}

function publicAddresses(instance: Instance): { publicIp?: string; publicDnsName?: string } {
  return {
    ...(instance.PublicIpAddress ? { publicIp: instance.PublicIpAddress } : {}),
    ...(instance.PublicDnsName ? { publicDnsName: instance.PublicDnsName } : {}),
  };
}

function text(value: string | undefined): string {
  return value ?? '';
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
