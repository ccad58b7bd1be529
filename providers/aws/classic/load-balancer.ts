// LoadBalancer as a Classic ELB, the kind cloud-provider-aws makes for a Service without the
// `service.beta.kubernetes.io/aws-load-balancer-type` annotation: upstream's name (`a` + the UID),
// tags, listeners, health check, attributes, policies and security groups (./security-groups.ts),
// so that a Classic ELB cloud-provider-aws made is adopted as it is. cirrus only changes or deletes
// a Classic ELB tagged `kubernetes.io/cluster/<id>=owned` and `kubernetes.io/service-name=<ns>/<name>`
// (upstream tags its Classic ELBs so). Which kind serves a Service is chosen in ../load-balancer.ts.
//
// A refused Service (a setting cirrus cannot apply) does not freeze its Classic ELB: the instances
// registered still follow the nodes, and the error says what was not applied (as ../refusal.ts
// does for an NLB).

import {
  ApplySecurityGroupsToLoadBalancerCommand,
  CreateLoadBalancerCommand,
  DeleteLoadBalancerCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  type LoadBalancerDescription,
  type Tag,
} from '@aws-sdk/client-elastic-load-balancing';
import type { Instance } from '@aws-sdk/client-ec2';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { findCause } from '../../../shared/cloud/errors.ts';
import { defaultLoadBalancerName } from '../../../shared/cloud/provider.ts';
import { ANNOTATION_PREFIX } from '../annotations.ts';
import { abortable, errorCode, required, type AwsApi } from '../api.ts';
import type { AwsConfig } from '../config.ts';
import { ForeignResourceError, LoadBalancerNotFoundError, ServiceSettingError } from '../errors.ts';
import type { ServiceWarnings } from '../events.ts';
import { instancesOf } from '../ingress.ts';
import type { AwsInstances } from '../instances.ts';
import { nodeTargets } from '../nlb-plan.ts';
import { SOURCE_RANGES_ANNOTATION } from '../source-ranges.ts';
import { loadBalancerSubnets } from '../subnets.ts';
import { clusterTagKey, isOwned, ownedTags, SERVICE_NAME_TAG, tagValue } from '../tags.ts';
import { classicPlanFor, type ClassicPlan } from './plan.ts';
import * as sync from './reconcile.ts';
import { ClassicSecurityGroups, groupIdOf } from './security-groups.ts';

export class ClassicLoadBalancers {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;
  readonly #instances: AwsInstances;
  readonly #warnings: ServiceWarnings;
  readonly #groups: ClassicSecurityGroups;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances, warnings: ServiceWarnings) {
    this.#api = api;
    this.#config = config;
    this.#instances = instances;
    this.#warnings = warnings;
    this.#groups = new ClassicSecurityGroups(api, config);
  }

  /** The Classic ELB `name`, or undefined. */
  async find(name: string, signal: AbortSignal | undefined): Promise<LoadBalancerDescription | undefined> {
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

  /** Whether `lb` is this cluster's and `service`'s. */
  async isServices(lb: LoadBalancerDescription, service: V1Service, signal: AbortSignal | undefined): Promise<boolean> {
    return this.#ownedBy(await this.#tagsOf(lb, signal), serviceNameOf(service));
  }

  async get(
    service: V1Service,
    found: LoadBalancerDescription,
    signal: AbortSignal | undefined,
  ): Promise<V1LoadBalancerStatus | undefined> {
    return (await this.isServices(found, service, signal)) ? statusOf(found) : undefined;
  }

  async ensure(
    service: V1Service,
    nodes: readonly V1Node[],
    found: LoadBalancerDescription | undefined,
    signal: AbortSignal | undefined,
  ): Promise<V1LoadBalancerStatus> {
    const plan = await this.#plan(service, nodes, found, signal);
    await this.#warnUnenforced(service, plan);
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
    const plan = await this.#plan(service, nodes, found, signal);
    if (found === undefined) throw new LoadBalancerNotFoundError(plan.name);
    await this.#checkOwned(found, plan, signal);
    await this.#syncNodes(found, plan.targets, signal);
  }

  /**
   * Deletes the Service's Classic ELB if it is this Service's, then its own security group (also
   * when an earlier delete stopped after the load balancer), withdrawing the nodes' rules first.
   */
  async delete(service: V1Service, signal: AbortSignal | undefined): Promise<void> {
    const name = defaultLoadBalancerName(service);
    const lb = await this.find(name, signal);
    if (lb !== undefined) {
      if (!this.#ownedBy(await this.#tagsOf(lb, signal), serviceNameOf(service))) return;
      await this.#api.elb.send(new DeleteLoadBalancerCommand({ LoadBalancerName: name }), abortable(signal));
    }
    const plan = { securityGroupName: `k8s-elb-${name}` };
    const [group] = await this.#groups.describeNamed(plan.securityGroupName, signal);
    if (group === undefined || !this.#groups.isOwn(group, plan)) return;
    await this.#groups.removeNodeRules(groupIdOf(group), signal);
    await this.#groups.deleteAfter(name, group, signal);
  }

  // ---- planning and checking

  /** The Service's plan; when a setting is refused, its existing Classic ELB still gets the node set. */
  async #plan(
    service: V1Service,
    nodes: readonly V1Node[],
    found: LoadBalancerDescription | undefined,
    signal: AbortSignal | undefined,
  ): Promise<ClassicPlan> {
    try {
      return classicPlanFor(this.#config, defaultLoadBalancerName(service), service, nodes);
    } catch (error) {
      const refused = findCause(error, ServiceSettingError);
      if (refused === undefined) throw error;
      throw await this.nodesOnly({ service, nodes, found }, refused, signal);
    }
  }

  /** Brings the Service's existing Classic ELB (if it is the Service's) to `nodes` only; the error to throw for `refused`, saying so. */
  async nodesOnly(
    given: {
      readonly service: V1Service;
      readonly nodes: readonly V1Node[];
      readonly found: LoadBalancerDescription | undefined;
    },
    refused: ServiceSettingError,
    signal: AbortSignal | undefined,
  ): Promise<ServiceSettingError> {
    const { service, nodes, found } = given;
    if (found === undefined || !(await this.isServices(found, service, signal)))
      return new ServiceSettingError(refused.setting, `${refused.problem}; nothing was applied`, { cause: refused });
    const wanted = nodeTargets(service, nodes);
    await this.#syncNodes(found, wanted, signal);
    return new ServiceSettingError(
      refused.setting,
      `${refused.problem}; the Service's changes were not applied to load balancer ${found.LoadBalancerName ?? ''}, but its instances follow the ${wanted.length} current target node(s)`,
      { cause: refused },
    );
  }

  /** With the cloud-config's shared ElbSecurityGroup, which cirrus never edits, the Service's ranges are not enforced. */
  async #warnUnenforced(service: V1Service, plan: ClassicPlan): Promise<void> {
    if (this.#groups.shared === undefined || !plan.sourceRanges.given) return;
    await this.#warnings.warn(
      service,
      'SourceRangesNotEnforced',
      `spec.loadBalancerSourceRanges / ${SOURCE_RANGES_ANNOTATION} (${plan.sourceRanges.cidrs.join(', ')}) are not enforced by cirrus: the cloud-config's ElbSecurityGroup ${this.#groups.shared} is shared by every Classic ELB and is yours to restrict`,
    );
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
      throw new ForeignResourceError(
        `load balancer ${plan.name}`,
        `exists but is not tagged ${clusterTagKey(this.#config.clusterId)}=owned and ${SERVICE_NAME_TAG}=${plan.serviceName}`,
      );
    }
    return tags;
  }

  // ---- creating

  async #create(plan: ClassicPlan, signal: AbortSignal | undefined): Promise<V1LoadBalancerStatus> {
    const subnets = await loadBalancerSubnets(this.#api, this.#config, plan, signal);
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
    await this.#syncNodes(created, plan.targets, signal);
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
      throw new ServiceSettingError(
        `${ANNOTATION_PREFIX}internal`,
        `load balancer ${plan.name} is ${lb.Scheme ?? ''}; the scheme of a Classic ELB cannot change (delete and re-create the Service)`,
      );
    }
    await this.#syncGroups(lb, plan, signal);
    const t = this.#target(plan, signal);
    if (plan.subnets !== undefined)
      await sync.syncSubnets(t, lb, await loadBalancerSubnets(this.#api, this.#config, plan, signal));
    await sync.syncListeners(t, lb, plan);
    await sync.syncPolicies(t, lb, plan);
    await sync.syncHealthCheck(t, lb, plan);
    await sync.syncAttributes(t, plan.attributes);
    await sync.syncTags(t, tags, plan);
    await this.#syncNodes(lb, plan.targets, signal);
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
  async #syncNodes(
    lb: LoadBalancerDescription,
    targets: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const current = (lb.Instances ?? []).map((i) => i.InstanceId ?? '');
    const instances = (await instancesOf(this.#instances, targets, signal)).filter(isLive);
    const registrable = new Set(instances.map((i) => i.InstanceId ?? ''));
    const wanted = targets.filter((id) => current.includes(id) || registrable.has(id));
    const name = required(lb.LoadBalancerName, 'a LoadBalancerName');
    await sync.syncInstances({ elb: this.#api.elb, name, signal }, current, wanted);
    const group = lb.SecurityGroups?.[0];
    if (group !== undefined) await this.#groups.syncNodeRules(group, instances, signal);
  }

  #target(plan: ClassicPlan, signal: AbortSignal | undefined): sync.Target {
    return { elb: this.#api.elb, name: plan.name, signal };
  }
}

/** A running or pending instance (a stopped node's instance cannot be registered). */
function isLive(instance: Instance): boolean {
  return ['running', 'pending'].includes(instance.State?.Name ?? '');
}

function serviceNameOf(service: V1Service): string {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

function statusOf(lb: LoadBalancerDescription): V1LoadBalancerStatus {
  return lb.DNSName === undefined ? {} : { ingress: [{ hostname: lb.DNSName }] };
}
