// The event contract without the wire (ADR 0021): where the relay and the functions share a
// process (`cirrus start`), the relay hands a function the CloudEvent it would have sent over
// HTTP, and the function answers with what its reply would have carried — the same types, the
// same statuses and error codes (./replies.ts), no serialization, no signature (nothing crosses a
// trust boundary). The relay's side is relay/transport.ts, the host's shared/host/local.ts.

import type { CloudEvent } from './cloudevents.ts';

/** A function's answer to a handed-over event: its HTTP reply's status, body, `Retry-After` and cloud calls, as values. */
export interface LocalReply {
  /** What the reply's status would be: 202 done, 400 rejected for good, 503 later, 500 failed, … */
  readonly status: number;
  /** The report (2xx), or the error body `{ error, code, problems? }` (./replies.ts). */
  readonly body: unknown;
  /** Set on a 503: the delay asked for, in whole seconds, as `Retry-After` would say it. */
  readonly retryAfterSeconds?: number | undefined;
  /** On a 2xx: the cloud calls the reconcile made (what the `x-cirrus-cloud-calls` header says). */
  readonly cloudCalls?: number | undefined;
}

/**
 * A function of this process taking one event as its `POST /` route would, and resolving once the
 * work is done (never rejecting: every failure is a reply). The event's `data` is the relay's own
 * copy of the object, handed by reference: a function must treat it — its `claimed` and
 * `lastKnown` — as read-only. `signal` is the relay's: it aborts when the relay gives up on the
 * delivery (its timeout, its stop), and is the reconcile's abandonment signal.
 */
export type LocalHandler = (event: CloudEvent, signal: AbortSignal) => Promise<LocalReply>;
