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
  CreateSecurityGroupCommand,
  DeleteSecurityGroupCommand,
  DescribeSecurityGroupsCommand,
  type Instance,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import { RetryError } from '../../../shared/cloud/errors.ts';
import { abortable, errorCode, ignoring, required, type AwsApi } from '../api.ts';
import type { AwsConfig } from '../config.ts';
import { ForeignResourceError } from '../errors.ts';
import { changeIngress, nodeGroupOf, sameTraffic, ungroup, type Rule } from '../ingress.ts';
import { clusterTagKey, hasClusterTag, isOwned, ownedTags } from '../tags.ts';
import type { ClassicPlan } from './plan.ts';

/** How long a delete waits when AWS still holds the load balancer's group (its interfaces go a little after it). */
const GROUP_IN_USE_RETRY_MS = 10_000;

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
    const groupId = await this.create(
      {
        name: plan.securityGroupName,
        description: `Security group for Kubernetes ELB ${plan.name} (${plan.serviceName})`,
        tags: plan.tags,
      },
      signal,
    );
    await changeIngress(this.#api, { kind: 'grant', groupId, rules: wantedIngress(plan) }, signal);
    return groupId;
  }

  /** Creates a group in the VPC tagged as this cluster's own (also used for an NLB's group, ../nlb-security-group.ts). */
  async create(
    group: { readonly name: string; readonly description: string; readonly tags: Record<string, string> },
    signal: AbortSignal | undefined,
  ): Promise<string> {
    const out = await this.#api.ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: group.name,
        Description: group.description,
        VpcId: this.#config.vpc,
        TagSpecifications: [{ ResourceType: 'security-group', Tags: ownedTags(this.#config, group.tags) }],
      }),
      abortable(signal),
    );
    return required(out.GroupId, `the GroupId of security group ${group.name}`);
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

  /** Makes the own group's ingress exactly the plan's (whatever the source): nothing when it already is. */
  async syncIngress(group: SecurityGroup, plan: ClassicPlan, signal: AbortSignal | undefined): Promise<void> {
    await this.syncRules(group, wantedIngress(plan), signal);
  }

  /** Makes the group's ingress exactly `wanted`: nothing when it already is. */
  async syncRules(group: SecurityGroup, wanted: readonly Rule[], signal: AbortSignal | undefined): Promise<void> {
    const groupId = groupIdOf(group);
    const actual = ungroup(group.IpPermissions ?? []);
    const revoke = actual.filter((r) => !wanted.some((w) => sameTraffic(r, w)));
    const grant = wanted.filter((w) => !actual.some((r) => sameTraffic(r, w)));
    await changeIngress(this.#api, { kind: 'grant', groupId, rules: grant }, signal);
    await changeIngress(this.#api, { kind: 'revoke', groupId, rules: revoke }, signal);
  }

  /**
   * Admits the load balancer's group `source` on the nodes' groups of `instances`, and withdraws
   * it from cluster-tagged groups no node of them has. Nothing when DisableSecurityGroupIngress.
   */
  async syncNodeRules(source: string, instances: readonly Instance[], signal: AbortSignal | undefined): Promise<void> {
    if (this.#config.disableSecurityGroupIngress) return;
    const wanted = await this.#nodeGroups(instances, signal);
    const actual = await this.#referencing(source, signal);
    for (const groupId of wanted) {
      if (!actual.some((g) => g.GroupId === groupId))
        await changeIngress(this.#api, { kind: 'grant', groupId, rules: [fromGroup(source)] }, signal);
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
    await ignoring('InvalidGroup.NotFound', () =>
      this.#api.ec2.send(new DeleteSecurityGroupCommand({ GroupId: id }), abortable(signal)),
    );
  }

  /**
   * Deletes `group` after its load balancer `lbName`: while AWS still holds it for the deleted
   * load balancer, a RetryError (as upstream's deleteSecurityGroupsWithBackoff keeps trying).
   */
  async deleteAfter(lbName: string, group: SecurityGroup, signal: AbortSignal | undefined): Promise<void> {
    try {
      await this.deleteOwn(groupIdOf(group), signal);
    } catch (error) {
      if (errorCode(error) !== 'DependencyViolation') throw error;
      throw new RetryError(
        `security group ${group.GroupName ?? groupIdOf(group)} is still in use by the deleted load balancer ${lbName}; trying again`,
        GROUP_IN_USE_RETRY_MS,
        { cause: error },
      );
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
      throw new ForeignResourceError(
        `security group ${plan.securityGroupName} (${group.GroupId ?? ''})`,
        `exists but is not tagged ${clusterTagKey(this.#config.clusterId)}=owned, so it is not load balancer ${plan.name}'s own`,
      );
  }

  /** Each instance's node group (../ingress.ts, nodeGroupOf). */
  async #nodeGroups(instances: readonly Instance[], signal: AbortSignal | undefined): Promise<Set<string>> {
    const ids = [...new Set(instances.flatMap((i) => (i.SecurityGroups ?? []).flatMap((g) => g.GroupId ?? [])))];
    const groups = await this.describe(ids, signal);
    const tagged = new Set(groups.filter((g) => hasClusterTag(g.Tags, this.#config.clusterId)).map(groupIdOf));
    const key = clusterTagKey(this.#config.clusterId);
    const chosen = new Set<string>();
    for (const instance of instances) {
      const group = nodeGroupOf(instance, tagged, key);
      if (group !== undefined) chosen.add(group);
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

  /** Revokes the rules of `group` that name `source` (and only those). */
  async #withdraw(group: SecurityGroup, source: string, signal: AbortSignal | undefined): Promise<void> {
    const rules = ungroup(group.IpPermissions ?? []).filter((r) => r.source === source);
    await changeIngress(this.#api, { kind: 'revoke', groupId: groupIdOf(group), rules }, signal);
  }
}

/** Upstream's node rule for a Classic ELB: everything from the load balancer's group. */
function fromGroup(source: string): Rule {
  return { protocol: '-1', from: -1, to: -1, source, description: '' };
}

/** The own group's rules: TCP on each Service port and ICMP "fragmentation needed" (type 3, code 4), from each client range. */
export function wantedIngress(plan: Pick<ClassicPlan, 'ports' | 'sourceRanges'>): Rule[] {
  return plan.sourceRanges.cidrs.flatMap((source) => [
    ...plan.ports.map((port) => ({ protocol: 'tcp', from: port, to: port, source, description: '' })),
    { protocol: 'icmp', from: 3, to: 4, source, description: '' },
  ]);
}

export function groupIdOf(group: SecurityGroup): string {
  return required(group.GroupId, `a GroupId for security group ${group.GroupName ?? '(unnamed)'}`);
}
