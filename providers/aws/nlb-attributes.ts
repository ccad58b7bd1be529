// The attributes of a Service's Network Load Balancer and of its target groups, kept as the Service
// asks (./nlb-extras.ts) the way cloud-provider-aws keeps them (pkg/providers/v1/aws_loadbalancer.go,
// reconcileLBAttributes and reconcileTargetGroupsAttributes): read, compared, and modified only
// where they differ, so an unchanged Service costs no mutating call.
//   - The load balancer: cross-zone load balancing and access logs, in one ModifyLoadBalancerAttributes.
//     Off unless asked, as upstream (an NLB's access logs turned on by hand are turned off); the
//     bucket and prefix are only sent while access logs are on (AWS refuses an empty bucket).
//   - The target groups: only while the annotation is there (upstream leaves them as they are
//     when it is removed), and only the keys it gives.

import {
  DescribeLoadBalancerAttributesCommand,
  DescribeTargetGroupAttributesCommand,
  ModifyLoadBalancerAttributesCommand,
  ModifyTargetGroupAttributesCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Service } from '@kubernetes/client-node';
import { abortable, type AwsApi } from './api.ts';
import { targetGroupArnOf, type Elbv2Reader } from './elbv2.ts';
import type { ServiceWarnings } from './events.ts';
import type { NlbExtras } from './nlb-extras.ts';

const CROSS_ZONE = 'load_balancing.cross_zone.enabled';
const ACCESS_LOGS = 'access_logs.s3.enabled';
const ACCESS_LOGS_BUCKET = 'access_logs.s3.bucket';
const ACCESS_LOGS_PREFIX = 'access_logs.s3.prefix';

/** A new NLB's attributes, as AWS makes it: what need not be modified after CreateLoadBalancer. */
const NEW_NLB: Readonly<Record<string, string>> = {
  [CROSS_ZONE]: 'false',
  [ACCESS_LOGS]: 'false',
  [ACCESS_LOGS_BUCKET]: '',
  [ACCESS_LOGS_PREFIX]: '',
};

/** What the attributes depend on. */
export interface AttributePlan {
  readonly crossZone: boolean;
  readonly extras: NlbExtras;
  /** The names of the Service's target groups. */
  readonly mappings: readonly { readonly targetGroupName: string }[];
}

type Attribute = { Key: string; Value: string };

export class NlbAttributes {
  readonly #api: AwsApi;
  readonly #read: Elbv2Reader;
  readonly #warnings: ServiceWarnings;

  constructor(api: AwsApi, read: Elbv2Reader, warnings: ServiceWarnings) {
    this.#api = api;
    this.#read = read;
    this.#warnings = warnings;
  }

  /** Brings load balancer `arn`'s and its target groups' attributes to `plan`; `fresh`: just created (AWS's defaults, not read). */
  async sync(arn: string, plan: AttributePlan, fresh: boolean, signal: AbortSignal | undefined): Promise<void> {
    // An attribute AWS leaves out of its answer is at its default.
    const current = fresh ? NEW_NLB : { ...NEW_NLB, ...(await this.#loadBalancerAttributes(arn, signal)) };
    const changes = differing(wantedAttributes(plan), current);
    if (changes.length > 0)
      await this.#api.elbv2.send(
        new ModifyLoadBalancerAttributesCommand({ LoadBalancerArn: arn, Attributes: changes }),
        abortable(signal),
      );
    await this.#syncTargetGroups(arn, plan, signal);
  }

  /** A Warning for each annotation given that does nothing with the others as they are. */
  async warnUnapplied(service: V1Service, extras: NlbExtras): Promise<void> {
    for (const { annotation, why } of extras.unapplied)
      await this.#warnings.warn(service, 'AnnotationNotApplied', `${annotation}: ${why}`);
  }

  async #loadBalancerAttributes(arn: string, signal: AbortSignal | undefined): Promise<Record<string, string>> {
    const out = await this.#api.elbv2.send(
      new DescribeLoadBalancerAttributesCommand({ LoadBalancerArn: arn }),
      abortable(signal),
    );
    return asRecord(out.Attributes);
  }

  /** Each of the Service's target groups gets the annotation's attributes where they differ. */
  async #syncTargetGroups(arn: string, plan: AttributePlan, signal: AbortSignal | undefined): Promise<void> {
    const wanted = plan.extras.targetGroupAttributes;
    if (wanted === undefined || Object.keys(wanted).length === 0) return;
    const names = new Set(plan.mappings.map((m) => m.targetGroupName));
    const groups = (await this.#read.targetGroupsOf(arn, signal)).filter((g) => names.has(g.TargetGroupName ?? ''));
    for (const group of groups) {
      const groupArn = targetGroupArnOf(group);
      const out = await this.#api.elbv2.send(
        new DescribeTargetGroupAttributesCommand({ TargetGroupArn: groupArn }),
        abortable(signal),
      );
      // A key AWS does not report is sent too (upstream skips it): AWS then applies it or says why not.
      const changes = differing(wanted, asRecord(out.Attributes));
      if (changes.length === 0) continue;
      await this.#api.elbv2.send(
        new ModifyTargetGroupAttributesCommand({ TargetGroupArn: groupArn, Attributes: changes }),
        abortable(signal),
      );
    }
  }
}

/** The load balancer attributes the Service asks for. */
export function wantedAttributes(plan: AttributePlan): Record<string, string> {
  const logs = plan.extras.accessLogs;
  return {
    [CROSS_ZONE]: String(plan.crossZone),
    [ACCESS_LOGS]: String(logs.enabled),
    ...(logs.enabled ? { [ACCESS_LOGS_BUCKET]: logs.bucket, [ACCESS_LOGS_PREFIX]: logs.prefix } : {}),
  };
}

/** The entries of `wanted` whose value `current` does not have. */
function differing(wanted: Readonly<Record<string, string>>, current: Readonly<Record<string, string>>): Attribute[] {
  return Object.entries(wanted)
    .filter(([key, value]) => current[key] !== value)
    .map(([Key, Value]) => ({ Key, Value }));
}

function asRecord(
  attributes: readonly { Key?: string | undefined; Value?: string | undefined }[] | undefined,
): Record<string, string> {
  return Object.fromEntries((attributes ?? []).map((x) => [x.Key ?? '', x.Value ?? '']));
}
