// What a function gives the host: the reconcile steps it performs. The host (./app.ts) turns HTTP
// requests — CloudEvents from the relay or an ApiServerSource, periodic triggers, manual
// reconciles — into calls of these, and their results and errors into replies.

import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ObjectKey } from '../wire/keys.ts';

// The key is the wire contract's (shared/wire/keys.ts); a function names it with the rest of its definition.
export type { ObjectKey } from '../wire/keys.ts';

/**
 * How a reconcile runs. `lastKnown` and `claimed` are read-only: under `cirrus start` they are the
 * relay's own copy of the object, handed over by reference (ADR 0021), which it goes on using.
 */
export interface ReconcileOptions {
  /** Compute and report the changes, write nothing (cloud reads still happen). */
  readonly dryRun: boolean;
  /** Aborted when the request is abandoned or the server shuts down. */
  readonly signal: AbortSignal;
  /** The request's logger, carrying its id and the object's key. */
  readonly log: Logger;
  /**
   * For a Resource-mode delete event: the object as last seen (the event's data). Lets a function
   * clean up after an object that is gone without a finalizer; never required (Reference mode and
   * manual reconciles do not have it).
   */
  readonly lastKnown?: unknown;
  /**
   * For a Resource-mode add or update event: the object as the event states it. A claim — a
   * function may decide from it that there is nothing to do (and so read nothing), but re-reads the
   * object from the API server before it writes anything or mutates the cloud (but see claimVerified).
   */
  readonly claimed?: unknown;
  /** The claim came from the relay over a verified channel (a signed request whose signature the host checked, or a hand-over in process): a function may start from it and condition its writes on its resourceVersion. */
  readonly claimVerified?: boolean;
  /**
   * A delete's `lastKnown` came from the relay over a verified channel (as claimVerified). A delete
   * is still decided on the object as read (ADR 0022); routes only forgets the Node from its copy.
   */
  readonly lastKnownVerified?: boolean;
  /**
   * The event is the relay's periodic recheck of an unchanged object (`cirrusreason: recheck`,
   * ADR 0029): the function's periodic work for that object (node-init: refresh its addresses).
   */
  readonly recheck?: boolean;
  /** The event's `cirrusnodeset` extension (shared/wire/types.ts), when it has one. */
  readonly nodeSet?: string;
  /** The relay's periodic trigger (`cirrusreason: periodic`): a drift check, not a change. */
  readonly periodic?: boolean;
}

/** One change a reconcile made (or, in a dry run, would make). */
export interface Change {
  /** What kind of write: `patch`, `patch-status`, `delete`, `event`, or a provider call such as `cloud`. */
  readonly action: string;
  /** The object written, e.g. `Node/worker-1`. */
  readonly target: string;
  /** The body sent (a patch, an event) or a short description. */
  readonly detail?: unknown;
}

/** What a reconcile did: the JSON body of a 2xx reply. */
export interface Report {
  readonly function: string;
  readonly dryRun: boolean;
  /** One entry per object looked at. */
  readonly objects: readonly ObjectReport[];
}

/** The outcome for one object. */
export interface ObjectReport {
  readonly key: string;
  /** A short word for what happened: `initialized`, `unchanged`, `deleted`, `not-found`, `failed`, … */
  readonly result: string;
  readonly changes: readonly Change[];
  /** Set when result is `failed`: the error, for a reconcile over many objects that went on. */
  readonly error?: string;
  /** Why the reconcile did not do what its trigger claimed was needed (e.g. a delete event for a live object). */
  readonly note?: string;
}

/** A deployable function: a name, the kinds it handles, and its two reconcile entry points. */
export interface FunctionDefinition {
  /** Canonical name, e.g. `node-init`; also the metrics label and log field. */
  readonly name: string;
  /** Kubernetes kinds whose events it accepts, e.g. ['Node']. Others are a 400. */
  readonly kinds: readonly string[];
  /** Reconciles one object by key. Throws RetryError to ask for a fixed delay; any other error is a 500. */
  reconcileOne(key: ObjectKey, options: ReconcileOptions): Promise<Report>;
  /** Reconciles everything the function owns (the periodic trigger, or a manual "all"). */
  reconcileAll(options: ReconcileOptions): Promise<Report>;
  /** Registers the function's own metrics (the host's registry is per app). */
  registerMetrics?(registry: Registry): void;
}
