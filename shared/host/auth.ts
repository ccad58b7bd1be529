// The host's side of request signing (the scheme itself is the wire contract's, shared/wire/signing.ts):
// reading a request body whole so that its signature can be checked before any parser sees it, and
// the 401 for a request that fails the check.

import { verifyRequest, type AuthOptions, type SignedRequest } from '../wire/signing.ts';

/** The reply to a request that failed verification. */
export class UnauthorizedError extends Error {
  override readonly name = 'UnauthorizedError';
  readonly statusCode = 401;
}

/**
 * Reads a request body stream whole (at most `limit` bytes) and verifies the request's signature
 * over it. Resolves with the body, to be parsed as usual; rejects with UnauthorizedError (the
 * reason as its message) when verification fails, and with `tooLarge()` when the body is over
 * the limit. For a server's pre-parsing step: the signature covers the raw bytes, so it must be
 * checked before a parser turns them into something else.
 */
export async function readVerifiedBody(
  payload: AsyncIterable<Uint8Array | string>,
  headers: SignedRequest['headers'],
  options: AuthOptions & { readonly limit: number; readonly tooLarge: () => Error },
): Promise<Buffer> {
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
  const verification = verifyRequest({ headers, body }, options);
  if (!verification.ok) throw new UnauthorizedError(verification.reason);
  return body;
}
