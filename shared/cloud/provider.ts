// The provider contract: a TypeScript rendering of k8s.io/cloud-provider's `cloudprovider.Interface`.
//
// A provider supports some capabilities and not others: each accessor returns the implementation
// or `undefined` ("not supported"), and each function checks at start-up for what it needs.
// Implementations must treat every Node and Service they are given as read-only, and must be safe
// to call from many stateless function instances at once (nothing may rely on in-process state
// surviving between calls). Outcomes the contract defines are the typed errors of ./errors.ts.

import type { KubeConfig, V1LoadBalancerStatus, V1Node, V1NodeAddress, V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';

/** A cloud provider, as returned by the factory it was registered with. */
export interface CloudProvider {
  /** The provider's name: the prefix of the provider IDs it hands out (`<name>://<id>`). */
  providerName(): string;
  /** Whether the provider tags resources with a cluster ID. */
  hasClusterId(): boolean;
  loadBalancer(): LoadBalancer | undefined;
  /** The legacy, name-based instances interface. Used only when instancesV2() is undefined. */
  instances(): Instances | undefined;
  /** Node-based instances interface; when present, zones() is never consulted for nodes. */
  instancesV2(): InstancesV2 | undefined;
  /** Deprecated upstream: with InstancesV2, zones come from instanceMetadata(). Used only on the legacy path. */
  zones(): Zones | undefined;
  clusters(): Clusters | undefined;
  routes(): Routes | undefined;
  /**
   * Optional: what the provider needs of the cluster before any function runs, checked once at
   * start-up by the commands that act on an existing cluster (`cirrus start`, `cirrus serve`,
   * `cirrus conformance` with a kubeconfig; not the Lambda entry, whose cold start reaches no
   * cluster). It may create what is missing where `context.mayCreate` allows and the identity
   * has the right (and says what it did in `created`); anything it cannot have is a problem, a
   * sentence naming what is missing and how to provide it, and the command stops with them all.
   */
  preflight?(context: PreflightContext): Promise<PreflightReport>;
}

/** What a provider's preflight gets. */
export interface PreflightContext {
  /** The cluster the functions will act on. */
  readonly kubeConfig: KubeConfig;
  /** Whether the preflight may create what is missing (a namespace): false on a dry run. */
  readonly mayCreate: boolean;
  /** Whether a function that uses the provider's load balancers will run: a provider checks what will be used. */
  readonly loadBalancers: boolean;
  readonly log: Logger;
  readonly signal: AbortSignal;
}

/** What a provider's preflight found: what it created, and what it lacks (empty: all is ready). */
export interface PreflightReport {
  readonly created: readonly string[];
  readonly problems: readonly string[];
}

/** What the cloud knows of the instance behind a Node. */
export interface InstanceMetadata {
  /** `<provider>://<id>`; written to `spec.providerID` when the Node has none. */
  readonly providerId: string;
  readonly instanceType: string;
  readonly nodeAddresses: readonly V1NodeAddress[];
  readonly zone: string;
  readonly region: string;
  /** Extra labels: never overwrite a label the Node has, never in the kubernetes.io / k8s.io domains. */
  readonly additionalLabels: Readonly<Record<string, string>>;
}

/**
 * Instances found from the Node object. Implementations should look at `spec.providerID` first,
 * then at the name, labels and annotations.
 */
export interface InstancesV2 {
  /** Whether the instance exists; true for a stopped instance. */
  instanceExists(node: V1Node, signal?: AbortSignal): Promise<boolean>;
  /** Whether the instance is shut down. */
  instanceShutdown(node: V1Node, signal?: AbortSignal): Promise<boolean>;
  /** The instance's metadata; `undefined` when there is nothing to apply yet (the Node stays tainted). */
  instanceMetadata(node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata | undefined>;
}

/** The legacy, name- and provider-ID-based instances interface. */
export interface Instances {
  nodeAddresses(nodeName: string, signal?: AbortSignal): Promise<V1NodeAddress[]>;
  nodeAddressesByProviderId(providerId: string, signal?: AbortSignal): Promise<V1NodeAddress[]>;
  /** The instance ID (not the provider ID). Throws InstanceNotFoundError for a missing instance, not for a stopped one. */
  instanceId(nodeName: string, signal?: AbortSignal): Promise<string>;
  instanceType(nodeName: string, signal?: AbortSignal): Promise<string>;
  instanceTypeByProviderId(providerId: string, signal?: AbortSignal): Promise<string>;
  /** False means the instance is gone and the Node may be deleted; true for a stopped instance. */
  instanceExistsByProviderId(providerId: string, signal?: AbortSignal): Promise<boolean>;
  instanceShutdownByProviderId(providerId: string, signal?: AbortSignal): Promise<boolean>;
}

/** A failure domain. */
export interface Zone {
  readonly failureDomain: string;
  readonly region: string;
}

/** Zone lookup for the legacy Instances path (deprecated upstream). */
export interface Zones {
  getZoneByProviderId(providerId: string, signal?: AbortSignal): Promise<Zone>;
  getZoneByNodeName(nodeName: string, signal?: AbortSignal): Promise<Zone>;
}

/** Clusters known to the cloud; no controller uses it. */
export interface Clusters {
  listClusters(signal?: AbortSignal): Promise<string[]>;
  master(clusterName: string, signal?: AbortSignal): Promise<string>;
}

/** A route to a node's pod CIDR. */
export interface Route {
  /** Set by the provider; ignored on create. */
  readonly name: string;
  readonly targetNode: string;
  /** Opt-in: when false, targetNodeAddresses are ignored when comparing routes. */
  readonly enableNodeAddresses: boolean;
  readonly targetNodeAddresses: readonly V1NodeAddress[];
  readonly destinationCidr: string;
  /** A route whose target is gone; deleted when it is in the cluster CIDR. */
  readonly blackhole: boolean;
}

/** Pod network routes. */
export interface Routes {
  listRoutes(clusterName: string, signal?: AbortSignal): Promise<Route[]>;
  /** `nameHint` is the node's UID. */
  createRoute(clusterName: string, nameHint: string, route: Route, signal?: AbortSignal): Promise<void>;
  /** `route` as listRoutes returned it. */
  deleteRoute(clusterName: string, route: Route, signal?: AbortSignal): Promise<void>;
}

/** A load balancer the provider made, and the Service it made it for (what {@link LoadBalancer.listLoadBalancers} returns). */
export interface OwnedLoadBalancer {
  /** The provider's name for it (for reports and logs). */
  readonly name: string;
  /** The Service it was made for, as recorded when it was made. */
  readonly service: { readonly namespace: string; readonly name: string; readonly uid: string };
}

/**
 * Load balancers for `type: LoadBalancer` Services. ensure/update may throw RetryError to ask for a
 * fixed delay, and ImplementedElsewhereError when another controller implements this Service's
 * load balancer (getLoadBalancer then reports it as not existing); ensureLoadBalancerDeleted must
 * succeed when the load balancer does not exist, and must not throw ImplementedElsewhereError.
 */
export interface LoadBalancer {
  getLoadBalancer(
    clusterName: string,
    service: V1Service,
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus | undefined>;
  getLoadBalancerName(clusterName: string, service: V1Service): string;
  ensureLoadBalancer(
    clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<V1LoadBalancerStatus>;
  updateLoadBalancer(
    clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<void>;
  ensureLoadBalancerDeleted(clusterName: string, service: V1Service, signal?: AbortSignal): Promise<void>;
  /**
   * Optional: every load balancer this provider made for `clusterName`, each naming the Service
   * (namespace, name, uid) it belongs to. A provider that can list what it owns (by tags, a record,
   * a naming scheme it can parse) offers it so that the pass over all Services can release load
   * balancers whose Service is gone without cleanup (its finalizer removed by hand, or deleted while
   * cirrus was down): service-lb confirms with the API server that no Service of that namespace,
   * name and uid exists, then calls ensureLoadBalancerDeleted with a Service object carrying just
   * those three (and `spec.type: LoadBalancer`). List only what is certainly yours; a load balancer
   * that cannot be tied to a Service must be left out, never guessed.
   */
  listLoadBalancers?(clusterName: string, signal?: AbortSignal): Promise<OwnedLoadBalancer[]>;
  /**
   * Optional: what ensureLoadBalancer would do for `service` and `nodes` now, found with read calls
   * only (never a call that changes the cloud). The dry run of service-lb asks for it, so that an
   * operator sees, per Service, whether a load balancer would be created, adopted, changed (and
   * how) or refused before letting cirrus act. Throws what ensureLoadBalancer would throw for
   * anything other than a refusal (ImplementedElsewhereError included).
   */
  planLoadBalancer?(
    clusterName: string,
    service: V1Service,
    nodes: readonly V1Node[],
    signal?: AbortSignal,
  ): Promise<LoadBalancerPlan>;
}

/**
 * What ensureLoadBalancer would do: `create` a load balancer; `adopt` one that exists and is the
 * Service's (by the provider's ownership marks) though the Service's status does not name it yet;
 * `update` the one the Service has; leave it `unchanged`; or `refuse` the Service (`reason` says
 * why; `changes` then lists what would still be applied, e.g. the node set).
 */
export interface LoadBalancerPlan {
  readonly action: 'create' | 'adopt' | 'update' | 'unchanged' | 'refuse';
  /** The load balancer's name in the cloud. */
  readonly name: string;
  /** The writes the ensure would make, in order: empty for `unchanged`. */
  readonly changes: readonly PlanChange[];
  /** For `refuse`: the error the ensure would end with. */
  readonly reason?: string;
  /** Warnings the ensure would record on the Service (settings it would not apply). */
  readonly warnings?: readonly string[];
}

/** One write of a plan: the setting it changes (`targets`, `listeners`, `security group rules`, …) and how, readably. */
export interface PlanChange {
  readonly setting: string;
  readonly change: string;
}

/** The upstream default load balancer name: "a" + the Service UID without dashes, cut to 32 characters. */
export function defaultLoadBalancerName(service: V1Service): string {
  return `a${(service.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);
}
