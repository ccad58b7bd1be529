// The `http` provider: a provider in any language, behind protocol v1 — each contract call is one
// JSON request to an endpoint the cloud-config names (docs/providers/http.md, and for endpoint
// authors docs/http-provider-v1.openapi.yaml). cirrus keeps no state of its own here: every call
// goes to the endpoint, which answers for its cloud.

import type { V1LoadBalancerIngress, V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import type { ProviderContext } from '../../shared/cloud/registry.ts';
import {
  defaultLoadBalancerName,
  type CloudProvider,
  type Clusters,
  type Instances,
  type InstancesV2,
  type LoadBalancer,
  type Route,
  type Routes,
  type Zones,
} from '../../shared/cloud/provider.ts';
import { displayUrl } from '../../shared/net/url.ts';
import { ProtocolClient } from './client.ts';
import { parseHttpConfig } from './config.ts';
import { capabilitiesAnswer, type CapabilityName } from './protocol.ts';

export { parseHttpConfig, type HttpConfig } from './config.ts';

/**
 * Builds the provider from the cloud-config in `context`: asks the endpoint for its capabilities
 * (`GET /v1/capabilities`), so an endpoint that cannot be reached at start-up stops the start with
 * an error naming it. Throws CloudConfigError for a cloud-config it cannot use.
 */
export async function createHttpProvider(context: ProviderContext): Promise<CloudProvider> {
  const config = parseHttpConfig(context.config, context.configPath);
  const client = new ProtocolClient(config);
  context.signal.addEventListener('abort', () => {
    client.close();
  });
  let answer;
  try {
    answer = await client.capabilities(capabilitiesAnswer, context.signal);
  } catch (error) {
    client.close();
    // Nothing retries a failed start here: the platform restarts the function.
    const reason = (error as Error).message.replace(/; retrying in .*$/, '');
    throw new Error(`the endpoint ${displayUrl(config.endpoint)} did not say what it supports: ${reason}`, {
      cause: error,
    });
  }
  context.log.info(
    { endpoint: displayUrl(config.endpoint), providerName: answer.providerName, capabilities: answer.capabilities },
    'http provider ready',
  );
  return new HttpCloud(client, answer.providerName, answer.hasClusterId, new Set(answer.capabilities));
}

// Node and Service objects are sent as they are; the endpoint reads what it needs.
class HttpCloud implements CloudProvider {
  readonly #client: ProtocolClient;
  readonly #name: string;
  readonly #clusterId: boolean;
  readonly #supported: ReadonlySet<CapabilityName>;

  constructor(client: ProtocolClient, name: string, clusterId: boolean, supported: ReadonlySet<CapabilityName>) {
    this.#client = client;
    this.#name = name;
    this.#clusterId = clusterId;
    this.#supported = supported;
  }

  providerName(): string {
    return this.#name;
  }

  hasClusterId(): boolean {
    return this.#clusterId;
  }

  loadBalancer(): LoadBalancer | undefined {
    return this.#supported.has('loadBalancer') ? this.#loadBalancer : undefined;
  }

  instances(): Instances | undefined {
    return this.#supported.has('instances') ? this.#instances : undefined;
  }

  instancesV2(): InstancesV2 | undefined {
    return this.#supported.has('instancesV2') ? this.#instancesV2 : undefined;
  }

  zones(): Zones | undefined {
    return this.#supported.has('zones') ? this.#zones : undefined;
  }

  clusters(): Clusters | undefined {
    return this.#supported.has('clusters') ? this.#clusters : undefined;
  }

  routes(): Routes | undefined {
    return this.#supported.has('routes') ? this.#routes : undefined;
  }

  readonly #instancesV2: InstancesV2 = {
    instanceExists: (node: V1Node, signal) => this.#client.call('instanceExists', { node }, signal),
    instanceShutdown: (node: V1Node, signal) => this.#client.call('instanceShutdown', { node }, signal),
    instanceMetadata: async (node: V1Node, signal) =>
      (await this.#client.call('instanceMetadata', { node }, signal)) ?? undefined,
  };

  readonly #instances: Instances = {
    nodeAddresses: (nodeName, signal) => this.#client.call('nodeAddresses', { nodeName }, signal),
    nodeAddressesByProviderId: (providerId, signal) =>
      this.#client.call('nodeAddressesByProviderId', { providerId }, signal),
    instanceId: (nodeName, signal) => this.#client.call('instanceId', { nodeName }, signal),
    instanceType: (nodeName, signal) => this.#client.call('instanceType', { nodeName }, signal),
    instanceTypeByProviderId: (providerId, signal) =>
      this.#client.call('instanceTypeByProviderId', { providerId }, signal),
    instanceExistsByProviderId: (providerId, signal) =>
      this.#client.call('instanceExistsByProviderId', { providerId }, signal),
    instanceShutdownByProviderId: (providerId, signal) =>
      this.#client.call('instanceShutdownByProviderId', { providerId }, signal),
  };

  readonly #zones: Zones = {
    getZoneByProviderId: (providerId, signal) => this.#client.call('getZoneByProviderId', { providerId }, signal),
    getZoneByNodeName: (nodeName, signal) => this.#client.call('getZoneByNodeName', { nodeName }, signal),
  };

  readonly #clusters: Clusters = {
    listClusters: (signal) => this.#client.call('listClusters', {}, signal),
    master: (clusterName, signal) => this.#client.call('master', { clusterName }, signal),
  };

  readonly #routes: Routes = {
    listRoutes: (clusterName, signal) => this.#client.call('listRoutes', { clusterName }, signal),
    createRoute: async (clusterName, nameHint, route: Route, signal) => {
      await this.#client.call('createRoute', { clusterName, nameHint, route }, signal);
    },
    deleteRoute: async (clusterName, route: Route, signal) => {
      await this.#client.call('deleteRoute', { clusterName, route }, signal);
    },
  };

  // The name is upstream's default, computed here: getLoadBalancerName is synchronous, so it
  // cannot ask the endpoint; every load balancer call carries it as loadBalancerName.
  readonly #loadBalancer: LoadBalancer = {
    getLoadBalancer: async (clusterName, service: V1Service, signal) => {
      const status = await this.#client.call('getLoadBalancer', lbBody(clusterName, service), signal);
      return status === null ? undefined : statusOf(status);
    },
    getLoadBalancerName: (_clusterName, service) => defaultLoadBalancerName(service),
    ensureLoadBalancer: async (clusterName, service, nodes, signal) =>
      statusOf(await this.#client.call('ensureLoadBalancer', { ...lbBody(clusterName, service), nodes }, signal)),
    updateLoadBalancer: async (clusterName, service, nodes, signal) => {
      await this.#client.call('updateLoadBalancer', { ...lbBody(clusterName, service), nodes }, signal);
    },
    ensureLoadBalancerDeleted: async (clusterName, service, signal) => {
      await this.#client.call('ensureLoadBalancerDeleted', lbBody(clusterName, service), signal);
    },
  };
}

function lbBody(clusterName: string, service: V1Service): Record<string, unknown> {
  return { clusterName, service, loadBalancerName: defaultLoadBalancerName(service) };
}

// The status without the fields the answer left out (zod's optional fields are present as undefined).
function statusOf(status: { ingress: readonly object[] }): V1LoadBalancerStatus {
  return {
    ingress: status.ingress.map(
      (i) => Object.fromEntries(Object.entries(i).filter(([, v]) => v !== undefined)) as V1LoadBalancerIngress,
    ),
  };
}
