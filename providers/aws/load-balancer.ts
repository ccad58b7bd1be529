// LoadBalancer for the aws provider: each public method picks the kind of load balancer that serves
// the Service and delegates to its module — Network Load Balancers ./nlb.ts, Classic ELBs
// ./classic/load-balancer.ts — after a Warning for each aws-load-balancer-* annotation that does
// nothing on that kind (./annotations.ts) and each Service field that does nothing (./service-fields.ts).
//
// The kind, as cloud-provider-aws chooses it, so that nothing it made is re-created: the
// aws-load-balancer-type annotation (`nlb`: an NLB; `nlb-ip` and `external`: another controller's);
// without it, the kind of the load balancer the Service already has; a Service with neither gets
// the cloud-config's DefaultLoadBalancerType (upstream's Classic unless set). `nlb` on a Service
// whose load balancer is a Classic ELB is refused, as upstream refuses a change of kind after
// creation (pkg/providers/v1/aws_validations.go, validateServiceAnnotations).

import type { LoadBalancerDescription } from '@aws-sdk/client-elastic-load-balancing';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { defaultLoadBalancerName, type LoadBalancer, type LoadBalancerPlan } from '../../shared/cloud/provider.ts';
import { ANNOTATION_PREFIX, unappliedAnnotations, type Kind } from './annotations.ts';
import type { AwsApi } from './api.ts';
import { ClassicLoadBalancers } from './classic/load-balancer.ts';
import type { AwsConfig } from './config.ts';
import { Elbv2Reader } from './elbv2.ts';
import { ServiceSettingError } from './errors.ts';
import type { ServiceWarnings } from './events.ts';
import type { AwsInstances } from './instances.ts';
import { NetworkLoadBalancers } from './nlb.ts';
import { implementedElsewhere } from './nlb-plan.ts';
import { tlsUnapplied } from './nlb-tls.ts';
import { planEnsure } from './plan.ts';
import { unappliedFields } from './service-fields.ts';

const TYPE_ANNOTATION = `${ANNOTATION_PREFIX}type`;

/** Which kind serves a Service; for Classic, the one found (undefined: none yet). */
type Route =
  { readonly kind: 'nlb' } | { readonly kind: 'classic'; readonly found: LoadBalancerDescription | undefined };

export class AwsLoadBalancer implements LoadBalancer {
  readonly #api: AwsApi;
  readonly #instances: AwsInstances;
  readonly #config: AwsConfig;
  readonly #warnings: ServiceWarnings;
  readonly #nlb: NetworkLoadBalancers;
  readonly #classic: ClassicLoadBalancers;
  readonly #nlbs: Elbv2Reader;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances, warnings: ServiceWarnings) {
    this.#api = api;
    this.#instances = instances;
    this.#config = config;
    this.#warnings = warnings;
    this.#nlb = new NetworkLoadBalancers(api, config, instances, warnings);
    this.#classic = new ClassicLoadBalancers(api, config, instances, warnings);
    this.#nlbs = new Elbv2Reader(api, config);
  }

  getLoadBalancerName(_clusterName: string, service: V1Service): string {
    return defaultLoadBalancerName(service);
  }

  async getLoadBalancer(
    _clusterName: string,
    service: V1Service,
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus | undefined> {
    const route = await this.#route(service, undefined, signal);
    if (route.kind === 'nlb') return this.#nlb.get(service, signal);
    return route.found === undefined ? undefined : this.#classic.get(service, route.found, signal);
  }

  async ensureLoadBalancer(
    clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus> {
    const route = await this.#route(service, nodes, signal);
    await this.#warnUnapplied(service, route.kind);
    if (route.kind === 'nlb') return this.#nlb.ensure(clusterName, service, nodes, signal);
    return this.#classic.ensure(service, nodes, route.found, signal);
  }

  /** The ensure itself, against clients that only read (./plan.ts). */
  planLoadBalancer(
    clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<LoadBalancerPlan> {
    return planEnsure(this.#api, service, (api, warnings) =>
      new AwsLoadBalancer(api, this.#config, this.#instances, warnings).ensureLoadBalancer(
        clusterName,
        service,
        nodes,
        signal,
      ),
    );
  }

  async updateLoadBalancer(
    _clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<void> {
    const route = await this.#route(service, nodes, signal);
    if (route.kind === 'nlb') return this.#nlb.update(service, nodes, signal);
    return this.#classic.update(service, nodes, route.found, signal);
  }

  /** Whatever kind the Service had: each module removes only what is this Service's. */
  async ensureLoadBalancerDeleted(clusterName: string, service: V1Service, signal?: AbortSignal): Promise<void> {
    if (implementedElsewhere(service)) return;
    await this.#classic.delete(service, signal);
    await this.#nlb.delete(clusterName, service, signal);
  }

  /** The kind that serves `service`; with `nodes` (ensure, update), a change of kind is refused. */
  async #route(
    service: V1Service,
    nodes: readonly V1Node[] | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Route> {
    const name = defaultLoadBalancerName(service);
    const type = service.metadata?.annotations?.[TYPE_ANNOTATION];
    if (type !== undefined) {
      if (type === 'nlb' && nodes !== undefined) await this.#refuseKindChange(service, nodes, signal);
      return { kind: 'nlb' };
    }
    const found = await this.#classic.find(name, signal);
    if (found !== undefined) return { kind: 'classic', found };
    if (this.#config.defaultLoadBalancerType === 'nlb') return { kind: 'nlb' };
    // An NLB the Service already has is kept, whatever the default (cirrus may have made it).
    if ((await this.#nlbs.find(name, signal)) !== undefined) return { kind: 'nlb' };
    return { kind: 'classic', found: undefined };
  }

  /** Refuses `nlb` on a Service whose Classic ELB is its own; that ELB still follows the nodes. */
  async #refuseKindChange(
    service: V1Service,
    nodes: readonly V1Node[],
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const name = defaultLoadBalancerName(service);
    const found = await this.#classic.find(name, signal);
    if (found === undefined || !(await this.#classic.isServices(found, service, signal))) return;
    const refused = new ServiceSettingError(
      TYPE_ANNOTATION,
      `"nlb" on a Service whose load balancer ${name} is a Classic ELB: the kind of a load balancer is not changed after creation (as cloud-provider-aws); remove the annotation, or delete and re-create the Service`,
    );
    throw await this.#classic.nodesOnly({ service, nodes, found }, refused, signal);
  }

  /** A Warning per aws-load-balancer-* annotation that does nothing on `kind`, and per Service field that does nothing (./service-fields.ts); none for another controller's Service. */
  async #warnUnapplied(service: V1Service, kind: Kind): Promise<void> {
    if (implementedElsewhere(service)) return;
    const unapplied = unappliedAnnotations(service.metadata?.annotations ?? {}, kind);
    if (kind === 'nlb') unapplied.push(...tlsUnapplied(service));
    for (const { annotation, why } of unapplied)
      await this.#warnings.warn(service, 'AnnotationNotApplied', `${annotation}: ${why}`);
    for (const { field, why } of unappliedFields(service))
      await this.#warnings.warn(service, 'FieldNotApplied', `${field}: ${why}`);
  }
}
