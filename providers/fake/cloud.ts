// The `fake` provider: a recording cloud for tests and the benchmark, after Go's
// k8s.io/cloud-provider/fake. Every call is appended to `calls` (and, once answered, to `answered`),
// counted by method with the most in flight at once; each capability can be switched off; each
// method can be given an error to throw and a latency. Its instances are plain data that a test
// sets up, or made for any node name (`instanceFor`). It can also act as a cloud that throttles
// (`throttle`): above a number of calls in any second, a call is refused with RetryError, as a
// cloud API's rate limit answers (issue 20, row 9).

import type { V1LoadBalancerIngress, V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { InstanceNotFoundError, RetryError } from '../../shared/cloud/errors.ts';
import { defaultLoadBalancerName } from '../../shared/cloud/provider.ts';
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
import { fakePlan } from './plan.ts';
import type { FakeCall, FakeCapability, FakeInstance, FakeLoadBalancer, FakeThrottle } from './types.ts';

/** A recording fake of the whole provider contract. */
export class FakeCloud implements CloudProvider {
  /** The calls the cloud accepted (a throttled call is counted in {@link throttled}, not here). */
  readonly calls: FakeCall[] = [];
  /** The accepted calls in the order they were answered (their latency waited), with or without an error. */
  readonly answered: FakeCall[] = [];
  /**
   * Whether every call is kept in {@link calls} and {@link answered} (the default); off, only the
   * counts and peaks are, so that a long benchmark's cloud does not grow with its calls.
   */
  recordCalls = true;
  /** The accepted calls by method name. */
  readonly callCounts = new Map<string, number>();
  /** The most accepted calls of each method in flight (waiting their latency) at once. */
  readonly peakInFlight = new Map<string, number>();
  readonly #inFlight = new Map<string, number>();
  /**
   * Throttling, or undefined for none: a call arriving when `perSecond` calls were accepted in the
   * last 1000 ms throws RetryError(`retryAfterMs`) before anything else (latency, `errors`) and
   * changes nothing. Refused calls do not count against the window, as with a token bucket.
   */
  throttle: FakeThrottle | undefined;
  /** Calls refused by {@link throttle}. */
  throttled = 0;
  /** Calls refused by {@link throttle}, by method name. */
  readonly throttledByMethod = new Map<string, number>();
  /** The most calls accepted in any 1-s window so far: what a budget must keep at or under its rate plus burst. */
  peakCallsPerSecond = 0;
  // When each accepted call of the last second arrived (performance.now()), oldest first.
  readonly #window: number[] = [];
  readonly machines: FakeInstance[] = [];
  /**
   * The machine of a node name that no machine in {@link machines} has (undefined: none), as a
   * cloud where every node has a machine (the benchmark's, the fault suite's). Its ID must be the
   * node name, so that its provider ID (`fake://<name>`) finds it again. Unset by default.
   */
  instanceFor: ((nodeName: string) => FakeInstance | undefined) | undefined;
  readonly routeTable: Route[] = [];
  /** Load balancers by their name (namespace/name, or the uid with {@link namesByUid}). */
  readonly loadBalancers = new Map<string, FakeLoadBalancer>();
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
  /** The ingress IP ensureLoadBalancer hands out (unless {@link ingressFor} is set). */
  loadBalancerIp = '192.0.2.100';
  /**
   * The ingress of the n-th load balancer (n from 1, counting those that exist when it is made),
   * which then keeps it through later ensures; undefined (the default): every ensure answers
   * {@link loadBalancerIp}.
   */
  ingressFor: ((n: number) => V1LoadBalancerIngress) | undefined;
  clusterNames: string[] = ['kubernetes'];

  /**
   * The name it answers to and the scheme of its provider IDs (`fake://<id>`): another one makes a
   * second fake cloud beside the first, as a hybrid cluster's second provider (ADR 0026).
   */
  scheme = 'fake';

  providerName(): string {
    return this.scheme;
  }

  hasClusterId(): boolean {
    return true;
  }

  /** The same object for the same optional methods, as a provider's accessor answers (tests replace its methods). */
  loadBalancer(): LoadBalancer | undefined {
    const listing = !this.disabled.has('listLoadBalancers');
    const planning = !this.disabled.has('planLoadBalancer');
    const key = `${String(listing)}/${String(planning)}`;
    let lb = this.#loadBalancers.get(key);
    if (lb === undefined) {
      lb = { ...this.#unlistedLoadBalancer, ...(listing ? this.#listing : {}), ...(planning ? this.#planning : {}) };
      this.#loadBalancers.set(key, lb);
    }
    return this.#capability('loadBalancer', lb);
  }
  readonly #loadBalancers = new Map<string, LoadBalancer>();

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
    this.#admit(method);
    const call: FakeCall = { method, args };
    if (this.recordCalls) this.calls.push(call);
    this.callCounts.set(method, (this.callCounts.get(method) ?? 0) + 1);
    const inFlight = (this.#inFlight.get(method) ?? 0) + 1;
    this.#inFlight.set(method, inFlight);
    this.peakInFlight.set(method, Math.max(inFlight, this.peakInFlight.get(method) ?? 0));
    try {
      const latency = this.latencyMs.get(method) ?? this.latencyMs.get('*') ?? 0;
      if (latency > 0) await new Promise((resolve) => setTimeout(resolve, latency));
    } finally {
      this.#answered(call);
    }
    const error = this.errors.get(method);
    if (error) throw error;
  }

  // A call's latency is over: no longer in flight, answered now.
  #answered(call: FakeCall): void {
    this.#inFlight.set(call.method, (this.#inFlight.get(call.method) ?? 1) - 1);
    call.answeredAt = performance.now();
    if (this.recordCalls) this.answered.push(call);
  }

  // Slides the 1-s window and refuses the call when the throttle's limit is reached.
  #admit(method: string): void {
    const now = performance.now();
    while (this.#window.length > 0 && (this.#window[0] ?? now) <= now - 1000) this.#window.shift();
    const limit = this.throttle?.perSecond;
    if (limit !== undefined && this.#window.length >= limit) {
      this.throttled += 1;
      this.throttledByMethod.set(method, (this.throttledByMethod.get(method) ?? 0) + 1);
      const retryAfterMs = this.throttle?.retryAfterMs ?? 0;
      throw new RetryError(`fake cloud: ${method} throttled (more than ${limit} calls a second)`, retryAfterMs);
    }
    this.#window.push(now);
    this.peakCallsPerSecond = Math.max(this.peakCallsPerSecond, this.#window.length);
  }

  #routeError(route: Route): void {
    const error = this.routeErrors.get(route.destinationCidr);
    if (error) throw error;
  }

  #byNode(node: V1Node): FakeInstance | undefined {
    const providerId = node.spec?.providerID;
    if (providerId) return this.#byProviderId(providerId);
    const name = node.metadata?.name;
    return name === undefined ? undefined : this.#byName(name);
  }

  #byProviderId(providerId: string): FakeInstance | undefined {
    const prefix = `${this.scheme}://`;
    const found = this.machines.find((i) => `${prefix}${i.id}` === providerId);
    if (found !== undefined || !providerId.startsWith(prefix)) return found;
    return this.instanceFor?.(providerId.slice(prefix.length));
  }

  #byName(nodeName: string): FakeInstance | undefined {
    return this.machines.find((i) => i.nodeName === nodeName) ?? this.instanceFor?.(nodeName);
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
      return instance.noMetadata ? undefined : metadataOf(instance, this.scheme);
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

  // What ensureLoadBalancer answers for the load balancer `name`.
  #statusFor(name: string): V1LoadBalancerStatus {
    if (this.ingressFor === undefined) return { ingress: [{ ip: this.loadBalancerIp }] };
    return this.loadBalancers.get(name)?.status ?? { ingress: [this.ingressFor(this.loadBalancers.size + 1)] };
  }

  // Every method of the contract's LoadBalancer but the optional ones.
  readonly #unlistedLoadBalancer: LoadBalancer = {
    getLoadBalancer: async (clusterName, service) => {
      await this.#call('getLoadBalancer', clusterName, serviceKey(service));
      return this.loadBalancers.get(this.#lbName(service))?.status;
    },
    // With namesByUid, upstream's default name ("a" + the uid), as the cloud that option stands for.
    getLoadBalancerName: (_clusterName, service) =>
      this.namesByUid ? defaultLoadBalancerName(service) : `fake-${serviceKey(service).replace('/', '-')}`,
    ensureLoadBalancer: async (clusterName, service, nodes) => {
      const names = nodes.map((n) => String(n.metadata?.name));
      await this.#call('ensureLoadBalancer', clusterName, serviceKey(service), names);
      const name = this.#lbName(service);
      const status = this.#statusFor(name);
      this.loadBalancers.set(name, { status, nodes: names, service: identity(service) });
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

  readonly #listing: Pick<LoadBalancer, 'listLoadBalancers'> = {
    listLoadBalancers: async (clusterName) => {
      await this.#call('listLoadBalancers', clusterName);
      return [...this.loadBalancers].map(([name, lb]) => ({ name, service: { ...lb.service } }));
    },
  };

  readonly #planning: Pick<LoadBalancer, 'planLoadBalancer'> = {
    planLoadBalancer: async (clusterName, service, nodes) => {
      const names = nodes.map((n) => String(n.metadata?.name));
      await this.#call('planLoadBalancer', clusterName, serviceKey(service), names);
      return fakePlan({
        name: this.#unlistedLoadBalancer.getLoadBalancerName(clusterName, service),
        service,
        nodes: names,
        existing: this.loadBalancers.get(this.#lbName(service)),
        refusal: this.errors.get('ensureLoadBalancer'),
      });
    },
  };
}

function identity(service: V1Service): FakeLoadBalancer['service'] {
  const { namespace = '', name = '', uid = '' } = service.metadata ?? {};
  return { namespace, name, uid };
}

function metadataOf(instance: FakeInstance, scheme: string): InstanceMetadata {
  return {
    providerId: instance.noProviderId ? '' : `${scheme}://${instance.id}`,
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
