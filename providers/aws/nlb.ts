// A Service's Network Load Balancer with instance targets on the nodes' NodePorts: one target
// group and one listener per Service port. Names are upstream's ("a" + the UID, and
// k8s-<ns>-<name>-<hash> target groups), so a load balancer cloud-provider-aws made is adopted
// rather than doubled; what cirrus creates carries `kubernetes.io/cluster/<id>=owned` and
// `kubernetes.io/service-name=<namespace>/<name>`, and cirrus only touches a load balancer or
// target group carrying both: a load balancer of the same name without them is another's.
//
// Order of deletion: listeners, target groups, then the load balancer, so that the load balancer
// exists until everything else is gone and an interrupted delete is finished by the next one.

import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DeleteListenerCommand,
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  ModifyListenerCommand,
  ModifyTargetGroupCommand,
  type Listener,
  type LoadBalancer as Nlb,
  type TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { findCause } from '../../shared/cloud/errors.ts';
import { defaultLoadBalancerName } from '../../shared/cloud/provider.ts';
import { abortable, errorCode, ignoring, required, type AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import { Elbv2Reader, forwardedTo, loadBalancerArnOf, statusOf, targetGroupArnOf } from './elbv2.ts';
import { ForeignResourceError, LoadBalancerNotFoundError, ServiceSettingError } from './errors.ts';
import type { ServiceWarnings } from './events.ts';
import type { AwsInstances } from './instances.ts';
import { NlbAttributes } from './nlb-attributes.ts';
import { addressChange, subnetMappings } from './nlb-extras.ts';
import { groupFits, healthCheckChange, listenerDiffers, listenerSettings } from './nlb-listeners.ts';
import { implementedElsewhere, planFor, type NlbPlan, type PortMapping } from './nlb-plan.ts';
import { Refusals } from './refusal.ts';
import { groupIdOf } from './classic/security-groups.ts';
import { NlbSecurityGroup } from './nlb-security-group.ts';
import { NodeSecurityGroups } from './security-groups.ts';
import { loadBalancerSubnets } from './subnets.ts';
import { clusterTagKey, ownedTags, SERVICE_NAME_TAG } from './tags.ts';
import { TargetSyncer, type TargetSync } from './targets.ts';

export class NetworkLoadBalancers {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;
  readonly #read: Elbv2Reader;
  readonly #targets: TargetSyncer;
  readonly #groups: NodeSecurityGroups;
  readonly #refusals: Refusals;
  readonly #attributes: NlbAttributes;
  readonly #securityGroup: NlbSecurityGroup;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances, warnings: ServiceWarnings) {
    this.#api = api;
    this.#config = config;
    this.#read = new Elbv2Reader(api, config);
    this.#targets = new TargetSyncer(api, instances);
    this.#groups = new NodeSecurityGroups(api, config, instances, warnings);
    this.#refusals = new Refusals(this.#read, this.#targets);
    this.#attributes = new NlbAttributes(api, this.#read, warnings);
    this.#securityGroup = new NlbSecurityGroup(api, config, warnings);
  }

  async get(service: V1Service, signal: AbortSignal | undefined): Promise<V1LoadBalancerStatus | undefined> {
    if (implementedElsewhere(service)) return undefined;
    const nlb = await this.#ours(service, signal);
    return nlb === undefined ? undefined : statusOf(nlb);
  }

  async ensure(
    clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal: AbortSignal | undefined,
  ): Promise<V1LoadBalancerStatus> {
    const plan = await this.#plan(service, nodes, signal);
    let nlb = await this.#read.find(plan.name, signal);
    if (nlb === undefined) {
      const group = await this.#securityGroup.forNew(clusterName, service, plan, signal);
      nlb = await this.#create(plan, group === undefined ? [] : [groupIdOf(group)], signal);
      // As upstream: the group's rules once the load balancer is made.
      if (group !== undefined) await this.#securityGroup.syncRules(group, plan, signal);
    } else {
      await this.#checkOwned(nlb, plan, signal);
      await this.#checkAddresses({ service, nodes, nlb }, plan, signal);
      await this.#reconcile(nlb, plan, signal);
      await this.#securityGroup.sync(service, nlb, plan, signal);
    }
    await this.#groups.ensureFor(service, nlb, plan, signal);
    await this.#attributes.warnUnapplied(service, plan.extras);
    return statusOf(nlb);
  }

  /** The node set changed: as upstream, the whole ensure again; on an existing load balancer it changes targets only. */
  async update(service: V1Service, nodes: readonly V1Node[], signal: AbortSignal | undefined): Promise<void> {
    const plan = await this.#plan(service, nodes, signal);
    const found = await this.#read.find(plan.name, signal);
    if (found === undefined) throw new LoadBalancerNotFoundError(plan.name);
    await this.#checkOwned(found, plan, signal);
    await this.#checkAddresses({ service, nodes, nlb: found }, plan, signal);
    await this.#reconcile(found, plan, signal);
    await this.#securityGroup.sync(service, found, plan, signal);
    await this.#groups.ensureFor(service, found, plan, signal);
  }

  /** The Service's plan; when a setting is refused, its existing load balancer still gets the node set (./refusal.ts). */
  async #plan(service: V1Service, nodes: readonly V1Node[], signal: AbortSignal | undefined): Promise<NlbPlan> {
    try {
      return planFor(this.#config, defaultLoadBalancerName(service), service, nodes);
    } catch (error) {
      const refused = findCause(error, ServiceSettingError);
      if (refused === undefined) throw error;
      throw await this.#refusals.nodesOnly(service, nodes, refused, signal);
    }
  }

  /** An NLB's addresses are fixed at creation: a Service that asks for others is refused (its targets still follow the nodes). */
  async #checkAddresses(
    current: { readonly service: V1Service; readonly nodes: readonly V1Node[]; readonly nlb: Nlb },
    plan: NlbPlan,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const refused = addressChange(current.nlb, plan.extras);
    if (refused !== undefined) throw await this.#refusals.nodesOnly(current.service, current.nodes, refused, signal);
  }

  /** The load balancer if it is the Service's, then its own security group (also when an earlier delete stopped after the load balancer). */
  async delete(clusterName: string, service: V1Service, signal: AbortSignal | undefined): Promise<void> {
    if (implementedElsewhere(service)) return;
    const name = defaultLoadBalancerName(service);
    const found = await this.#read.find(name, signal);
    if (found !== undefined && !(await this.#isServices(found, service, signal))) return;
    const group =
      found === undefined
        ? await this.#securityGroup.leftBehind(clusterName, service, signal)
        : await this.#securityGroup.own(found, signal);
    if (found !== undefined) await this.#deleteNlb(found, service, signal);
    if (group !== undefined) await this.#securityGroup.delete(name, group, signal);
  }

  async #deleteNlb(nlb: Nlb, service: V1Service, signal: AbortSignal | undefined): Promise<void> {
    // As upstream: the rules first, so a load balancer that is still there is found again to finish.
    await this.#groups.sync(defaultLoadBalancerName(service), undefined, signal);
    const arn = loadBalancerArnOf(nlb);
    const listeners = await this.#read.listeners(arn, signal);
    const groups = await this.#groupsToDelete(arn, service, signal);
    const tags = await this.#read.tags([...groups.keys()], signal);
    for (const listener of listeners) await this.#deleteListener(listener, signal);
    for (const groupArn of groups.keys()) {
      if (!this.#read.ownedBy(tags.get(groupArn), serviceNameOf(service))) continue;
      await ignoring('TargetGroupNotFound', () =>
        this.#api.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: groupArn }), abortable(signal)),
      );
    }
    await ignoring('LoadBalancerNotFound', () =>
      this.#api.elbv2.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: arn }), abortable(signal)),
    );
  }

  /** The load balancer's target groups by ARN, and those of the Service's names (ownership is checked by the caller). */
  async #groupsToDelete(
    arn: string,
    service: V1Service,
    signal: AbortSignal | undefined,
  ): Promise<Map<string, TargetGroup>> {
    const groups = new Map<string, TargetGroup>();
    for (const g of await this.#read.targetGroupsOf(arn, signal)) groups.set(targetGroupArnOf(g), g);
    // Target groups a listener no longer points at (an earlier delete stopped half-way) are found by name.
    for (const name of expectedTargetGroupNames(this.#config, service)) {
      const g = await this.#read.targetGroupNamed(name, signal);
      if (g !== undefined) groups.set(targetGroupArnOf(g), g);
    }
    return groups;
  }

  async #deleteListener(listener: Listener, signal: AbortSignal | undefined): Promise<void> {
    await ignoring('ListenerNotFound', () =>
      this.#api.elbv2.send(new DeleteListenerCommand({ ListenerArn: listener.ListenerArn }), abortable(signal)),
    );
  }

  /** The Service's load balancer if it carries this cluster's and this Service's tags. */
  async #ours(service: V1Service, signal: AbortSignal | undefined): Promise<Nlb | undefined> {
    const nlb = await this.#read.find(defaultLoadBalancerName(service), signal);
    return nlb !== undefined && (await this.#isServices(nlb, service, signal)) ? nlb : undefined;
  }

  async #isServices(nlb: Nlb, service: V1Service, signal: AbortSignal | undefined): Promise<boolean> {
    return this.#read.ownedBy(await this.#read.tagsOf(loadBalancerArnOf(nlb), signal), serviceNameOf(service));
  }

  async #checkOwned(nlb: Nlb, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    const tags = await this.#read.tagsOf(loadBalancerArnOf(nlb), signal);
    if (!this.#read.ownedBy(tags, plan.serviceName)) {
      throw new ForeignResourceError(
        `load balancer ${plan.name}`,
        `exists but is not tagged ${clusterTagKey(this.#config.clusterId)}=owned and ${SERVICE_NAME_TAG}=${plan.serviceName}`,
      );
    }
  }

  // ---- creating

  async #create(plan: NlbPlan, securityGroups: readonly string[], signal: AbortSignal | undefined): Promise<Nlb> {
    const subnets = await loadBalancerSubnets(this.#api, this.#config, plan, signal);
    const out = await this.#api.elbv2.send(
      new CreateLoadBalancerCommand({
        Name: plan.name,
        Type: 'network',
        Scheme: plan.internal ? 'internal' : 'internet-facing',
        SubnetMappings: subnetMappings(subnets, plan.extras),
        ...(securityGroups.length === 0 ? {} : { SecurityGroups: [...securityGroups] }),
        Tags: ownedTags(this.#config, plan.tags),
      }),
      abortable(signal),
    );
    const made = required(out.LoadBalancers?.[0], `the load balancer in CreateLoadBalancer ${plan.name}'s answer`);
    const nlb = { ...made, SecurityGroups: made.SecurityGroups ?? [...securityGroups] };
    for (const mapping of plan.mappings) await this.#createListener(nlb, plan, mapping, signal);
    // A new NLB's attributes are AWS's defaults: only a Service that wants others costs a call.
    await this.#attributes.sync(loadBalancerArnOf(nlb), plan, true, signal);
    return nlb;
  }

  async #createListener(nlb: Nlb, plan: NlbPlan, mapping: PortMapping, signal: AbortSignal | undefined): Promise<void> {
    const { group, created } = await this.#createTargetGroup(nlb, plan, mapping, signal);
    await this.#targets.sync(targetsOf(group, mapping, plan, created), signal);
    await this.#api.elbv2.send(
      new CreateListenerCommand({
        LoadBalancerArn: nlb.LoadBalancerArn,
        Port: mapping.port,
        ...listenerSettings(mapping),
        DefaultActions: [{ Type: 'forward', TargetGroupArn: group.TargetGroupArn }],
        Tags: ownedTags(this.#config, plan.tags),
      }),
      abortable(signal),
    );
  }

  async #createTargetGroup(
    nlb: Nlb,
    plan: NlbPlan,
    mapping: PortMapping,
    signal: AbortSignal | undefined,
  ): Promise<{ readonly group: TargetGroup; readonly created: boolean }> {
    const hc = mapping.healthCheck;
    try {
      const out = await this.#api.elbv2.send(
        new CreateTargetGroupCommand({
          Name: mapping.targetGroupName,
          Protocol: mapping.targetProtocol,
          Port: mapping.nodePort,
          VpcId: nlb.VpcId,
          TargetType: 'instance',
          HealthCheckProtocol: hc.protocol,
          HealthCheckPort: hc.port,
          ...(hc.path === undefined ? {} : { HealthCheckPath: hc.path }),
          HealthCheckIntervalSeconds: hc.intervalSeconds,
          HealthyThresholdCount: hc.healthyThreshold,
          UnhealthyThresholdCount: hc.unhealthyThreshold,
          Tags: ownedTags(this.#config, plan.tags),
        }),
        abortable(signal),
      );
      const group = required(
        out.TargetGroups?.[0],
        `the target group in CreateTargetGroup ${mapping.targetGroupName}'s answer`,
      );
      return { group, created: true };
    } catch (error) {
      // Left by an ensure that stopped before its listener: take it if it is this Service's.
      if (errorCode(error) !== 'DuplicateTargetGroupName') throw error;
      const group = await this.#read.targetGroupNamed(mapping.targetGroupName, signal);
      const tags = group === undefined ? undefined : await this.#read.tagsOf(targetGroupArnOf(group), signal);
      if (group === undefined || !this.#read.ownedBy(tags, plan.serviceName)) {
        throw new ForeignResourceError(
          `target group ${mapping.targetGroupName}`,
          `exists and is not tagged as ${plan.serviceName}'s`,
          { cause: error },
        );
      }
      return { group, created: false };
    }
  }

  // ---- reconciling an existing load balancer

  async #reconcile(nlb: Nlb, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    const arn = loadBalancerArnOf(nlb);
    const [listeners, groups] = await Promise.all([
      this.#read.listeners(arn, signal),
      this.#read.targetGroupsOf(arn, signal),
    ]);
    const groupByArn = new Map(groups.map((g) => [targetGroupArnOf(g), g]));
    const wanted = new Set<Listener>();
    for (const mapping of plan.mappings) {
      const listener = listeners.find((l) => l.Port === mapping.port);
      if (listener === undefined) {
        await this.#createListener(nlb, plan, mapping, signal);
        continue;
      }
      wanted.add(listener);
      const group = forwardedTo(listener, groupByArn);
      await this.#reconcileListener(nlb, plan, { mapping, listener, group }, signal);
    }
    for (const listener of listeners) {
      if (wanted.has(listener)) continue;
      await this.#deleteListener(listener, signal);
      const group = forwardedTo(listener, groupByArn);
      if (group !== undefined) await this.#deleteGroupIfOwned(group, plan, signal);
    }
    await this.#attributes.sync(arn, plan, false, signal);
  }

  /** An existing listener for `mapping`: its target group kept and synced if it fits, else replaced; its TLS settings modified when they differ. */
  async #reconcileListener(
    nlb: Nlb,
    plan: NlbPlan,
    current: { readonly mapping: PortMapping; readonly listener: Listener; readonly group: TargetGroup | undefined },
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const { mapping, listener, group } = current;
    if (group !== undefined && groupFits(group, mapping)) {
      const change = healthCheckChange(group, mapping);
      if (change !== undefined) await this.#api.elbv2.send(new ModifyTargetGroupCommand(change), abortable(signal));
      await this.#targets.sync(targetsOf(group, mapping, plan, false), signal);
      if (listenerDiffers(listener, mapping)) await this.#modifyListener(listener, mapping, group, signal);
      return;
    }
    // Port, protocol or health check kind changed: a target group cannot change those, so a new one.
    const { group: fresh, created } = await this.#createTargetGroup(nlb, plan, mapping, signal);
    await this.#targets.sync(targetsOf(fresh, mapping, plan, created), signal);
    await this.#modifyListener(listener, mapping, fresh, signal);
    if (group !== undefined) await this.#deleteGroupIfOwned(group, plan, signal);
  }

  /** Without a policy in `mapping`, none is sent: AWS keeps the listener's. */
  async #modifyListener(
    listener: Listener,
    mapping: PortMapping,
    group: TargetGroup,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    await this.#api.elbv2.send(
      new ModifyListenerCommand({
        ListenerArn: listener.ListenerArn,
        ...listenerSettings(mapping),
        DefaultActions: [{ Type: 'forward', TargetGroupArn: group.TargetGroupArn }],
      }),
      abortable(signal),
    );
  }

  async #deleteGroupIfOwned(group: TargetGroup, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    const tags = await this.#read.tagsOf(targetGroupArnOf(group), signal);
    if (!this.#read.ownedBy(tags, plan.serviceName)) return;
    await ignoring('TargetGroupNotFound', () =>
      this.#api.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: group.TargetGroupArn }), abortable(signal)),
    );
  }
}

function serviceNameOf(service: V1Service): string {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

function targetsOf(group: TargetGroup, mapping: PortMapping, plan: NlbPlan, created: boolean): TargetSync {
  const sync = { groupArn: targetGroupArnOf(group), port: mapping.nodePort, wanted: plan.targets };
  return created ? { ...sync, current: new Set() } : sync;
}

/**
 * The names of the target groups a Service's ports would have, for finding ones a listener no
 * longer names. A Service whose settings cannot be planned (an annotation changed to a value that
 * is refused, ports without NodePorts) has no names to derive: its groups are only those its
 * listeners name. Any other error is the caller's.
 */
function expectedTargetGroupNames(config: AwsConfig, service: V1Service): string[] {
  try {
    return planFor(config, defaultLoadBalancerName(service), service, []).mappings.map((m) => m.targetGroupName);
  } catch (error) {
    if (findCause(error, ServiceSettingError) !== undefined) return [];
    throw error;
  }
}
