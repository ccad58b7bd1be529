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
export function verifiedClaim(options: ClaimOptions, waited: boolean): KubeObject | undefined {
  if (options.claimVerified !== true || options.dryRun || waited) return undefined;
  const claim = options.claimed as KubeObject | undefined;
  const version = claim?.metadata?.resourceVersion;
  return typeof version === 'string' && version !== '' ? claim : undefined;
}
