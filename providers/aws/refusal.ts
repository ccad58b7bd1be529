// A refusal does not freeze a load balancer: when a Service asks for a setting cirrus does not
// offer (or gives a value it cannot use), nothing of the Service's change is applied, but the load
// balancer it already has — if it is this cluster's and this Service's — still follows the node
// set: each target group its listeners forward to gets the current target nodes. Otherwise a node
// that joins while the Service is refused would never get traffic, and one that left would keep
// getting it. The error that goes back (and becomes the Service's Warning Event) says what was not
// applied and what was.

import type { V1Node, V1Service } from '@kubernetes/client-node';
import { defaultLoadBalancerName } from '../../shared/cloud/provider.ts';
import { forwardedTo, loadBalancerArnOf, targetGroupArnOf, type Elbv2Reader } from './elbv2.ts';
import { ServiceSettingError } from './errors.ts';
import { nodeTargets } from './nlb-plan.ts';
import type { TargetSyncer } from './targets.ts';

export class Refusals {
  readonly #read: Elbv2Reader;
  readonly #targets: TargetSyncer;

  constructor(read: Elbv2Reader, targets: TargetSyncer) {
    this.#read = read;
    this.#targets = targets;
  }

  /** Brings the existing load balancer's targets to `nodes`; the error to throw for `refused`, saying so. */
  async nodesOnly(
    service: V1Service,
    nodes: readonly V1Node[],
    refused: ServiceSettingError,
    signal: AbortSignal | undefined,
  ): Promise<ServiceSettingError> {
    const name = defaultLoadBalancerName(service);
    const arn = await this.#ownedArn(name, service, signal);
    if (arn === undefined)
      return new ServiceSettingError(refused.setting, `${refused.problem}; nothing was applied`, { cause: refused });
    const wanted = nodeTargets(service, nodes);
    await this.#syncTargets(arn, serviceNameOf(service), wanted, signal);
    return new ServiceSettingError(
      refused.setting,
      `${refused.problem}; the Service's changes were not applied to load balancer ${name}, but its targets follow the ${wanted.length} current target node(s)`,
      { cause: refused },
    );
  }

  /** The ARN of load balancer `name` when it is this cluster's and this Service's. */
  async #ownedArn(name: string, service: V1Service, signal: AbortSignal | undefined): Promise<string | undefined> {
    const nlb = await this.#read.find(name, signal);
    if (nlb === undefined) return undefined;
    const arn = loadBalancerArnOf(nlb);
    return this.#read.ownedBy(await this.#read.tagsOf(arn, signal), serviceNameOf(service)) ? arn : undefined;
  }

  /** Each of the Service's target groups its listeners forward to gets `wanted` as targets. */
  async #syncTargets(
    arn: string,
    serviceName: string,
    wanted: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const [listeners, groups] = await Promise.all([
      this.#read.listeners(arn, signal),
      this.#read.targetGroupsOf(arn, signal),
    ]);
    const byArn = new Map(groups.map((g) => [targetGroupArnOf(g), g]));
    const tags = await this.#read.tags([...byArn.keys()], signal);
    for (const listener of listeners) {
      const group = forwardedTo(listener, byArn);
      if (group?.Port === undefined || !this.#read.ownedBy(tags.get(targetGroupArnOf(group)), serviceName)) continue;
      await this.#targets.sync({ groupArn: targetGroupArnOf(group), port: group.Port, wanted }, signal);
    }
  }
}

function serviceNameOf(service: V1Service): string {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}
