// How the host turns an error into a reply. One table, so that an event and a manual reconcile
// that fail the same way get the same status: the Knative data plane retries on the status alone
// (400 is never retried, 503 is retried after Retry-After, other 5xx with backoff).

import { findCause, RetryError } from '../cloud/errors.ts';

/**
 * The request itself is wrong and sending it again cannot help: a malformed CloudEvent, a kind
 * the function does not handle, a name that is not a valid Kubernetes name. The host answers 400
 * with `{ error: message, problems }`. Definitions may throw it (also as the `cause` of another
 * error); `problems` lists every individual problem, and is `[message]` when none are given.
 */
export class InvalidRequestError extends Error {
  override readonly name = 'InvalidRequestError';
  readonly problems: readonly string[];
  constructor(message: string, problems: readonly string[] = [message], options?: ErrorOptions) {
    super(message, options);
    this.problems = problems;
  }
}

/** The JSON body of every error reply. */
export interface ErrorBody {
  readonly error: string;
  /** Set on 400: each thing wrong with the request. */
  readonly problems?: readonly string[];
}

/** What to answer for an error, and how loudly to log it. */
export interface ErrorReply {
  readonly status: 400 | 500 | 503;
  readonly body: ErrorBody;
  /** Seconds for the `Retry-After` header; set exactly when status is 503. */
  readonly retryAfterSeconds?: number;
  /** `info` for a requested retry, `warn` for a bad request, `error` for a failure. */
  readonly level: 'info' | 'warn' | 'error';
}

/**
 * Maps an error thrown by a reconcile (or by the host's own request checks) to its reply:
 * a RetryError anywhere in the cause chain → 503 with `Retry-After` = ceil(retryAfterMs / 1000),
 * at least 1 (a 0 would invite an immediate retry storm); an InvalidRequestError anywhere in the
 * chain → 400; anything else → 500. RetryError wins over InvalidRequestError: "try later" is
 * the more specific instruction.
 */
export function errorReply(error: unknown): ErrorReply {
  const message = errorMessage(error);
  const retry = findCause(error, RetryError);
  if (retry) return { status: 503, body: { error: message }, retryAfterSeconds: retryAfterSeconds(retry.retryAfterMs), level: 'info' };
  const invalid = findCause(error, InvalidRequestError);
  if (invalid) return { status: 400, body: { error: message, problems: invalid.problems }, level: 'warn' };
  return { status: 500, body: { error: message }, level: 'error' };
}

/** Whole seconds for `Retry-After` (the header takes no fractions), never below 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === 'string' ? error : 'unknown error';
}
