// How the host turns an error into a reply: the one table. An event and a manual reconcile that
// fail the same way get the same status and code, wherever the error came from (the function, the
// host's own checks, a body parser, load shedding, the signature check): the Knative data plane
// retries on the status alone (400 is never retried, 503 is retried after Retry-After, other 5xx
// with backoff), and a caller that wants to know why matches on the code (shared/wire/replies.ts
// lists them; docs/http-contract.md says what each means). A reply's message repeats an error's
// text, a provider's included: the URLs in it are scrubbed of credentials and query strings
// (shared/net/url.ts), whoever wrote the error.

import { ApiException } from '@kubernetes/client-node';
import type { FastifyBaseLogger } from 'fastify';
import { findCause, RetryError } from '../cloud/errors.ts';
import { apiMessage } from '../kube/api.ts';
import { scrubUrls } from '../net/url.ts';
import { errorCodes, InvalidRequestError, type ErrorBody, type ErrorCode } from '../wire/replies.ts';

// The 400 error, the error body and the codes are the wire contract's (shared/wire/replies.ts);
// functions import them from here, with the rest of what they need from the host.
export { errorCodes, InvalidRequestError, type ErrorBody, type ErrorCode } from '../wire/replies.ts';

/** A request refused by the signature check: 401 with the reason as its message. */
export class UnauthorizedError extends Error {
  override readonly name = 'UnauthorizedError';
  readonly statusCode = 401;
  readonly code: ErrorCode;
  constructor(reason: string, code: ErrorCode) {
    super(reason);
    this.code = code;
  }
}

/** A request refused because the process has as many in flight as it takes. */
export class OverloadedError extends Error {
  override readonly name = 'OverloadedError';
  readonly statusCode = 503;
}

/** What to answer for an error, and how loudly to log it. */
export interface ErrorReply {
  readonly status: 400 | 401 | 500 | 503;
  readonly body: ErrorBody & { readonly code: ErrorCode };
  /** Seconds for the `Retry-After` header; set exactly when status is 503. */
  readonly retryAfterSeconds?: number;
  /** `info` for a requested retry, `warn` for a refused request, `error` for a failure. */
  readonly level: 'info' | 'warn' | 'error';
}

/** The `Retry-After` of load shedding's 503s when the caller names none: the default pressure's. */
export const defaultShedRetryAfterSeconds = 5;

/**
 * Maps an error thrown by a reconcile (or by the host's own request checks) to its reply:
 * an UnauthorizedError → 401 with its code; load shedding (an OverloadedError, under-pressure's
 * refusal) → 503 with `Retry-After` = `shedRetryAfter`; a RetryError anywhere in the cause chain
 * → 503 with `Retry-After` = ceil(retryAfterMs / 1000), at least 1 (a 0 would invite an immediate
 * retry storm); an InvalidRequestError anywhere in the chain → 400 with its code; Fastify's client
 * errors of the body parsers (413, malformed JSON) → 400, since the event itself is unusable and
 * a Knative sender would retry a 413 forever; anything else → 500. RetryError wins over
 * InvalidRequestError: "try later" is the more specific instruction.
 */
export function errorReply(error: unknown, shedRetryAfter: number = defaultShedRetryAfterSeconds): ErrorReply {
  if (error instanceof UnauthorizedError)
    return { status: 401, body: errorBody(error.code, `unauthorized: ${error.message}`), level: 'warn' };
  const shed = shedding(error);
  if (shed !== undefined)
    return { status: 503, body: errorBody(shed.code, shed.message), retryAfterSeconds: shedRetryAfter, level: 'warn' };
  const message = errorMessage(error);
  const retry = findCause(error, RetryError);
  if (retry)
    return {
      status: 503,
      body: errorBody('CIRRUS_ERR_RETRY_LATER', message),
      retryAfterSeconds: retryAfterSeconds(retry.retryAfterMs),
      level: 'info',
    };
  const invalid = findCause(error, InvalidRequestError);
  if (invalid) return { status: 400, body: errorBody(invalid.code, message, invalid.problems), level: 'warn' };
  const client = fastifyClientError(error);
  if (client !== undefined) return { status: 400, body: errorBody(client, message, [message]), level: 'warn' };
  return { status: 500, body: errorBody('CIRRUS_ERR_INTERNAL', message), level: 'error' };
}

/** An error reply's body: `{ error, code }`, and `problems` when given. */
export function errorBody(
  code: ErrorCode,
  error: string,
  problems?: readonly string[],
): ErrorBody & { readonly code: ErrorCode } {
  return problems === undefined ? { error, code } : { error, code, problems };
}

/** The status a code is answered with. */
export function statusOf(code: ErrorCode): number {
  return errorCodes[code];
}

/** Whole seconds for `Retry-After` (the header takes no fractions), never below 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Where a failure is logged, how long the reconcile ran, and the Retry-After of load shedding. */
export interface FailureContext {
  readonly log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>;
  readonly retryAfter: number;
  readonly durationMs?: number;
}

const outcomes = { 400: 'rejected', 401: 'unauthorized', 500: 'failed', 503: 'retry' } as const;

/** The one place an error becomes a reply ({@link errorReply}), and its log line. */
export function failure(error: unknown, context: FailureContext): ErrorReply {
  const mapped = errorReply(error, context.retryAfter);
  const fields = {
    outcome: outcomes[mapped.status],
    code: mapped.status,
    errorCode: mapped.body.code,
    ...(context.durationMs === undefined ? {} : { durationMs: context.durationMs }),
    ...(mapped.retryAfterSeconds === undefined ? {} : { retryAfter: mapped.retryAfterSeconds }),
  };
  if (mapped.level === 'error') context.log.error({ ...fields, err: error }, 'reconcile failed');
  else
    context.log[mapped.level](
      { ...fields, error: mapped.body.error, problems: mapped.body.problems },
      `reconcile ${fields.outcome}`,
    );
  return mapped;
}

// Load shedding's refusals: ours (too many in flight) and @fastify/under-pressure's (memory, event loop).
function shedding(error: unknown): { code: ErrorCode; message: string } | undefined {
  if (error instanceof OverloadedError) return { code: 'CIRRUS_ERR_OVERLOADED', message: error.message };
  if (isFastifyError(error) && error.code === 'FST_UNDER_PRESSURE')
    return { code: 'CIRRUS_ERR_UNDER_PRESSURE', message: 'overloaded: try again later' };
  return undefined;
}

// Fastify's client errors (4xx), all of them about the body: too large, or not what its
// Content-Type says.
function fastifyClientError(error: unknown): ErrorCode | undefined {
  if (!isFastifyError(error) || error.statusCode === undefined || error.statusCode < 400 || error.statusCode >= 500)
    return undefined;
  return error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? 'CIRRUS_ERR_BODY_TOO_LARGE' : 'CIRRUS_ERR_MALFORMED_BODY';
}

function isFastifyError(error: unknown): error is Error & { code: string; statusCode?: number } {
  return error instanceof Error && 'code' in error && typeof error.code === 'string' && error.code.startsWith('FST_');
}

// An API error's own message is client-node's dump of the whole response, headers included: the
// reply carries the API server's Status message instead. URLs are scrubbed in either.
function errorMessage(error: unknown): string {
  if (error instanceof ApiException) return scrubUrls(`Kubernetes API answered ${apiMessage(error)}`);
  if (error instanceof Error) return scrubUrls(error.message);
  return typeof error === 'string' ? scrubUrls(error) : 'unknown error';
}
