// The Node side of a routes pass, read as seldom as correctness allows (ADR 0030). A function
// instance keeps the Nodes it last listed and updates them from what reaches it: the Node each
// routes event carries (the relay sends one for every change that may change routes, routes' feed),
// a delete's last known state, and the API server's answer to its own condition writes. Every
// routes event from the relay carries the digest of the route views of every Node the relay's watch
// holds (feed.ts `routesNodeSet`); a pass starts from the copy, reading nothing, when the copy's
// digest is one that a request of the pass carried: the relay held exactly these views when it
// sent it — the same state an informer's cache would give upstream's route controller. Otherwise
// (a new instance, a missed or out-of-order event, a relay that took over, another provider's
// Node in a split hybrid deployment, a request without a digest: a manual reconcile, an
// ApiServerSource event) the pass lists the Nodes once, and the list becomes the copy.

import type { V1Node } from '@kubernetes/client-node';
import type { Core } from '../../shared/kube/core.ts';
import type { KubeObject } from '../../shared/kube/object.ts';
import { routesNodeSet } from './feed.ts';

/** What the requests a pass serves vouch for. */
export interface Demand {
  /** The `cirrusnodeset` digests they carried. */
  readonly digests: ReadonlySet<string>;
  /** Some request carried none: it asks for a fresh look. */
  readonly unvouched: boolean;
}

/** Where a pass's Nodes came from. */
export type NodeSource = 'copy' | 'list';

// A resourceVersion as a number, to tell the newer of two states of a Node; undefined when it is
// not one (the API server's are, but they are opaque by contract: then the later arrival wins).
function version(text: string | undefined): bigint | undefined {
  return text !== undefined && /^\d+$/.test(text) ? BigInt(text) : undefined;
}

function newer(candidate: V1Node, held: V1Node | undefined): boolean {
  const [a, b] = [version(candidate.metadata?.resourceVersion), version(held?.metadata?.resourceVersion)];
  return a === undefined || b === undefined || a >= b;
}

/** One instance's copy of the Nodes, by name. */
export class NodeCopy {
  readonly #core: Core;
  #nodes = new Map<string, V1Node>();
  // The copy's digest, computed when first asked after a change.
  #digest: string | undefined;

  constructor(core: Core) {
    this.#core = core;
  }

  /** Takes in a Node's state (an event's claim, a write's answer) unless the copy holds a newer one. */
  learn(node: V1Node): void {
    const name = node.metadata?.name;
    if (name === undefined || !newer(node, this.#nodes.get(name))) return;
    this.#nodes.set(name, node);
    this.#digest = undefined;
  }

  /** Forgets a deleted Node: that incarnation (UID), unless the copy holds a newer state of it. */
  forget(node: V1Node): void {
    const name = node.metadata?.name;
    const held = name === undefined ? undefined : this.#nodes.get(name);
    if (name === undefined || held?.metadata?.uid !== node.metadata?.uid || !newer(node, held)) return;
    this.#nodes.delete(name);
    this.#digest = undefined;
  }

  /** The copy's digest (feed.ts `routesNodeSet`). */
  digest(): string {
    this.#digest ??= routesNodeSet(this.#nodes.values() as Iterable<KubeObject>);
    return this.#digest;
  }

  /**
   * The Nodes for a pass: the copy, when every request vouched and one of their digests is the
   * copy's and `fresh` is not asked for; else a LIST, which becomes the copy.
   */
  async nodes(demand: Demand, fresh: boolean): Promise<{ readonly nodes: V1Node[]; readonly source: NodeSource }> {
    if (!fresh && !demand.unvouched && demand.digests.has(this.digest()))
      return { nodes: [...this.#nodes.values()], source: 'copy' };
    const list = await this.#core.listNode();
    this.#install(list.items, version(list.metadata?.resourceVersion));
    return { nodes: list.items, source: 'list' };
  }

  // The list as the copy; states learnt while it was read that are newer than it stay.
  #install(items: readonly V1Node[], listed: bigint | undefined): void {
    const next = new Map(items.map((node) => [node.metadata?.name ?? '', node]));
    for (const [name, held] of this.#nodes) {
      const at = version(held.metadata?.resourceVersion);
      if (listed === undefined || at === undefined || at <= listed) continue;
      const item = next.get(name);
      if (item === undefined || newer(held, item)) next.set(name, held);
    }
    this.#nodes = next;
    this.#digest = undefined;
  }
}
