// How a delivery reaches its function: the seam between the queue (./leader.ts sends) and the
// wire. Over HTTP by default (./delivery.ts: a signed binary-mode CloudEvent on a pool of
// keep-alive connections), for functions elsewhere — Knative Services, Lambda function URLs,
// `cirrus relay` beside `cirrus serve`. In process where a function shares the relay's process
// (`cirrus start`, ADR 0021): the same event handed over as values (shared/wire/local.ts), its
// object by reference, and the function's answer read with the same classes as a reply. Either
// way the queue sees one DeliveryOutcome, so retries, Retry-After, rejections, the cloud call
// refund and the delivery metrics do not depend on the way.

import type { LocalHandler } from '../shared/wire/index.ts';
import {
  deadline,
  deliver,
  deliveryAgent,
  describeError,
  eventRequest,
  localOutcome,
  outgoingEvent,
  type DeliveryContext,
} from './delivery.ts';
import type { DeliveryOutcome } from './queue.ts';
import type { Destination, Outgoing } from './routing.ts';

/** One delivery to make. */
export interface Delivery {
  readonly destination: Destination;
  readonly outgoing: Outgoing;
  /** The event's source, extensions (the relay's and this delivery's), secret and clock. */
  readonly context: DeliveryContext;
  /** How long the function may take to answer, its work included. */
  readonly timeoutMs: number;
  /** Aborted when the relay stops delivering. */
  readonly signal: AbortSignal;
}

/** A way to deliver. */
export interface DeliveryTransport {
  /** Makes one delivery and resolves with its outcome; never rejects. */
  send(delivery: Delivery): Promise<DeliveryOutcome>;
  /** Releases what it holds (connections); the relay calls it once it has stopped. */
  close(): Promise<void>;
  /** How `destination` is reached, for the relay's start line: `http` or `in-process`. */
  describe(destination: Destination): 'http' | 'in-process';
}

/** Deliveries over HTTP to each destination's URL, on a connection pool of the transport's own. */
export function httpTransport(): DeliveryTransport {
  const dispatcher = deliveryAgent();
  return {
    send: (delivery) =>
      deliver(delivery.destination.url, eventRequest(delivery.outgoing, delivery.context), {
        timeoutMs: delivery.timeoutMs,
        signal: delivery.signal,
        clock: delivery.context.clock,
        dispatcher,
      }),
    close: () => dispatcher.close(),
    describe: () => 'http',
  };
}

/**
 * Deliveries to the destinations named in `handlers` handed over in process; to any other, by
 * `fallback` (default: over HTTP). A hand-over is abandoned — the function's signal aborted, the
 * outcome a retry as for a timed-out request — when the relay's signal aborts or the timeout
 * passes; the reconcile may go on, holding its key in the function's own guard, as a reconcile
 * whose caller hung up does.
 */
export function inProcessTransport(
  handlers: ReadonlyMap<string, LocalHandler>,
  fallback: DeliveryTransport = httpTransport(),
): DeliveryTransport {
  return {
    send: (delivery) => {
      const handler = handlers.get(delivery.destination.name);
      return handler === undefined ? fallback.send(delivery) : handTo(handler, delivery);
    },
    close: () => fallback.close(),
    describe: (destination) => (handlers.has(destination.name) ? 'in-process' : fallback.describe(destination)),
  };
}

async function handTo(handler: LocalHandler, delivery: Delivery): Promise<DeliveryOutcome> {
  if (delivery.signal.aborted)
    return { kind: 'retry', reason: 'unreachable', detail: describeError(delivery.signal.reason) };
  const limit = deadline(delivery.signal, delivery.timeoutMs);
  let giveUp: (() => void) | undefined;
  const abandoned = new Promise<DeliveryOutcome>((resolve) => {
    giveUp = () => {
      resolve({ kind: 'retry', reason: 'unreachable', detail: describeError(limit.signal.reason) });
    };
    if (limit.signal.aborted) giveUp();
    else limit.signal.addEventListener('abort', giveUp, { once: true });
  });
  try {
    const answered = handler(outgoingEvent(delivery.outgoing, delivery.context), limit.signal).then(
      localOutcome,
      (error: unknown): DeliveryOutcome => ({ kind: 'retry', reason: 'status', detail: describeError(error) }),
    );
    return await Promise.race([answered, abandoned]);
  } finally {
    if (giveUp !== undefined) limit.signal.removeEventListener('abort', giveUp);
    limit.clear();
  }
}
