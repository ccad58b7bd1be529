// Reading Elastic Load Balancing v2: a load balancer by name, its listeners and target groups,
// tags, and whether a resource is this cluster's and this Service's. moto's answers differ from
// AWS's in places; where they do, the difference is handled here and named.

import {
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  type Listener,
  type LoadBalancer as Nlb,
  type TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1LoadBalancerStatus } from '@kubernetes/client-node';
import { abortable, errorCode, required, type AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import { isOwned, SERVICE_NAME_TAG, tagValue, type Tag } from './tags.ts';

/** ELBv2 takes at most 20 ARNs per DescribeTags. */
const ARNS_PER_DESCRIBE_TAGS = 20;

export class Elbv2Reader {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;

  constructor(api: AwsApi, config: AwsConfig) {
    this.#api = api;
    this.#config = config;
  }

  /** The Network Load Balancer `name`, or undefined. */
  async find(name: string, signal: AbortSignal | undefined): Promise<Nlb | undefined> {
    try {
      const out = await this.#api.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] }), abortable(signal));
      return out.LoadBalancers?.find((lb) => lb.Type === 'network');
    } catch (error) {
      if (errorCode(error) === 'LoadBalancerNotFound') return undefined;
      throw error;
    }
  }

  /** Whether `tags` are this cluster's `owned` tag and `serviceName`'s service-name tag. */
  ownedBy(tags: readonly Tag[] | undefined, serviceName: string): boolean {
    return isOwned(tags, this.#config.clusterId) && tagValue(tags, SERVICE_NAME_TAG) === serviceName;
  }

  async tags(arns: readonly string[], signal: AbortSignal | undefined): Promise<Map<string, Tag[]>> {
    const tags = new Map<string, Tag[]>();
    for (let i = 0; i < arns.length; i += ARNS_PER_DESCRIBE_TAGS) {
      const out = await this.#api.elbv2.send(
        new DescribeTagsCommand({ ResourceArns: arns.slice(i, i + ARNS_PER_DESCRIBE_TAGS) }),
        abortable(signal),
      );
      for (const d of out.TagDescriptions ?? [])
        tags.set(required(d.ResourceArn, 'a ResourceArn in DescribeTags'), d.Tags ?? []);
    }
    return tags;
  }

  /** The tags of one resource. */
  async tagsOf(arn: string, signal: AbortSignal | undefined): Promise<Tag[] | undefined> {
    return (await this.tags([arn], signal)).get(arn);
  }

  async listeners(arn: string, signal: AbortSignal | undefined): Promise<Listener[]> {
    const out = await this.#api.elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: arn }), abortable(signal));
    return out.Listeners ?? [];
  }

  async targetGroupsOf(arn: string, signal: AbortSignal | undefined): Promise<TargetGroup[]> {
    try {
      const out = await this.#api.elbv2.send(
        new DescribeTargetGroupsCommand({ LoadBalancerArn: arn }),
        abortable(signal),
      );
      return out.TargetGroups ?? [];
    } catch (error) {
      // AWS answers a load balancer without target groups with an empty list, moto with this error.
      if (errorCode(error) === 'TargetGroupNotFound') return [];
      throw error;
    }
  }

  async targetGroupNamed(name: string, signal: AbortSignal | undefined): Promise<TargetGroup | undefined> {
    try {
      const out = await this.#api.elbv2.send(new DescribeTargetGroupsCommand({ Names: [name] }), abortable(signal));
      return out.TargetGroups?.[0];
    } catch (error) {
      if (errorCode(error) === 'TargetGroupNotFound') return undefined;
      throw error;
    }
  }
}

/** The target group a listener forwards to, among `groups` by ARN. */
export function forwardedTo(listener: Listener, groups: ReadonlyMap<string, TargetGroup>): TargetGroup | undefined {
  const arn = listener.DefaultActions?.find((a) => a.Type === 'forward')?.TargetGroupArn;
  return arn === undefined ? undefined : groups.get(arn);
}

export function statusOf(nlb: Nlb): V1LoadBalancerStatus {
  return nlb.DNSName === undefined ? {} : { ingress: [{ hostname: nlb.DNSName }] };
}

export function loadBalancerArnOf(nlb: Nlb): string {
  return required(nlb.LoadBalancerArn, `a LoadBalancerArn for load balancer ${nlb.LoadBalancerName ?? '(unnamed)'}`);
}

export function targetGroupArnOf(group: TargetGroup): string {
  return required(group.TargetGroupArn, `a TargetGroupArn for target group ${group.TargetGroupName ?? '(unnamed)'}`);
}
