// The providers one function instance acts for, and the rules that say which of them (if any) a
// Node or a Service belongs to (ADR 0026). Each Node goes to its owner (./ownership.ts) when this
// instance serves that owner, and is left alone otherwise: another instance serves it, or nobody
// here does. With one provider the same rules hold — that provider is the default, so a Node with
// no provider ID and no marker is its own, as before, but a Node whose provider ID, label or
// platform names another provider is another CCM's and is left alone (issue 38). Services: with one
// provider every one goes to it (service-lb filters by --load-balancer-class itself); with several,
// each to its class's provider.

import type { CloudProvider } from './provider.ts';
import {
  classOf,
  nodeOwner,
  serviceOwner,
  type NodeLike,
  type Ownership,
  type ServiceLike,
  type UnownedReason,
} from './ownership.ts';

/** The providers an instance acts for. */
export interface Fleet {
  /** The deployment's ownership rules (with one provider: that one, as the default). */
  readonly ownership: Ownership;
  /** Several providers (`--cloud-provider a,b`): a hybrid cluster's rules for Services and Events. */
  readonly hybrid: boolean;
  /** The providers this instance acts for, by name (with one provider, that one alone). */
  readonly served: ReadonlyMap<string, CloudProvider>;
}

/** Why a Node is left alone here, as a bounded word: nobody here owns it (./ownership.ts), or another instance does. */
export type SkipReason = UnownedReason | 'other-instance';

/** Who acts on an object: a provider this instance serves, or why the object is left alone. */
export type Choice =
  | { readonly provider: string; readonly cloud: CloudProvider }
  | {
      readonly provider: undefined;
      /** Why it is left alone, for logs and reports. */
      readonly why: string;
      /**
       * Set when no provider of a hybrid deployment owns it (a Node: node-init says so in an
       * Event). Unset for another instance's, and with one provider for another CCM's.
       */
      readonly nobody: boolean;
    };

/** A Choice for a Node: when it is left alone, also why, as a bounded word (a metric label). */
export type NodeChoice =
  | Extract<Choice, { readonly cloud: CloudProvider }>
  | (Exclude<Choice, { readonly cloud: CloudProvider }> & { readonly reason: SkipReason });

/**
 * One provider: the default for Nodes that name none, and given every Service. A Node that names
 * another provider (./ownership.ts) is left alone.
 */
export function singleFleet(cloud: CloudProvider): Fleet {
  const name = cloud.providerName();
  return {
    ownership: { providers: [name], defaultProvider: name, classes: new Map() },
    hybrid: false,
    served: new Map([[name, cloud]]),
  };
}

/** Several providers under `ownership`; `served` names those this instance acts for (all, in one process). */
export function hybridFleet(ownership: Ownership, served: ReadonlyMap<string, CloudProvider>): Fleet {
  for (const name of served.keys())
    if (!ownership.providers.includes(name))
      throw new Error(`provider ${name} is served but not one of ${ownership.providers.join(', ')}`);
  return { ownership, hybrid: true, served };
}

/** Whether `fleet` serves several providers (a hybrid cluster). */
export function isHybrid(fleet: Fleet): boolean {
  return fleet.hybrid;
}

/**
 * The provider that acts on `node`, or why none here does — with one provider as with several: a
 * Node whose provider ID, label or platform names a provider not served by the deployment is
 * another CCM's, and no function initializes, checks, taints, deletes or routes it.
 */
export function chooseForNode(fleet: Fleet, node: NodeLike): NodeChoice {
  const owner = nodeOwner(fleet.ownership, node);
  if (owner.provider === undefined) {
    const why = fleet.hybrid ? `no provider owns it: ${owner.why}` : `another CCM's: ${owner.why}`;
    return { provider: undefined, why, nobody: fleet.hybrid, reason: owner.reason };
  }
  const cloud = fleet.served.get(owner.provider);
  if (cloud !== undefined) return { provider: owner.provider, cloud };
  const why = `its provider is ${owner.provider} (by ${owner.by}), which another instance serves`;
  return { provider: undefined, why, nobody: false, reason: 'other-instance' };
}

/** The provider whose load balancer serves `service`, or why none here does. */
export function chooseForService(fleet: Fleet, service: ServiceLike): Choice {
  if (!fleet.hybrid) return only(fleet);
  const owner = serviceOwner(fleet.ownership, service);
  if (owner === undefined) {
    const loadBalancerClass = service.spec?.loadBalancerClass ?? undefined;
    const why =
      loadBalancerClass === undefined
        ? 'it has no spec.loadBalancerClass and no default provider is configured'
        : `its spec.loadBalancerClass ${loadBalancerClass} is no provider's here`;
    return { provider: undefined, why, nobody: true };
  }
  return served(fleet, owner, `its class is ${owner}'s`);
}

/**
 * The `spec.loadBalancerClass` of the Services `provider` serves: undefined for one provider's
 * deployment as configured (`--load-balancer-class`, passed as `single`), and in a hybrid one for
 * the default provider, which serves the Services without a class.
 */
export function serviceClass(fleet: Fleet, provider: string, single: string | undefined): string | undefined {
  if (!fleet.hybrid) return single;
  return fleet.ownership.defaultProvider === provider ? undefined : classOf(fleet.ownership, provider);
}

/** Whether `provider` serves any Service in `fleet` (a hybrid provider with no class and not the default serves none). */
export function servesServices(fleet: Fleet, provider: string): boolean {
  if (!fleet.hybrid) return true;
  return fleet.ownership.defaultProvider === provider || classOf(fleet.ownership, provider) !== undefined;
}

function only(fleet: Fleet): Choice {
  const [entry] = fleet.served;
  if (entry === undefined) throw new Error('a fleet of one provider serves none');
  return { provider: entry[0], cloud: entry[1] };
}

function served(fleet: Fleet, provider: string, why: string): Choice {
  const cloud = fleet.served.get(provider);
  if (cloud !== undefined) return { provider, cloud };
  return { provider: undefined, why: `${why}, which another instance serves`, nobody: false };
}
