// Access to the run's AWS emulator (moto, started by test/global-setup.ts) from a test file, and a
// cluster world of the test's own in it (tools/aws-emulator/world.ts): parallel test files share
// the emulator, and worlds keep them apart (a VPC, subnets, route table and cluster ID each).

import { randomBytes } from 'node:crypto';
import { after, before, type TestContext } from 'node:test';
import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DescribeRouteTablesCommand,
} from '@aws-sdk/client-ec2';
import {
  ConfigureHealthCheckCommand,
  CreateLoadBalancerCommand,
  ElasticLoadBalancingClient,
  RegisterInstancesWithLoadBalancerCommand,
} from '@aws-sdk/client-elastic-load-balancing';
import {
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  type ElasticLoadBalancingV2Client,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { startCallCounter, type CallCounter } from '../../tools/aws-emulator/counter.ts';
import {
  awsEnv,
  awsProcessEnv,
  createWorld,
  defaultRegion,
  emulatorCredentials,
  type AwsWorld,
  type WorldInstance,
} from '../../tools/aws-emulator/world.ts';

export type { AwsWorld, WorldInstance } from '../../tools/aws-emulator/world.ts';

/**
 * False when the emulator runs; otherwise the reason the aws suites skip, for
 * `describe(name, { skip: awsEmulatorSkip }, …)` (as controlPlaneSkip in ./cluster.ts).
 */
export const awsEmulatorSkip: string | false =
  process.env['CIRRUS_TEST_AWS_ENDPOINT'] === undefined
    ? `no AWS emulator: ${process.env['CIRRUS_TEST_AWS_SKIP'] ?? 'run through npm test (test/global-setup.ts starts it)'}`
    : false;

/**
 * The emulator's endpoint; when there is none, skips `t` with the reason and returns undefined
 * (the test then returns: `const endpoint = awsEmulator(t); if (!endpoint) return;`).
 */
export function awsEmulator(t: TestContext): string | undefined {
  const endpoint = process.env['CIRRUS_TEST_AWS_ENDPOINT'];
  if (endpoint === undefined) t.skip(String(awsEmulatorSkip));
  return endpoint;
}

/** The emulator's endpoint; throws when there is none (guard suites with awsEmulatorSkip). */
export function requireAwsEmulator(): string {
  const endpoint = process.env['CIRRUS_TEST_AWS_ENDPOINT'];
  if (endpoint === undefined) throw new Error(String(awsEmulatorSkip));
  return endpoint;
}

/**
 * A world of `t`'s own, with a cluster ID no other test uses (`<name>-` and 8 hex digits), closed
 * after the test; undefined (and `t` skipped) when there is no emulator.
 */
export async function testWorld(t: TestContext, name: string, region?: string): Promise<AwsWorld | undefined> {
  const endpoint = awsEmulator(t);
  if (endpoint === undefined) return undefined;
  const world = await awsWorld(name, region);
  t.after(() => {
    world.close();
  });
  return world;
}

/** A world with a unique cluster ID, for a suite's `before` (the caller closes it); throws when there is no emulator. */
export function awsWorld(name: string, region: string = defaultRegion): Promise<AwsWorld> {
  const clusterId = `${name.replace(/[^-A-Za-z0-9]/g, '-').slice(0, 40)}-${randomBytes(4).toString('hex')}`;
  return createWorld(requireAwsEmulator(), { clusterId, region });
}

/**
 * The standard AWS SDK variables that point a provider at `world` (AWS_ENDPOINT_URL, AWS_REGION,
 * AWS_ACCESS_KEY_ID=testing, …), as a record to merge into a child process's env.
 */
export function awsTestEnv(world: Pick<AwsWorld, 'endpoint' | 'region'>): Record<string, string> {
  return awsEnv(world.endpoint, world.region);
}

/**
 * A whole env for a child process (default: this process's, with AWS_PROFILE, web-identity and
 * AWS_ENDPOINT_URL_* variables removed so they cannot win over the emulator).
 */
export function awsChildEnv(world: Pick<AwsWorld, 'endpoint' | 'region'>, base?: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return awsProcessEnv(world.endpoint, world.region, base);
}

/**
 * Points this process's AWS SDK clients at `world` (for a provider built in-process) until `t`
 * ends, then restores the environment as it was.
 */
export function useAwsEnv(t: Pick<TestContext, 'after'>, world: Pick<AwsWorld, 'endpoint' | 'region'>): void {
  const saved = { ...process.env };
  const wanted = awsProcessEnv(world.endpoint, world.region, process.env);
  for (const key of Object.keys(process.env)) if (!(key in wanted)) Reflect.deleteProperty(process.env, key);
  Object.assign(process.env, wanted);
  t.after(() => {
    for (const key of Object.keys(process.env)) if (!(key in saved)) Reflect.deleteProperty(process.env, key);
    Object.assign(process.env, saved);
  });
}

/** What a Classic ELB made the way kubernetes/cloud-provider-aws makes one is made of. */
export interface UpstreamClassicElb {
  /** The load balancer's name (`a` + the Service's UID without dashes, 32 characters). */
  readonly name: string;
  /** `<namespace>/<name>`, the `kubernetes.io/service-name` tag. */
  readonly serviceName: string;
  /** Its group's description (upstream's names the Service; the tests have used both forms). */
  readonly groupDescription: string;
  /** The listeners, TCP to TCP: the Service port and its NodePort. */
  readonly ports: readonly { readonly port: number; readonly nodePort: number }[];
  /** The instances registered. */
  readonly instanceIds: readonly string[];
}

/**
 * Makes a Classic ELB as cloud-provider-aws makes one for a Service without annotations
 * (pkg/providers/v1/aws_loadbalancer.go, ensureLoadBalancer, and aws.go, EnsureLoadBalancer): a
 * group of its own `k8s-elb-<name>` admitting 0.0.0.0/0 on the ports and ICMP 3-4, the load
 * balancer with the cluster's `owned` and the Service's name tags, its health check (TCP to the
 * first NodePort, 10 s, 5 s, 2, 6), a rule on the nodes' group from its group, the instances
 * registered. For the tests of adoption. Returns the load balancer's DNS name.
 */
export async function makeUpstreamClassicElb(
  world: AwsWorld,
  elb: ElasticLoadBalancingClient,
  spec: UpstreamClassicElb,
): Promise<string | undefined> {
  const { name, ports } = spec;
  const sg = await world.ec2.send(
    new CreateSecurityGroupCommand({
      GroupName: `k8s-elb-${name}`,
      Description: spec.groupDescription,
      VpcId: world.vpcId,
      TagSpecifications: [{ ResourceType: 'security-group', Tags: [{ Key: world.clusterTagKey, Value: 'owned' }] }],
    }),
  );
  const groupId = sg.GroupId ?? '';
  const open = (from: number, to: number, protocol = 'tcp') => ({
    IpProtocol: protocol,
    FromPort: from,
    ToPort: to,
    IpRanges: [{ CidrIp: '0.0.0.0/0' }],
  });
  await world.ec2.send(
    new AuthorizeSecurityGroupIngressCommand({
      GroupId: groupId,
      IpPermissions: [...ports.map((p) => open(p.port, p.port)), open(3, 4, 'icmp')],
    }),
  );
  const created = await elb.send(
    new CreateLoadBalancerCommand({
      LoadBalancerName: name,
      Listeners: ports.map((p) => ({
        Protocol: 'tcp',
        LoadBalancerPort: p.port,
        InstanceProtocol: 'tcp',
        InstancePort: p.nodePort,
      })),
      Subnets: world.publicSubnets.map((s) => s.id),
      SecurityGroups: [groupId],
      Tags: [
        { Key: 'kubernetes.io/service-name', Value: spec.serviceName },
        { Key: world.clusterTagKey, Value: 'owned' },
      ],
    }),
  );
  const target = `TCP:${ports[0]?.nodePort ?? 0}`;
  await elb.send(
    new ConfigureHealthCheckCommand({
      LoadBalancerName: name,
      HealthCheck: { Target: target, Interval: 10, Timeout: 5, HealthyThreshold: 2, UnhealthyThreshold: 6 },
    }),
  );
  await world.ec2.send(
    new AuthorizeSecurityGroupIngressCommand({
      GroupId: world.securityGroupId,
      IpPermissions: [{ IpProtocol: '-1', UserIdGroupPairs: [{ GroupId: groupId }] }],
    }),
  );
  await elb.send(
    new RegisterInstancesWithLoadBalancerCommand({
      LoadBalancerName: name,
      Instances: spec.instanceIds.map((InstanceId) => ({ InstanceId })),
    }),
  );
  return created.DNSName;
}

/** A world whose provider clients go through the emulator's call counter, and what tests use beside it. */
export interface CountedWorld {
  world: AwsWorld;
  /** Counts every call the provider sends (tools/aws-emulator/counter.ts). */
  counter: CallCounter;
  /** A Classic ELB client straight to the emulator, for making load balancers as another CCM would. */
  elb: ElasticLoadBalancingClient;
  /** Running instances, spread over the public subnets' zones. */
  readonly instances: WorldInstance[];
}

/**
 * A world of the test file's own, made in `before` and closed in `after` (as ownControlPlane in
 * ./cluster.ts): `count` running instances, and the environment set so that the provider's
 * clients go through a call counter — the file runs in a process of its own, so the environment
 * is the file's.
 */
export function countedWorld(name: string, count = 3): CountedWorld {
  const counted = { instances: [] as WorldInstance[] } as CountedWorld;
  before(async () => {
    counted.world = await awsWorld(name);
    const { world } = counted;
    counted.counter = await startCallCounter(world.endpoint);
    Object.assign(process.env, awsEnv(counted.counter.endpoint, world.region));
    counted.elb = new ElasticLoadBalancingClient({
      endpoint: world.endpoint,
      region: world.region,
      credentials: emulatorCredentials,
      maxAttempts: 1,
    });
    for (let i = 0; i < count; i += 1)
      counted.instances.push(await world.runInstance({ az: world.publicSubnets[i % 2]?.az ?? '' }));
  });
  after(async () => {
    (counted.elb as ElasticLoadBalancingClient | undefined)?.destroy();
    await (counted.counter as CallCounter | undefined)?.close();
    (counted.world as AwsWorld | undefined)?.close();
  });
  return counted;
}

/** The load balancer name upstream gives a Service (`a` + its UID without dashes, 32 characters). */
export const upstreamLoadBalancerName = (svc: V1Service): string =>
  `a${(svc.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);

/** A Node for an instance, named by its private DNS name. */
export const nodeOfInstance = (i: WorldInstance): V1Node => ({
  metadata: { name: i.privateDnsName, labels: {} },
  spec: { providerID: i.providerId },
});

/** The instance IDs registered in each target group of the NLB `loadBalancerArn`, each list sorted. */
export async function registeredTargets(
  elbv2: ElasticLoadBalancingV2Client,
  loadBalancerArn: string | undefined,
): Promise<string[][]> {
  const groups = (await elbv2.send(new DescribeTargetGroupsCommand({ LoadBalancerArn: loadBalancerArn }))).TargetGroups;
  return Promise.all(
    (groups ?? []).map(async (g) =>
      (
        (await elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: g.TargetGroupArn })))
          .TargetHealthDescriptions ?? []
      )
        .map((d) => d.Target?.Id ?? '')
        .sort(),
    ),
  );
}

/** The routes to instances in `world`'s route table, as `<destination CIDR>><instance ID>`, sorted. */
export async function instanceRoutes(world: Pick<AwsWorld, 'ec2' | 'routeTableId'>): Promise<string[]> {
  const table = await world.ec2.send(new DescribeRouteTablesCommand({ RouteTableIds: [world.routeTableId] }));
  return (table.RouteTables?.[0]?.Routes ?? [])
    .filter((r) => r.InstanceId !== undefined)
    .map((r) => `${r.DestinationCidrBlock}>${r.InstanceId}`)
    .sort();
}
