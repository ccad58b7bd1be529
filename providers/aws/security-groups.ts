// Ingress rules on the nodes' security groups for a Network Load Balancer, as cloud-provider-aws
// writes them (pkg/providers/v1/aws_loadbalancer.go, updateInstanceSecurityGroupsForNLB): an NLB
// keeps the client's address, so the nodes' group must admit the clients on the NodePorts, and
// the load balancer's subnets on the health check ports. Rules carry upstream's descriptions —
// `kubernetes.io/rule/nlb/client=<lb>`, `kubernetes.io/rule/nlb/health=<lb>`, and
// `kubernetes.io/rule/nlb/mtu` for ICMP "fragmentation needed" from each client range — so rules
// cloud-provider-aws made are found as they are, and a rule is only ever removed when it carries
// one of those descriptions for this load balancer (or the MTU one, once no client rule needs it).
//
// A node's group is chosen as upstream chooses it (./ingress.ts, nodeGroupOf); the groups looked at
// are the cluster's (tagged `kubernetes.io/cluster/<id>`) in the VPC, the nodes', and any holding a
// rule of this load balancer's. Rules are compared as upstream compares them: protocol, ports and
// source, whatever the description, so a rule someone else wrote that admits the same traffic is
// left as it is and not doubled.

import { DescribeSecurityGroupsCommand, DescribeSubnetsCommand, type SecurityGroup } from '@aws-sdk/client-ec2';
import type { LoadBalancer as Nlb } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Service } from '@kubernetes/client-node';
import { abortable, required, type AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import type { ServiceWarnings } from './events.ts';
import { changeIngress, instancesOf, nodeGroupOf, sameTraffic, ungroup, type Rule } from './ingress.ts';
import type { AwsInstances } from './instances.ts';
import type { NlbPlan, PortMapping } from './nlb-plan.ts';
import { EVERYONE, SOURCE_RANGES_ANNOTATION } from './source-ranges.ts';
import { clusterTagKey, hasClusterTag } from './tags.ts';

export const NLB_CLIENT_RULE = 'kubernetes.io/rule/nlb/client';
export const NLB_HEALTH_RULE = 'kubernetes.io/rule/nlb/health';
export const NLB_MTU_RULE = 'kubernetes.io/rule/nlb/mtu';

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
    const groups = await this.#vpcGroups(signal);
    let nodeGroups = new Set<string>();
    let wanted = NONE;
    if (ingress !== undefined) {
      nodeGroups = await this.#nodeGroups(ingress.instanceIds, groups, signal);
      wanted = wantedRules(name, ingress, await this.#subnetCidrs(ingress.subnetIds, signal));
    }
    for (const group of groups) {
      const id = required(group.GroupId, 'a GroupId in DescribeSecurityGroups');
      const current = { id, rules: ungroup(group.IpPermissions ?? []) };
      // The cluster's groups, a node's (untagged) group, and any group with a rule of this load balancer's.
      if (!hasClusterTag(group.Tags, this.#config.clusterId) && !nodeGroups.has(id) && !hasRulesOf(name, current.rules))
        continue;
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
    await changeIngress(this.#api, { kind: 'revoke', groupId, rules: revoke }, signal);
    for (const r of revoke) current.splice(current.indexOf(r), 1);
    await changeIngress(this.#api, { kind: 'grant', groupId, rules: grant }, signal);
    current.push(...grant);
    return revoke.length + grant.length > 0;
  }

  /** The VPC's security groups. */
  async #vpcGroups(signal: AbortSignal | undefined): Promise<SecurityGroup[]> {
    const out = await this.#api.ec2.send(
      new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'vpc-id', Values: [this.#config.vpc] }] }),
      abortable(signal),
    );
    return out.SecurityGroups ?? [];
  }

  /** The node group of each target instance (./ingress.ts, nodeGroupOf). */
  async #nodeGroups(
    instanceIds: readonly string[],
    groups: readonly SecurityGroup[],
    signal: AbortSignal | undefined,
  ): Promise<Set<string>> {
    const tagged = new Set(
      groups.filter((g) => hasClusterTag(g.Tags, this.#config.clusterId)).map((g) => g.GroupId ?? ''),
    );
    const key = clusterTagKey(this.#config.clusterId);
    const found = new Set<string>();
    for (const instance of await instancesOf(this.#instances, instanceIds, signal)) {
      const group = nodeGroupOf(instance, tagged, key);
      if (group !== undefined) found.add(group);
    }
    return found;
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
    [...ports].flatMap((port) =>
      cidrs.map((source) => ({ protocol: proto, from: port, to: port, source, description })),
    );
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
  const cidrs = new Set(current.filter((r) => r.description.includes(NLB_CLIENT_RULE)).map((r) => r.source));
  return [...cidrs].map((source) => ({ protocol: 'icmp', from: 3, to: 4, source, description: NLB_MTU_RULE }));
}

/** Whether `rules` hold a client or health rule of load balancer `name`. */
function hasRulesOf(name: string, rules: readonly Rule[]): boolean {
  const mine = [`${NLB_CLIENT_RULE}=${name}`, `${NLB_HEALTH_RULE}=${name}`];
  return rules.some((r) => mine.includes(r.description));
}

function sameSet(a: ReadonlySet<number>, b: ReadonlySet<number>): boolean {
  return a.size === b.size && [...a].every((x) => b.has(x));
}
