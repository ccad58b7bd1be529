// LoadBalancer as a Network Load Balancer with instance targets on the nodes' NodePorts: one
// target group and one listener per Service port. Names are upstream's ("a" + the UID, and
// k8s-<ns>-<name>-<hash> target groups), so a load balancer cloud-provider-aws made is adopted
// rather than doubled; what cirrus creates carries `kubernetes.io/cluster/<id>=owned` and
// `kubernetes.io/service-name=<namespace>/<name>`, and cirrus only touches a load balancer or
// target group carrying both: a load balancer of the same name without them is another's.
//
// Order of deletion: listeners, target groups, then the load balancer, so that the load balancer
// exists until everything else is gone and an interrupted delete is finished by the next one.
//
// Each entry point first asks ./classic/ which kind serves the Service: a Classic ELB is handled there.

import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DeleteListenerCommand,
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  DeregisterTargetsCommand,
  DescribeListenersCommand,
  DescribeLoadBalancerAttributesCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
  ModifyListenerCommand,
  ModifyLoadBalancerAttributesCommand,
  ModifyTargetGroupCommand,
  RegisterTargetsCommand,
  type Listener,
  type LoadBalancer as Nlb,
  type TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { DescribeRouteTablesCommand, DescribeSubnetsCommand, type Subnet } from '@aws-sdk/client-ec2';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { defaultLoadBalancerName, type LoadBalancer } from '../../shared/cloud/provider.ts';
import { abortable, errorCode, required, type AwsApi } from './api.ts';
import { ClassicLoadBalancer, type SubnetChoice } from './classic/load-balancer.ts';
import type { AwsConfig } from './config.ts';
import type { AwsInstances } from './instances.ts';
import { implementedElsewhere, planFor, type NlbPlan, type PortMapping } from './nlb-plan.ts';
import { clusterTagKey, hasClusterTag, isOwned, ownedTags, SERVICE_NAME_TAG, tagValue, type Tag } from './tags.ts';

/** ELBv2 takes at most this many targets per Register/DeregisterTargets, and 20 ARNs per DescribeTags. */
const TARGETS_PER_CALL = 100;
const ARNS_PER_DESCRIBE_TAGS = 20;
const CROSS_ZONE = 'load_balancing.cross_zone.enabled';

export class AwsLoadBalancer implements LoadBalancer {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;
  readonly #instances: AwsInstances;
  readonly #classic: ClassicLoadBalancer;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances) {
    this.#api = api;
    this.#config = config;
    this.#instances = instances;
    this.#classic = new ClassicLoadBalancer(api, config, instances, (choice, signal) => this.#subnets(choice, signal));
  }

  getLoadBalancerName(_clusterName: string, service: V1Service): string {
    return defaultLoadBalancerName(service);
  }

  async getLoadBalancer(
    _clusterName: string,
    service: V1Service,
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus | undefined> {
    if (implementedElsewhere(service)) return undefined;
    const route = await this.#classic.route(service, signal);
    if (route.kind === 'classic') return this.#classic.get(service, route, signal);
    const nlb = await this.#ours(service, signal);
    return nlb === undefined ? undefined : statusOf(nlb);
  }

  async ensureLoadBalancer(
    _clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus> {
    const route = await this.#classic.route(service, signal, true);
    if (route.kind === 'classic') return this.#classic.ensure(service, nodes, route.found, signal);
    const plan = planFor(this.#config, defaultLoadBalancerName(service), service, nodes);
    const found = await this.#find(plan.name, signal);
    if (found === undefined) return statusOf(await this.#create(plan, signal));
    await this.#checkOwned(found, plan, signal);
    await this.#reconcile(found, plan, signal);
    return statusOf(found);
  }

  /** The node set changed: as upstream, the whole ensure again; on an existing load balancer it changes targets only. */
  async updateLoadBalancer(
    _clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<void> {
    const route = await this.#classic.route(service, signal, true);
    if (route.kind === 'classic') return this.#classic.update(service, nodes, route.found, signal);
    const plan = planFor(this.#config, defaultLoadBalancerName(service), service, nodes);
    const found = await this.#find(plan.name, signal);
    if (found === undefined) throw new Error(`load balancer ${plan.name} not found`);
    await this.#checkOwned(found, plan, signal);
    await this.#reconcile(found, plan, signal);
  }

  async ensureLoadBalancerDeleted(_clusterName: string, service: V1Service, signal?: AbortSignal): Promise<void> {
    if (implementedElsewhere(service)) return;
    await this.#classic.ensureDeleted(service, signal);
    const nlb = await this.#ours(service, signal);
    if (nlb === undefined) return;
    const arn = loadBalancerArnOf(nlb);
    const listeners = await this.#listeners(arn, signal);
    const groups = await this.#groupsToDelete(arn, service, signal);
    const tags = await this.#tags([...groups.keys()], signal);
    for (const listener of listeners) await this.#deleteListener(listener, signal);
    for (const groupArn of groups.keys()) {
      if (!this.#ownedBy(tags.get(groupArn), `${service.metadata?.namespace}/${service.metadata?.name}`)) continue;
      await this.#ignore('TargetGroupNotFound', () =>
        this.#api.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: groupArn }), abortable(signal)),
      );
    }
    await this.#ignore('LoadBalancerNotFound', () =>
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
    for (const g of await this.#targetGroupsOf(arn, signal)) groups.set(targetGroupArnOf(g), g);
    // Target groups a listener no longer points at (an earlier delete stopped half-way) are found by name.
    for (const name of expectedTargetGroupNames(this.#config, service)) {
      const g = await this.#targetGroupNamed(name, signal);
      if (g !== undefined) groups.set(targetGroupArnOf(g), g);
    }
    return groups;
  }

  async #deleteListener(listener: Listener, signal: AbortSignal | undefined): Promise<void> {
    await this.#ignore('ListenerNotFound', () =>
      this.#api.elbv2.send(new DeleteListenerCommand({ ListenerArn: listener.ListenerArn }), abortable(signal)),
    );
  }

  // ---- finding and checking

  async #find(name: string, signal: AbortSignal | undefined): Promise<Nlb | undefined> {
    try {
      const out = await this.#api.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] }), abortable(signal));
      return out.LoadBalancers?.find((lb) => lb.Type === 'network');
    } catch (error) {
      if (errorCode(error) === 'LoadBalancerNotFound') return undefined;
      throw error;
    }
  }

  /** The Service's load balancer if it carries this cluster's and this Service's tags. */
  async #ours(service: V1Service, signal: AbortSignal | undefined): Promise<Nlb | undefined> {
    const nlb = await this.#find(defaultLoadBalancerName(service), signal);
    if (nlb === undefined) return undefined;
    const tags = await this.#tagsOf(loadBalancerArnOf(nlb), signal);
    return this.#ownedBy(tags, `${service.metadata?.namespace}/${service.metadata?.name}`) ? nlb : undefined;
  }

  async #checkOwned(nlb: Nlb, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    const tags = await this.#tagsOf(loadBalancerArnOf(nlb), signal);
    if (!this.#ownedBy(tags, plan.serviceName)) {
      throw new Error(
        `load balancer ${plan.name} exists but is not tagged ${clusterTagKey(this.#config.clusterId)}=owned and ${SERVICE_NAME_TAG}=${plan.serviceName}; cirrus will not take it over`,
      );
    }
  }

  #ownedBy(tags: readonly Tag[] | undefined, serviceName: string): boolean {
    return isOwned(tags, this.#config.clusterId) && tagValue(tags, SERVICE_NAME_TAG) === serviceName;
  }

  async #tags(arns: readonly string[], signal: AbortSignal | undefined): Promise<Map<string, Tag[]>> {
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
  async #tagsOf(arn: string, signal: AbortSignal | undefined): Promise<Tag[] | undefined> {
    return (await this.#tags([arn], signal)).get(arn);
  }

  async #listeners(arn: string, signal: AbortSignal | undefined): Promise<Listener[]> {
    const out = await this.#api.elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: arn }), abortable(signal));
    return out.Listeners ?? [];
  }

  async #targetGroupsOf(arn: string, signal: AbortSignal | undefined): Promise<TargetGroup[]> {
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

  async #targetGroupNamed(name: string, signal: AbortSignal | undefined): Promise<TargetGroup | undefined> {
    try {
      const out = await this.#api.elbv2.send(new DescribeTargetGroupsCommand({ Names: [name] }), abortable(signal));
      return out.TargetGroups?.[0];
    } catch (error) {
      if (errorCode(error) === 'TargetGroupNotFound') return undefined;
      throw error;
    }
  }

  async #ignore(code: string, call: () => Promise<unknown>): Promise<void> {
    try {
      await call();
    } catch (error) {
      if (errorCode(error) !== code) throw error;
    }
  }

  // ---- creating

  async #create(plan: NlbPlan, signal: AbortSignal | undefined): Promise<Nlb> {
    const subnets = await this.#subnets(plan, signal);
    const out = await this.#api.elbv2.send(
      new CreateLoadBalancerCommand({
        Name: plan.name,
        Type: 'network',
        Scheme: plan.internal ? 'internal' : 'internet-facing',
        SubnetMappings: subnets.map((SubnetId) => ({ SubnetId })),
        Tags: ownedTags(this.#config, plan.tags),
      }),
      abortable(signal),
    );
    const nlb = out.LoadBalancers?.[0];
    if (nlb?.LoadBalancerArn === undefined)
      throw new Error(`CreateLoadBalancer ${plan.name} answered without a load balancer`);
    for (const mapping of plan.mappings) await this.#createListener(nlb, plan, mapping, signal);
    // A new NLB has cross-zone load balancing off: only a Service that wants it on costs a call.
    if (plan.crossZone) await this.#setCrossZone(nlb.LoadBalancerArn, true, signal);
    return nlb;
  }

  async #createListener(nlb: Nlb, plan: NlbPlan, mapping: PortMapping, signal: AbortSignal | undefined): Promise<void> {
    const { group, created } = await this.#createTargetGroup(nlb, plan, mapping, signal);
    await this.#syncTargets(targetsOf(group, mapping, plan, created), signal);
    await this.#api.elbv2.send(
      new CreateListenerCommand({
        LoadBalancerArn: nlb.LoadBalancerArn,
        Port: mapping.port,
        Protocol: mapping.protocol,
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
          Protocol: mapping.protocol,
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
      const group = await this.#targetGroupNamed(mapping.targetGroupName, signal);
      const tags = group === undefined ? undefined : await this.#tagsOf(targetGroupArnOf(group), signal);
      if (group === undefined || !this.#ownedBy(tags, plan.serviceName)) {
        throw new Error(`target group ${mapping.targetGroupName} exists and is not ${plan.serviceName}'s`, {
          cause: error,
        });
      }
      return { group, created: false };
    }
  }

  /** Upstream's choice of subnets: the annotation's, or one per zone of the VPC's that fit the scheme. */
  async #subnets(plan: SubnetChoice, signal: AbortSignal | undefined): Promise<string[]> {
    const { vpc, clusterId, subnetId } = this.#config;
    if (plan.subnets !== undefined) return this.#namedSubnets(plan.subnets, signal);
    const candidates = await this.#candidateSubnets(plan, signal);
    const roleTag = plan.internal ? 'kubernetes.io/role/internal-elb' : 'kubernetes.io/role/elb';
    const chosen = onePerZone(candidates, roleTag, clusterId);
    if (chosen.length > 0) return chosen;
    if (subnetId !== undefined) return [subnetId];
    throw new Error(
      `no ${plan.internal ? '' : 'public '}subnet in ${vpc} for load balancer ${plan.name}: tag subnets ${roleTag}, or name them with service.beta.kubernetes.io/aws-load-balancer-subnets`,
    );
  }

  /** The VPC's subnets that are this cluster's or no cluster's; for an internet-facing one, only public ones. */
  async #candidateSubnets(plan: SubnetChoice, signal: AbortSignal | undefined): Promise<Subnet[]> {
    const { vpc, clusterId } = this.#config;
    const out = await this.#api.ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [vpc] }] }),
      abortable(signal),
    );
    const candidates = (out.Subnets ?? []).filter(
      (s) =>
        hasClusterTag(s.Tags, clusterId) || !(s.Tags ?? []).some((t) => t.Key?.startsWith('kubernetes.io/cluster/')),
    );
    if (plan.internal || candidates.length === 0) return candidates;
    const publicIds = await this.#publicSubnets(candidates, signal);
    return candidates.filter((s) => publicIds.has(subnetIdOf(s)));
  }

  async #namedSubnets(names: readonly string[], signal: AbortSignal | undefined): Promise<string[]> {
    const out = await this.#api.ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [this.#config.vpc] }] }),
      abortable(signal),
    );
    const subnets = out.Subnets ?? [];
    return names.map((name) => {
      const s = subnets.find((x) => x.SubnetId === name || x.Tags?.some((t) => t.Key === 'Name' && t.Value === name));
      if (s === undefined) {
        throw new Error(
          `service.beta.kubernetes.io/aws-load-balancer-subnets: no subnet "${name}" (an ID or Name tag) in ${this.#config.vpc}`,
        );
      }
      return subnetIdOf(s);
    });
  }

  /** Subnets whose route table (their own, or the VPC's main one) has a route to an internet gateway. */
  async #publicSubnets(subnets: readonly Subnet[], signal: AbortSignal | undefined): Promise<Set<string>> {
    const out = await this.#api.ec2.send(
      new DescribeRouteTablesCommand({ Filters: [{ Name: 'vpc-id', Values: [this.#config.vpc] }] }),
      abortable(signal),
    );
    const tables = out.RouteTables ?? [];
    const isPublic = (t: (typeof tables)[number] | undefined): boolean =>
      (t?.Routes ?? []).some((r) => r.GatewayId?.startsWith('igw') === true);
    const main = tables.find((t) => t.Associations?.some((a) => a.Main === true));
    const result = new Set<string>();
    for (const s of subnets) {
      const own = tables.find((t) => t.Associations?.some((a) => a.SubnetId === s.SubnetId));
      if (isPublic(own ?? main)) result.add(subnetIdOf(s));
    }
    return result;
  }

  // ---- reconciling an existing load balancer

  async #reconcile(nlb: Nlb, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    const arn = loadBalancerArnOf(nlb);
    const [listeners, groups] = await Promise.all([this.#listeners(arn, signal), this.#targetGroupsOf(arn, signal)]);
    const groupByArn = new Map(groups.map((g) => [targetGroupArnOf(g), g]));
    const forwardedTo = (listener: Listener): TargetGroup | undefined => {
      const forwardTo = listener.DefaultActions?.find((a) => a.Type === 'forward')?.TargetGroupArn;
      return forwardTo === undefined ? undefined : groupByArn.get(forwardTo);
    };
    const wanted = new Set<Listener>();
    for (const mapping of plan.mappings) {
      const listener = listeners.find((l) => l.Port === mapping.port);
      if (listener === undefined) {
        await this.#createListener(nlb, plan, mapping, signal);
        continue;
      }
      wanted.add(listener);
      await this.#reconcileListener(nlb, plan, { mapping, listener, group: forwardedTo(listener) }, signal);
    }
    for (const listener of listeners) {
      if (wanted.has(listener)) continue;
      await this.#deleteListener(listener, signal);
      const group = forwardedTo(listener);
      if (group !== undefined) await this.#deleteGroupIfOwned(group, plan, signal);
    }
    await this.#syncCrossZone(arn, plan.crossZone, signal);
  }

  /** An existing listener for `mapping`: its target group kept and synced if it fits, else replaced. */
  async #reconcileListener(
    nlb: Nlb,
    plan: NlbPlan,
    current: { readonly mapping: PortMapping; readonly listener: Listener; readonly group: TargetGroup | undefined },
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const { mapping, listener, group } = current;
    if (group !== undefined && fits(group, mapping) && listener.Protocol === mapping.protocol) {
      await this.#syncHealthCheck(group, mapping, signal);
      await this.#syncTargets(targetsOf(group, mapping, plan, false), signal);
      return;
    }
    // Port, protocol or health check kind changed: a target group cannot change those, so a new one.
    const { group: fresh, created } = await this.#createTargetGroup(nlb, plan, mapping, signal);
    await this.#syncTargets(targetsOf(fresh, mapping, plan, created), signal);
    await this.#api.elbv2.send(
      new ModifyListenerCommand({
        ListenerArn: listener.ListenerArn,
        Protocol: mapping.protocol,
        DefaultActions: [{ Type: 'forward', TargetGroupArn: fresh.TargetGroupArn }],
      }),
      abortable(signal),
    );
    if (group !== undefined) await this.#deleteGroupIfOwned(group, plan, signal);
  }

  async #deleteGroupIfOwned(group: TargetGroup, plan: NlbPlan, signal: AbortSignal | undefined): Promise<void> {
    const tags = await this.#tagsOf(targetGroupArnOf(group), signal);
    if (!this.#ownedBy(tags, plan.serviceName)) return;
    await this.#ignore('TargetGroupNotFound', () =>
      this.#api.elbv2.send(new DeleteTargetGroupCommand({ TargetGroupArn: group.TargetGroupArn }), abortable(signal)),
    );
  }

  async #syncHealthCheck(group: TargetGroup, mapping: PortMapping, signal: AbortSignal | undefined): Promise<void> {
    const hc = mapping.healthCheck;
    const same =
      group.HealthCheckPort === hc.port &&
      group.HealthyThresholdCount === hc.healthyThreshold &&
      group.UnhealthyThresholdCount === hc.unhealthyThreshold &&
      (hc.path === undefined || group.HealthCheckPath === hc.path);
    if (same) return;
    await this.#api.elbv2.send(
      new ModifyTargetGroupCommand({
        TargetGroupArn: group.TargetGroupArn,
        HealthCheckPort: hc.port,
        ...(hc.path === undefined ? {} : { HealthCheckPath: hc.path }),
        HealthyThresholdCount: hc.healthyThreshold,
        UnhealthyThresholdCount: hc.unhealthyThreshold,
      }),
      abortable(signal),
    );
  }

  /** Deregisters targets that should not be there, then registers missing ones; nothing when they match. */
  /**
   * Deregisters targets that should not be there, then registers missing ones; nothing when they
   * match. `current` is given for a target group just created (known empty: no DescribeTargetHealth).
   */
  async #syncTargets(group: TargetSync, signal: AbortSignal | undefined): Promise<void> {
    const { groupArn, port } = group;
    const current = group.current ?? (await this.#registered(groupArn, signal));
    const want = new Set(group.wanted);
    const stale = [...current].filter((id) => !want.has(id));
    for (let i = 0; i < stale.length; i += TARGETS_PER_CALL) {
      await this.#api.elbv2.send(
        new DeregisterTargetsCommand({
          TargetGroupArn: groupArn,
          Targets: stale.slice(i, i + TARGETS_PER_CALL).map((Id) => ({ Id, Port: port })),
        }),
        abortable(signal),
      );
    }
    const missing = await this.#registrable(
      [...want].filter((id) => !current.has(id)),
      signal,
    );
    for (let i = 0; i < missing.length; i += TARGETS_PER_CALL) {
      await this.#api.elbv2.send(
        new RegisterTargetsCommand({
          TargetGroupArn: groupArn,
          Targets: missing.slice(i, i + TARGETS_PER_CALL).map((Id) => ({ Id, Port: port })),
        }),
        abortable(signal),
      );
    }
  }

  async #registered(groupArn: string, signal: AbortSignal | undefined): Promise<Set<string>> {
    const health = await this.#api.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: groupArn }),
      abortable(signal),
    );
    return new Set(
      (health.TargetHealthDescriptions ?? [])
        .filter((d) => d.TargetHealth?.Reason !== 'Target.DeregistrationInProgress')
        .map((d) => d.Target?.Id ?? ''),
    );
  }

  /**
   * The instances among `ids` that AWS lets be registered: running or pending ones (a stopped
   * node's Node is still in the node set; AWS refuses its instance as a new target). One
   * DescribeInstances for all of them, through the instances' batcher.
   */
  async #registrable(ids: readonly string[], signal: AbortSignal | undefined): Promise<string[]> {
    if (ids.length === 0) return [];
    const instances = await Promise.all(ids.map((id) => this.#instances.find({ spec: { providerID: id } }, signal)));
    return ids.filter((_, i) => ['running', 'pending'].includes(instances[i]?.State?.Name ?? ''));
  }

  async #syncCrossZone(arn: string, wanted: boolean, signal: AbortSignal | undefined): Promise<void> {
    const out = await this.#api.elbv2.send(
      new DescribeLoadBalancerAttributesCommand({ LoadBalancerArn: arn }),
      abortable(signal),
    );
    const current = out.Attributes?.find((x) => x.Key === CROSS_ZONE)?.Value === 'true';
    if (current !== wanted) await this.#setCrossZone(arn, wanted, signal);
  }

  async #setCrossZone(arn: string, enabled: boolean, signal: AbortSignal | undefined): Promise<void> {
    await this.#api.elbv2.send(
      new ModifyLoadBalancerAttributesCommand({
        LoadBalancerArn: arn,
        Attributes: [{ Key: CROSS_ZONE, Value: String(enabled) }],
      }),
      abortable(signal),
    );
  }
}

/** What #syncTargets needs to know of a target group. */
interface TargetSync {
  readonly groupArn: string;
  /** The NodePort the targets listen on. */
  readonly port: number;
  /** The instance IDs that should be targets. */
  readonly wanted: readonly string[];
  /** The registered targets when known without asking (a group just created has none). */
  readonly current?: ReadonlySet<string>;
}

function targetsOf(group: TargetGroup, mapping: PortMapping, plan: NlbPlan, created: boolean): TargetSync {
  const sync = { groupArn: targetGroupArnOf(group), port: mapping.nodePort, wanted: plan.targets };
  return created ? { ...sync, current: new Set() } : sync;
}

/** Whether a target group serves a mapping: what cannot be modified in place matches. */
function fits(group: TargetGroup, mapping: PortMapping): boolean {
  return (
    group.Port === mapping.nodePort &&
    group.Protocol === mapping.protocol &&
    group.HealthCheckProtocol === mapping.healthCheck.protocol &&
    group.HealthCheckIntervalSeconds === mapping.healthCheck.intervalSeconds
  );
}

function statusOf(nlb: Nlb): V1LoadBalancerStatus {
  return nlb.DNSName === undefined ? {} : { ingress: [{ hostname: nlb.DNSName }] };
}

/** A subnet's preference for a zone: the role tag first, then the cluster tag, then the lowest ID. */
type Rank = readonly [number, number, string];

function compare(a: Rank, b: Rank): number {
  if (a[0] !== b[0]) return a[0] - b[0];
  if (a[1] !== b[1]) return a[1] - b[1];
  if (a[2] === b[2]) return 0;
  return a[2] < b[2] ? -1 : 1;
}

/** The best-ranked subnet of each zone, as sorted IDs. */
function onePerZone(candidates: readonly Subnet[], roleTag: string, clusterId: string): string[] {
  const rank = (s: Subnet): Rank => [
    (s.Tags ?? []).some((t) => t.Key === roleTag) ? 0 : 1,
    hasClusterTag(s.Tags, clusterId) ? 0 : 1,
    s.SubnetId ?? '',
  ];
  const byZone = new Map<string, Subnet>();
  for (const s of candidates) {
    const current = byZone.get(s.AvailabilityZone ?? '');
    if (current === undefined || compare(rank(s), rank(current)) < 0) byZone.set(s.AvailabilityZone ?? '', s);
  }
  return [...byZone.values()].map(subnetIdOf).sort();
}

function loadBalancerArnOf(nlb: Nlb): string {
  return required(nlb.LoadBalancerArn, `a LoadBalancerArn for load balancer ${nlb.LoadBalancerName ?? '(unnamed)'}`);
}

function targetGroupArnOf(group: TargetGroup): string {
  return required(group.TargetGroupArn, `a TargetGroupArn for target group ${group.TargetGroupName ?? '(unnamed)'}`);
}

function subnetIdOf(subnet: Subnet): string {
  return required(subnet.SubnetId, 'a SubnetId for a subnet of the VPC');
}

/** The names of the target groups a Service's ports would have, for finding ones a listener no longer names. */
function expectedTargetGroupNames(config: AwsConfig, service: V1Service): string[] {
  try {
    return planFor(config, defaultLoadBalancerName(service), service, []).mappings.map((m) => m.targetGroupName);
  } catch {
    return [];
  }
}
