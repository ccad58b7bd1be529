// The providers one function instance acts for, and the rules that say which of them (if any) a
// Node or a Service belongs to (ADR 0026). With one provider there are no rules: it is given every
// object, exactly as before hybrid clusters existed. With several, each object goes to its owner
// (./ownership.ts) when this instance serves that owner, and is left alone otherwise: another
// instance serves it, or nobody here does.

import type { CloudProvider } from './provider.ts';
import { classOf, nodeOwner, serviceOwner, type NodeLike, type Ownership, type ServiceLike } from './ownership.ts';

/** The providers an instance acts for. */
export interface Fleet {
  /** The deployment's ownership rules; undefined for one provider, which is given every object. */
  readonly ownership: Ownership | undefined;
  /** The providers this instance acts for, by name (with one provider, that one alone). */
  readonly served: ReadonlyMap<string, CloudProvider>;
}

/** Who acts on an object: a provider this instance serves, or why the object is left alone. */
export type Choice =
  | { readonly provider: string; readonly cloud: CloudProvider }
  | {
      readonly provider: undefined;
      /** Why it is left alone, for logs and reports. */
      readonly why: string;
      /** Set when no provider of the deployment owns it (a Node: node-init says so in an Event). */
      readonly nobody: boolean;
    };

/** One provider, given every object. */
export function singleFleet(cloud: CloudProvider): Fleet {
  return { ownership: undefined, served: new Map([[cloud.providerName(), cloud]]) };
}

/** Several providers under `ownership`; `served` names those this instance acts for (all, in one process). */
export function hybridFleet(ownership: Ownership, served: ReadonlyMap<string, CloudProvider>): Fleet {
  for (const name of served.keys())
    if (!ownership.providers.includes(name))
      throw new Error(`provider ${name} is served but not one of ${ownership.providers.join(', ')}`);
  return { ownership, served };
}

/** Whether `fleet` decides by ownership (several providers). */
export function isHybrid(fleet: Fleet): boolean {
  return fleet.ownership !== undefined;
}

/** The provider that acts on `node`, or why none here does. */
export function chooseForNode(fleet: Fleet, node: NodeLike): Choice {
  if (fleet.ownership === undefined) return only(fleet);
  const owner = nodeOwner(fleet.ownership, node);
  if (owner.provider === undefined)
    return { provider: undefined, why: `no provider owns it: ${owner.why}`, nobody: true };
  return served(fleet, owner.provider, `its provider is ${owner.provider} (by ${owner.by})`);
}

/** The provider whose load balancer serves `service`, or why none here does. */
export function chooseForService(fleet: Fleet, service: ServiceLike): Choice {
  if (fleet.ownership === undefined) return only(fleet);
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
  if (fleet.ownership === undefined) return single;
  return fleet.ownership.defaultProvider === provider ? undefined : classOf(fleet.ownership, provider);
}

/** Whether `provider` serves any Service in `fleet` (a hybrid provider with no class and not the default serves none). */
export function servesServices(fleet: Fleet, provider: string): boolean {
  if (fleet.ownership === undefined) return true;
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
