// The reply side of the event contract (docs/http-contract.md): 2xx handled, 400 the event itself
// is invalid (never retried; the error says why), 401 not signed as the contract requires, 408 too
// slow to send its request, 429/503 with Retry-After, other 5xx retried with backoff. Every error
// reply carries a stable `code` from {@link errorCodes}, in the manner of Fastify's `FST_ERR_…`:
// what a caller matches on, where the message is for people. What a function throws for a 400,
// and the body every error reply carries, which the relay reads back into its log.

/**
 * Every code an error reply of the host carries, with its status: the one list (docs/http-contract.md
 * has it with what each means and what a sender does about it). Codes are stable: one is never
 * reused for another meaning; a new failure gets a new code.
 */
export const errorCodes = {
  /** A function's own InvalidRequestError: an object name that cannot be valid, a missing namespace. */
  CIRRUS_ERR_INVALID_REQUEST: 400,
  /** The request is not a valid CloudEvent (missing attributes, batched mode, a malformed extension). */
  CIRRUS_ERR_INVALID_EVENT: 400,
  /** A valid CloudEvent of a type the host does not take. */
  CIRRUS_ERR_UNSUPPORTED_EVENT_TYPE: 400,
  /** The event or manual request names a kind the function does not handle. */
  CIRRUS_ERR_UNSUPPORTED_KIND: 400,
  /** The body of `POST /reconcile` is not `{ name, namespace?, kind? }` or `{ all: true }`. */
  CIRRUS_ERR_INVALID_RECONCILE_REQUEST: 400,
  /** An unknown, repeated or malformed query parameter (only `dryRun=true|false` is taken). */
  CIRRUS_ERR_INVALID_QUERY: 400,
  /** The body does not parse as its Content-Type says (malformed JSON). */
  CIRRUS_ERR_MALFORMED_BODY: 400,
  /** The body is larger than the host reads (maxEventBytes, shared/wire/signing.ts). */
  CIRRUS_ERR_BODY_TOO_LARGE: 400,
  /** A signed route without an `X-Cirrus-Signature` header. */
  CIRRUS_ERR_SIGNATURE_MISSING: 401,
  /** A signature header that is malformed, of a scheme no longer accepted, or that does not match. */
  CIRRUS_ERR_SIGNATURE_INVALID: 401,
  /** A signature whose timestamp is too old, or further in the future than the clock skew allows. */
  CIRRUS_ERR_SIGNATURE_EXPIRED: 401,
  /** A signature this instance has already accepted: a replay. */
  CIRRUS_ERR_SIGNATURE_REPLAYED: 401,
  /** The body does not have the digest the (verified) signature header states. */
  CIRRUS_ERR_BODY_DIGEST_MISMATCH: 401,
  /** No such route. */
  CIRRUS_ERR_NOT_FOUND: 404,
  /** The request's headers and body did not arrive within the deadline; the connection is closed. */
  CIRRUS_ERR_REQUEST_TIMEOUT: 408,
  /** Not HTTP the server can read (a malformed request line or header); the connection is closed. */
  CIRRUS_ERR_BAD_HTTP: 400,
  /** The request's headers are larger than the server reads (16 KiB); the connection is closed. */
  CIRRUS_ERR_HEADERS_TOO_LARGE: 431,
  /** The function failed: anything not listed here. Retried with backoff. */
  CIRRUS_ERR_INTERNAL: 500,
  /** The function asked to be called again later (a RetryError): Retry-After says when. */
  CIRRUS_ERR_RETRY_LATER: 503,
  /** As many reconcile requests in flight as the instance takes (--max-concurrent-requests). */
  CIRRUS_ERR_OVERLOADED: 503,
  /** Memory or event-loop delay over its limit (load shedding). */
  CIRRUS_ERR_UNDER_PRESSURE: 503,
  /** The instance is shutting down. */
  CIRRUS_ERR_CLOSING: 503,
} as const;

/** A stable error code: a key of {@link errorCodes}. */
export type ErrorCode = keyof typeof errorCodes;

/**
 * The request itself is wrong and sending it again cannot help: a malformed CloudEvent, a kind
 * the function does not handle, a name that is not a valid Kubernetes name. The host answers 400
 * with `{ error: message, code, problems }`. Definitions may throw it (also as the `cause` of
 * another error); `problems` lists every individual problem, and is `[message]` when none are
 * given; `code` is CIRRUS_ERR_INVALID_REQUEST unless the thrower names a more precise one.
 */
export class InvalidRequestError extends Error {
  override readonly name = 'InvalidRequestError';
  readonly problems: readonly string[];
  readonly code: ErrorCode;
  constructor(
    message: string,
    problems: readonly string[] = [message],
    options?: ErrorOptions & { readonly code?: ErrorCode },
  ) {
    super(message, options);
    this.problems = problems;
    this.code = options?.code ?? 'CIRRUS_ERR_INVALID_REQUEST';
  }
}

/**
 * A 2xx reply's header: the cloud calls the reconcile made (a whole number), so that the relay
 * gives back the cloud call budget it charged beyond them (ADR 0018).
 */
export const cloudCallsHeader = 'x-cirrus-cloud-calls';

/** The JSON body of every error reply. */
export interface ErrorBody {
  readonly error: string;
  /** One of {@link errorCodes}; optional only in what {@link parseErrorBody} reads from a peer. */
  readonly code?: string;
  /** Set on 400: each thing wrong with the request. */
  readonly problems?: readonly string[];
}

/**
 * The {@link ErrorBody} in a reply's text; undefined when the text is not one (not JSON, or no
 * string `error`). Problems that are not strings are left out, and so is a code that is not one.
 */
export function parseErrorBody(text: string): ErrorBody | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  return readErrorBody(body);
}

/** The {@link ErrorBody} a reply's parsed body holds (as {@link parseErrorBody}, without the JSON). */
export function readErrorBody(body: unknown): ErrorBody | undefined {
  if (typeof body !== 'object' || body === null || !('error' in body) || typeof body.error !== 'string')
    return undefined;
  const problems =
    'problems' in body && Array.isArray(body.problems)
      ? body.problems.filter((p): p is string => typeof p === 'string')
      : [];
  const code = 'code' in body && typeof body.code === 'string' ? { code: body.code } : {};
  return { error: body.error, ...code, problems };
}
