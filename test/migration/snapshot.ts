// What a cluster's move between CCMs must keep: the cloud side (load balancers of both kinds, their
// listeners, target groups, registered instances, security groups and their rules, routes) and the
// cluster side (each Service's status.loadBalancer, each Node's cloud-set fields), as one flat map
// from a readable key to a canonical value, so that two snapshots diff line by line.

import { DescribeRouteTablesCommand, DescribeSecurityGroupsCommand, type IpPermission } from '@aws-sdk/client-ec2';
import {
  DescribeListenersCommand,
  DescribeLoadBalancerAttributesCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupAttributesCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  type LoadBalancer,
  type TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { CoreV1Api, V1Node } from '@kubernetes/client-node';
import type { AwsWorld } from '../harness/aws.ts';
import { classicLoadBalancers, field, members, text, type Xml } from './classic-elb.ts';

/** Key → canonical JSON. Keys: `<kind> <name>[ <part>]`. */
export type Snapshot = ReadonlyMap<string, string>;

/** What the snapshot reads on the cluster side. */
export interface ClusterSide {
  readonly core: CoreV1Api;
  readonly namespace: string;
}

export async function takeSnapshot(world: AwsWorld, cluster: ClusterSide): Promise<Snapshot> {
  const entries = new Map<string, unknown>();
  const parts = await Promise.all([
    classicEntries(world),
    elbv2Entries(world),
    securityGroupEntries(world),
    routeEntries(world),
    serviceEntries(cluster),
    nodeEntries(cluster.core),
  ]);
  for (const part of parts) for (const [key, value] of part) entries.set(key, value);
  return new Map([...entries].sort(([a], [b]) => a.localeCompare(b)).map(([key, value]) => [key, canonical(value)]));
}

/**
 * One line per difference: `- key: before`, `+ key: after`, or, for a changed value, one
 * `~ key .field: before → after` per field that differs (the whole value when it is not an object).
 */
export function diffSnapshots(
  before: Snapshot,
  after: Snapshot,
  keep: (key: string) => boolean = () => true,
): string[] {
  const keys = [...new Set([...before.keys(), ...after.keys()])].filter(keep).sort();
  return keys.flatMap((key) => {
    const [a, b] = [before.get(key), after.get(key)];
    if (a === b) return [];
    if (b === undefined) return [`- ${key}: ${a}`];
    if (a === undefined) return [`+ ${key}: ${b}`];
    return changedFields(JSON.parse(a), JSON.parse(b)).map(([field, x, y]) => `~ ${key}${field}: ${x} → ${y}`);
  });
}

function changedFields(a: unknown, b: unknown): [string, string, string][] {
  const isRecord = (v: unknown): v is Record<string, unknown> =>
    v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!isRecord(a) || !isRecord(b)) return [['', canonical(a), canonical(b)]];
  const fields = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return fields
    .map((f): [string, string, string] => [` .${f}`, shown(a[f]), shown(b[f])])
    .filter(([, x, y]) => x !== y);
}

/** `snapshot` without the entries `drop` names and with `instanceId` left out of every registration list. */
export function without(snapshot: Snapshot, drop: (key: string) => boolean, instanceId: string): Snapshot {
  const kept = [...snapshot].filter(([key]) => !drop(key));
  return new Map(
    kept.map(([key, value]) => {
      if (!key.endsWith(' instances') && !key.endsWith(' targets')) return [key, value];
      const list = (JSON.parse(value) as string[]).filter((id) => id.split(':')[0] !== instanceId);
      return [key, canonical(list)];
    }),
  );
}

const shown = (value: unknown): string => (value === undefined ? 'absent' : canonical(value));

/** JSON with object keys sorted, so equal values print equal. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
}

type Entries = [string, unknown][];

async function classicEntries(world: AwsWorld): Promise<Entries> {
  return (await classicLoadBalancers(world)).flatMap(({ name, description, attributes, policies, tags }) => {
    const d = description as Record<string, Xml>;
    const listeners = members(field(d, 'ListenerDescriptions')).map((l) => ({
      ...(field(l, 'Listener') as object),
      policies: members(field(l, 'PolicyNames')).map(text).sort(),
    }));
    const backends = members(field(d, 'BackendServerDescriptions'));
    const instances = members(field(d, 'Instances')).map((i) => text(field(i, 'InstanceId')));
    const settings = {
      dnsName: d['DNSName'],
      scheme: d['Scheme'],
      subnets: members(field(d, 'Subnets')).map(text).sort(),
      securityGroups: members(field(d, 'SecurityGroups')).map(text).sort(),
      sourceSecurityGroup: d['SourceSecurityGroup'],
      healthCheck: d['HealthCheck'],
      backends,
      attributes,
      tags: members(tags)
        .map((t) => `${text(field(t, 'Key'))}=${text(field(t, 'Value'))}`)
        .sort(),
    };
    const policyEntries: Entries = members(policies).map((p) => [
      `classic-elb ${name} policy ${text(field(p, 'PolicyName'))}`,
      p,
    ]);
    return [
      [`classic-elb ${name}`, settings],
      [`classic-elb ${name} listeners`, listeners],
      [`classic-elb ${name} instances`, instances.sort()],
      ...policyEntries,
    ];
  });
}

async function elbv2Entries(world: AwsWorld): Promise<Entries> {
  const all = (await world.elbv2.send(new DescribeLoadBalancersCommand({}))).LoadBalancers ?? [];
  const ours = all.filter((lb) => lb.VpcId === world.vpcId);
  const groups = ((await world.elbv2.send(new DescribeTargetGroupsCommand({}))).TargetGroups ?? []).filter(
    (g) => g.VpcId === world.vpcId,
  );
  const names = new Map(ours.map((lb) => [lb.LoadBalancerArn ?? '', lb.LoadBalancerName ?? '']));
  const groupNames = new Map(groups.map((g) => [g.TargetGroupArn ?? '', g.TargetGroupName ?? '']));
  const perBalancer = await Promise.all(ours.map((lb) => balancerEntries(world, lb, groupNames)));
  const perGroup = await Promise.all(groups.map((g) => targetGroupEntries(world, g, names)));
  return [...perBalancer.flat(), ...perGroup.flat()];
}

async function balancerEntries(world: AwsWorld, lb: LoadBalancer, groupNames: Map<string, string>): Promise<Entries> {
  const arn = lb.LoadBalancerArn ?? '';
  const name = `${lb.Type ?? ''} ${lb.LoadBalancerName ?? ''}`;
  const [listeners, attributes, tags] = await Promise.all([
    world.elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: arn })),
    world.elbv2.send(new DescribeLoadBalancerAttributesCommand({ LoadBalancerArn: arn })),
    world.elbv2.send(new DescribeTagsCommand({ ResourceArns: [arn] })),
  ]);
  const settings = {
    ...balancerSettings(lb),
    attributes: attributeList(attributes.Attributes),
    tags: tagList(tags.TagDescriptions?.[0]?.Tags),
  };
  const listenerEntries: Entries = (listeners.Listeners ?? []).map((l) => [
    `${name} listener ${l.Port ?? ''}`,
    {
      protocol: l.Protocol,
      certificates: (l.Certificates ?? []).map((c) => c.CertificateArn),
      sslPolicy: l.SslPolicy,
      alpn: l.AlpnPolicy,
      forwardTo: (l.DefaultActions ?? []).map((a) => `${a.Type ?? ''}:${groupNames.get(a.TargetGroupArn ?? '') ?? ''}`),
    },
  ]);
  return [[name, settings], ...listenerEntries];
}

function balancerSettings(lb: LoadBalancer): Record<string, unknown> {
  const zones = lb.AvailabilityZones ?? [];
  return {
    dnsName: lb.DNSName,
    scheme: lb.Scheme,
    ipAddressType: lb.IpAddressType,
    subnets: zones.map((z) => z.SubnetId).sort(),
    addresses: zones.flatMap((z) => z.LoadBalancerAddresses ?? []),
    securityGroups: [...(lb.SecurityGroups ?? [])].sort(),
  };
}

function attributeList(attributes: readonly { Key?: string | undefined; Value?: string | undefined }[] | undefined) {
  return (attributes ?? []).map((a) => `${a.Key ?? ''}=${a.Value ?? ''}`).sort();
}

async function targetGroupEntries(world: AwsWorld, g: TargetGroup, balancers: Map<string, string>): Promise<Entries> {
  const arn = g.TargetGroupArn ?? '';
  const [health, attributes, tags] = await Promise.all([
    world.elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: arn })),
    world.elbv2.send(new DescribeTargetGroupAttributesCommand({ TargetGroupArn: arn })),
    world.elbv2.send(new DescribeTagsCommand({ ResourceArns: [arn] })),
  ]);
  const name = `target-group ${g.TargetGroupName ?? ''}`;
  const settings = {
    protocol: g.Protocol,
    port: g.Port,
    targetType: g.TargetType,
    loadBalancers: (g.LoadBalancerArns ?? []).map((a) => balancers.get(a) ?? a).sort(),
    healthCheck: {
      protocol: g.HealthCheckProtocol,
      port: g.HealthCheckPort,
      path: g.HealthCheckPath,
      interval: g.HealthCheckIntervalSeconds,
      timeout: g.HealthCheckTimeoutSeconds,
      healthy: g.HealthyThresholdCount,
      unhealthy: g.UnhealthyThresholdCount,
      matcher: g.Matcher?.HttpCode,
    },
    attributes: attributeList(attributes.Attributes),
    tags: tagList(tags.TagDescriptions?.[0]?.Tags),
  };
  const targets = (health.TargetHealthDescriptions ?? []).map((t) => `${t.Target?.Id ?? ''}:${t.Target?.Port ?? ''}`);
  return [
    [name, settings],
    [`${name} targets`, targets.sort()],
  ];
}

function tagList(tags: readonly { Key?: string | undefined; Value?: string | undefined }[] | undefined): string[] {
  return (tags ?? []).map((t) => `${t.Key ?? ''}=${t.Value ?? ''}`).sort();
}

// Every group of the VPC, and each of its rules as one entry: `<protocol> <ports> from <source>`,
// valued by the descriptions it carries (two entries' worth of one rule shows as two descriptions).
async function securityGroupEntries(world: AwsWorld): Promise<Entries> {
  const filter = { Filters: [{ Name: 'vpc-id', Values: [world.vpcId] }] };
  const groups = (await world.ec2.send(new DescribeSecurityGroupsCommand(filter))).SecurityGroups ?? [];
  return groups.flatMap((g) => {
    const name = `security-group ${g.GroupId ?? ''} (${g.GroupName ?? ''})`;
    const rules = new Map<string, string[]>();
    const add = (direction: string, permissions: IpPermission[] | undefined): void => {
      for (const [rule, description] of ruleLines(permissions ?? [])) {
        const key = `${name} ${direction} ${rule}`;
        rules.set(key, [...(rules.get(key) ?? []), description].sort());
      }
    };
    add('ingress', g.IpPermissions);
    add('egress', g.IpPermissionsEgress);
    return [[name, { description: g.Description, tags: tagList(g.Tags) }] as [string, unknown], ...rules];
  });
}

function ruleLines(permissions: readonly IpPermission[]): [string, string][] {
  return permissions.flatMap((p) => {
    const ports = `${p.IpProtocol ?? ''} ${p.FromPort ?? ''}-${p.ToPort ?? ''}`;
    return [
      ...(p.IpRanges ?? []).map((r) => [`${ports} from ${r.CidrIp ?? ''}`, r.Description ?? ''] as [string, string]),
      ...(p.Ipv6Ranges ?? []).map(
        (r) => [`${ports} from ${r.CidrIpv6 ?? ''}`, r.Description ?? ''] as [string, string],
      ),
      ...(p.UserIdGroupPairs ?? []).map(
        (r) => [`${ports} from ${r.GroupId ?? ''}`, r.Description ?? ''] as [string, string],
      ),
      ...(p.PrefixListIds ?? []).map(
        (r) => [`${ports} from ${r.PrefixListId ?? ''}`, r.Description ?? ''] as [string, string],
      ),
    ];
  });
}

async function routeEntries(world: AwsWorld): Promise<Entries> {
  const table = await world.ec2.send(new DescribeRouteTablesCommand({ RouteTableIds: [world.routeTableId] }));
  return (table.RouteTables?.[0]?.Routes ?? [])
    .filter((r) => r.InstanceId !== undefined)
    .map((r) => [`route ${r.DestinationCidrBlock ?? ''}`, r.InstanceId]);
}

async function serviceEntries({ core, namespace }: ClusterSide): Promise<Entries> {
  const services = (await core.listNamespacedService({ namespace })).items;
  return services
    .filter((s) => s.spec?.type === 'LoadBalancer')
    .map((s) => [`service ${s.metadata?.name ?? ''} status.loadBalancer`, s.status?.loadBalancer ?? {}]);
}

async function nodeEntries(core: CoreV1Api): Promise<Entries> {
  return (await core.listNode()).items.map((n) => [`node ${n.metadata?.name ?? ''}`, nodeFields(n)]);
}

/** What a CCM writes on a Node. */
export interface NodeFields {
  readonly providerID: string | undefined;
  readonly labels: Readonly<Record<string, string>>;
  /** `<type>=<address>`, sorted. */
  readonly addresses: readonly string[];
  /** The keys of its taints but those the API server's admission adds. */
  readonly taints: readonly string[];
  /** `<status>/<reason>` of the condition, when there is one. */
  readonly networkUnavailable: string | undefined;
}

/** What a CCM writes on a Node: the provider ID, labels, addresses, its taints and NetworkUnavailable. */
export function nodeFields(node: V1Node): NodeFields {
  const { metadata = {}, spec = {}, status = {} } = node;
  const networkUnavailable = status.conditions?.find((c) => c.type === 'NetworkUnavailable');
  return {
    providerID: spec.providerID,
    labels: metadata.labels ?? {},
    addresses: (status.addresses ?? []).map((a) => `${a.type}=${a.address}`).sort(),
    taints: (spec.taints ?? []).filter((t) => !t.key.startsWith('node.kubernetes.io/')).map((t) => t.key),
    networkUnavailable: networkUnavailable && `${networkUnavailable.status}/${networkUnavailable.reason ?? ''}`,
  };
}
