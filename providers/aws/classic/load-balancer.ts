// LoadBalancer as a Classic ELB, the kind cloud-provider-aws makes for a Service without the
// `service.beta.kubernetes.io/aws-load-balancer-type` annotation: upstream's name (`a` + the UID),
// tags, listeners, health check, attributes, policies and security groups (./security-groups.ts),
// so that a Classic ELB cloud-provider-aws made is adopted as it is. cirrus only changes or deletes
// a Classic ELB tagged `kubernetes.io/cluster/<id>=owned` and `kubernetes.io/service-name=<ns>/<name>`
// (upstream tags its Classic ELBs so).
//
// Which kind a Service gets (route()): the kind of the load balancer it already has, whatever the
// default; a Service without the annotation and without a load balancer gets the cloud-config's
// DefaultLoadBalancerType (upstream's Classic unless set); `type: nlb` on a Service that has a
// Classic ELB is refused, as upstream refuses a change of kind after creation.

import {
  ApplySecurityGroupsToLoadBalancerCommand,
  CreateLoadBalancerCommand,
  DeleteLoadBalancerCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  type LoadBalancerDescription,
  type Tag,
} from '@aws-sdk/client-elastic-load-balancing';
import { DescribeLoadBalancersCommand as DescribeNlbsCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { Instance } from '@aws-sdk/client-ec2';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { RetryError } from '../../../shared/cloud/errors.ts';
import { defaultLoadBalancerName } from '../../../shared/cloud/provider.ts';
import { abortable, errorCode, required, type AwsApi } from '../api.ts';
import type { AwsConfig } from '../config.ts';
import type { AwsInstances } from '../instances.ts';
import { ANNOTATION_PREFIX } from '../nlb-plan.ts';
import { clusterTagKey, isOwned, ownedTags, SERVICE_NAME_TAG, tagValue } from '../tags.ts';
import { classicPlanFor, type ClassicPlan } from './plan.ts';
import * as sync from './reconcile.ts';
import { ClassicSecurityGroups, groupIdOf } from './security-groups.ts';

const TYPE_ANNOTATION = `${ANNOTATION_PREFIX}type`;
/** How long a delete waits when AWS still holds the load balancer's group (its interfaces go a little after it). */
const GROUP_IN_USE_RETRY_MS = 10_000;

/** The part of a plan that chooses subnets: the NLB path's selection, shared. */
export interface SubnetChoice {
  readonly name: string;
  readonly internal: boolean;
  readonly subnets: readonly string[] | undefined;
}
export type SubnetChooser = (choice: SubnetChoice, signal: AbortSignal | undefined) => Promise<string[]>;

/** Which kind of load balancer serves a Service; for Classic, the one found (undefined: none yet). */
export type Route =
  { readonly kind: 'nlb' } | { readonly kind: 'classic'; readonly found: LoadBalancerDescription | undefined };

export class ClassicLoadBalancer {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;
  readonly #instances: AwsInstances;
  readonly #subnets: SubnetChooser;
  readonly #groups: ClassicSecurityGroups;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances, subnets: SubnetChooser) {
    this.#api = api;
    this.#config = config;
    this.#instances = instances;
    this.#subnets = subnets;
    this.#groups = new ClassicSecurityGroups(api, config);
  }

  /**
   * Which kind serves `service`. With `changing` (ensure, update), a kind change is refused, and so
   * is an NLB when the nodes' groups should be opened (cirrus does not open them for NLBs yet).
   */
  async route(service: V1Service, signal: AbortSignal | undefined, changing = false): Promise<Route> {
    const type = service.metadata?.annotations?.[TYPE_ANNOTATION];
    if (type !== undefined) return this.#annotated(service, type, signal, changing);
    const found = await this.#find(defaultLoadBalancerName(service), signal);
    if (found !== undefined) return { kind: 'classic', found };
    if (this.#config.defaultLoadBalancerType === 'nlb') return this.#nlb(changing);
    if (await this.#hasNlb(defaultLoadBalancerName(service), signal)) return this.#nlb(changing);
    return { kind: 'classic', found: undefined };
  }

  async get(
    service: V1Service,
    route: Route,
    signal: AbortSignal | undefined,
  ): Promise<V1LoadBalancerStatus | undefined> {
    if (route.kind !== 'classic' || route.found === undefined) return undefined;
    const tags = await this.#tagsOf(route.found, signal);
    return this.#ownedBy(tags, serviceNameOf(service)) ? statusOf(route.found) : undefined;
  }

  async ensure(
    service: V1Service,
    nodes: readonly V1Node[],
    found: LoadBalancerDescription | undefined,
    signal: AbortSignal | undefined,
  ): Promise<V1LoadBalancerStatus> {
    const plan = classicPlanFor(this.#config, defaultLoadBalancerName(service), service, nodes);
    if (found === undefined) return this.#create(plan, signal);
    const tags = await this.#checkOwned(found, plan, signal);
    await this.#reconcile(found, plan, tags, signal);
    return statusOf(found);
  }

  /** The node set changed: as upstream, the instances and the nodes' rules only. */
  async update(
    service: V1Service,
    nodes: readonly V1Node[],
    found: LoadBalancerDescription | undefined,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const plan = classicPlanFor(this.#config, defaultLoadBalancerName(service), service, nodes);
    if (found === undefined) throw new Error(`load balancer ${plan.name} not found`);
    await this.#checkOwned(found, plan, signal);
    await this.#syncNodes(found, plan, signal);
  }

  /**
   * Deletes the Service's Classic ELB if it is this Service's, then its own security group (also
   * when an earlier delete stopped after the load balancer), withdrawing the nodes' rules first.
   */
  async ensureDeleted(service: V1Service, signal: AbortSignal | undefined): Promise<void> {
    const name = defaultLoadBalancerName(service);
    const lb = await this.#find(name, signal);
    if (lb !== undefined) {
      if (!this.#ownedBy(await this.#tagsOf(lb, signal), serviceNameOf(service))) return;
      await this.#api.elb.send(new DeleteLoadBalancerCommand({ LoadBalancerName: name }), abortable(signal));
    }
    const plan = { securityGroupName: `k8s-elb-${name}` };
    const [group] = await this.#groups.describeNamed(plan.securityGroupName, signal);
    if (group === undefined || !this.#groups.isOwn(group, plan)) return;
    await this.#groups.removeNodeRules(groupIdOf(group), signal);
    try {
      await this.#groups.deleteOwn(groupIdOf(group), signal);
    } catch (error) {
      if (errorCode(error) !== 'DependencyViolation') throw error;
      throw new RetryError(
        `security group ${plan.securityGroupName} is still in use by the deleted load balancer ${name}; trying again`,
        GROUP_IN_USE_RETRY_MS,
        { cause: error },
      );
    }
  }

  // ---- kinds

  /** A Service with the type annotation: an NLB (the NLB path refuses values it does not take), never a kind change. */
  async #annotated(
    service: V1Service,
    type: string,
    signal: AbortSignal | undefined,
    changing: boolean,
  ): Promise<Route> {
    if (type !== 'nlb' || !changing) return { kind: 'nlb' };
    await this.#refuseKindChange(service, signal);
    return this.#nlb(true);
  }

  #nlb(checkIngress: boolean): Route {
    if (checkIngress && !this.#config.disableSecurityGroupIngress) {
      throw new Error(
        `${TYPE_ANNOTATION}: a Network Load Balancer needs DisableSecurityGroupIngress = true in the cloud-config: cirrus does not open the nodes' security groups for NLBs yet (open the NodePort range yourself), only for Classic ELBs`,
      );
    }
    return { kind: 'nlb' };
  }

  async #refuseKindChange(service: V1Service, signal: AbortSignal | undefined): Promise<void> {
    const found = await this.#find(defaultLoadBalancerName(service), signal);
    if (found === undefined || !this.#ownedBy(await this.#tagsOf(found, signal), serviceNameOf(service))) return;
    throw new Error(
      `${TYPE_ANNOTATION}: "nlb" on a Service whose load balancer ${found.LoadBalancerName ?? ''} is a Classic ELB: the kind of a load balancer is not changed after creation (as cloud-provider-aws); remove the annotation, or delete and re-create the Service`,
    );
  }

  async #hasNlb(name: string, signal: AbortSignal | undefined): Promise<boolean> {
    try {
      const out = await this.#api.elbv2.send(new DescribeNlbsCommand({ Names: [name] }), abortable(signal));
      return (out.LoadBalancers ?? []).some((lb) => lb.Type === 'network');
    } catch (error) {
      if (errorCode(error) === 'LoadBalancerNotFound') return false;
      throw error;
    }
  }

  // ---- finding and checking

  async #find(name: string, signal: AbortSignal | undefined): Promise<LoadBalancerDescription | undefined> {
    try {
      const out = await this.#api.elb.send(
        new DescribeLoadBalancersCommand({ LoadBalancerNames: [name] }),
        abortable(signal),
      );
      return out.LoadBalancerDescriptions?.[0];
    } catch (error) {
      if (errorCode(error) === 'LoadBalancerNotFound') return undefined;
      throw error;
    }
  }

  async #tagsOf(lb: LoadBalancerDescription, signal: AbortSignal | undefined): Promise<Tag[]> {
    const out = await this.#api.elb.send(
      new DescribeTagsCommand({ LoadBalancerNames: [required(lb.LoadBalancerName, 'a LoadBalancerName')] }),
      abortable(signal),
    );
    return out.TagDescriptions?.[0]?.Tags ?? [];
  }

  #ownedBy(tags: readonly Tag[], serviceName: string): boolean {
    return isOwned(tags, this.#config.clusterId) && tagValue(tags, SERVICE_NAME_TAG) === serviceName;
  }

  async #checkOwned(lb: LoadBalancerDescription, plan: ClassicPlan, signal: AbortSignal | undefined): Promise<Tag[]> {
    const tags = await this.#tagsOf(lb, signal);
    if (!this.#ownedBy(tags, plan.serviceName)) {
      throw new Error(
        `load balancer ${plan.name} exists but is not tagged ${clusterTagKey(this.#config.clusterId)}=owned and ${SERVICE_NAME_TAG}=${plan.serviceName}; cirrus will not take it over`,
      );
    }
    return tags;
  }

  // ---- creating

  async #create(plan: ClassicPlan, signal: AbortSignal | undefined): Promise<V1LoadBalancerStatus> {
    const subnets = await this.#subnets(plan, signal);
    const group = this.#groups.shared ?? (await this.#groups.ensureOwn(plan, signal));
    const out = await this.#api.elb.send(
      new CreateLoadBalancerCommand({
        LoadBalancerName: plan.name,
        Listeners: plan.listeners.map(sync.listenerOf),
        Subnets: subnets,
        SecurityGroups: [group],
        ...(plan.internal ? { Scheme: 'internal' } : {}),
        Tags: ownedTags(this.#config, plan.tags),
      }),
      abortable(signal),
    );
    const created: LoadBalancerDescription = {
      LoadBalancerName: plan.name,
      DNSName: required(out.DNSName, `the DNSName of load balancer ${plan.name}`),
      SecurityGroups: [group],
      Subnets: subnets,
      ListenerDescriptions: plan.listeners.map((l) => ({ Listener: sync.listenerOf(l), PolicyNames: [] })),
    };
    const t = this.#target(plan, signal);
    await sync.syncPolicies(t, created, plan);
    await sync.syncHealthCheck(t, created, plan);
    // A new Classic ELB starts from the defaults: only a Service that asks for more costs a call.
    await sync.syncAttributes(t, plan.attributes, sync.defaultAttributes);
    await this.#syncNodes(created, plan, signal);
    return statusOf(created);
  }

  // ---- reconciling an existing load balancer

  async #reconcile(
    lb: LoadBalancerDescription,
    plan: ClassicPlan,
    tags: readonly Tag[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const internal = lb.Scheme === 'internal';
    if (internal !== plan.internal) {
      throw new Error(
        `${ANNOTATION_PREFIX}internal: load balancer ${plan.name} is ${lb.Scheme ?? ''}; the scheme of a Classic ELB cannot change (delete and re-create the Service)`,
      );
    }
    await this.#syncGroups(lb, plan, signal);
    const t = this.#target(plan, signal);
    if (plan.subnets !== undefined) await sync.syncSubnets(t, lb, await this.#subnets(plan, signal));
    await sync.syncListeners(t, lb, plan);
    await sync.syncPolicies(t, lb, plan);
    await sync.syncHealthCheck(t, lb, plan);
    await sync.syncAttributes(t, plan.attributes);
    await sync.syncTags(t, tags, plan);
    await this.#syncNodes(lb, plan, signal);
  }

  /** The load balancer's group: the configured shared one, or its own with exactly the plan's ingress. */
  async #syncGroups(lb: LoadBalancerDescription, plan: ClassicPlan, signal: AbortSignal | undefined): Promise<void> {
    const current = lb.SecurityGroups ?? [];
    let wanted = this.#groups.shared;
    if (wanted === undefined) {
      const own = (await this.#groups.describe(current, signal)).find((g) => this.#groups.isOwn(g, plan));
      if (own !== undefined) await this.#groups.syncIngress(own, plan, signal);
      wanted = own === undefined ? await this.#groups.ensureOwn(plan, signal) : groupIdOf(own);
    }
    if (current.length === 1 && current[0] === wanted) return;
    await this.#api.elb.send(
      new ApplySecurityGroupsToLoadBalancerCommand({ LoadBalancerName: plan.name, SecurityGroups: [wanted] }),
      abortable(signal),
    );
    lb.SecurityGroups = [wanted];
  }

  /** Instances registered and deregistered as the nodes are, and the nodes' groups admitting the load balancer's. */
  async #syncNodes(lb: LoadBalancerDescription, plan: ClassicPlan, signal: AbortSignal | undefined): Promise<void> {
    const current = (lb.Instances ?? []).map((i) => i.InstanceId ?? '');
    const instances = await this.#live(plan.targets, signal);
    const registrable = new Set(instances.map((i) => i.InstanceId ?? ''));
    const wanted = plan.targets.filter((id) => current.includes(id) || registrable.has(id));
    await sync.syncInstances(this.#target(plan, signal), current, wanted);
    const group = lb.SecurityGroups?.[0];
    if (group !== undefined) await this.#groups.syncNodeRules(group, instances, signal);
  }

  /** The running or pending instances among `ids` (a stopped node's instance cannot be registered), in one DescribeInstances. */
  async #live(ids: readonly string[], signal: AbortSignal | undefined): Promise<Instance[]> {
    const found = await Promise.all(ids.map((id) => this.#instances.find({ spec: { providerID: id } }, signal)));
    return found.filter((i): i is Instance => ['running', 'pending'].includes(i?.State?.Name ?? ''));
  }

  #target(plan: ClassicPlan, signal: AbortSignal | undefined): sync.Target {
    return { elb: this.#api.elb, name: plan.name, signal };
  }
}

function serviceNameOf(service: V1Service): string {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

function statusOf(lb: LoadBalancerDescription): V1LoadBalancerStatus {
  return lb.DNSName === undefined ? {} : { ingress: [{ hostname: lb.DNSName }] };
}
