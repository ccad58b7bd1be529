// Request signing between the relay (or `cirrus reconcile`) and the functions: an HMAC-SHA256 with
// a shared secret over a timestamp, the event's attributes and the body, in one header:
//
//   X-Cirrus-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
//
// The signed string is `v1`, the timestamp, the values of {@link signedHeaders} (empty when
// absent) and the body, separated by newlines. The CloudEvent attributes are signed because in
// binary mode they travel in headers: signing the body alone would let anyone holding one signed
// request (say, a `reconcile.all` with an empty body) send any event for five minutes. The path is
// not signed: gateways in front of a function (API Gateway stages, Knative's activator) may
// rewrite it, and the attributes already say what the request is about.
//
// What this protects: a function that verifies answers only to senders holding the secret, and a
// captured request is worthless after the tolerance (5 minutes either way, for clock skew). Within
// it a request can be replayed as it is; handlers are idempotent, so a replay does no more than a
// duplicate delivery would.
//
// Both sides live here, so that what is signed and what is verified cannot drift apart; the host's
// reading of a request body for verification is in shared/host/auth.ts.

import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header that carries the signature (lower case, as Node reads it). */
export const signatureHeader = 'x-cirrus-signature';

/** Headers covered by the signature, in signing order. */
export const signedHeaders: readonly string[] = [
  'content-type',
  'ce-specversion',
  'ce-id',
  'ce-source',
  'ce-type',
  'ce-subject',
  'ce-time',
  'ce-kind',
  'ce-apiversion',
  'ce-name',
  'ce-namespace',
];

/** How far a signature's timestamp may be from the verifier's clock, either way: 5 minutes. */
export const defaultToleranceSeconds = 300;

/** The request parts a signature covers. */
export interface SignedRequest {
  /** Header values by lower-case name; a missing header signs as empty. */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly body: string | Uint8Array;
}

/** How a function verifies signatures. */
export interface AuthOptions {
  /**
   * The shared secret, or several: a request signed with any of them is accepted, so that a
   * secret can be rotated without downtime (verify with old and new, then sign with the new).
   */
  readonly secret: string | readonly string[];
  /** Default {@link defaultToleranceSeconds}. */
  readonly toleranceSeconds?: number;
  /** Unix time in seconds; injectable for tests. Default: the system clock. */
  readonly now?: () => number;
}

/** The outcome of a verification: ok, or why not (for the 401's body and the log). */
export type Verification = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** The current Unix time in whole seconds. */
export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * The value of {@link signatureHeader} for `request`, signed with `secret` at `timestamp` (Unix
 * seconds, default now). Throws TypeError for an empty secret.
 */
export function signRequest(secret: string, request: SignedRequest, timestamp: number = unixNow()): string {
  if (secret === '') throw new TypeError('signRequest: the secret must not be empty');
  return `t=${timestamp},v1=${digest(secret, timestamp, request).toString('hex')}`;
}

/**
 * Checks the {@link signatureHeader} of `request` against the secret(s) in `options`: it must be
 * present and well formed, its timestamp within the tolerance of now, and one of its `v1`
 * signatures the HMAC of the request with one of the secrets (compared in constant time).
 */
export function verifyRequest(request: SignedRequest, options: AuthOptions): Verification {
  const header = headerValue(request.headers[signatureHeader]);
  if (header === '') return { ok: false, reason: `missing ${signatureHeader} header` };
  const parsed = parseSignature(header);
  if (parsed === undefined)
    return { ok: false, reason: `malformed ${signatureHeader} header: expected t=<unix seconds>,v1=<hex>` };
  const tolerance = options.toleranceSeconds ?? defaultToleranceSeconds;
  const now = (options.now ?? unixNow)();
  if (Math.abs(now - parsed.timestamp) > tolerance) {
    return { ok: false, reason: `signature timestamp is more than ${tolerance} s away from this server's clock` };
  }
  const secrets = typeof options.secret === 'string' ? [options.secret] : options.secret;
  for (const secret of secrets) {
    if (secret === '') continue;
    const expected = digest(secret, parsed.timestamp, request);
    if (
      parsed.signatures.some(
        (signature) => signature.length === expected.length && timingSafeEqual(signature, expected),
      )
    )
      return { ok: true };
  }
  return { ok: false, reason: 'signature does not match' };
}

function digest(secret: string, timestamp: number, request: SignedRequest): Buffer {
  const hmac = createHmac('sha256', secret);
  hmac.update(`v1\n${timestamp}\n`);
  for (const name of signedHeaders) hmac.update(`${headerValue(request.headers[name])}\n`);
  hmac.update(request.body);
  return hmac.digest();
}

function headerValue(value: string | readonly string[] | undefined): string {
  if (value === undefined) return '';
  return typeof value === 'string' ? value : value.join(',');
}

interface ParsedSignature {
  readonly timestamp: number;
  readonly signatures: readonly Buffer[];
}

// `t=<digits>` once and one or more `v1=<64 hex>`; unknown schemes (a future v2) are skipped.
function parseSignature(header: string): ParsedSignature | undefined {
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const [name = '', value = ''] = part.trim().split('=', 2);
    if (name === 't' && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (name === 'v1' && /^[0-9a-f]{64}$/i.test(value)) signatures.push(Buffer.from(value, 'hex'));
  }
  return timestamp === undefined || signatures.length === 0 ? undefined : { timestamp, signatures };
}
