// Request bodies. Only the reconcile routes read one: whole within the size limit (for the
// signature's body digest, ./auth.ts), parsed (JSON, or text for a data format the host never
// looks at), and never read at all when the reply is sent before them. Every other request that
// comes with a body (an unknown path, a method a route does not take, a body on a probe's GET) is
// answered in the first hook, before a byte of it is read, and its connection closed: nothing
// unsigned is held outside the reconcile routes. The deadline on a body's arrival is the
// server's (./probes.ts, `requestTimeoutMs`); a client that goes away while sending one is
// counted, not logged as an error.

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Counter } from 'prom-client';
import { errorBody, InvalidRequestError } from './errors.ts';
import type { HostApp } from './app-type.ts';

/**
 * The body limit outside the reconcile routes (the server's default): 64 KiB. No route there
 * reads a body (the guard below answers first); this only bounds what a route added later
 * without the `takesBody` flag could be made to hold.
 */
export const outsideBodyLimit = 64 * 1024;

/** The route config of a route that reads its body (the reconcile routes): `{ config: takesBody }`. */
export const takesBody: { readonly takesBody: true } = { takesBody: true };

/** Whether a request says it carries a body (Transfer-Encoding, or a Content-Length other than 0). */
export function announcesBody(headers: FastifyRequest['headers']): boolean {
  return (
    headers['transfer-encoding'] !== undefined ||
    (headers['content-length'] !== undefined && headers['content-length'] !== '0')
  );
}

/**
 * The first hook of every app (./probes.ts createHostApp): a request with a body to a route that
 * does not read one is answered now, with the connection closed so that the rest is never read:
 * 404 CIRRUS_ERR_NOT_FOUND for no such route (any path, or a method the path does not take), 400
 * CIRRUS_ERR_BODY_TOO_LARGE for a route that takes no body (the probes' GETs, `OPTIONS /`).
 */
export function addBodyGuard(app: HostApp): void {
  app.addHook('onRequest', (request, reply, done) => {
    const config = request.routeOptions.config as { takesBody?: unknown } | undefined;
    if (!announcesBody(request.headers) || (!request.is404 && config?.takesBody === true)) {
      done();
      return;
    }
    const path = request.url.split('?')[0] ?? '';
    reply.header('connection', 'close');
    if (request.is404)
      void reply.code(404).send(errorBody('CIRRUS_ERR_NOT_FOUND', `no route ${request.method} ${path}`));
    else
      void reply
        .code(400)
        .send(errorBody('CIRRUS_ERR_BODY_TOO_LARGE', `${request.method} ${path} takes no request body`));
  });
}

/**
 * Whether `error` only says that the client went away before its request was in (it closed the
 * connection mid-body): nobody is left to answer, and nothing failed on our side.
 */
export function clientWentAway(error: unknown, request: FastifyRequest): boolean {
  const code = error instanceof Error && 'code' in error ? error.code : undefined;
  return request.raw.readableAborted || code === 'ECONNRESET';
}

/**
 * For an error handler: when the client went away ({@link clientWentAway}), counts it in
 * `aborted`, logs it at debug and returns true (the caller answers nothing more); else false.
 */
export function noteClientGone(error: unknown, request: FastifyRequest, aborted: Counter): boolean {
  if (!clientWentAway(error, request)) return false;
  aborted.inc();
  request.log.debug(
    { url: request.url, error: error instanceof Error ? error.message : String(error) },
    'client went away',
  );
  return true;
}

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
  const hasBody = announcesBody(request.headers);
  // Only a socket's request has `complete` (not inject()'s, which has its whole body at hand).
  if (hasBody && 'complete' in request.raw && !request.raw.complete) reply.header('connection', 'close');
}
