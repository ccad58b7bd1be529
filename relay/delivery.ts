// One delivery: the CloudEvent as an HTTP request, sent, and the reply read into an outcome. The
// vocabulary (types, extension names, subjects, header encoding, signing) is the wire contract's,
// shared/wire/, which the functions' host reads with.
//
// Object changes go out exactly as Knative's ApiServerSource (Resource mode) sends them, binary
// content mode (knative/eventing pkg/adapter/apiserver/events/events.go):
//   ce-specversion: 1.0
//   ce-id:          a fresh UUID per request (as ApiServerSource: no idempotency key — a retry may
//                   carry a newer state of the object than the attempt before it)
//   ce-source:      the API server URL
//   ce-type:        dev.knative.apiserver.resource.add | .update | .delete
//   ce-subject:     /apis/v1/namespaces/<namespace>/<kind>s/<name> (namespace empty for Nodes)
//   ce-time:        when the relay observed the change
//   ce-kind, ce-apiversion, ce-name, ce-namespace: the object's (namespace '' for Nodes)
//   content-type:   application/json
//   body:           the object (for delete, its last known state)
// Triggers are `dev.cirrus-ccm.reconcile.all` with no body, source `/cirrus/relay`, and the
// extensions `cirrustarget` (the function it is for) and `cirrusreason` (periodic, nodes).
//
// Where the relay and a function share a process (`cirrus start`), the same event is handed over
// as values instead (./transport.ts, ADR 0021): outgoingEvent() builds it, localOutcome() reads
// the function's answer with the same classes as a reply's.
//
// Reply classes (docs/adr/0005-function-http-contract.md): 2xx accepted; 400 rejected for good
// (logged with the function's reason); 429 and 503 retried after their Retry-After when they give
// one; anything else — other statuses, refused or reset connections, timeouts — retried with backoff. Unlike the Knative data
// plane, 401/403/404 are retried too: they are configuration mistakes (a wrong secret or URL) that
// get fixed, and the relay loses nothing meanwhile.

import { randomUUID } from 'node:crypto';
import { Agent, request as httpRequest, type Dispatcher } from 'undici';
import {
  binaryModeHeaders,
  cloudCallsHeader,
  eventTypes,
  extensionNames,
  objectSubject,
  parseErrorBody,
  readErrorBody,
  signatureHeader,
  signRequest,
  triggerSource,
  type CloudEvent,
  type ErrorBody,
  type LocalReply,
} from '../shared/wire/index.ts';
import { maxEventBytes } from '../shared/wire/signing.ts';
import { systemClock, type Clock } from '../shared/clock.ts';
import type { DeliveryOutcome } from './queue.ts';
import type { Outgoing } from './routing.ts';

/** What every request of one relay shares. */
export interface DeliveryContext {
  /** The API server URL: `ce-source` of object events. */
  readonly source: string;
  /** Extensions added to every event (K_CE_OVERRIDES); names are lower-case letters and digits. */
  readonly ceOverrides?: Readonly<Record<string, string>> | undefined;
  /** Signs each request (X-Cirrus-Signature) when set. */
  readonly secret?: string | undefined;
  /** What a trigger's `ce-time` is read from; default the system clock. */
  readonly clock?: Clock | undefined;
}

/** An HTTP request ready to send. */
export interface EventRequest {
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /**
   * Sign with this secret when sending: the signature covers the method, path and query of the
   * URL the request goes to, which only deliver() knows.
   */
  readonly signingSecret?: string;
}

/** The request for `outgoing`, with `id` as `ce-id`. */
export function eventRequest(outgoing: Outgoing, context: DeliveryContext, id: string = randomUUID()): EventRequest {
  const { attributes, data } = eventParts(outgoing, context);
  const headers = binaryModeHeaders({ ...context.ceOverrides, ...attributes, id });
  const body = data === undefined ? '' : JSON.stringify(data);
  if (body !== '') headers['content-type'] = 'application/json';
  const signingSecret = context.secret === '' ? undefined : context.secret;
  return signingSecret === undefined ? { headers, body } : { headers, body, signingSecret };
}

/**
 * The CloudEvent for `outgoing`, with `id` as its id, as a function reads eventRequest()'s request
 * — the same attributes and extensions — but with the object itself as `data`, by reference: for
 * a hand-over in process (./transport.ts). The object is the relay's own copy, which the watch and
 * the queue go on using: read-only for whoever receives it.
 */
export function outgoingEvent(outgoing: Outgoing, context: DeliveryContext, id: string = randomUUID()): CloudEvent {
  const { attributes, data } = eventParts(outgoing, context);
  // Split as a receiver splits the headers: the core attributes, and every other name an extension.
  const merged: Attributes = { ...context.ceOverrides, ...attributes };
  const extensions = Object.fromEntries(Object.entries(merged).filter(([name]) => !coreAttributes.has(name)));
  const { subject, dataschema } = merged;
  return {
    specversion: '1.0',
    id,
    source: merged.source,
    type: merged.type,
    ...(subject === undefined ? {} : { subject }),
    time: merged.time,
    ...(dataschema === undefined ? {} : { dataschema }),
    extensions,
    ...(data === undefined ? {} : { datacontenttype: 'application/json', data }),
  };
}

// CloudEvents' core attributes: every other attribute is an extension.
const coreAttributes: ReadonlySet<string> = new Set([
  'specversion',
  'id',
  'source',
  'type',
  'subject',
  'time',
  'datacontenttype',
  'dataschema',
]);

// An event's attributes (core and extensions, by name) and its data: the object, or none.
function eventParts(outgoing: Outgoing, context: DeliveryContext): { attributes: Attributes; data: unknown } {
  return outgoing.kind === 'object'
    ? objectEvent(outgoing, context.source)
    : triggerEvent(outgoing, (context.clock ?? systemClock).now());
}

interface Attributes extends Record<string, string> {
  readonly specversion: '1.0';
  readonly source: string;
  readonly type: string;
  readonly time: string;
}

/** The headers to send `request` to `url` with: signed for that URL's path and query when it has a secret. */
export function headersFor(url: string, request: EventRequest): Readonly<Record<string, string>> {
  if (request.signingSecret === undefined) return request.headers;
  const { pathname, search } = new URL(url);
  const signed = { method: 'POST', url: `${pathname}${search}`, headers: request.headers, body: request.body };
  return { ...request.headers, [signatureHeader]: signRequest(request.signingSecret, signed) };
}

function objectEvent(
  outgoing: Extract<Outgoing, { kind: 'object' }>,
  source: string,
): { attributes: Attributes; data: unknown } {
  const { change } = outgoing;
  const { kind, apiVersion } = change.resource;
  const name = change.object.metadata?.name ?? '';
  const namespace = change.object.metadata?.namespace ?? '';
  const attributes = {
    specversion: '1.0' as const,
    source,
    type: { add: eventTypes.resourceAdd, update: eventTypes.resourceUpdate, delete: eventTypes.resourceDelete }[
      change.type
    ],
    subject: objectSubject(apiVersion, { kind, name, namespace }),
    time: new Date(change.observedAt).toISOString(),
    [extensionNames.kind]: kind,
    [extensionNames.apiVersion]: apiVersion,
    [extensionNames.name]: name,
    [extensionNames.namespace]: namespace,
    ...(outgoing.reason === undefined ? {} : { [extensionNames.reason]: outgoing.reason }),
  };
  return { attributes, data: change.object };
}

function triggerEvent(
  outgoing: Extract<Outgoing, { kind: 'trigger' }>,
  now: number,
): { attributes: Attributes; data: unknown } {
  const attributes = {
    specversion: '1.0' as const,
    source: triggerSource,
    type: eventTypes.reconcileAll,
    time: new Date(now).toISOString(),
    [extensionNames.target]: outgoing.target,
    [extensionNames.reason]: outgoing.reason,
  };
  return { attributes, data: undefined };
}

/** The connection pool deliveries go out on, and how long one may take. */
export interface DeliverOptions {
  /** Bounds the whole exchange, reply included: a function answers only once its work is done. */
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
  readonly clock?: Clock | undefined;
  /** The connection pool (default one shared by every caller that gives none). */
  readonly dispatcher?: Dispatcher | undefined;
}

/**
 * A pool of keep-alive connections for deliveries, per origin: as many as there are deliveries in
 * flight to it, kept 4 s after use; no timeouts of its own (deliver() bounds each exchange).
 */
export function deliveryAgent(): Agent {
  return new Agent({ headersTimeout: 0, bodyTimeout: 0 });
}

let sharedAgent: Agent | undefined;

/**
 * POSTs `request` to `url`, signed then (headersFor), on undici's `request` over a connection
 * pool, and reads the reply into an outcome (see the module comment). Never rejects. A body
 * larger than a function takes (maxEventBytes) is not sent: it is rejected here as the function
 * would reject it, with a 400. A Retry-After date is read against `clock` (default the system
 * clock).
 */
export async function deliver(url: string, request: EventRequest, options: DeliverOptions): Promise<DeliveryOutcome> {
  const size = Buffer.byteLength(request.body);
  if (size > maxEventBytes)
    return {
      kind: 'rejected',
      status: 0,
      reason: `the event is ${size} bytes, more than a function takes (${maxEventBytes})`,
    };
  const limit = deadline(options.signal, options.timeoutMs);
  let status: number;
  let headers: Record<string, string | string[] | undefined>;
  let text: string;
  try {
    const response = await httpRequest(url, {
      method: 'POST',
      headers: headersFor(url, request),
      // No body at all for an empty one: no content type either (a header the signature covers).
      ...(request.body === '' ? {} : { body: request.body }),
      signal: limit.signal,
      dispatcher: options.dispatcher ?? (sharedAgent ??= deliveryAgent()),
    });
    ({ statusCode: status, headers } = response);
    // Read to the end either way: an unread body keeps the connection from being reused.
    text = await response.body.text();
  } catch (error) {
    return { kind: 'retry', reason: 'unreachable', detail: describeError(error) };
  } finally {
    limit.clear();
  }
  const now = (options.clock ?? systemClock).now();
  const outcome = classify(status, text, single(headers['retry-after']), now);
  return withReportedCalls(outcome, single(headers[cloudCallsHeader]));
}

/**
 * The outcome of a function's answer to a hand-over in process (./transport.ts): the classes of
 * {@link classify}, read from the reply's values — its status, its error body, its Retry-After in
 * seconds and its cloud calls — rather than from an HTTP reply.
 */
export function localOutcome(reply: LocalReply): DeliveryOutcome {
  const { status } = reply;
  if (status >= 200 && status < 300)
    return reply.cloudCalls === undefined
      ? { kind: 'accepted', status }
      : { kind: 'accepted', status, cloudCalls: reply.cloudCalls };
  const reason = reasonOf(readErrorBody(reply.body), () =>
    (JSON.stringify(reply.body) as string | undefined)?.slice(0, 300),
  );
  // The function has logged this failure in the same log (shared/host/errors.ts failure): the
  // relay's own line about it is debug (./queue.ts).
  if (status === 400) return { kind: 'rejected', status, reason, logged: true };
  const detail = `status ${status}: ${reason}`;
  if ((status === 429 || status === 503) && reply.retryAfterSeconds !== undefined)
    return {
      kind: 'retry',
      reason: 'retry-after',
      status,
      detail,
      retryAfterMs: reply.retryAfterSeconds * 1000,
      logged: true,
    };
  return { kind: 'retry', reason: 'status', status, detail, logged: true };
}

/**
 * `signal`, also aborted after `ms` with a TimeoutError (as AbortSignal.timeout's), and the way to
 * drop the timer and the listener once the exchange is over: AbortSignal.timeout's timer would
 * live on for the whole timeout after every delivery.
 */
export function deadline(signal: AbortSignal, ms: number): { readonly signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const onAbort = (): void => {
    controller.abort(signal.reason);
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => {
    controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }, ms);
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

function single(value: string | string[] | undefined): string | null {
  return (Array.isArray(value) ? value[0] : value) ?? null;
}

/** The outcome of a reply with `status`, body `text` and Retry-After header `retryAfter`. */
export function classify(
  status: number,
  text: string,
  retryAfter: string | null,
  now: number = systemClock.now(),
): DeliveryOutcome {
  if (status >= 200 && status < 300) return { kind: 'accepted', status };
  if (status === 400) return { kind: 'rejected', status, reason: errorReason(text) };
  const detail = `HTTP ${status}: ${errorReason(text)}`;
  const retryAfterMs = status === 429 || status === 503 ? parseRetryAfter(retryAfter, now) : undefined;
  if (retryAfterMs !== undefined) return { kind: 'retry', reason: 'retry-after', status, detail, retryAfterMs };
  return { kind: 'retry', reason: 'status', status, detail };
}

/** A Retry-After value (delay in seconds, or an HTTP date) in ms from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = systemClock.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

// The cloud calls a 2xx reply says the function made (the host's x-cirrus-cloud-calls header,
// counted by shared/cloud/paced.ts): a whole number, or nothing.
function withReportedCalls(outcome: DeliveryOutcome, value: string | null): DeliveryOutcome {
  if (outcome.kind !== 'accepted' || value === null || !/^\d+$/.test(value.trim())) return outcome;
  return { ...outcome, cloudCalls: Number(value.trim()) };
}

// The host answers `{ error, problems }` (shared/wire/replies.ts); anything else is shown as it came, shortened.
function errorReason(text: string): string {
  return reasonOf(parseErrorBody(text), () => text.slice(0, 300));
}

function reasonOf(body: ErrorBody | undefined, asItCame: () => string | undefined): string {
  if (body === undefined) return asItCame() || '(no body)';
  const problems = body.problems ?? [];
  return problems.length > 0 && !(problems.length === 1 && problems[0] === body.error)
    ? `${body.error} (${problems.join('; ')})`
    : body.error;
}

// What went wrong, for the log: the system error's code and message (`ECONNREFUSED: connect
// ECONNREFUSED 127.0.0.1:80`), undici's (`UND_ERR_SOCKET: other side closed`), or the abort's
// reason (`TimeoutError: The operation was aborted due to timeout`).
export function describeError(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause;
  const reason = cause instanceof Error ? cause : error;
  if (!(reason instanceof Error)) return String(reason);
  const code = (reason as { code?: unknown }).code;
  return `${typeof code === 'string' ? code : reason.name}: ${reason.message}`;
}
