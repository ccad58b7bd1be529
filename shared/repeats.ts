// Repeated failures, logged once a while: the first of a kind (its message and its cause) is logged
// as it comes, then, at most once per interval, one summary line says how many more there were
// (`node not reconciled: connect ECONNREFUSED … (41 more times in the last 60 s)`). The kind is not
// the object: a hundred Nodes failing the same way in one pass are one line and a count.
//
// A summary is written when the kind comes again after the interval; a kind that stops failing
// leaves its last count unsaid, as the next success says nothing either.

import { systemClock, type Clock } from './clock.ts';

interface Seen {
  /** When the last line of this kind was written. */
  since: number;
  /** How many times it came since, not logged. */
  held: number;
}

/** Where {@link Repeats} writes (a pino Logger is one). */
export interface WarnLog {
  warn(fields: object, message: string): void;
}

/** What {@link Repeats} needs: how long between two lines of one kind, and the time. */
export interface RepeatsOptions {
  readonly intervalMs: number;
  readonly clock?: Clock;
}

// Kinds kept at most before those quiet for an interval are forgotten.
const pruneAbove = 256;

/** Logs repeated failures at warn, the first of each kind and then a count per interval (see the module comment). */
export class Repeats {
  readonly #intervalMs: number;
  readonly #clock: Clock;
  readonly #seen = new Map<string, Seen>();

  constructor(options: RepeatsOptions) {
    this.#intervalMs = options.intervalMs;
    this.#clock = options.clock ?? systemClock;
  }

  /** Logs `message` for `error` on `log` at warn with `fields`, or counts it when its kind was logged within the interval. */
  warn(log: WarnLog, fields: Record<string, unknown> & { err: unknown }, message: string): void {
    const cause = causeOf(fields.err);
    const kind = `${message}\u0000${cause}`;
    const now = this.#clock.now();
    const seen = this.#seen.get(kind);
    if (seen !== undefined && now - seen.since < this.#intervalMs) {
      seen.held += 1;
      return;
    }
    if (seen === undefined || seen.held === 0) log.warn(fields, message);
    else {
      const rest = Object.fromEntries(Object.entries(fields).filter(([name]) => name !== 'err'));
      const count = seen.held + 1;
      const seconds = Math.round((now - seen.since) / 1000);
      log.warn(
        { ...rest, error: cause, repeats: count },
        `${message}: ${cause} (${count} more times in the last ${seconds} s)`,
      );
    }
    this.#seen.set(kind, { since: now, held: 0 });
    if (this.#seen.size > pruneAbove) this.#prune(now);
  }

  #prune(now: number): void {
    for (const [kind, seen] of this.#seen) if (now - seen.since >= this.#intervalMs) this.#seen.delete(kind);
  }
}

function causeOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
