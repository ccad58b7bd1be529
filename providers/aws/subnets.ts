// Which subnets a new load balancer goes in, chosen as cloud-provider-aws chooses them
// (pkg/providers/v1/aws.go, getLoadBalancerSubnets): the annotation's, or one per zone among the
// VPC's subnets that are this cluster's or no cluster's — public ones only for an internet-facing
// load balancer — preferring the role tag, then the cluster tag, then the lowest ID; else the
// cloud-config's SubnetID.

import { DescribeRouteTablesCommand, DescribeSubnetsCommand, type Subnet } from '@aws-sdk/client-ec2';
import { abortable, required, type AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import { ServiceSettingError, SubnetError } from './errors.ts';
import { ANNOTATION_PREFIX } from './annotations.ts';
import { hasClusterTag, LEGACY_CLUSTER_TAG, type Tag } from './tags.ts';

const SUBNETS_ANNOTATION = `${ANNOTATION_PREFIX}subnets`;
const CLUSTER_TAG_PREFIX = 'kubernetes.io/cluster/';

/** What the choice depends on, for either kind of load balancer. */
export interface SubnetChoice {
  readonly name: string;
  readonly internal: boolean;
  /** The subnets annotation's IDs or Name tags; undefined: discover. */
  readonly subnets: readonly string[] | undefined;
}

/** The subnet IDs for the load balancer `plan` describes. */
export async function loadBalancerSubnets(
  api: AwsApi,
  config: AwsConfig,
  plan: SubnetChoice,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const subnets = await vpcSubnets(api, config, signal);
  if (plan.subnets !== undefined) return namedSubnets(config, subnets, plan.subnets);
  const candidates = await candidateSubnets(api, config, { plan, subnets }, signal);
  const roleTag = plan.internal ? 'kubernetes.io/role/internal-elb' : 'kubernetes.io/role/elb';
  const chosen = onePerZone(candidates, roleTag, config.clusterId);
  if (chosen.length > 0) return chosen;
  if (config.subnetId !== undefined) return [config.subnetId];
  throw new SubnetError(
    `no ${plan.internal ? '' : 'public '}subnet in ${config.vpc} for load balancer ${plan.name}: tag subnets ${roleTag}, or name them with ${SUBNETS_ANNOTATION}`,
  );
}

async function vpcSubnets(api: AwsApi, config: AwsConfig, signal: AbortSignal | undefined): Promise<Subnet[]> {
  const out = await api.ec2.send(
    new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [config.vpc] }] }),
    abortable(signal),
  );
  return out.Subnets ?? [];
}

/** Whether the subnet is tagged for another cluster (and not for this one). */
function isOtherClusters(tags: readonly Tag[] | undefined, clusterId: string): boolean {
  return !hasClusterTag(tags, clusterId) && (tags ?? []).some((t) => t.Key?.startsWith(CLUSTER_TAG_PREFIX) === true);
}

/**
 * Whether a subnet named in the annotation is another cluster's: as above, or tagged with the legacy
 * `KubernetesCluster` for another cluster ID. Stricter than discovery, which (as upstream's
 * findSubnets and hasNoClusterPrefixTag) reads only the `kubernetes.io/cluster/` prefix: a Service's
 * owner chooses the named subnet, and a cluster whose ID came from KubernetesClusterTag tags its
 * subnets with that tag alone.
 */
function isNamedOtherClusters(tags: readonly Tag[] | undefined, clusterId: string): boolean {
  if (isOtherClusters(tags, clusterId)) return true;
  return (
    !hasClusterTag(tags, clusterId) && (tags ?? []).some((t) => t.Key === LEGACY_CLUSTER_TAG && t.Value !== clusterId)
  );
}

/** The VPC's subnets that are this cluster's or no cluster's; for an internet-facing one, only public ones. */
async function candidateSubnets(
  api: AwsApi,
  config: AwsConfig,
  given: { readonly plan: SubnetChoice; readonly subnets: readonly Subnet[] },
  signal: AbortSignal | undefined,
): Promise<Subnet[]> {
  const candidates = given.subnets.filter((s) => !isOtherClusters(s.Tags, config.clusterId));
  if (given.plan.internal || candidates.length === 0) return candidates;
  const publicIds = await publicSubnets(api, config, candidates, signal);
  return candidates.filter((s) => publicIds.has(subnetIdOf(s)));
}

/**
 * The annotation's subnets (IDs or Name tags) in the VPC. A subnet tagged for another cluster is
 * refused: a Service's owner must not place a load balancer in a subnet another cluster manages.
 */
function namedSubnets(config: AwsConfig, subnets: readonly Subnet[], names: readonly string[]): string[] {
  return names.map((name) => {
    const s = subnets.find((x) => x.SubnetId === name || x.Tags?.some((t) => t.Key === 'Name' && t.Value === name));
    if (s === undefined)
      throw new ServiceSettingError(SUBNETS_ANNOTATION, `no subnet "${name}" (an ID or Name tag) in ${config.vpc}`);
    if (isNamedOtherClusters(s.Tags, config.clusterId)) {
      throw new ServiceSettingError(
        SUBNETS_ANNOTATION,
        `subnet "${name}" (${subnetIdOf(s)}) is tagged for another cluster, not ${config.clusterId}`,
      );
    }
    return subnetIdOf(s);
  });
}

/** Subnets whose route table (their own, or the VPC's main one) has a route to an internet gateway. */
async function publicSubnets(
  api: AwsApi,
  config: AwsConfig,
  subnets: readonly Subnet[],
  signal: AbortSignal | undefined,
): Promise<Set<string>> {
  const out = await api.ec2.send(
    new DescribeRouteTablesCommand({ Filters: [{ Name: 'vpc-id', Values: [config.vpc] }] }),
    abortable(signal),
  );
  const tables = out.RouteTables ?? [];
  const isPublic = (t: (typeof tables)[number] | undefined): boolean =>
    (t?.Routes ?? []).some((r) => r.GatewayId?.startsWith('igw') === true);
  const main = tables.find((t) => t.Associations?.some((a) => a.Main === true));
  const result = new Set<string>();
  for (const s of subnets) {
    const own = tables.find((t) => t.Associations?.some((a) => a.SubnetId === s.SubnetId));
    if (isPublic(own ?? main)) result.add(subnetIdOf(s));
  }
  return result;
}

/** A subnet's preference for a zone: the role tag first, then the cluster tag, then the lowest ID. */
type Rank = readonly [number, number, string];

function compare(a: Rank, b: Rank): number {
  if (a[0] !== b[0]) return a[0] - b[0];
  if (a[1] !== b[1]) return a[1] - b[1];
  if (a[2] === b[2]) return 0;
  return a[2] < b[2] ? -1 : 1;
}

/** The best-ranked subnet of each zone, as sorted IDs. */
function onePerZone(candidates: readonly Subnet[], roleTag: string, clusterId: string): string[] {
  const rank = (s: Subnet): Rank => [
    (s.Tags ?? []).some((t) => t.Key === roleTag) ? 0 : 1,
    hasClusterTag(s.Tags, clusterId) ? 0 : 1,
    s.SubnetId ?? '',
  ];
  const byZone = new Map<string, Subnet>();
  for (const s of candidates) {
    const current = byZone.get(s.AvailabilityZone ?? '');
    if (current === undefined || compare(rank(s), rank(current)) < 0) byZone.set(s.AvailabilityZone ?? '', s);
  }
  return [...byZone.values()].map(subnetIdOf).sort();
}

function subnetIdOf(subnet: Subnet): string {
  return required(subnet.SubnetId, 'a SubnetId for a subnet of the VPC');
}
