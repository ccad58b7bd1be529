// The nodes a load balancer should have, read as seldom as correctness allows. A reconcile of one
// Service must not list every Node (a node joining would cost one LIST per load-balanced Service,
// quadratic in cluster size), so an instance keeps the last list it read under its digest
// (nodeListDigest: the eligible nodes' names and resourceVersions):
//
// - an event whose `cirrusnodeset` equals that digest is served from it, without a request: the
//   relay saw exactly these versions of exactly these nodes when it sent the event;
// - any other request (another digest, no digest — ApiServerSource, manual reconciles, a new
//   instance) gets a list that started after it arrived, shared with every other request waiting
//   at the time (shared/coalesce.ts): a fan-out of 1,000 Service events after a node change costs
//   one LIST per instance, not 1,000, and never an answer older than the request.
//
// Out-of-order events are harmless: an older digest misses the cache and gets a fresh list.

import type { V1Node } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Core } from '../../shared/kube/core.ts';
import { Coalescer } from '../../shared/coalesce.ts';
import { inLoadBalancers, nodeListDigest } from './predicates.ts';

/** A list of the nodes eligible for load balancers, and its digest. */
export interface NodeList {
  readonly nodes: readonly V1Node[];
  readonly digest: string;
}

/** Where a reconcile gets the nodes of its load balancer. */
export interface Nodes {
  /** `log`: where a Node left alone (another provider's or CCM's) is logged. */
  nodes(digest: string | undefined, signal: AbortSignal | undefined, log?: Logger): Promise<readonly V1Node[]>;
}

/**
 * A provider's share of `all`: the eligible nodes it owns (a load balancer's node set holds only
 * Nodes its provider can target, never another provider's or CCM's). The digest stays the whole
 * list's, as the relay computes it, so the lister's cache serves every provider.
 */
export function ownedNodes(all: Nodes, owns: (node: V1Node, log?: Logger) => boolean): Nodes {
  return {
    nodes: async (digest, signal, log) => (await all.nodes(digest, signal)).filter((node) => owns(node, log)),
  };
}

/** The eligible nodes, from the last list when the caller's digest matches it, else from a fresh shared list. */
export class NodeLister implements Nodes {
  readonly #lists: Coalescer<NodeList, undefined>;
  #last: NodeList | undefined;

  constructor(core: Core) {
    this.#lists = new Coalescer<NodeList, undefined>(async () => {
      const { items } = await core.listNode();
      const list = { nodes: items.filter(inLoadBalancers), digest: nodeListDigest(items) };
      this.#last = list;
      return list;
    });
  }

  /** The eligible nodes; `digest` is the event's claim of which versions are current, if it made one. */
  async nodes(digest: string | undefined, signal: AbortSignal | undefined): Promise<readonly V1Node[]> {
    const last = this.#last;
    if (digest !== undefined && last?.digest === digest) return last.nodes;
    return (await this.#lists.join(undefined, signal ?? neverAborted)).nodes;
  }
}

const neverAborted = new AbortController().signal;
