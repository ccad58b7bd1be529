// The benchmark cloud (performance.md §9): fixed answers for any node name, so that cirrus and the Go
// CCM write identical objects; every call waits `latencyMs`, ensure/update/delete load balancer wait
// `lbLatencyMs`; waits hold no lock. Calls are counted per method, and updateLoadBalancer is logged
// with its time for the node-sync scenario.

import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import type {
  CloudProvider,
  InstanceMetadata,
  InstancesV2,
  LoadBalancer,
  Route,
  Routes,
} from '../../shared/cloud/provider.ts';
import { defaultLoadBalancerName } from '../../shared/cloud/provider.ts';
import { sleep } from './kube.ts';

export class BenchCloud implements CloudProvider {
  latencyMs = 0;
  lbLatencyMs = 0;
  readonly calls: Record<string, number> = {};
  /** The most calls of each method seen in flight at once. */
  readonly maxInFlight: Record<string, number> = {};
  readonly #inFlight: Record<string, number> = {};
  /** Each updateLoadBalancer: the Service key, the node names, and when it returned (performance.now()). */
  readonly updates: { service: string; nodes: string[]; at: number }[] = [];
  readonly #balancers = new Map<string, V1LoadBalancerStatus>();
  readonly #routeTable: Route[] = [];

  providerName(): string {
    return 'fake';
  }
  hasClusterId(): boolean {
    return true;
  }
  instances(): undefined {
    return undefined;
  }
  zones(): undefined {
    return undefined;
  }
  clusters(): undefined {
    return undefined;
  }
  instancesV2(): InstancesV2 {
    return this.#instancesV2;
  }
  loadBalancer(): LoadBalancer {
    return this.#loadBalancer;
  }
  routes(): Routes {
    return this.#routes;
  }

  async #call(method: string, ms = this.latencyMs): Promise<void> {
    this.calls[method] = (this.calls[method] ?? 0) + 1;
    const now = (this.#inFlight[method] ?? 0) + 1;
    this.#inFlight[method] = now;
    this.maxInFlight[method] = Math.max(now, this.maxInFlight[method] ?? 0);
    try {
      await sleep(ms);
    } finally {
      this.#inFlight[method] = (this.#inFlight[method] ?? 1) - 1;
    }
  }

  readonly #instancesV2: InstancesV2 = {
    instanceExists: async () => {
      await this.#call('instanceExists');
      return true;
    },
    instanceShutdown: async () => {
      await this.#call('instanceShutdown');
      return false;
    },
    instanceMetadata: async (node) => {
      await this.#call('instanceMetadata');
      return metadataFor(node.metadata?.name ?? '');
    },
  };

  readonly #loadBalancer: LoadBalancer = {
    getLoadBalancer: async (_cluster, service) => {
      await this.#call('getLoadBalancer');
      return this.#balancers.get(defaultLoadBalancerName(service));
    },
    getLoadBalancerName: (_cluster, service) => defaultLoadBalancerName(service),
    ensureLoadBalancer: async (_cluster, service) => {
      await this.#call('ensureLoadBalancer', this.lbLatencyMs);
      const name = defaultLoadBalancerName(service);
      const status = this.#balancers.get(name) ?? {
        ingress: [{ ip: ipPlus(0xc6120000, this.#balancers.size + 1), ipMode: 'VIP' }],
      };
      this.#balancers.set(name, status);
      return status;
    },
    updateLoadBalancer: async (_cluster, service, nodes) => {
      await this.#call('updateLoadBalancer', this.lbLatencyMs);
      this.updates.push({
        service: keyOf(service),
        nodes: nodes.map((n: V1Node) => n.metadata?.name ?? ''),
        at: performance.now(),
      });
    },
    ensureLoadBalancerDeleted: async (_cluster, service) => {
      await this.#call('ensureLoadBalancerDeleted', this.lbLatencyMs);
      this.#balancers.delete(defaultLoadBalancerName(service));
    },
  };

  readonly #routes: Routes = {
    listRoutes: async () => {
      await this.#call('listRoutes');
      return this.#routeTable.map((r) => ({ ...r }));
    },
    createRoute: async (cluster, hint, route) => {
      await this.#call('createRoute');
      this.#routeTable.push({ ...route, name: `${cluster}-${hint}` });
    },
    deleteRoute: async (_cluster, route) => {
      await this.#call('deleteRoute');
      const index = this.#routeTable.findIndex(
        (r) => r.name === route.name && r.destinationCidr === route.destinationCidr,
      );
      if (index >= 0) this.#routeTable.splice(index, 1);
    },
  };
}

function metadataFor(name: string): InstanceMetadata {
  const h = fnv1a(name);
  return {
    providerId: `fake://${name}`,
    instanceType: 'fake.medium',
    nodeAddresses: [{ type: 'InternalIP', address: `10.${(h >>> 16) & 255}.${(h >>> 8) & 255}.${h & 255}` }],
    zone: 'fake-zone-a',
    region: 'fake-region-1',
    additionalLabels: {},
  };
}

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

function ipPlus(base: number, n: number): string {
  const v = (base + n) >>> 0;
  return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
}

function keyOf(service: V1Service): string {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}
