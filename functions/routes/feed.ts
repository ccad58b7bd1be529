// routes' feed (the route controller reconciles the whole cluster): one coalesced `reconcile.all`
// when a node is added or deleted, its pod CIDR(s) change, or (a hybrid cluster, ADR 0026) its
// provider label changes, which moves a Node without a provider ID to another provider's routes.

import type { Feed, WatchChange } from '../../shared/catalogue.ts';
import { providerLabel } from '../../shared/cloud/ownership.ts';
import type { KubeObject } from '../../shared/kube/object.ts';

function podCidrs(node: KubeObject | undefined): string {
  const spec = node?.['spec'] as { podCIDR?: string; podCIDRs?: readonly string[] } | undefined;
  return JSON.stringify([spec?.podCIDR ?? '', spec?.podCIDRs ?? []]);
}

/** A node change that may change routes: a node added or deleted, its podCIDR(s) or its provider label changed. */
export function routesMayChange(change: WatchChange): boolean {
  if (change.type !== 'update' || change.previous === undefined) return true;
  return (
    podCidrs(change.previous) !== podCidrs(change.object) ||
    change.previous.metadata?.labels?.[providerLabel] !== change.object.metadata?.labels?.[providerLabel]
  );
}

/** A `reconcile.all` for node changes that may change routes. */
export const routesFeed: Feed = (change) =>
  change.resource.kind === 'Node' && routesMayChange(change) ? 'all' : undefined;
