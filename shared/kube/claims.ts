// A verified claim as the starting point of a reconcile (ADR 0022): the relay's watch copy of the
// object, delivered over a channel the host verified, used instead of a GET when every write
// decided from it carries its resourceVersion, so that the API server refuses (409) what a stale
// copy would decide and the reconcile reads the object and starts over.

import type { KubeObject } from './object.ts';

/** What decides whether a reconcile may start from its event's object. */
export interface ClaimOptions {
  readonly dryRun: boolean;
  readonly claimed?: unknown;
  readonly claimVerified?: boolean;
}

/**
 * The event's object to start from instead of reading it, or undefined (read first): the claim
 * must be verified and carry a resourceVersion (the precondition its writes will carry); a dry run
 * reads (it reports what a reconcile of the object as stored would write), and so does a reconcile
 * that waited behind another of the same key (`waited`: that one may have written since the claim).
 */
export function verifiedClaim(
  options: ClaimOptions,
  waited: boolean,
  ledger: ClaimLedger,
  key: string,
): KubeObject | undefined {
  if (options.claimVerified !== true || options.dryRun || waited) return undefined;
  const claim = options.claimed as KubeObject | undefined;
  const version = claim?.metadata?.resourceVersion;
  if (typeof version !== 'string' || version === '') return undefined;
  // A version this instance started from before is a repeat (the same event again: a retry, a
  // second relay): what that reconcile wrote makes it stale, so read rather than meet a 409.
  return ledger.firstTime(key, version) ? claim : undefined;
}

/**
 * The resourceVersion of each key's last claim a reconcile started from, for the most recent
 * `limit` keys (the oldest forgotten first): one function instance's memory of the claims it used.
 */
export class ClaimLedger {
  readonly #last = new Map<string, string>();
  readonly #limit: number;

  constructor(limit = 10_000) {
    this.#limit = limit;
  }

  /** Whether `version` of `key` was not started from before; it is recorded as started from now. */
  firstTime(key: string, version: string): boolean {
    const before = this.#last.get(key);
    this.#last.delete(key);
    this.#last.set(key, version);
    if (this.#last.size > this.#limit) {
      const [oldest] = this.#last.keys();
      if (oldest !== undefined) this.#last.delete(oldest);
    }
    return before !== version;
  }
}
