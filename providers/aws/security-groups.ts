// Ingress rules on the nodes' security groups for a Network Load Balancer, as cloud-provider-aws
// writes them (pkg/providers/v1/aws_loadbalancer.go, updateInstanceSecurityGroupsForNLB): an NLB
// keeps the client's address, so the nodes' group must admit the clients on the NodePorts, and
// the load balancer's subnets on the health check ports. Rules carry upstream's descriptions —
// `kubernetes.io/rule/nlb/client=<lb>`, `kubernetes.io/rule/nlb/health=<lb>`, and
// `kubernetes.io/rule/nlb/mtu` for ICMP "fragmentation needed" from each client range — so rules
// cloud-provider-aws made are found as they are, and a rule is only ever removed when it carries
// one of those descriptions for this load balancer (or the MTU one, once no client rule needs it).
//
// The groups are those of the cluster (tagged `kubernetes.io/cluster/<id>`) in the VPC; a node's
// group is its one cluster-tagged group. Rules are compared as upstream compares them: protocol,
// ports and range, whatever the description, so a rule someone else wrote that admits the same
// traffic is left as it is and not doubled.

import {
  AuthorizeSecurityGroupIngressCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  RevokeSecurityGroupIngressCommand,
  type Instance,
  type IpPermission,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import { abortable, errorCode, ignoring, required, type AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import { SecurityGroupError } from './errors.ts';
import type { AwsInstances } from './instances.ts';
import type { LoadBalancer as Nlb } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Service } from '@kubernetes/client-node';
import type { ServiceWarnings } from './events.ts';
import type { NlbPlan, PortMapping } from './nlb-plan.ts';
import { EVERYONE, SOURCE_RANGES_ANNOTATION } from './source-ranges.ts';
import { clusterTagKey, hasClusterTag } from './tags.ts';

export const NLB_CLIENT_RULE = 'kubernetes.io/rule/nlb/client';
export const NLB_HEALTH_RULE = 'kubernetes.io/rule/nlb/health';
export const NLB_MTU_RULE = 'kubernetes.io/rule/nlb/mtu';

/** One ingress rule, ungrouped as upstream ungroups them: one protocol, port range and IPv4 range. */
interface Rule {
  readonly protocol: string;
  readonly from: number;
  readonly to: number;
  readonly cidr: string;
  readonly description: string;
}

/** What a load balancer needs admitted. */
export interface NlbIngress {
  /** The instances that are targets: their groups get the rules. */
  readonly instanceIds: readonly string[];
  /** The load balancer's subnets: health checks come from their ranges. */
  readonly subnetIds: readonly string[];
  readonly clientCidrs: readonly string[];
  readonly mappings: readonly PortMapping[];
}

/** A group's wanted rules for one load balancer; `health` undefined: leave its health rules as they are. */
interface Wanted {
  readonly client: readonly Rule[];
  readonly health: readonly Rule[] | undefined;
}

/** A group's ID and its rules as they are (kept up to date as rules are granted and revoked). */
interface GroupRules {
  readonly id: string;
  readonly rules: Rule[];
}

const NONE: Wanted = { client: [], health: [] };

export class NodeSecurityGroups {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;
  readonly #instances: AwsInstances;
  readonly #warnings: ServiceWarnings;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances, warnings: ServiceWarnings) {
    this.#api = api;
    this.#config = config;
    this.#instances = instances;
    this.#warnings = warnings;
  }

  /** The rules for `plan`'s load balancer `nlb` (after it, as upstream: they name its subnets); with DisableSecurityGroupIngress, a Warning for source ranges not enforced. */
  async ensureFor(service: V1Service, nlb: Nlb, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    if (this.#config.disableSecurityGroupIngress) {
      if (plan.sourceRanges.given)
        await this.#warnings.warn(
          service,
          'SourceRangesNotEnforced',
          `spec.loadBalancerSourceRanges / ${SOURCE_RANGES_ANNOTATION} (${plan.sourceRanges.cidrs.join(', ')}) are not enforced by cirrus: the cloud-config sets DisableSecurityGroupIngress, so the nodes' security groups are yours to restrict`,
        );
      return;
    }
    const subnetIds = (nlb.AvailabilityZones ?? []).flatMap((z) => (z.SubnetId === undefined ? [] : [z.SubnetId]));
    await this.sync(
      plan.name,
      { instanceIds: plan.targets, subnetIds, clientCidrs: plan.sourceRanges.cidrs, mappings: plan.mappings },
      signal,
    );
  }

  /** Brings load balancer `name`'s rules to `ingress`; undefined removes them all. Nothing when DisableSecurityGroupIngress. */
  async sync(name: string, ingress: NlbIngress | undefined, signal: AbortSignal | undefined): Promise<void> {
    if (this.#config.disableSecurityGroupIngress) return;
    const groups = await this.#clusterGroups(signal);
    let nodeGroups = new Set<string>();
    let wanted = NONE;
    if (ingress !== undefined) {
      nodeGroups = await this.#nodeGroups(ingress.instanceIds, groups, signal);
      wanted = wantedRules(name, ingress, await this.#subnetCidrs(ingress.subnetIds, signal));
    }
    for (const group of groups.values()) {
      const id = required(group.GroupId, 'a GroupId in DescribeSecurityGroups');
      const current = { id, rules: ungroup(group.IpPermissions ?? []) };
      await this.#syncGroup(current, nodeGroups.has(id) ? wanted : NONE, name, signal);
    }
  }

  async #syncGroup(group: GroupRules, wanted: Wanted, name: string, signal: AbortSignal | undefined): Promise<void> {
    let changed = false;
    if (wanted.health !== undefined)
      changed = await this.#syncDescribed(
        group,
        { description: `${NLB_HEALTH_RULE}=${name}`, rules: wanted.health },
        signal,
      );
    if (await this.#syncDescribed(group, { description: `${NLB_CLIENT_RULE}=${name}`, rules: wanted.client }, signal))
      changed = true;
    // As upstream: the MTU rules follow the client rules of every load balancer, when this one changed the group.
    if (changed) await this.#syncDescribed(group, { description: NLB_MTU_RULE, rules: mtuRules(group.rules) }, signal);
  }

  /**
   * Revokes the group's rules described `wanted.description` that are not wanted, then grants the
   * wanted ones the group lacks; `group.rules` is updated to match. Whether anything changed.
   */
  async #syncDescribed(
    group: GroupRules,
    wanted: { readonly description: string; readonly rules: readonly Rule[] },
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    const { id: groupId, rules: current } = group;
    const revoke = current.filter(
      (c) => c.description === wanted.description && !wanted.rules.some((w) => sameTraffic(c, w)),
    );
    const grant = wanted.rules.filter((w) => !current.some((c) => sameTraffic(c, w)));
    if (revoke.length > 0) {
      await this.#change('revoke', groupId, revoke, signal);
      for (const r of revoke) current.splice(current.indexOf(r), 1);
    }
    if (grant.length > 0) {
      await this.#change('grant', groupId, grant, signal);
      current.push(...grant);
    }
    return revoke.length + grant.length > 0;
  }

  /**
   * One Authorize/RevokeSecurityGroupIngress for `rules`. AWS refuses the whole call when one rule
   * is already there (or already gone) — another reconcile got there first (the MTU rules are
   * shared by every load balancer) — and then each rule is sent alone, that one counting as done.
   */
  async #change(
    kind: 'grant' | 'revoke',
    groupId: string,
    rules: readonly Rule[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const done = kind === 'grant' ? 'InvalidPermission.Duplicate' : 'InvalidPermission.NotFound';
    const send = (batch: readonly Rule[]): Promise<unknown> => {
      const input = { GroupId: groupId, IpPermissions: batch.map(permissionOf) };
      const command =
        kind === 'grant'
          ? new AuthorizeSecurityGroupIngressCommand(input)
          : new RevokeSecurityGroupIngressCommand(input);
      return this.#api.ec2.send(command, abortable(signal));
    };
    try {
      await send(rules);
    } catch (error) {
      if (errorCode(error) !== done) throw error;
      for (const rule of rules) await ignoring(done, () => send([rule]));
    }
  }

  /** The cluster's security groups in the VPC, by ID. */
  async #clusterGroups(signal: AbortSignal | undefined): Promise<Map<string, SecurityGroup>> {
    const out = await this.#api.ec2.send(
      new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'vpc-id', Values: [this.#config.vpc] }] }),
      abortable(signal),
    );
    const groups = (out.SecurityGroups ?? []).filter((g) => hasClusterTag(g.Tags, this.#config.clusterId));
    return new Map(groups.map((g) => [g.GroupId ?? '', g]));
  }

  /** The cluster group of each target instance (upstream's findSecurityGroupForInstance, without its untagged fallback). */
  async #nodeGroups(
    instanceIds: readonly string[],
    groups: ReadonlyMap<string, SecurityGroup>,
    signal: AbortSignal | undefined,
  ): Promise<Set<string>> {
    const instances = await Promise.all(
      instanceIds.map((id) => this.#instances.find({ spec: { providerID: id } }, signal)),
    );
    const found = new Set<string>();
    for (const instance of instances) {
      const group = instance === undefined ? undefined : this.#groupOf(instance, groups);
      if (group !== undefined) found.add(group);
    }
    return found;
  }

  #groupOf(instance: Instance, groups: ReadonlyMap<string, SecurityGroup>): string | undefined {
    const ids = (instance.SecurityGroups ?? []).flatMap((g) => (g.GroupId === undefined ? [] : [g.GroupId]));
    const tagged = ids.filter((id) => groups.has(id));
    const key = clusterTagKey(this.#config.clusterId);
    if (tagged.length > 1)
      throw new SecurityGroupError(
        `instance ${instance.InstanceId ?? ''} has ${tagged.length} security groups tagged ${key} (${tagged.join(', ')}): tag only the nodes' group`,
      );
    if (tagged.length === 0 && ids.length > 0)
      throw new SecurityGroupError(
        `instance ${instance.InstanceId ?? ''} has no security group tagged ${key} (${ids.join(', ')}): tag the nodes' group, or set DisableSecurityGroupIngress = true and admit the load balancers' traffic yourself`,
      );
    return tagged[0];
  }

  async #subnetCidrs(subnetIds: readonly string[], signal: AbortSignal | undefined): Promise<string[]> {
    if (subnetIds.length === 0) return [];
    const out = await this.#api.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [...subnetIds] }), abortable(signal));
    return (out.Subnets ?? []).map((s) => required(s.CidrBlock, `a CidrBlock for subnet ${s.SubnetId ?? ''}`));
  }
}

/** Upstream's rules for a load balancer: clients on the NodePorts, and the subnets on the health check ports. */
function wantedRules(name: string, ingress: NlbIngress, subnetCidrs: readonly string[]): Wanted {
  const clientPorts = new Set(ingress.mappings.map((m) => m.nodePort));
  const healthPorts = new Set(
    ingress.mappings.map((m) => (m.healthCheck.port === 'traffic-port' ? m.nodePort : Number(m.healthCheck.port))),
  );
  const protocol = ingress.mappings.some((m) => m.protocol === 'UDP') ? 'udp' : 'tcp';
  const rules = (proto: string, ports: ReadonlySet<number>, cidrs: readonly string[], description: string): Rule[] =>
    [...ports].flatMap((port) => cidrs.map((cidr) => ({ protocol: proto, from: port, to: port, cidr, description })));
  const client = rules(protocol, clientPorts, ingress.clientCidrs, `${NLB_CLIENT_RULE}=${name}`);
  // When clients are everyone over TCP on the very ports health checks use, the client rules admit those too.
  const covered =
    ingress.clientCidrs.length === 1 &&
    ingress.clientCidrs[0] === EVERYONE &&
    protocol === 'tcp' &&
    sameSet(healthPorts, clientPorts);
  const health = covered ? undefined : rules('tcp', healthPorts, subnetCidrs, `${NLB_HEALTH_RULE}=${name}`);
  return { client, health };
}

/** ICMP "fragmentation needed" (type 3, code 4) from every range a client rule of any load balancer admits. */
function mtuRules(current: readonly Rule[]): Rule[] {
  const cidrs = new Set(current.filter((r) => r.description.includes(NLB_CLIENT_RULE)).map((r) => r.cidr));
  return [...cidrs].map((cidr) => ({ protocol: 'icmp', from: 3, to: 4, cidr, description: NLB_MTU_RULE }));
}

function ungroup(permissions: readonly IpPermission[]): Rule[] {
  return permissions.flatMap((p) =>
    (p.IpRanges ?? []).map((r) => ({
      protocol: p.IpProtocol ?? '',
      from: p.FromPort ?? -1,
      to: p.ToPort ?? -1,
      cidr: r.CidrIp ?? '',
      description: r.Description ?? '',
    })),
  );
}

function permissionOf(rule: Rule): IpPermission {
  return {
    IpProtocol: rule.protocol,
    FromPort: rule.from,
    ToPort: rule.to,
    IpRanges: [{ CidrIp: rule.cidr, Description: rule.description }],
  };
}

function sameTraffic(a: Rule, b: Rule): boolean {
  return a.protocol === b.protocol && a.from === b.from && a.to === b.to && a.cidr === b.cidr;
}

function sameSet(a: ReadonlySet<number>, b: ReadonlySet<number>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}
