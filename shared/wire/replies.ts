// The reply side of the event contract (DESIGN.md): 2xx handled, 400 the event itself is invalid
// (never retried; the error says why), 429/503 with Retry-After, other 5xx retried with backoff.
// What a function throws for a 400, and the body every error reply carries, which the relay reads
// back into its log.

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

/**
 * A 2xx reply's header: the cloud calls the reconcile made (a whole number), so that the relay
 * gives back the cloud call budget it charged beyond them (ADR 0018).
 */
export const cloudCallsHeader = 'x-cirrus-cloud-calls';

/** The JSON body of every error reply. */
export interface ErrorBody {
  readonly error: string;
  /** Set on 400: each thing wrong with the request. */
  readonly problems?: readonly string[];
}

/**
 * The {@link ErrorBody} in a reply's text; undefined when the text is not one (not JSON, or no
 * string `error`). Problems that are not strings are left out.
 */
export function parseErrorBody(text: string): ErrorBody | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null || !('error' in body) || typeof body.error !== 'string')
    return undefined;
  const problems =
    'problems' in body && Array.isArray(body.problems)
      ? body.problems.filter((p): p is string => typeof p === 'string')
      : [];
  return { error: body.error, problems };
}
