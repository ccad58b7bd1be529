// Request signing between the relay (or `cirrus reconcile`) and the functions: an HMAC-SHA256 with
// a shared secret over a timestamp, what the request asks for (method, path, query), the event's
// attributes and the body, in one header:
//
//   X-Cirrus-Signature: t=<unix seconds>,v3=<hex HMAC-SHA256>
//
// The signed string (scheme v3; ADR 0007 has the same text) is, each part followed by a newline
// except the body:
//
//   v3
//   <t>                         the timestamp of the header, decimal
//   <METHOD>                    upper case: POST
//   <path>                      the request target up to its first `?`, exactly as sent (still
//                               percent-encoded, never normalized): /node-init/reconcile
//   <canonical query>           see canonicalQuery(); empty without a query
//   <content-type>              the header's value; empty when absent
//   <name>:<value>              one line for each `ce-` header present, by name in ascending
//                               order (names lower case; repeated ones joined by ",")
//   <empty line>                the end of the headers
//   <body>                      the raw bytes
//
// Why each part: the CloudEvent attributes travel in headers in binary mode, so signing the body
// alone would let anyone holding one signed request (say, a `reconcile.all` with an empty body)
// send any event for five minutes. Every `ce-` header is signed, the contract's extensions
// included (`cirrustarget`, `cirrusnodeset`), so that no attribute a function reads is unsigned. The method, path and query say what the request does
// (`?dryRun=true` is a different request from `?dryRun=false`, `/routes` from `/node-init` under
// `cirrus start`), so they are signed too: the signer signs the path it requests, and the
// function verifies the path it received. A gateway that rewrites paths between them (an API
// Gateway stage prefix) must be configured not to, or the signer given the rewritten path.
//
// Earlier schemes are refused with a message saying so, rather than failing as a signature that
// does not match: v1 (until 2026-11-25) signed neither method, path nor query; v2 (2026-11-25,
// one day) signed a fixed list of headers and so not the extensions cirrus added later.
//
// What this protects: a function that verifies answers only to senders holding the secret, and a
// captured request is worthless after the tolerance (5 minutes either way, for clock skew). Within
// it a request can be replayed as it is, but not changed; handlers are idempotent, so a replay does
// no more than a duplicate delivery would.
//
// Both sides live here, so that what is signed and what is verified cannot drift apart; the host's
// reading of a request body for verification is in shared/host/auth.ts. So does the largest event
// body both sides agree on ({@link maxEventBytes}): the host reads at most that much before it can
// verify, and the relay never sends more.

import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header that carries the signature (lower case, as Node reads it). */
export const signatureHeader = 'x-cirrus-signature';

/** The version of the signed string this module writes and accepts. */
export const signatureScheme = 'v3';

/** The headers a signature covers: `content-type`, and every header whose name starts with this. */
export const signedHeaderPrefix = 'ce-';

/** How far a signature's timestamp may be from the verifier's clock, either way: 5 minutes. */
export const defaultToleranceSeconds = 300;

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
  return `t=${timestamp},${signatureScheme}=${digest(secret, timestamp, request).toString('hex')}`;
}

/**
 * The part of verification that needs no body: the {@link signatureHeader} in `headers` is
 * present, well formed, of scheme v3, and its timestamp within the tolerance of now. For a
 * server's first look at a request, so that a stranger is refused before its body is read;
 * {@link verifyRequest} does this and checks the HMAC.
 */
export function checkSignatureHeader(headers: SignedRequest['headers'], options: AuthOptions): Verification {
  const parsed = readHeader(headers, options);
  return 'reason' in parsed ? { ok: false, reason: parsed.reason } : { ok: true };
}

/**
 * Checks the {@link signatureHeader} of `request` against the secret(s) in `options`: it must pass
 * {@link checkSignatureHeader}, and one of its `v3` signatures must be the HMAC of the request with
 * one of the secrets (compared in constant time).
 */
export function verifyRequest(request: SignedRequest, options: AuthOptions): Verification {
  const parsed = readHeader(request.headers, options);
  if ('reason' in parsed) return { ok: false, reason: parsed.reason };
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

function digest(secret: string, timestamp: number, request: SignedRequest): Buffer {
  const at = request.url.indexOf('?');
  const path = at === -1 ? request.url : request.url.slice(0, at);
  const hmac = createHmac('sha256', secret);
  hmac.update(`${signatureScheme}\n${timestamp}\n${request.method.toUpperCase()}\n${path}\n`);
  hmac.update(`${canonicalQuery(request.url)}\n`);
  for (const line of headerLines(request.headers)) hmac.update(`${line}\n`);
  hmac.update('\n');
  hmac.update(request.body);
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

interface ParsedSignature {
  readonly timestamp: number;
  readonly signatures: readonly Buffer[];
}

// The header, parsed and fresh; or why not.
function readHeader(
  headers: SignedRequest['headers'],
  options: AuthOptions,
): ParsedSignature | { readonly reason: string } {
  const header = headerValue(headers[signatureHeader]);
  if (header === '') return { reason: `missing ${signatureHeader} header` };
  const parsed = parseSignature(header);
  if (parsed === 'v1' || parsed === 'v2')
    return {
      reason: `${signatureHeader} is signature scheme ${parsed}, which is no longer accepted: sign with v3, which covers the method, path, query and every ce- header (ADR 0007)`,
    };
  if (parsed === undefined)
    return { reason: `malformed ${signatureHeader} header: expected t=<unix seconds>,v3=<hex>` };
  const tolerance = options.toleranceSeconds ?? defaultToleranceSeconds;
  const now = (options.now ?? unixNow)();
  if (Math.abs(now - parsed.timestamp) > tolerance)
    return { reason: `signature timestamp is more than ${tolerance} s away from this server's clock` };
  return parsed;
}

// `t=<digits>` once and one or more `v3=<64 hex>`; other schemes (a future v4) are skipped, and a
// header with only well-formed signatures of an old scheme is recognized as that scheme.
function parseSignature(header: string): ParsedSignature | 'v1' | 'v2' | undefined {
  const fields = header.split(',').map((part) => {
    const [name = '', value = ''] = part.trim().split('=', 2);
    return { name, value, hex: /^[0-9a-f]{64}$/i.test(value) };
  });
  const time = fields.findLast((field) => field.name === 't' && /^\d{1,12}$/.test(field.value));
  if (time === undefined) return undefined;
  const signatures = fields
    .filter((field) => field.name === signatureScheme && field.hex)
    .map((field) => Buffer.from(field.value, 'hex'));
  if (signatures.length > 0) return { timestamp: Number(time.value), signatures };
  return (['v2', 'v1'] as const).find((old) => fields.some((field) => field.name === old && field.hex));
}
