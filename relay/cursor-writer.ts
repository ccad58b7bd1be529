// Who writes the known-keys cursor (./cursor.ts, ADR 0014): one relay at a time. Two relays that
// wrote one cursor side by side (two replicas without leader election, on the default Lease name)
// each removed the other's keys, and the deletes made while one of them was down were lost (issue
// 38). So the cursor's first ConfigMap of each resource names its writer in an annotation — the
// relay's identity, the Lease it leads on (if any), when it last renewed the record and for how
// long the record holds — renewed every third of that time. Another relay takes the cursor only
// when the record is its own, is gone, names the Lease that relay now holds (the writer was
// deposed), or is stale: unchanged for as long as it holds, judged on the reader's own clock as a
// Lease is (so clocks that disagree do not matter), or renewed, by the reader's clock, longer ago
// than twice that.

import type { Clock } from '../shared/clock.ts';

/** The annotation of the cursor's first ConfigMap (of each resource) that names its writer. */
export const writerAnnotation = 'relay.cirrus-ccm.dev/cursor-writer';

/** How long a writer's record holds after its renewal (ms); it is renewed every third of that. */
export const defaultCursorClaimMs = 15_000;

/** The relay that writes a cursor. */
export interface CursorWriter {
  /** The relay's identity (its Lease identity: host name and a per-process suffix). */
  readonly identity: string;
  /** `namespace/name` of the Lease it leads on; undefined without leader election. */
  readonly lease?: string | undefined;
}

/** The writer's record, as the annotation holds it (JSON). */
export interface WriterRecord extends CursorWriter {
  /** When the writer last renewed the record, by its clock (RFC 3339). */
  readonly renewTime: string;
  /** How long the record holds after renewTime. */
  readonly claimSeconds: number;
}

/** What a relay may do with a cursor, given its writer record. */
export type Verdict =
  | { readonly kind: 'mine' }
  | { readonly kind: 'free'; readonly reason: 'none' | 'lease' | 'stale' }
  | { readonly kind: 'held'; readonly holder: WriterRecord };

export function formatRecord(writer: CursorWriter, now: number, claimMs: number): string {
  const record: WriterRecord = {
    identity: writer.identity,
    ...(writer.lease === undefined ? {} : { lease: writer.lease }),
    renewTime: new Date(now).toISOString(),
    claimSeconds: Math.ceil(claimMs / 1000),
  };
  return JSON.stringify(record);
}

export function parseRecord(text: string | undefined): WriterRecord | undefined {
  if (text === undefined || text === '') return undefined;
  try {
    const record = JSON.parse(text) as Partial<WriterRecord> | null;
    if (typeof record?.identity !== 'string' || typeof record.renewTime !== 'string') return undefined;
    const claimSeconds = typeof record.claimSeconds === 'number' ? record.claimSeconds : defaultCursorClaimMs / 1000;
    return { ...record, identity: record.identity, renewTime: record.renewTime, claimSeconds };
  } catch {
    return undefined;
  }
}

/** Judges the writer records one relay reads, remembering when it saw each change (its own clock). */
export class WriterJudge {
  readonly #self: CursorWriter;
  readonly #clock: Clock;
  #seen: string | undefined;
  #seenAt = 0;

  constructor(self: CursorWriter, clock: Clock) {
    this.#self = self;
    this.#clock = clock;
  }

  /** Whether this relay may take the cursor whose first ConfigMap holds the record `text`. */
  judge(text: string | undefined): Verdict {
    const now = this.#clock.now();
    if (text !== this.#seen) {
      this.#seen = text;
      this.#seenAt = now;
    }
    const record = parseRecord(text);
    if (record === undefined) return { kind: 'free', reason: 'none' };
    if (record.identity === this.#self.identity) return { kind: 'mine' };
    // Only a leader keeps a cursor: holding the Lease the record names, it deposed that writer.
    if (this.#self.lease !== undefined && record.lease === this.#self.lease) return { kind: 'free', reason: 'lease' };
    const holdsMs = record.claimSeconds * 1000;
    const renewed = Date.parse(record.renewTime);
    if (now - this.#seenAt >= holdsMs || (Number.isFinite(renewed) && now - renewed > 2 * holdsMs))
      return { kind: 'free', reason: 'stale' };
    return { kind: 'held', holder: record };
  }
}

/** What a relay refused a cursor says: who writes it, and how to run two relays. */
export function refusal(where: string, holder: WriterRecord, starting: boolean): string {
  const lease = holder.lease === undefined ? 'without leader election' : `leading on the Lease ${holder.lease}`;
  const what = starting
    ? 'this relay neither writes it nor delivers until that relay stops or its record is not renewed for ' +
      `${String(holder.claimSeconds)} s`
    : 'it took the cursor over while this relay did not renew its record: this relay no longer writes it, and ' +
      'delivers without it until it is restarted';
  return (
    `the cursor ${where} is written by another relay, ${holder.identity} (${lease}, renewed ${holder.renewTime}): ` +
    `${what}. Two relays must not share a cursor: run them with leader election on one ` +
    'Lease (--leader-elect, the same --leader-elect-resource-name), or give each its own cursor ' +
    '(another --leader-elect-resource-name), or turn it off (--relay-cursor=false)'
  );
}
