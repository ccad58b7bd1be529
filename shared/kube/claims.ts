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
 * that waited behind another of the same key (`waited`: that one may have written since the claim),
 * or whose claim is a version this instance has written over already (`ledger`: the same event
 * again — a retry, a second relay — would only meet a 409).
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
  return ledger.writtenOver(key, version) ? undefined : claim;
}

/**
 * Runs one reconcile of `key` from its verified claim, or from a read (`reconcile(undefined)`),
 * and when it wrote (its report has changes), takes the claim's version as written over.
 */
export async function fromClaim<R extends { readonly changes: readonly unknown[] }>(
  ledger: ClaimLedger,
  key: string,
  claim: { readonly options: ClaimOptions; readonly waited: boolean },
  reconcile: (start: KubeObject | undefined) => Promise<R>,
): Promise<R> {
  const start = verifiedClaim(claim.options, claim.waited, ledger, key);
  const report = await reconcile(start);
  const version = (claim.options.claimed as KubeObject | undefined)?.metadata?.resourceVersion;
  if (report.changes.length > 0 && !claim.options.dryRun && typeof version === 'string' && version !== '')
    ledger.wroteOver(key, version);
  return report;
}

/**
 * For the most recent `limit` keys (the oldest forgotten first), the resourceVersion of the last
 * claim a reconcile of this function instance wrote over: one instance's memory of the copies it
 * knows to be stale.
 */
export class ClaimLedger {
  readonly #last = new Map<string, string>();
  readonly #limit: number;

  constructor(limit = 10_000) {
    this.#limit = limit;
  }

  /** Whether `version` of `key` is one a reconcile here wrote over. */
  writtenOver(key: string, version: string): boolean {
    return this.#last.get(key) === version;
  }

  /** Takes `version` of `key` as written over. */
  wroteOver(key: string, version: string): void {
    this.#last.delete(key);
    this.#last.set(key, version);
    if (this.#last.size > this.#limit) {
      const [oldest] = this.#last.keys();
      if (oldest !== undefined) this.#last.delete(oldest);
    }
  }
}
