// How the host turns an error into a reply. One table, so that an event and a manual reconcile
// that fail the same way get the same status: the Knative data plane retries on the status alone
// (400 is never retried, 503 is retried after Retry-After, other 5xx with backoff).

import { ApiException } from '@kubernetes/client-node';
import { findCause, RetryError } from '../cloud/errors.ts';
import { apiMessage } from '../kube/api.ts';
import { InvalidRequestError, type ErrorBody } from '../wire/replies.ts';

// The 400 error and the error body are the wire contract's (shared/wire/replies.ts); functions
// import them from here, with the rest of what they need from the host.
export { InvalidRequestError, type ErrorBody } from '../wire/replies.ts';

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
  if (retry)
    return {
      status: 503,
      body: { error: message },
      retryAfterSeconds: retryAfterSeconds(retry.retryAfterMs),
      level: 'info',
    };
  const invalid = findCause(error, InvalidRequestError);
  if (invalid) return { status: 400, body: { error: message, problems: invalid.problems }, level: 'warn' };
  return { status: 500, body: { error: message }, level: 'error' };
}

/** Whole seconds for `Retry-After` (the header takes no fractions), never below 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

// An API error's own message is client-node's dump of the whole response, headers included: the
// reply carries the API server's Status message instead.
function errorMessage(error: unknown): string {
  if (error instanceof ApiException) return `Kubernetes API answered ${apiMessage(error)}`;
  if (error instanceof Error) return error.message;
  return typeof error === 'string' ? error : 'unknown error';
}
