// Request bodies on the reconcile routes: read whole within the size limit (for the signature's
// body digest, ./auth.ts), parsed (JSON, or text for a data format the host never looks at), and
// never read at all when the reply is sent before them. The deadline on their arrival is the
// server's (./probes.ts, `requestTimeoutMs`).

import type { FastifyReply, FastifyRequest } from 'fastify';
import { InvalidRequestError } from './errors.ts';
import type { HostApp } from './probes.ts';

/**
 * Reads a request body stream whole, at most `limit` bytes: throws InvalidRequestError
 * (CIRRUS_ERR_BODY_TOO_LARGE) at once when `declaredLength` (the Content-Length) says it is
 * larger, else as soon as more than `limit` bytes have come.
 */
export async function readBody(
  payload: AsyncIterable<Uint8Array | string>,
  declaredLength: string | undefined,
  limit: number,
): Promise<Buffer> {
  const tooLarge = (): Error =>
    new InvalidRequestError(`the body is larger than ${limit} bytes`, undefined, { code: 'CIRRUS_ERR_BODY_TOO_LARGE' });
  const declared = Number(declaredLength);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of payload) {
    const bytes =
      typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    length += bytes.length;
    if (length > limit) throw tooLarge();
    chunks.push(bytes);
  }
  return Buffer.concat(chunks, length);
}

/**
 * JSON (binary-mode data, structured events, manual bodies) with an empty body meaning no data:
 * a binary-mode reconcile.all may come without any. Any other content type is read as text, so
 * that a binary-mode event whose key is in its extensions does not fail on a data format we
 * never look at.
 */
export function addBodyParsers(scope: HostApp): void {
  const json = scope.getDefaultJsonParser('error', 'error');
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser(
    ['application/json', 'application/cloudevents+json'],
    { parseAs: 'string' },
    (request, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      if (text === '') {
        done(null, undefined);
        return;
      }
      void json(request, text, done); // callback style: it calls done and returns nothing
    },
  );
  scope.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    done(null, body === '' ? undefined : body);
  });
}

/**
 * A reply sent while the request body is still coming closes the connection, rather than let
 * Node read (and discard) the rest of it: a refused stranger or an excess request costs no more
 * than its headers. The relay reads the reply all the same (fetch takes an early reply) and opens
 * a new connection for its retry.
 */
export function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  const { headers } = request;
  const hasBody =
    headers['transfer-encoding'] !== undefined ||
    (headers['content-length'] !== undefined && headers['content-length'] !== '0');
  // Only a socket's request has `complete` (not inject()'s, which has its whole body at hand).
  if (hasBody && 'complete' in request.raw && !request.raw.complete) reply.header('connection', 'close');
}
