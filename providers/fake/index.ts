// The `fake` provider: a recording cloud for tests, after Go's k8s.io/cloud-provider/fake.
// Every call is appended to `calls`; each capability can be switched off; each method can be
// given an error to throw and a latency. Its instances are plain data that a test sets up.

import type { V1LoadBalancerStatus, V1Node, V1NodeAddress, V1Service } from '@kubernetes/client-node';
import { CloudConfigError, InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import type { ProviderContext } from '../../shared/cloud/registry.ts';
import type {
  CloudProvider,
  Clusters,
  InstanceMetadata,
  Instances,
  InstancesV2,
  LoadBalancer,
  Route,
  Routes,
  Zone,
  Zones,
} from '../../shared/cloud/provider.ts';

/** A machine in the fake cloud (FakeCloud.machines). */
export interface FakeInstance {
  /** The instance ID; the provider ID is `fake://<id>`. */
  readonly id: string;
  /** The Node name it answers to in name-based calls. */
  readonly nodeName: string;
  readonly instanceType?: string;
  readonly addresses?: readonly V1NodeAddress[];
  readonly zone?: string;
  readonly region?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly shutdown?: boolean;
  /** Make instanceMetadata() answer undefined ("nothing yet"). */
  readonly noMetadata?: boolean;
  /** Make instanceMetadata() answer an empty provider ID. */
  readonly noProviderId?: boolean;
}

/** The capabilities a FakeCloud can switch off. */
export type FakeCapability = 'loadBalancer' | 'instances' | 'instancesV2' | 'zones' | 'clusters' | 'routes';

/** One recorded call: the method and its arguments (Nodes and Services by name). */
export interface FakeCall {
  readonly method: string;
  readonly args: readonly unknown[];
}

/** A recording fake of the whole provider contract. */
export class FakeCloud implements CloudProvider {
  readonly calls: FakeCall[] = [];
  readonly machines: FakeInstance[] = [];
  readonly routeTable: Route[] = [];
  /** Load balancers by their name (namespace/name, or the uid with {@link namesByUid}). */
  readonly loadBalancers = new Map<string, { status: V1LoadBalancerStatus; nodes: string[] }>();
  /**
   * Find load balancers by the Service's uid alone, as a cloud does whose load balancers carry
   * upstream's default name ("a" + the uid): a Service object that claims another's uid reaches
   * that one's load balancer.
   */
  namesByUid = false;
  /** Capabilities that answer undefined. */
  readonly disabled = new Set<FakeCapability>();
  /** Errors thrown by a method, by method name (`instanceMetadata`, `ensureLoadBalancer`, …). */
  readonly errors = new Map<string, Error>();
  /** Latency of a method in milliseconds, by method name; `*` applies to every method. */
  readonly latencyMs = new Map<string, number>();
  /**
   * Errors thrown by createRoute and deleteRoute for one route, by its destination CIDR (after
   * latency and `errors`; the route table is then left as it was): one failing route among many.
   */
  readonly routeErrors = new Map<string, Error>();
  /**
   * Whether routes created from now on opt in to node addresses (`enableNodeAddresses`), like a
   * provider that programs routes to the node's addresses and wants them compared.
   */
  routesEnableNodeAddresses = false;
  /** The ingress IP ensureLoadBalancer hands out. */
  loadBalancerIp = '192.0.2.100';
  clusterNames: string[] = ['kubernetes'];

  providerName(): string {
    return 'fake';
  }

  hasClusterId(): boolean {
    return true;
  }

  loadBalancer(): LoadBalancer | undefined {
    return this.#capability('loadBalancer', this.#loadBalancer);
  }

  instances(): Instances | undefined {
    return this.#capability('instances', this.#instances);
  }

  instancesV2(): InstancesV2 | undefined {
    return this.#capability('instancesV2', this.#instancesV2);
  }

  zones(): Zones | undefined {
    return this.#capability('zones', this.#zones);
  }

  clusters(): Clusters | undefined {
    return this.#capability('clusters', this.#clusters);
  }

  routes(): Routes | undefined {
    return this.#capability('routes', this.#routes);
  }

  /** The recorded method names, in order. */
  methods(): string[] {
    return this.calls.map((c) => c.method);
  }

  #capability<T>(name: FakeCapability, impl: T): T | undefined {
    return this.disabled.has(name) ? undefined : impl;
  }

  // Records the call, waits the configured latency, then throws the configured error if any.
  async #call(method: string, ...args: unknown[]): Promise<void> {
    this.calls.push({ method, args });
    const latency = this.latencyMs.get(method) ?? this.latencyMs.get('*') ?? 0;
    if (latency > 0) await new Promise((resolve) => setTimeout(resolve, latency));
    const error = this.errors.get(method);
    if (error) throw error;
  }

  #routeError(route: Route): void {
    const error = this.routeErrors.get(route.destinationCidr);
    if (error) throw error;
  }

  #byNode(node: V1Node): FakeInstance | undefined {
    const providerId = node.spec?.providerID;
    if (providerId) return this.#byProviderId(providerId);
    return this.machines.find((i) => i.nodeName === node.metadata?.name);
  }

  #byProviderId(providerId: string): FakeInstance | undefined {
    return this.machines.find((i) => `fake://${i.id}` === providerId);
  }

  #byName(nodeName: string): FakeInstance | undefined {
    return this.machines.find((i) => i.nodeName === nodeName);
  }

  #found(instance: FakeInstance | undefined, what: string): FakeInstance {
    if (instance === undefined) throw new InstanceNotFoundError(`instance not found: ${what}`);
    return instance;
  }

  readonly #instancesV2: InstancesV2 = {
    instanceExists: async (node) => {
      await this.#call('instanceExists', node.metadata?.name);
      return this.#byNode(node) !== undefined;
    },
    instanceShutdown: async (node) => {
      await this.#call('instanceShutdown', node.metadata?.name);
      return this.#found(this.#byNode(node), String(node.metadata?.name)).shutdown === true;
    },
    instanceMetadata: async (node) => {
      await this.#call('instanceMetadata', node.metadata?.name);
      const instance = this.#found(this.#byNode(node), String(node.metadata?.name));
      return instance.noMetadata ? undefined : metadataOf(instance);
    },
  };

  readonly #instances: Instances = {
    nodeAddresses: async (nodeName) => {
      await this.#call('nodeAddresses', nodeName);
      return [...(this.#found(this.#byName(nodeName), nodeName).addresses ?? [])];
    },
    nodeAddressesByProviderId: async (providerId) => {
      await this.#call('nodeAddressesByProviderId', providerId);
      return [...(this.#found(this.#byProviderId(providerId), providerId).addresses ?? [])];
    },
    instanceId: async (nodeName) => {
      await this.#call('instanceId', nodeName);
      return this.#found(this.#byName(nodeName), nodeName).id;
    },
    instanceType: async (nodeName) => {
      await this.#call('instanceType', nodeName);
      return this.#found(this.#byName(nodeName), nodeName).instanceType ?? '';
    },
    instanceTypeByProviderId: async (providerId) => {
      await this.#call('instanceTypeByProviderId', providerId);
      return this.#found(this.#byProviderId(providerId), providerId).instanceType ?? '';
    },
    instanceExistsByProviderId: async (providerId) => {
      await this.#call('instanceExistsByProviderId', providerId);
      return this.#byProviderId(providerId) !== undefined;
    },
    instanceShutdownByProviderId: async (providerId) => {
      await this.#call('instanceShutdownByProviderId', providerId);
      return this.#found(this.#byProviderId(providerId), providerId).shutdown === true;
    },
  };

  readonly #zones: Zones = {
    getZoneByProviderId: async (providerId) => {
      await this.#call('getZoneByProviderId', providerId);
      return zoneOf(this.#found(this.#byProviderId(providerId), providerId));
    },
    getZoneByNodeName: async (nodeName) => {
      await this.#call('getZoneByNodeName', nodeName);
      return zoneOf(this.#found(this.#byName(nodeName), nodeName));
    },
  };

  readonly #clusters: Clusters = {
    listClusters: async () => {
      await this.#call('listClusters');
      return [...this.clusterNames];
    },
    master: async (clusterName) => {
      await this.#call('master', clusterName);
      return `https://${clusterName}.master.fake`;
    },
  };

  readonly #routes: Routes = {
    listRoutes: async (clusterName) => {
      await this.#call('listRoutes', clusterName);
      return this.routeTable.map((r) => ({ ...r }));
    },
    createRoute: async (clusterName, nameHint, route) => {
      await this.#call('createRoute', clusterName, nameHint, route);
      this.#routeError(route);
      const enableNodeAddresses = route.enableNodeAddresses || this.routesEnableNodeAddresses;
      this.routeTable.push({ ...route, name: `${clusterName}-${nameHint}`, enableNodeAddresses });
    },
    deleteRoute: async (clusterName, route) => {
      await this.#call('deleteRoute', clusterName, route);
      this.#routeError(route);
      // By name and destination: a dual-stack node's two routes share the name made from its UID.
      const index = this.routeTable.findIndex(
        (r) => r.name === route.name && r.destinationCidr === route.destinationCidr,
      );
      if (index >= 0) this.routeTable.splice(index, 1);
    },
  };

  #lbName(service: V1Service): string {
    return this.namesByUid ? `uid:${service.metadata?.uid ?? ''}` : serviceKey(service);
  }

  readonly #loadBalancer: LoadBalancer = {
    getLoadBalancer: async (clusterName, service) => {
      await this.#call('getLoadBalancer', clusterName, serviceKey(service));
      return this.loadBalancers.get(this.#lbName(service))?.status;
    },
    getLoadBalancerName: (_clusterName, service) => `fake-${serviceKey(service).replace('/', '-')}`,
    ensureLoadBalancer: async (clusterName, service, nodes) => {
      const names = nodes.map((n) => String(n.metadata?.name));
      await this.#call('ensureLoadBalancer', clusterName, serviceKey(service), names);
      const status = { ingress: [{ ip: this.loadBalancerIp }] };
      this.loadBalancers.set(this.#lbName(service), { status, nodes: names });
      return status;
    },
    updateLoadBalancer: async (clusterName, service, nodes) => {
      const names = nodes.map((n) => String(n.metadata?.name));
      await this.#call('updateLoadBalancer', clusterName, serviceKey(service), names);
      const existing = this.loadBalancers.get(this.#lbName(service));
      if (existing) existing.nodes = names;
    },
    ensureLoadBalancerDeleted: async (clusterName, service) => {
      await this.#call('ensureLoadBalancerDeleted', clusterName, serviceKey(service));
      this.loadBalancers.delete(this.#lbName(service));
    },
  };
}

function metadataOf(instance: FakeInstance): InstanceMetadata {
  return {
    providerId: instance.noProviderId ? '' : `fake://${instance.id}`,
    instanceType: instance.instanceType ?? '',
    nodeAddresses: (instance.addresses ?? []).map((a) => ({ ...a })),
    zone: instance.zone ?? '',
    region: instance.region ?? '',
    additionalLabels: { ...instance.labels },
  };
}

function zoneOf(instance: FakeInstance): Zone {
  return { failureDomain: instance.zone ?? '', region: instance.region ?? '' };
}

function serviceKey(service: V1Service): string {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

/** The registry's factory: an empty FakeCloud. The fake takes no cloud-config. */
export function fakeFromConfig(context: ProviderContext): FakeCloud {
  if (context.config !== undefined) {
    throw new CloudConfigError(context.configPath, '', 'the fake provider takes no cloud-config');
  }
  return new FakeCloud();
}
