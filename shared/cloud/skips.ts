// The one ownership check every function makes before it acts on a Node (ADR 0026, issue 38): the
// provider that acts on it here (./fleet.ts chooseForNode), or a skip — counted in
// `cloudprovider_node_ownership_skipped_total{function,reason}` and logged once per Node and
// function in this instance, at info (later skips of the same Node at debug). A skip is the normal
// course of a cluster shared with another CCM, not an error.
//
// Both labels are bounded: `function` is one of the catalogue's names, `reason` one of SkipReason's
// six words; the Node's name and the value it carries are only logged.

import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { chooseForNode, type Fleet, type NodeChoice, type SkipReason } from './fleet.ts';
import type { NodeLike } from './ownership.ts';

/** The counter's name (the draft of KEP-5778 names no metric; issue 38 named this one). */
export const ownershipSkippedMetric = 'cloudprovider_node_ownership_skipped_total';

/** The Nodes remembered as logged, per function and instance; past it the memory starts over. */
const loggedLimit = 10_000;

/** The parts of a Node a skip names. */
type Named = NodeLike & {
  readonly metadata?: (NodeLike['metadata'] & { readonly name?: string; readonly uid?: string }) | undefined;
};

/** One function's ownership check: the choice, and the count and log of each skip. */
export class OwnershipCheck {
  readonly #function: string;
  #counter: Counter<'function' | 'reason'> | undefined;
  readonly #logged = new Set<string>();

  constructor(functionName: string) {
    this.#function = functionName;
  }

  /** Adds the counter to `registry`, or uses the one another function of this process added. */
  register(registry: Registry): void {
    const existing = registry.getSingleMetric(ownershipSkippedMetric) as Counter<'function' | 'reason'> | undefined;
    this.#counter =
      existing ??
      new Counter({
        name: ownershipSkippedMetric,
        help:
          'Nodes a function left alone because another provider or CCM owns them, or another instance serves their ' +
          'provider, by function and reason (provider-id, label, platform-annotation, platform-label, no-owner, ' +
          'other-instance).',
        labelNames: ['function', 'reason'] as const,
        registers: [registry],
      });
  }

  /** The provider that acts on `node` here; a skip is counted and logged (`log` undefined: counted only). */
  choose(fleet: Fleet, node: Named, log: Logger | undefined): NodeChoice {
    return this.record(node, chooseForNode(fleet, node), log);
  }

  /** Counts and logs `choice` for `node` if it is a skip, and returns it. */
  record(node: Named, choice: NodeChoice, log: Logger | undefined): NodeChoice {
    if (choice.provider === undefined) this.#skipped(node, choice.reason, choice.why, log);
    return choice;
  }

  /** Whether `provider` acts on `node` here; a Node no provider here acts for is a skip. */
  owns(fleet: Fleet, provider: string, node: Named, log: Logger | undefined): boolean {
    return this.choose(fleet, node, log).provider === provider;
  }

  #skipped(node: Named, reason: SkipReason, why: string, log: Logger | undefined): void {
    this.#counter?.inc({ function: this.#function, reason });
    if (log === undefined) return;
    const name = node.metadata?.name ?? '';
    const key = node.metadata?.uid ?? name;
    const fields = { node: name, function: this.#function, reason };
    if (this.#logged.has(key)) {
      log.debug(fields, `node ${name} left alone: ${why}`);
      return;
    }
    if (this.#logged.size >= loggedLimit) this.#logged.clear();
    this.#logged.add(key);
    log.info(fields, `node ${name} left alone: ${why}`);
  }
}
