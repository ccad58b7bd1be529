// An NLB's own security group, as cloud-provider-aws v1.36 makes it with `[Global]
// NLBSecurityGroupMode = Managed` (pkg/providers/v1/aws.go, ensureNLBSecurityGroup,
// ensureNLBSecurityGroupRules, GetSecurityGroupNameForNLB, buildSecurityGroupsToDelete):
//   - only a new NLB gets one (AWS cannot add security groups to an NLB created without them):
//     `k8s-<namespace:8>-<name:8>-<sha256(cluster name, name, namespace, UID):10>` in the VPC,
//     described "[k8s] Managed SecurityGroup for LoadBalancer", tagged `kubernetes.io/cluster/<id>=owned`;
//   - its ingress is exactly the listener ports from the Service's client ranges, and ICMP
//     "fragmentation needed" from them; kept so on every ensure, also without the mode, for the
//     NLB's group that is this cluster's own (a group the NLB has that is not is never edited);
//   - the nodes' rules stay upstream's for an NLB (./security-groups.ts: client ranges and
//     health checks from the subnets); upstream does not make them reference the NLB's group;
//   - on delete, the group goes after the load balancer, retried while AWS still holds it.
// Protocols are the Service port's (tcp, udp): upstream writes a TLS listener's protocol name,
// which is not an IP protocol EC2 accepts; TLS is TCP on the wire.

import { createHash } from 'node:crypto';
import type { LoadBalancer as Nlb } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { SecurityGroup } from '@aws-sdk/client-ec2';
import type { V1Service } from '@kubernetes/client-node';
import type { AwsApi } from './api.ts';
import { ClassicSecurityGroups, groupIdOf } from './classic/security-groups.ts';
import type { AwsConfig } from './config.ts';
import { ForeignResourceError } from './errors.ts';
import type { ServiceWarnings } from './events.ts';
import type { Rule } from './ingress.ts';
import type { NlbPlan } from './nlb-plan.ts';
import { clusterTagKey, isOwned } from './tags.ts';

export const NLB_GROUP_DESCRIPTION = '[k8s] Managed SecurityGroup for LoadBalancer';

export class NlbSecurityGroup {
  readonly #config: AwsConfig;
  readonly #groups: ClassicSecurityGroups;
  readonly #warnings: ServiceWarnings;

  constructor(api: AwsApi, config: AwsConfig, warnings: ServiceWarnings) {
    this.#config = config;
    this.#groups = new ClassicSecurityGroups(api, config);
    this.#warnings = warnings;
  }

  /**
   * The group a new NLB is created with: its own (found by upstream's name, or created empty) with
   * the mode, else none. A created group is answered as it is, never read back (a plan's create is
   * not in AWS: ./plan.ts).
   */
  async forNew(
    clusterName: string,
    service: V1Service,
    plan: NlbPlan,
    signal: AbortSignal | undefined,
  ): Promise<SecurityGroup | undefined> {
    if (this.#config.nlbSecurityGroupManaged !== true) return undefined;
    const name = nlbSecurityGroupName(clusterName, service);
    const [found] = await this.#groups.describeNamed(name, signal);
    if (found === undefined) {
      const id = await this.#groups.create({ name, description: NLB_GROUP_DESCRIPTION, tags: plan.tags }, signal);
      return { GroupId: id, GroupName: name, IpPermissions: [] };
    }
    if (!isOwned(found.Tags, this.#config.clusterId))
      throw new ForeignResourceError(
        `security group ${name} (${groupIdOf(found)})`,
        `exists but is not tagged ${clusterTagKey(this.#config.clusterId)}=owned`,
      );
    return found;
  }

  /** Makes `group`'s ingress exactly the plan's traffic. */
  async syncRules(group: SecurityGroup, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    await this.#groups.syncRules(group, wantedNlbIngress(plan), signal);
  }

  /** Makes the NLB's own group admit exactly the plan's traffic; an NLB without groups under the mode: a Warning. */
  async sync(service: V1Service, nlb: Nlb, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    const ids = nlb.SecurityGroups ?? [];
    if (ids.length === 0) {
      if (this.#config.nlbSecurityGroupManaged === true)
        await this.#warnings.warn(
          service,
          'SecurityGroupNotApplied',
          `NLBSecurityGroupMode = Managed: load balancer ${plan.name} was created without security groups, and AWS cannot add them to it; its nodes' rules still admit the client ranges (delete and re-create the Service to get a group)`,
        );
      return;
    }
    const own = await this.own(nlb, signal);
    if (own !== undefined) await this.syncRules(own, plan, signal);
  }

  /** The NLB's group that is this cluster's own (upstream's isOwnedSecurityGroup), if any. */
  async own(nlb: Nlb, signal: AbortSignal | undefined): Promise<SecurityGroup | undefined> {
    const groups = await this.#groups.describe(nlb.SecurityGroups ?? [], signal);
    return groups.find((g) => isOwned(g.Tags, this.#config.clusterId));
  }

  /** The Service's own group when its NLB is gone already (an earlier delete stopped after it). */
  async leftBehind(
    clusterName: string,
    service: V1Service,
    signal: AbortSignal | undefined,
  ): Promise<SecurityGroup | undefined> {
    const [found] = await this.#groups.describeNamed(nlbSecurityGroupName(clusterName, service), signal);
    return found !== undefined && isOwned(found.Tags, this.#config.clusterId) ? found : undefined;
  }

  /** Deletes the group of the deleted load balancer `lbName` (RetryError while AWS still holds it). */
  async delete(lbName: string, group: SecurityGroup, signal: AbortSignal | undefined): Promise<void> {
    await this.#groups.deleteAfter(lbName, group, signal);
  }
}

/** Upstream's name for a Service's NLB group (GetSecurityGroupNameForNLB). */
export function nlbSecurityGroupName(clusterName: string, service: V1Service): string {
  const { name = '', namespace = '', uid = '' } = service.metadata ?? {};
  const hash = createHash('sha256').update(clusterName).update(name).update(namespace).update(uid).digest('hex');
  const clean = (text: string): string => text.replace(/[^A-Za-z0-9]/g, '').slice(0, 8);
  return `k8s-${clean(namespace)}-${clean(name)}-${hash.slice(0, 10)}`;
}

/** Each listener port from each client range, and ICMP type 3 code 4 from them (path MTU discovery). */
export function wantedNlbIngress(plan: Pick<NlbPlan, 'mappings' | 'sourceRanges'>): Rule[] {
  return plan.sourceRanges.cidrs.flatMap((source) => [
    ...plan.mappings.map((m) => ({
      protocol: m.protocol.toLowerCase(),
      from: m.port,
      to: m.port,
      source,
      description: '',
    })),
    { protocol: 'icmp', from: 3, to: 4, source, description: '' },
  ]);
}
