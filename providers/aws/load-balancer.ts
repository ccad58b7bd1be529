// LoadBalancer for the aws provider: each public method picks the module that makes the Service's
// kind of load balancer and delegates to it. Network Load Balancers: ./nlb.ts.

import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { defaultLoadBalancerName, type LoadBalancer } from '../../shared/cloud/provider.ts';
import type { AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import type { ServiceWarnings } from './events.ts';
import type { AwsInstances } from './instances.ts';
import { NetworkLoadBalancers } from './nlb.ts';

export class AwsLoadBalancer implements LoadBalancer {
  readonly #nlb: NetworkLoadBalancers;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances, warnings: ServiceWarnings) {
    this.#nlb = new NetworkLoadBalancers(api, config, instances, warnings);
  }

  getLoadBalancerName(_clusterName: string, service: V1Service): string {
    return defaultLoadBalancerName(service);
  }

  getLoadBalancer(
    _clusterName: string,
    service: V1Service,
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus | undefined> {
    return this.#nlb.get(service, signal);
  }

  ensureLoadBalancer(
    _clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus> {
    return this.#nlb.ensure(service, nodes, signal);
  }

  updateLoadBalancer(
    _clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<void> {
    return this.#nlb.update(service, nodes, signal);
  }

  ensureLoadBalancerDeleted(_clusterName: string, service: V1Service, signal?: AbortSignal): Promise<void> {
    return this.#nlb.delete(service, signal);
  }
}
