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
// Reply classes (docs/adr/0005-function-http-contract.md): 2xx accepted; 400 rejected for good
// (logged with the function's reason); 429 and 503 retried after their Retry-After when they give
// one; anything else — other statuses, refused or reset connections, timeouts — retried with backoff. Unlike the Knative data
// plane, 401/403/404 are retried too: they are configuration mistakes (a wrong secret or URL) that
// get fixed, and the relay loses nothing meanwhile.

import { randomUUID } from 'node:crypto';
import {
  binaryModeHeaders,
  cloudCallsHeader,
  eventTypes,
  extensionNames,
  objectSubject,
  parseErrorBody,
  signatureHeader,
  signRequest,
  triggerSource,
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
  const { attributes, body } =
    outgoing.kind === 'object'
      ? objectEvent(outgoing, context.source)
      : triggerEvent(outgoing, (context.clock ?? systemClock).now());
  const headers = binaryModeHeaders({ ...context.ceOverrides, ...attributes, id });
  if (body !== '') headers['content-type'] = 'application/json';
  const signingSecret = context.secret === '' ? undefined : context.secret;
  return signingSecret === undefined ? { headers, body } : { headers, body, signingSecret };
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
): { attributes: Record<string, string>; body: string } {
  const { change } = outgoing;
  const { kind, apiVersion } = change.resource;
  const name = change.object.metadata?.name ?? '';
  const namespace = change.object.metadata?.namespace ?? '';
  const attributes = {
    specversion: '1.0',
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
  };
  return { attributes, body: JSON.stringify(change.object) };
}

function triggerEvent(
  outgoing: Extract<Outgoing, { kind: 'trigger' }>,
  now: number,
): {
  attributes: Record<string, string>;
  body: string;
} {
  const attributes = {
    specversion: '1.0',
    source: triggerSource,
    type: eventTypes.reconcileAll,
    time: new Date(now).toISOString(),
    [extensionNames.target]: outgoing.target,
    [extensionNames.reason]: outgoing.reason,
  };
  return { attributes, body: '' };
}

/**
 * POSTs `request` to `url`, signed then (headersFor), and reads the reply into an outcome (see
 * the module comment). Never rejects. `timeoutMs` bounds the whole exchange: a function answers
 * only once its work is done. A body larger than a function takes (maxEventBytes) is not sent:
 * it is rejected here as the function would reject it, with a 400. A Retry-After date is read
 * against `clock` (default the system clock).
 */
export async function deliver(
  url: string,
  request: EventRequest,
  options: { readonly timeoutMs: number; readonly signal: AbortSignal; readonly clock?: Clock | undefined },
): Promise<DeliveryOutcome> {
  const size = Buffer.byteLength(request.body);
  if (size > maxEventBytes)
    return {
      kind: 'rejected',
      status: 0,
      reason: `the event is ${size} bytes, more than a function takes (${maxEventBytes})`,
    };
  let response: Response;
  let text: string;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: headersFor(url, request),
      // No body at all for an empty one: fetch would otherwise add `content-type: text/plain`,
      // a header the signature covers (and that the receiver would try to parse).
      ...(request.body === '' ? {} : { body: request.body }),
      signal: AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]),
    });
    // Read to the end either way: an unread body keeps the connection from being reused.
    text = await response.text();
  } catch (error) {
    return { kind: 'retry', reason: 'unreachable', detail: describeFetchError(error) };
  }
  const { headers } = response;
  const now = (options.clock ?? systemClock).now();
  const outcome = classify(response.status, text, headers.get('retry-after'), now);
  return withReportedCalls(outcome, headers.get(cloudCallsHeader));
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
  const body = parseErrorBody(text);
  if (body === undefined) return text.slice(0, 300) || '(no body)';
  const problems = body.problems ?? [];
  return problems.length > 0 && !(problems.length === 1 && problems[0] === body.error)
    ? `${body.error} (${problems.join('; ')})`
    : body.error;
}

// fetch wraps the reason (ECONNREFUSED, ECONNRESET, a timeout, a port fetch refuses) in a TypeError's cause.
function describeFetchError(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = typeof cause?.code === 'string' ? `${cause.code}: ` : '';
  if (typeof cause?.message === 'string') return `${code}${cause.message}`;
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
