// Routing by owner in a split hybrid deployment (ADR 0026): when the function instances serve one
// provider each (one Knative Service per function and provider), a destination names the providers
// it serves, and the relay sends it only the Nodes and Services of those providers, by the same
// rules the functions decide with (shared/cloud/ownership.ts). The functions still decide every
// time; this only spares the deliveries another provider's instance would leave alone.
//
// What a destination serving `providers` receives of a change:
// - a Node's own event, when its owner — now, or before the change (a Node relabelled away must
//   still reach its old provider) — is one of them, or when nobody owns it now (node-init there
//   records the `NoCloudProvider` Event, under one name whichever instance writes it; routes'
//   copy of the Nodes learns it, ADR 0030);
// - a Service's own event, when its owner, now or before, is one of them;
// - a fan-out (service-lb: one event per load-balanced Service after a node-set change) only from
//   a change that concerns one of them, and only for the Services of those providers;
// - a `reconcile.all` a change asks for only from a change that concerns one of them;
// - periodic triggers, as every destination (they come from no change).
// A destination that names no providers, or a table without ownership rules, receives as before.

import { nodeOwner, serviceOwner, type Ownership, type ServiceLike } from '../shared/cloud/ownership.ts';
import type { KubeObject } from '../shared/kube/object.ts';
import type { ResourceChange } from './resources.ts';

/** The owners of one change's object, before and after it; computed once, when a destination asks. */
export interface ChangeOwners {
  /** The providers owning the object now or before the change. */
  readonly providers: ReadonlySet<string>;
  /** A Node nobody here owns now. */
  readonly nobodysNode: boolean;
}

/** The owner of one object of `kind` (Node or Service); undefined for nobody, or another kind. */
export function ownerOf(ownership: Ownership, kind: string, object: KubeObject | undefined): string | undefined {
  if (object === undefined) return undefined;
  if (kind === 'Node') return nodeOwner(ownership, object).provider;
  if (kind === 'Service') return serviceOwner(ownership, object as ServiceLike);
  return undefined;
}

/** The owners `change` concerns under `ownership`. */
export function changeOwners(ownership: Ownership, change: ResourceChange): ChangeOwners {
  const kind = change.resource.kind;
  const now = ownerOf(ownership, kind, change.object);
  const before = ownerOf(ownership, kind, change.previous);
  const providers = new Set([now, before].filter((owner) => owner !== undefined));
  return { providers, nobodysNode: kind === 'Node' && now === undefined };
}

/**
 * The gate of one change's deliveries: whether a destination serving `providers` (undefined: every
 * object) receives `delivered` — the change itself, an object of a fan-out, or undefined for a
 * trigger. Without ownership rules, or for a destination naming no providers, everything passes and
 * no owner is computed; else the change's owners are computed once, at the first such destination.
 */
export function ownerGate(
  ownership: Ownership | undefined,
  change: ResourceChange,
): (providers: readonly string[] | undefined, delivered: ResourceChange | undefined) => boolean {
  if (ownership === undefined) return () => true;
  let owners: ChangeOwners | undefined;
  return (providers, delivered) => {
    if (providers === undefined) return true;
    owners ??= changeOwners(ownership, change);
    const concerned = providers.some((provider) => owners?.providers.has(provider) === true);
    if (delivered === change) return concerned || owners.nobodysNode;
    if (!concerned || delivered === undefined) return concerned;
    const owner = ownerOf(ownership, delivered.resource.kind, delivered.object);
    return owner !== undefined && providers.includes(owner);
  };
}

/**
 * What is wrong with a destination serving `providers` under `ownership` (every provider one of its
 * providers, none twice, and rules to route by at all); undefined when nothing is.
 */
export function providerProblem(providers: readonly string[], ownership: Ownership | undefined): string | undefined {
  if (ownership === undefined)
    return (
      `serves providers ${providers.join(', ')}, but the relay has no ownership rules: give it the deployment's ` +
      '--cloud-provider (several), --default-provider and --load-balancer-class, as the functions get them'
    );
  const unknown = providers.filter((provider) => !ownership.providers.includes(provider));
  if (unknown.length > 0)
    return `provider ${unknown.join(', ')} is not one of --cloud-provider ${ownership.providers.join(',')}`;
  const twice = providers.filter((provider, i) => providers.indexOf(provider) !== i);
  return twice.length > 0 ? `provider ${twice.join(', ')} named twice` : undefined;
}
