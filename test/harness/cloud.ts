// The benchmark's cloud: the recording fake (providers/fake) set to answer as bench/go-ccm/cloud.go
// answers the Go CCM, so that cirrus and the Go CCM write identical objects. Every node name is a
// machine (provider ID fake://<name>, an InternalIP from the FNV-1a hash of the name, fake.medium,
// fake-zone-a, fake-region-1); load balancers are found by the Service's uid (upstream's default
// name is "a" + the uid) and the n-th new one gets 198.18.0.0 + n; there are InstancesV2, load
// balancers (without listLoadBalancers) and routes, and no Instances, Zones or Clusters.
//
// Every call waits `latencyMs`, and ensure, update and delete of a load balancer `lbLatencyMs`;
// forget() removes a node's machine (the scale scenario). The benchmark reads the fake's records
// as it reports them: calls and the most in flight by
// method, and each updateLoadBalancer with the time it returned (the node-sync scenario), its
// node set kept as bench/go-ccm/calls.go keeps it (node-sets.ts): a bitset over numbered names.

import type {
  CloudProvider,
  Clusters,
  Instances,
  InstancesV2,
  LoadBalancer,
  Routes,
  Zones,
} from '../../shared/cloud/provider.ts';
import { FakeCloud, type FakeInstance } from '../../providers/fake/index.ts';
import { NodeSetReader, NodeSetRecorder } from './node-sets.ts';

/** One updateLoadBalancer: the Service key, the node names, and when it returned (performance.now()). */
export interface LoadBalancerUpdate {
  readonly service: string;
  readonly nodes: string[];
  readonly at: number;
}

/** One updateLoadBalancer as the cloud keeps it: its node set is a NodeSetRecorder's. */
export interface RecordedUpdate {
  readonly service: string;
  readonly nodes: string;
  readonly at: number;
}

const loadBalancerWrites = ['ensureLoadBalancer', 'updateLoadBalancer', 'ensureLoadBalancerDeleted'];

export class BenchCloud implements CloudProvider {
  /** The recording cloud behind it. */
  readonly fake = new FakeCloud();
  readonly #updates: RecordedUpdate[] = [];
  // The updates' node sets, each distinct one kept once as a bitset (at thousands of Nodes and
  // Services, their names would be most of the process's memory).
  readonly #nodeSets = new NodeSetRecorder();
  // For `updates` only (tests and scenarios in this process): their names, decoded as asked.
  #reader: NodeSetReader | undefined;
  readonly #decoded: LoadBalancerUpdate[] = [];
  #loadBalancer: LoadBalancer | undefined;
  // Node names whose machines are gone (forget()).
  readonly #gone = new Set<string>();

  constructor() {
    for (const capability of ['instances', 'zones', 'clusters', 'listLoadBalancers'] as const)
      this.fake.disabled.add(capability);
    this.fake.instanceFor = (name) => (this.#gone.has(name) ? undefined : machineFor(name));
    this.fake.namesByUid = true;
    // Counts and peaks only: the updates are kept here, as bench/go-ccm keeps them.
    this.fake.recordCalls = false;
    this.fake.ingressFor = (n) => ({ ip: ipPlus(0xc6120000, n), ipMode: 'VIP' });
    this.lbLatencyMs = 0;
  }

  /** The latency of every call but a load balancer's ensure, update and delete, in ms. */
  get latencyMs(): number {
    return this.fake.latencyMs.get('*') ?? 0;
  }
  set latencyMs(ms: number) {
    this.fake.latencyMs.set('*', ms);
  }

  /** The latency of a load balancer's ensure, update and delete, in ms. */
  get lbLatencyMs(): number {
    return this.fake.latencyMs.get('ensureLoadBalancer') ?? 0;
  }
  set lbLatencyMs(ms: number) {
    for (const method of loadBalancerWrites) this.fake.latencyMs.set(method, ms);
  }

  /** The machine of node `name` is gone from now on: instanceExists answers false, as bench/go-ccm does. */
  forget(name: string): void {
    this.#gone.add(name);
  }

  /** The calls by method. */
  get calls(): Record<string, number> {
    return Object.fromEntries(this.fake.callCounts);
  }

  /** The most calls of each method seen in flight at once. */
  get maxInFlight(): Record<string, number> {
    return Object.fromEntries(this.fake.peakInFlight);
  }

  /** Each updateLoadBalancer, in the order they returned (`at`: performance.now()), with its node names. */
  get updates(): readonly LoadBalancerUpdate[] {
    const reader = (this.#reader ??= new NodeSetReader());
    reader.names.push(...this.#nodeSets.names.slice(reader.names.length));
    for (const u of this.#updates.slice(this.#decoded.length))
      this.#decoded.push({ ...u, nodes: reader.decode(u.nodes) });
    return this.#decoded;
  }

  /**
   * The updates from the `from`-th on, at most `limit`, as kept (`at`: performance.now()), and
   * the names of nodes from the `namesFrom`-th on (every node the updates name is among the first
   * names.length): what bench/compare/provider.ts serves.
   */
  recorded(from: number, limit: number, namesFrom: number): { updates: RecordedUpdate[]; names: string[] } {
    return {
      updates: this.#updates.slice(from, from + limit),
      names: this.#nodeSets.names.slice(namesFrom),
    };
  }

  /** How many updates there are. */
  get updatesTotal(): number {
    return this.#updates.length;
  }

  providerName(): string {
    return this.fake.providerName();
  }
  hasClusterId(): boolean {
    return this.fake.hasClusterId();
  }
  instances(): Instances | undefined {
    return this.fake.instances();
  }
  instancesV2(): InstancesV2 | undefined {
    return this.fake.instancesV2();
  }
  zones(): Zones | undefined {
    return this.fake.zones();
  }
  clusters(): Clusters | undefined {
    return this.fake.clusters();
  }
  loadBalancer(): LoadBalancer | undefined {
    const inner = this.fake.loadBalancer();
    if (inner === undefined) return undefined;
    // The same object on every call, as a provider's accessor answers.
    this.#loadBalancer ??= {
      ...inner,
      updateLoadBalancer: async (clusterName, service, nodes, signal) => {
        await inner.updateLoadBalancer(clusterName, service, nodes, signal);
        const { namespace = '', name = '' } = service.metadata ?? {};
        const set = this.#nodeSets.record(nodes, (n) => String(n.metadata?.name));
        this.#updates.push({ service: `${namespace}/${name}`, nodes: set, at: performance.now() });
      },
    };
    return this.#loadBalancer;
  }

  routes(): Routes | undefined {
    return this.fake.routes();
  }
}

/** The machine the benchmark's cloud has for the node `name` (bench/go-ccm/cloud.go InstanceMetadata). */
export function machineFor(name: string): FakeInstance {
  const h = fnv1a(name);
  return {
    id: name,
    nodeName: name,
    instanceType: 'fake.medium',
    addresses: [{ type: 'InternalIP', address: `10.${(h >>> 16) & 255}.${(h >>> 8) & 255}.${h & 255}` }],
    zone: 'fake-zone-a',
    region: 'fake-region-1',
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
