// Request signing between the relay (or `cirrus reconcile`) and the functions: an HMAC-SHA256 with
// a shared secret over a timestamp, a nonce, what the request asks for (method, path, query), the
// event's attributes and the SHA-256 of the body, in one header:
//
//   X-Cirrus-Signature: t=<unix seconds>,n=<32 hex: the nonce>,d=<64 hex: SHA-256 of the body>,v4=<64 hex: the HMAC>
//
// The signed string (scheme v4; docs/http-contract.md has the same text) is, each part followed
// by a newline except the last:
//
//   v4
//   <t>                         the timestamp of the header, decimal
//   <n>                         the nonce of the header: 16 random bytes, hex
//   <METHOD>                    upper case: POST
//   <path>                      the request target up to its first `?`, exactly as sent (still
//                               percent-encoded, never normalized): /node-init/reconcile
//   <canonical query>           see canonicalQuery(); empty without a query
//   <content-type>              the header's value; empty when absent
//   <name>:<value>              one line for each `ce-` header present, by name in ascending
//                               order (names lower case; repeated ones joined by ",")
//   <empty line>                the end of the headers
//   <d>                         the body's SHA-256 as in the header, lower-case hex
//
// Why the body's digest rather than the body (the change from v3, ADR 0017): the HMAC can then be
// checked from the headers alone, so a request that does not hold the secret is refused before a
// byte of its body is read and never holds a place among the requests in flight; the body is then
// read, within the request deadline, and must have the digest the verified header states (AWS
// Signature Version 4 signs `x-amz-content-sha256` the same way). The nonce makes every request
// unique, so that a verifier can refuse a signature it has seen (a replay) without refusing two
// identical requests signed in the same second; the HMAC that matched is the request's id.
//
// Why each part: the CloudEvent attributes travel in headers in binary mode, so signing the body
// alone would let anyone holding one signed request (say, a `reconcile.all` with an empty body)
// send any event. Every `ce-` header is signed, the contract's extensions included
// (`cirrustarget`, `cirrusnodeset`), so that no attribute a function reads is unsigned. The
// method, path and query say what the request does (`?dryRun=true` is a different request from
// `?dryRun=false`, `/routes` from `/node-init` under `cirrus start`), so they are signed too: the
// signer signs the path it requests, and the function verifies the path it received. A gateway
// that rewrites paths between them (an API Gateway stage prefix) must be configured not to, or
// the signer given the rewritten path.
//
// Earlier schemes are refused with a message saying so, rather than failing as a signature that
// does not match: v1 signed neither method, path nor query; v2 a fixed list of headers and so not
// the extensions cirrus added later; v3 the body itself, so that a stranger's request had to be
// read whole before it could be refused.
//
// What this protects: a function that verifies answers only to senders holding the secret; a
// captured request is worthless after the tolerance (30 s old, or 5 s ahead of the verifier's
// clock), and within it the host refuses it once it has accepted it (shared/host/replay.ts, per
// instance: docs/http-contract.md says what holds across replicas, ADR 0027 why the lifetime is
// that short). A signature is made for one attempt: the relay signs every attempt afresh
// (relay/delivery.ts deliver()), and a function checks it when the request arrives, so neither a
// long reconcile nor the relay's backoff needs a longer lifetime.
//
// Both sides live here, so that what is signed and what is verified cannot drift apart; the host's
// side (verifying the header first, then the body) is in shared/host/auth.ts. So does the largest
// event body both sides agree on ({@link maxEventBytes}).

import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ErrorCode } from './replies.ts';

/** The header that carries the signature (lower case, as Node reads it). */
export const signatureHeader = 'x-cirrus-signature';

/** The version of the signed string this module writes and accepts. */
export const signatureScheme = 'v4';

/** The headers a signature covers: `content-type`, and every header whose name starts with this. */
export const signedHeaderPrefix = 'ce-';

/**
 * How old a signature's timestamp may be, by the verifier's clock: 30 s. A captured request can be
 * replayed, once per instance that has not seen it (another replica, a restarted process, another
 * Lambda sandbox), only that long after it was signed (ADR 0027). A request held longer on its way
 * (a Knative activator waiting for a cold pod) is refused 401 and sent again, signed afresh.
 */
export const defaultToleranceSeconds = 30;

/**
 * How far ahead of the verifier's clock a signature's timestamp may be: 5 s. Nodes kept by NTP
 * agree within a second. A request signed further ahead would stay acceptable, and so replayable
 * and remembered as seen, for longer than the tolerance: at most tolerance + skew, 35 s.
 */
export const defaultClockSkewSeconds = 5;

/**
 * The largest event body, in bytes, the relay sends and a function reads: 3 MiB + 64 KiB. The
 * API server refuses request bodies over 3 MiB (k8s.io/apiserver's MaxRequestBodyBytes), and etcd
 * stores objects of at most 1.5 MiB, so no object it serves is larger than 3 MiB as JSON; an event
 * carries one object (binary mode: the body is the object; structured mode: the object inside an
 * envelope of a dozen short attributes), and 64 KiB is ample room for that envelope. Anything
 * larger is not an event about one Kubernetes object, and a function refuses it (400) without
 * holding more than this in memory.
 */
export const maxEventBytes = 3 * 1024 * 1024 + 64 * 1024;

/** The request parts a signature covers. */
export interface SignedRequest {
  /** The HTTP method; signed upper case. */
  readonly method: string;
  /**
   * The request target as sent on the wire: the path with its query, if any, e.g.
   * `/node-init/reconcile?dryRun=true` (for a URL object, `pathname + search`).
   */
  readonly url: string;
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
  /** How old a timestamp may be; default {@link defaultToleranceSeconds}. */
  readonly toleranceSeconds?: number;
  /** How far ahead a timestamp may be; default {@link defaultClockSkewSeconds}. */
  readonly clockSkewSeconds?: number;
  /** Unix time in seconds; injectable for tests. Default: the system clock. */
  readonly now?: () => number;
}

/** The outcome of a verification: ok, or why not (for the 401's body and code, and the log). */
export type Verification =
  { readonly ok: true } | { readonly ok: false; readonly reason: string; readonly code: ErrorCode };

/** A signature header whose HMAC matches: what the body must hash to, and the request's id. */
export interface VerifiedHeader {
  readonly ok: true;
  /** The HMAC that matched, hex: unique to this request (it covers the nonce). */
  readonly id: string;
  /** The timestamp: the id need not be remembered once it is past the tolerance. */
  readonly timestamp: number;
  /** The SHA-256 of the body the header states, lower-case hex. */
  readonly bodyDigest: string;
}

/** The current Unix time in whole seconds. */
export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

/** The SHA-256 of a body, lower-case hex: the header's `d`. */
export function bodyDigest(body: string | Uint8Array): string {
  return createHash('sha256').update(body).digest('hex');
}

/**
 * The value of {@link signatureHeader} for `request`, signed with `secret` at `timestamp` (Unix
 * seconds, default now) with a fresh random nonce (or `nonce`, 32 hex digits, for a test).
 * Throws TypeError for an empty secret or a malformed nonce.
 */
export function signRequest(
  secret: string,
  request: SignedRequest,
  timestamp: number = unixNow(),
  nonce: string = randomBytes(16).toString('hex'),
): string {
  if (secret === '') throw new TypeError('signRequest: the secret must not be empty');
  if (!/^[0-9a-f]{32}$/.test(nonce)) throw new TypeError('signRequest: the nonce must be 32 lower-case hex digits');
  const signed = { timestamp, nonce, bodyDigest: bodyDigest(request.body) };
  const mac = digest(secret, signed, request).toString('hex');
  return `t=${timestamp},n=${nonce},d=${signed.bodyDigest},${signatureScheme}=${mac}`;
}

/**
 * Verifies the {@link signatureHeader} of a request from its headers alone: present, well formed,
 * of scheme v4, its timestamp within the tolerance (and the clock skew), and one of its `v4`
 * HMACs that of the request with one of the secrets, over the body digest the header states
 * (compared in constant time). For a server's first look at a request: a stranger is refused
 * before its body is read. The body must then hash to `bodyDigest` ({@link verifyRequest} does both).
 */
export function verifySignatureHeader(
  request: Omit<SignedRequest, 'body'>,
  options: AuthOptions,
): VerifiedHeader | Extract<Verification, { ok: false }> {
  const parsed = readHeader(request.headers, options);
  if ('reason' in parsed) return { ok: false, ...parsed };
  const secrets = typeof options.secret === 'string' ? [options.secret] : options.secret;
  for (const secret of secrets) {
    if (secret === '') continue;
    const expected = digest(secret, parsed, request);
    const match = parsed.signatures.find(
      (signature) => signature.length === expected.length && timingSafeEqual(signature, expected),
    );
    if (match !== undefined)
      return { ok: true, id: match.toString('hex'), timestamp: parsed.timestamp, bodyDigest: parsed.bodyDigest };
  }
  return { ok: false, reason: 'signature does not match', code: 'CIRRUS_ERR_SIGNATURE_INVALID' };
}

/**
 * Checks the {@link signatureHeader} of `request` against the secret(s) in `options`: it must pass
 * {@link verifySignatureHeader}, and the body must have the digest the header states.
 */
export function verifyRequest(request: SignedRequest, options: AuthOptions): Verification {
  const header = verifySignatureHeader(request, options);
  if (!header.ok) return header;
  return bodyDigest(request.body) === header.bodyDigest ? { ok: true } : bodyMismatch;
}

/** The verification of a body whose digest is not the one its verified header states. */
export const bodyMismatch = {
  ok: false,
  reason: 'the body does not have the digest its signature states',
  code: 'CIRRUS_ERR_BODY_DIGEST_MISMATCH',
} as const satisfies Verification;
/** One `name=value` of a query string, decoded; a part without `=` has the value ''. */
export interface QueryParameter {
  readonly name: string;
  readonly value: string;
}

/**
 * The parameters of the query in `url` (a request target, or the query alone after a `?`), in
 * order, repeats kept: split on `&` (empty parts skipped), each part at its first `=`, names and
 * values decoded as application/x-www-form-urlencoded (`+` is a space, then percent-decoding as
 * UTF-8); a name or value that does not decode is kept as sent. What a function interprets and what
 * the signature covers are these same parameters.
 */
export function queryParameters(url: string): QueryParameter[] {
  const at = url.indexOf('?');
  const query = at === -1 ? '' : url.slice(at + 1);
  const parameters: QueryParameter[] = [];
  for (const part of query.split('&')) {
    if (part === '') continue;
    const equals = part.indexOf('=');
    const name = equals === -1 ? part : part.slice(0, equals);
    const value = equals === -1 ? '' : part.slice(equals + 1);
    parameters.push({ name: formDecode(name), value: formDecode(value) });
  }
  return parameters;
}

/**
 * The query of `url` as the signature covers it: its {@link queryParameters}, each name and value
 * percent-encoded as RFC 3986 strictly says (every byte of its UTF-8 but the unreserved
 * `A-Z a-z 0-9 - . _ ~` as `%XX`, upper-case hex), written `name=value`, sorted (by name, then
 * value), joined by `&`. `?b=2&a=1`, `?a=1&b=2` and `?a=%31&b=2` are one canonical query,
 * `a=1&b=2`: a gateway that rebuilds the query from its parameters (an API Gateway REST API, the
 * AWS Lambda adapter) changes neither the signature nor the meaning.
 */
export function canonicalQuery(url: string): string {
  return queryParameters(url)
    .map(({ name, value }) => `${strictEncode(name)}=${strictEncode(value)}`)
    .sort()
    .join('&');
}

function formDecode(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return text;
  }
}

function strictEncode(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
}

interface ParsedSignature {
  readonly timestamp: number;
  readonly nonce: string;
  readonly bodyDigest: string;
  readonly signatures: readonly Buffer[];
}

function digest(
  secret: string,
  signed: Omit<ParsedSignature, 'signatures'>,
  request: Omit<SignedRequest, 'body'>,
): Buffer {
  const at = request.url.indexOf('?');
  const path = at === -1 ? request.url : request.url.slice(0, at);
  const hmac = createHmac('sha256', secret);
  hmac.update(`${signatureScheme}\n${signed.timestamp}\n${signed.nonce}\n${request.method.toUpperCase()}\n${path}\n`);
  hmac.update(`${canonicalQuery(request.url)}\n`);
  for (const line of headerLines(request.headers)) hmac.update(`${line}\n`);
  hmac.update('\n');
  hmac.update(signed.bodyDigest);
  return hmac.digest();
}

// The content type's value, then `name:value` for each `ce-` header, sorted. Names are compared
// lower case, as HTTP has them case-insensitive and Node hands them to a server lower case.
function headerLines(headers: SignedRequest['headers']): string[] {
  let contentType = '';
  const events: string[] = [];
  for (const [raw, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const name = raw.toLowerCase();
    if (name === 'content-type') contentType = headerValue(value);
    else if (name.startsWith(signedHeaderPrefix)) events.push(`${name}:${headerValue(value)}`);
  }
  return [contentType, ...events.sort()];
}

function headerValue(value: string | readonly string[] | undefined): string {
  if (value === undefined) return '';
  return typeof value === 'string' ? value : value.join(',');
}

type HeaderFailure = { readonly reason: string; readonly code: ErrorCode };

// The header, parsed and fresh; or why not.
function readHeader(headers: SignedRequest['headers'], options: AuthOptions): ParsedSignature | HeaderFailure {
  const header = headerValue(headers[signatureHeader]);
  if (header === '') return { reason: `missing ${signatureHeader} header`, code: 'CIRRUS_ERR_SIGNATURE_MISSING' };
  const parsed = parseSignature(header);
  if (typeof parsed === 'string')
    return {
      reason: `${signatureHeader} is signature scheme ${parsed}, which is no longer accepted: sign with v4, which covers the method, path, query, every ce- header and the body's digest (docs/http-contract.md)`,
      code: 'CIRRUS_ERR_SIGNATURE_INVALID',
    };
  if (parsed === undefined)
    return {
      reason: `malformed ${signatureHeader} header: expected t=<unix seconds>,n=<32 hex>,d=<64 hex>,v4=<64 hex>`,
      code: 'CIRRUS_ERR_SIGNATURE_INVALID',
    };
  return fresh(parsed, options);
}

function fresh(parsed: ParsedSignature, options: AuthOptions): ParsedSignature | HeaderFailure {
  const tolerance = options.toleranceSeconds ?? defaultToleranceSeconds;
  const skew = options.clockSkewSeconds ?? defaultClockSkewSeconds;
  const age = (options.now ?? unixNow)() - parsed.timestamp;
  if (age > tolerance)
    return {
      reason: `signature timestamp is more than ${tolerance} s older than this server's clock`,
      code: 'CIRRUS_ERR_SIGNATURE_EXPIRED',
    };
  if (age < -skew)
    return {
      reason: `signature timestamp is more than ${skew} s ahead of this server's clock: check the clocks`,
      code: 'CIRRUS_ERR_SIGNATURE_EXPIRED',
    };
  return parsed;
}

const oldSchemes = ['v3', 'v2', 'v1'] as const;

// `t=<digits>`, `n=<32 hex>` and `d=<64 hex>` once (the last of each counts) and one or more
// `v4=<64 hex>`; other schemes (a future v5) are skipped, and a header with only well-formed
// signatures of an old scheme is recognized as that scheme.
function parseSignature(header: string): ParsedSignature | (typeof oldSchemes)[number] | undefined {
  const fields = header.split(',').map((part) => {
    const [name = '', value = ''] = part.trim().split('=', 2);
    return { name, value };
  });
  const last = (name: string, pattern: RegExp): string | undefined =>
    fields.findLast((field) => field.name === name && pattern.test(field.value))?.value;
  const time = last('t', /^\d{1,12}$/);
  const nonce = last('n', /^[0-9a-f]{32}$/i);
  const body = last('d', /^[0-9a-f]{64}$/i);
  const signatures = fields
    .filter((field) => field.name === signatureScheme && /^[0-9a-f]{64}$/i.test(field.value))
    .map((field) => Buffer.from(field.value, 'hex'));
  if (time !== undefined && nonce !== undefined && body !== undefined && signatures.length > 0)
    return { timestamp: Number(time), nonce: nonce.toLowerCase(), bodyDigest: body.toLowerCase(), signatures };
  if (time === undefined) return undefined;
  return oldSchemes.find((old) => fields.some((field) => field.name === old && /^[0-9a-f]{64}$/i.test(field.value)));
}
