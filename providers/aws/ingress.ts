// Security group rules as both kinds of load balancer edit them: one rule per protocol, port range
// and source, ungrouped as cloud-provider-aws ungroups them before comparing (pkg/providers/v1/
// aws_utils.go, IPPermissionSet.Ungroup), compared on the traffic they admit whatever their
// description; granted and revoked in one call, tolerating a rule another reconcile already
// granted or revoked; and the one group of each node that gets the nodes' rules, chosen as upstream
// chooses it (pkg/providers/v1/aws.go, findSecurityGroupForInstance).

import {
  AuthorizeSecurityGroupIngressCommand,
  RevokeSecurityGroupIngressCommand,
  type Instance,
  type IpPermission,
} from '@aws-sdk/client-ec2';
import { abortable, errorCode, ignoring, type AwsApi } from './api.ts';
import { SecurityGroupError } from './errors.ts';
import type { AwsInstances } from './instances.ts';

/** One rule: one protocol, port range and source (an IPv4 or IPv6 range, `sg-…` or `pl-…`). */
export interface Rule {
  readonly protocol: string;
  readonly from: number;
  readonly to: number;
  readonly source: string;
  readonly description: string;
}

export function ungroup(permissions: readonly IpPermission[]): Rule[] {
  return permissions.flatMap((p) => {
    const rule = (source: string | undefined, description: string | undefined): Rule => ({
      protocol: p.IpProtocol ?? '',
      from: p.FromPort ?? -1,
      to: p.ToPort ?? -1,
      source: source ?? '',
      description: description ?? '',
    });
    return [
      ...(p.IpRanges ?? []).map((r) => rule(r.CidrIp, r.Description)),
      ...(p.Ipv6Ranges ?? []).map((r) => rule(r.CidrIpv6, r.Description)),
      ...(p.UserIdGroupPairs ?? []).map((g) => rule(g.GroupId, g.Description)),
      ...(p.PrefixListIds ?? []).map((l) => rule(l.PrefixListId, l.Description)),
    ];
  });
}

export function permissionOf(rule: Rule): IpPermission {
  const described = rule.description === '' ? {} : { Description: rule.description };
  const ports = rule.protocol === '-1' ? {} : { FromPort: rule.from, ToPort: rule.to };
  const base = { IpProtocol: rule.protocol, ...ports };
  if (rule.source.startsWith('sg-')) return { ...base, UserIdGroupPairs: [{ GroupId: rule.source, ...described }] };
  if (rule.source.startsWith('pl-')) return { ...base, PrefixListIds: [{ PrefixListId: rule.source, ...described }] };
  if (rule.source.includes(':')) return { ...base, Ipv6Ranges: [{ CidrIpv6: rule.source, ...described }] };
  return { ...base, IpRanges: [{ CidrIp: rule.source, ...described }] };
}

/** Whether two rules admit the same traffic (descriptions aside); all-protocol rules have no ports. */
export function sameTraffic(a: Rule, b: Rule): boolean {
  const ports = a.protocol === '-1' || (a.from === b.from && a.to === b.to);
  return a.protocol === b.protocol && ports && a.source === b.source;
}

/**
 * One Authorize/RevokeSecurityGroupIngress for `rules`. AWS refuses the whole call when one rule
 * is already there (or already gone) — another reconcile got there first — and then each rule is
 * sent alone, that one counting as done.
 */
export async function changeIngress(
  api: AwsApi,
  change: { readonly kind: 'grant' | 'revoke'; readonly groupId: string; readonly rules: readonly Rule[] },
  signal: AbortSignal | undefined,
): Promise<void> {
  const { kind, groupId, rules } = change;
  if (rules.length === 0) return;
  const done = kind === 'grant' ? 'InvalidPermission.Duplicate' : 'InvalidPermission.NotFound';
  const send = (batch: readonly Rule[]): Promise<unknown> => {
    const input = { GroupId: groupId, IpPermissions: batch.map(permissionOf) };
    const command =
      kind === 'grant' ? new AuthorizeSecurityGroupIngressCommand(input) : new RevokeSecurityGroupIngressCommand(input);
    return api.ec2.send(command, abortable(signal));
  };
  try {
    await send(rules);
  } catch (error) {
    if (errorCode(error) !== done) throw error;
    for (const rule of rules) await ignoring(done, () => send([rule]));
  }
}

/**
 * The instance's group that gets the nodes' rules: its one group tagged for the cluster, else (as
 * upstream, for clusters older than the tag) its only group; undefined when it has none.
 */
export function nodeGroupOf(instance: Instance, tagged: ReadonlySet<string>, clusterTag: string): string | undefined {
  const ids = (instance.SecurityGroups ?? []).flatMap((g) => (g.GroupId === undefined ? [] : [g.GroupId]));
  const clusters = ids.filter((id) => tagged.has(id));
  const pick = clusters.length > 0 ? clusters : ids;
  if (pick.length > 1) {
    const which =
      clusters.length > 0 ? `security groups tagged ${clusterTag}` : `security groups, none tagged ${clusterTag}`;
    throw new SecurityGroupError(
      `instance ${instance.InstanceId ?? ''} has ${pick.length} ${which} (${pick.join(', ')}): tag exactly one, the nodes' group`,
    );
  }
  return pick[0];
}

/** The instances of `ids` that exist, found through the instance cache (one DescribeInstances for a batch). */
export async function instancesOf(
  instances: AwsInstances,
  ids: readonly string[],
  signal: AbortSignal | undefined,
): Promise<Instance[]> {
  const found = await Promise.all(ids.map((id) => instances.find({ spec: { providerID: id } }, signal)));
  return found.filter((i): i is Instance => i !== undefined);
}
