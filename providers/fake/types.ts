// The fake cloud's data: its machines and load balancers, what it records of a call, what can be
// switched off, and its rate limit.

import type { V1LoadBalancerStatus, V1NodeAddress } from '@kubernetes/client-node';

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

/** A load balancer of the fake cloud: its ingress, its nodes, and the Service it was made for. */
export interface FakeLoadBalancer {
  status: V1LoadBalancerStatus;
  nodes: string[];
  readonly service: { readonly namespace: string; readonly name: string; readonly uid: string };
}

/**
 * The capabilities a FakeCloud can switch off, and the load balancers' optional methods:
 * `listLoadBalancers` (off: a provider that cannot list the load balancers it owns) and
 * `planLoadBalancer` (off: a provider whose dry run has no plan).
 */
export type FakeCapability =
  | 'loadBalancer'
  | 'instances'
  | 'instancesV2'
  | 'zones'
  | 'clusters'
  | 'routes'
  | 'listLoadBalancers'
  | 'planLoadBalancer';

/** One recorded call: the method and its arguments (Nodes and Services by name). */
export interface FakeCall {
  readonly method: string;
  readonly args: readonly unknown[];
  /** When the cloud answered it (performance.now(), after its latency); unset while in flight. */
  answeredAt?: number;
}

/** A cloud's rate limit: more than `perSecond` calls in any 1-s window are refused with RetryError(`retryAfterMs`). */
export interface FakeThrottle {
  readonly perSecond: number;
  readonly retryAfterMs: number;
}
