// The service controller's metrics under upstream's names, types, help and buckets
// (k8s.io/cloud-provider controllers/service/metrics.go), recorded where upstream records them
// (controllers/service/controller.go):
//
// - `service_controller_loadbalancer_sync_total`: UpdateLoadBalancer calls for a changed node set
//   (lockedUpdateLoadBalancerHosts; despite its help, upstream counts no EnsureLoadBalancer);
// - `service_controller_update_loadbalancer_host_latency_seconds`: each of those node-set updates,
//   its Events and, after a failure, the check that the load balancer exists included;
// - `service_controller_nodesync_error_total`: those that failed while the load balancer exists;
// - `service_controller_nodesync_latency_seconds`: a pass over every Service (upstream's syncNodes;
//   here the `reconcile.all` the relay sends when nodes change, and periodically).
//
// A dry run calls no provider and records none of them.

import { Counter, Histogram, type Registry } from 'prom-client';

/** Upstream's buckets of both latencies: ExponentialBuckets(1, 2, 15), 1 s to 16384 s. */
export const nodeSyncBuckets: readonly number[] = Array.from({ length: 15 }, (_, i) => 2 ** i);

interface Series {
  readonly loadBalancerSyncs: Counter;
  readonly nodeSyncErrors: Counter;
  readonly nodeSyncLatency: Histogram;
  readonly hostUpdateLatency: Histogram;
}

/** service-lb's upstream series; recording is a no-op until {@link ServiceControllerMetrics.register}. */
export class ServiceControllerMetrics {
  #series: Series | undefined;

  /** Adds the four series to `registry`. */
  register(registry: Registry): void {
    const registers = [registry];
    this.#series = {
      loadBalancerSyncs: new Counter({
        name: 'service_controller_loadbalancer_sync_total',
        help: '[ALPHA] A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster',
        registers,
      }),
      nodeSyncErrors: new Counter({
        name: 'service_controller_nodesync_error_total',
        help: '[ALPHA] A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster',
        registers,
      }),
      nodeSyncLatency: new Histogram({
        name: 'service_controller_nodesync_latency_seconds',
        help: '[ALPHA] A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.',
        buckets: [...nodeSyncBuckets],
        registers,
      }),
      hostUpdateLatency: new Histogram({
        name: 'service_controller_update_loadbalancer_host_latency_seconds',
        help: '[ALPHA] A metric measuring the latency for updating each load balancer hosts.',
        buckets: [...nodeSyncBuckets],
        registers,
      }),
    };
  }

  /** One node-set update of one load balancer, timed; `failed` when it failed and the load balancer exists. */
  async hostUpdate(update: () => Promise<boolean>): Promise<boolean> {
    const series = this.#series;
    series?.loadBalancerSyncs.inc();
    const started = performance.now();
    try {
      const updated = await update();
      if (!updated) series?.nodeSyncErrors.inc();
      return updated;
    } finally {
      series?.hostUpdateLatency.observe((performance.now() - started) / 1000);
    }
  }

  /** A pass over every Service, timed whatever its outcome. */
  async nodeSync<T>(pass: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await pass();
    } finally {
      this.#series?.nodeSyncLatency.observe((performance.now() - started) / 1000);
    }
  }
}
