// A Classic ELB's security groups, as cloud-provider-aws manages them (pkg/providers/v1/aws.go,
// buildELBSecurityGroupList, ensureSecurityGroup, setSecurityGroupIngress and
// updateInstanceSecurityGroupsForLoadBalancer):
//   - the load balancer's own group `k8s-elb-<name>` in the VPC, tagged `kubernetes.io/cluster/<id>=owned`
//     (cirrus adds `kubernetes.io/service-name`), admitting exactly the Service's client ranges on its
//     ports (and ICMP "fragmentation needed", for path MTU discovery); or the cloud-config's
//     ElbSecurityGroup, shared by every Classic ELB and never edited;
//   - on each node's security group (the instance's group tagged with the cluster, else its only
//     one), a rule admitting everything from the load balancer's group; removed from cluster-tagged
//     groups no node needs any more, and from every group when the Service goes. Nothing is done on
//     the nodes' groups when DisableSecurityGroupIngress is set, as upstream.
// Only the load balancer's own group and rules naming it are ever changed: another group's rules
// are never touched, and a group not tagged as the cluster's own is never edited or deleted.

import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DeleteSecurityGroupCommand,
  DescribeSecurityGroupsCommand,
  RevokeSecurityGroupIngressCommand,
  type Instance,
  type IpPermission,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import { abortable, errorCode, required, type AwsApi } from '../api.ts';
import type { AwsConfig } from '../config.ts';
import { hasClusterTag, isOwned, ownedTags } from '../tags.ts';
import type { ClassicPlan } from './plan.ts';

/** A rule as one (protocol, ports, source) entry, the way upstream ungroups rules before comparing. */
type Entry = string;

export class ClassicSecurityGroups {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;

  constructor(api: AwsApi, config: AwsConfig) {
    this.#api = api;
    this.#config = config;
  }

  /** The configured shared group, if any: the load balancer then gets it and no group of its own. */
  get shared(): string | undefined {
    return this.#config.elbSecurityGroup;
  }

  /** The load balancer's own group, found by upstream's name in the VPC or created; its ingress made exact. */
  async ensureOwn(plan: ClassicPlan, signal: AbortSignal | undefined): Promise<string> {
    const [found] = await this.describeNamed(plan.securityGroupName, signal);
    if (found !== undefined) {
      this.#checkOwned(found, plan);
      await this.syncIngress(found, plan, signal);
      return groupIdOf(found);
    }
    const out = await this.#api.ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: plan.securityGroupName,
        Description: `Security group for Kubernetes ELB ${plan.name} (${plan.serviceName})`,
        VpcId: this.#config.vpc,
        TagSpecifications: [{ ResourceType: 'security-group', Tags: ownedTags(this.#config, plan.tags) }],
      }),
      abortable(signal),
    );
    const id = required(out.GroupId, `the GroupId of security group ${plan.securityGroupName}`);
    await this.#change(id, wantedIngress(plan), [], signal);
    return id;
  }

  /** The groups `ids` (one DescribeSecurityGroups). */
  async describe(ids: readonly string[], signal: AbortSignal | undefined): Promise<SecurityGroup[]> {
    if (ids.length === 0) return [];
    const out = await this.#api.ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [...ids] }), abortable(signal));
    return out.SecurityGroups ?? [];
  }

  /** Whether `group` is the load balancer's own: upstream's name and this cluster's `owned` tag. */
  isOwn(group: SecurityGroup, plan: Pick<ClassicPlan, 'securityGroupName'>): boolean {
    return group.GroupName === plan.securityGroupName && isOwned(group.Tags, this.#config.clusterId);
  }

  /** Makes the own group's ingress exactly the plan's: nothing when it already is. */
  async syncIngress(group: SecurityGroup, plan: ClassicPlan, signal: AbortSignal | undefined): Promise<void> {
    const actual = ungroup(group.IpPermissions ?? []);
    const wanted = new Set(wantedIngress(plan));
    await this.#change(
      groupIdOf(group),
      [...wanted].filter((e) => !actual.has(e)),
      [...actual.values()].filter((p) => !wanted.has(entryOf(p))),
      signal,
    );
  }

  /**
   * Admits the load balancer's group `source` on the nodes' groups of `instances`, and withdraws
   * it from cluster-tagged groups no node of them has. Nothing when DisableSecurityGroupIngress.
   */
  async syncNodeRules(source: string, instances: readonly Instance[], signal: AbortSignal | undefined): Promise<void> {
    if (this.#config.disableSecurityGroupIngress) return;
    const wanted = await this.#nodeGroups(instances, signal);
    const actual = await this.#referencing(source, signal);
    for (const id of wanted) {
      if (!actual.some((g) => g.GroupId === id)) await this.#admit(id, source, signal);
    }
    for (const group of actual) {
      if (!wanted.has(groupIdOf(group)) && hasClusterTag(group.Tags, this.#config.clusterId))
        await this.#withdraw(group, source, signal);
    }
  }

  /** Withdraws `source` from every group that admits it (the load balancer is going). */
  async removeNodeRules(source: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.#config.disableSecurityGroupIngress) return;
    for (const group of await this.#referencing(source, signal)) await this.#withdraw(group, source, signal);
  }

  /** Deletes the load balancer's own group; gone already is done. */
  async deleteOwn(id: string, signal: AbortSignal | undefined): Promise<void> {
    try {
      await this.#api.ec2.send(new DeleteSecurityGroupCommand({ GroupId: id }), abortable(signal));
    } catch (error) {
      if (errorCode(error) !== 'InvalidGroup.NotFound') throw error;
    }
  }

  /** The groups of the VPC named `name` (upstream's primary key for a group: name and VPC). */
  async describeNamed(name: string, signal: AbortSignal | undefined): Promise<SecurityGroup[]> {
    const out = await this.#api.ec2.send(
      new DescribeSecurityGroupsCommand({
        Filters: [
          { Name: 'group-name', Values: [name] },
          { Name: 'vpc-id', Values: [this.#config.vpc] },
        ],
      }),
      abortable(signal),
    );
    return out.SecurityGroups ?? [];
  }

  #checkOwned(group: SecurityGroup, plan: ClassicPlan): void {
    if (!this.isOwn(group, plan))
      throw new Error(
        `security group ${plan.securityGroupName} (${group.GroupId ?? ''}) exists but is not tagged as this cluster's own; cirrus will not use it for load balancer ${plan.name}`,
      );
  }

  /** Each instance's group as upstream picks it: the one tagged with the cluster, else its only one. */
  async #nodeGroups(instances: readonly Instance[], signal: AbortSignal | undefined): Promise<Set<string>> {
    const ids = [...new Set(instances.flatMap((i) => (i.SecurityGroups ?? []).map((g) => g.GroupId ?? '')))];
    const tagged = new Set(
      (
        await this.describe(
          ids.filter((id) => id !== ''),
          signal,
        )
      )
        .filter((g) => hasClusterTag(g.Tags, this.#config.clusterId))
        .map(groupIdOf),
    );
    const chosen = new Set<string>();
    for (const instance of instances) {
      const own = (instance.SecurityGroups ?? []).map((g) => g.GroupId ?? '').filter((id) => id !== '');
      const clusters = own.filter((id) => tagged.has(id));
      const pick = clusters.length > 0 ? clusters : own;
      if (pick.length > 1)
        throw new Error(
          `instance ${instance.InstanceId ?? ''} has ${pick.length} ${clusters.length > 0 ? 'cluster-tagged' : 'untagged'} security groups (${pick.join(', ')}); tag exactly one kubernetes.io/cluster/${this.#config.clusterId}`,
        );
      if (pick[0] !== undefined) chosen.add(pick[0]);
    }
    return chosen;
  }

  /** The groups with a rule naming `source`. */
  async #referencing(source: string, signal: AbortSignal | undefined): Promise<SecurityGroup[]> {
    const out = await this.#api.ec2.send(
      new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'ip-permission.group-id', Values: [source] }] }),
      abortable(signal),
    );
    return out.SecurityGroups ?? [];
  }

  async #admit(groupId: string, source: string, signal: AbortSignal | undefined): Promise<void> {
    await this.#api.ec2.send(
      new AuthorizeSecurityGroupIngressCommand({
        GroupId: groupId,
        IpPermissions: [{ IpProtocol: '-1', UserIdGroupPairs: [{ GroupId: source }] }],
      }),
      abortable(signal),
    );
  }

  /** Revokes the rules of `group` that name `source` (and only those). */
  async #withdraw(group: SecurityGroup, source: string, signal: AbortSignal | undefined): Promise<void> {
    const rules = (group.IpPermissions ?? [])
      .filter((p) => (p.UserIdGroupPairs ?? []).some((pair) => pair.GroupId === source))
      .map((p) => ({
        IpProtocol: p.IpProtocol,
        FromPort: p.FromPort,
        ToPort: p.ToPort,
        UserIdGroupPairs: [{ GroupId: source }],
      }));
    if (rules.length === 0) return;
    await this.#api.ec2.send(
      new RevokeSecurityGroupIngressCommand({ GroupId: groupIdOf(group), IpPermissions: rules }),
      abortable(signal),
    );
  }

  async #change(
    groupId: string,
    add: readonly Entry[],
    remove: readonly IpPermission[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (add.length > 0) {
      await this.#api.ec2.send(
        new AuthorizeSecurityGroupIngressCommand({ GroupId: groupId, IpPermissions: add.map(permissionOf) }),
        abortable(signal),
      );
    }
    if (remove.length > 0) {
      await this.#api.ec2.send(
        new RevokeSecurityGroupIngressCommand({ GroupId: groupId, IpPermissions: [...remove] }),
        abortable(signal),
      );
    }
  }
}

/** The own group's rules: TCP on each Service port and ICMP type 3 code 4, from each client range. */
export function wantedIngress(plan: Pick<ClassicPlan, 'ports' | 'sourceRanges'>): Entry[] {
  const entries: Entry[] = [];
  for (const cidr of plan.sourceRanges) {
    for (const port of plan.ports) entries.push(`tcp|${port}|${port}|${cidr}`);
    entries.push(`icmp|3|4|${cidr}`);
  }
  return entries;
}

function permissionOf(entry: Entry): IpPermission {
  const [protocol = '', from = '', to = '', cidr = ''] = entry.split('|');
  return { IpProtocol: protocol, FromPort: Number(from), ToPort: Number(to), IpRanges: [{ CidrIp: cidr }] };
}

function entryOf(p: IpPermission): Entry {
  const source = p.IpRanges?.[0]?.CidrIp ?? `other:${JSON.stringify(p)}`;
  return `${p.IpProtocol ?? ''}|${p.FromPort ?? ''}|${p.ToPort ?? ''}|${source}`;
}

/** Each rule as single-source permissions, by entry (sources other than IPv4 ranges kept whole). */
function ungroup(permissions: readonly IpPermission[]): Map<Entry, IpPermission> {
  const single = new Map<Entry, IpPermission>();
  for (const p of permissions) {
    const base = { IpProtocol: p.IpProtocol, FromPort: p.FromPort, ToPort: p.ToPort };
    for (const range of p.IpRanges ?? []) {
      const one: IpPermission = { ...base, IpRanges: [{ CidrIp: range.CidrIp }] };
      single.set(entryOf(one), one);
    }
    const others = nonRangeSources(p);
    if (others !== undefined) single.set(entryOf(others), others);
  }
  return single;
}

/** The part of a rule with sources other than IPv4 ranges (IPv6, groups, prefix lists), if any. */
function nonRangeSources(p: IpPermission): IpPermission | undefined {
  const sources = {
    ...(p.Ipv6Ranges?.length ? { Ipv6Ranges: p.Ipv6Ranges } : {}),
    ...(p.UserIdGroupPairs?.length ? { UserIdGroupPairs: p.UserIdGroupPairs } : {}),
    ...(p.PrefixListIds?.length ? { PrefixListIds: p.PrefixListIds } : {}),
  };
  if (Object.keys(sources).length === 0) return undefined;
  return { IpProtocol: p.IpProtocol, FromPort: p.FromPort, ToPort: p.ToPort, ...sources };
}

export function groupIdOf(group: SecurityGroup): string {
  return required(group.GroupId, `a GroupId for security group ${group.GroupName ?? '(unnamed)'}`);
}
