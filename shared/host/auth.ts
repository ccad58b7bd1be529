// The host's side of request signing (the scheme itself is the wire contract's, shared/wire/signing.ts):
// a first look at the signature header before anything of the request body is read, reading the
// body whole so that the signature can be checked before any parser sees it, and the 401 for a
// request that fails either.

import { checkSignatureHeader, verifyRequest, type AuthOptions, type SignedRequest } from '../wire/signing.ts';

/** The reply to a request that failed verification. */
export class UnauthorizedError extends Error {
  override readonly name = 'UnauthorizedError';
  readonly statusCode = 401;
}

/**
 * Throws UnauthorizedError unless `headers` carry a well-formed, fresh signature header (scheme
 * v2, timestamp within the tolerance). For the request's first hook: a stranger without one is
 * refused before a byte of its body is read. The HMAC itself covers the body and is checked by
 * {@link readVerifiedBody}.
 */
export function requireSignatureHeader(headers: SignedRequest['headers'], options: AuthOptions): void {
  const check = checkSignatureHeader(headers, options);
  if (!check.ok) throw new UnauthorizedError(check.reason);
}

/**
 * Reads a request body stream whole (at most `limit` bytes) and verifies the request's signature
 * over it and `request`'s method, target (path and query, as received) and headers. Resolves with
 * the body, to be parsed as usual; rejects with UnauthorizedError (the reason as its message) when
 * verification fails, and with `tooLarge()` when the body is over the limit — at once when the
 * request's Content-Length says so, else as soon as more than `limit` bytes have come. For a
 * server's pre-parsing step: the signature covers the raw bytes, so it must be checked before a
 * parser turns them into something else.
 */
export async function readVerifiedBody(
  payload: AsyncIterable<Uint8Array | string>,
  request: Omit<SignedRequest, 'body'>,
  options: AuthOptions & { readonly limit: number; readonly tooLarge: () => Error },
): Promise<Buffer> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > options.limit) throw options.tooLarge();
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of payload) {
    const bytes =
      typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    length += bytes.length;
    if (length > options.limit) throw options.tooLarge();
    chunks.push(bytes);
  }
  const body = Buffer.concat(chunks, length);
  const verification = verifyRequest({ ...request, body }, options);
  if (!verification.ok) throw new UnauthorizedError(verification.reason);
  return body;
}
