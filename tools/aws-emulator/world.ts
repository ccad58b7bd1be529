// A "cluster world" in the AWS emulator: the VPC, subnets, route tables and security group a
// cluster has on AWS, tagged as cloud-provider-aws expects, plus helpers to run, stop and terminate
// instances and to write the cloud-config a provider reads. Built through the AWS SDK, as a user's
// tooling would build it.
//
// Every world has a VPC of its own with a /16 no other VPC in the region has (10.<n>.0.0/16), so
// worlds built by parallel test files in one emulator never see each other's instances by VPC or
// cluster tag, and their instances' private DNS names (ip-10-<n>-….ec2.internal) never collide.
// moto keeps state per region and answers HTTP 500 to anything it does not implement (an action
// or a filter name), so the clients make one attempt and this file filters only
// by what moto implements.

import {
  DescribeInstancesCommand,
  type EC2Client,
  RunInstancesCommand,
  StartInstancesCommand,
  StopInstancesCommand,
  TerminateInstancesCommand,
  type _InstanceType,
  type Instance,
  type RunInstancesCommandInput,
} from '@aws-sdk/client-ec2';
import type { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { defaultRegion, emulatorClients, step } from './env.ts';
import { createForeignLoadBalancer, type ForeignLoadBalancer } from './foreign.ts';
import { buildNetwork, must, tagged, type Network, type WorldSubnet } from './network.ts';

export { awsEnv, awsProcessEnv, defaultRegion, emulatorClients, emulatorCredentials, warmEmulator } from './env.ts';
export type { ForeignLoadBalancer } from './foreign.ts';
export type { WorldSubnet } from './network.ts';

/** An Amazon Linux 2 image from moto's catalogue (moto accepts any ID; this one looks like a node's). */
const imageId = 'ami-04681a1dbd79675a5';

export interface WorldOptions {
  /** The cluster ID: the `kubernetes.io/cluster/<id>` tag and the cloud-config's KubernetesClusterID. */
  readonly clusterId: string;
  /** Default us-east-1 (private DNS names `ip-….ec2.internal`; elsewhere `ip-….<region>.compute.internal`). */
  readonly region?: string;
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
  /** cloud-provider-aws's INI cloud-config for this world (node security groups managed, upstream's default); `extra` adds keys to [Global]. */
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
      // The suites written for NLBs keep them; Classic ELB suites pass DefaultLoadBalancerType = classic.
      // Security groups are managed, as upstream's default (DisableSecurityGroupIngress unset).
      DefaultLoadBalancerType: 'nlb',
      ...extra,
    };
    for (const [key, value] of Object.entries(global)) {
      if (!/^[A-Za-z][A-Za-z0-9]*$/.test(key)) throw new Error(`cloudConfig: "${key}" is not an INI key`);
      if (/[\r\n]/.test(value)) throw new Error(`cloudConfig: the value of ${key} spans lines`);
    }
    return ['[Global]', ...Object.entries(global).map(([key, value]) => `${key} = ${value}`), ''].join('\n');
  }

  createForeignLoadBalancer(name?: string): Promise<ForeignLoadBalancer> {
    return createForeignLoadBalancer(this.elbv2, this, name);
  }

  close(): void {
    this.ec2.destroy();
    this.elbv2.destroy();
  }
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
