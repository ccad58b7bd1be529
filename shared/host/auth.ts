// The host's side of request signing (the scheme itself is the wire contract's,
// shared/wire/signing.ts). In the reconcile routes' first hook, from the headers alone: the
// signature header must be present, fresh, its HMAC must match, and this instance must not have
// accepted it before (./replay.ts); a request that fails is refused 401 before a byte of its body
// is read, and so before it is counted among the requests in flight (./shedding.ts adds its hook
// after this one). Then, before any parser: the body, read within the size limit and the server's
// request deadline, must have the digest the verified header states. On a public endpoint, every
// other route but the probes needs a signature too, over an empty body.

import { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { bodyDigest, bodyMismatch, verifyRequest, verifySignatureHeader, type AuthOptions } from '../wire/signing.ts';
import { closeIfBodyUnread, readBody } from './body.ts';
import { errorReply, UnauthorizedError } from './errors.ts';
import type { HostApp } from './probes.ts';
import type { ReplayGuard } from './replay.ts';

/** How the host checks signatures: the options, and the ids it has accepted. */
export interface Signatures {
  readonly auth: AuthOptions;
  readonly replays: ReplayGuard;
}

/**
 * Adds the signature check to the reconcile routes of `scope`: the header in the first hook
 * (throws UnauthorizedError for the scope's error handler), the body digest before parsing. The
 * body is read whole, at most `limit` bytes, and handed to the parsers as if from the socket.
 */
export function addSignatureCheck(scope: HostApp, signatures: Signatures, limit: number): void {
  const digests = new WeakMap<FastifyRequest, string>();
  scope.addHook('onRequest', (request, _reply, done) => {
    // The target as received (request.url: under `cirrus start`, with the function's prefix).
    const header = verifySignatureHeader(request, signatures.auth);
    if (!header.ok) throw new UnauthorizedError(header.reason, header.code);
    if (!signatures.replays.accept(header.id, header.timestamp))
      throw new UnauthorizedError('this signature has been accepted before: a replay', 'CIRRUS_ERR_SIGNATURE_REPLAYED');
    digests.set(request, header.bodyDigest);
    done();
  });
  scope.addHook('preParsing', async (request, _reply, payload) => {
    const body = await readBody(payload, request.headers['content-length'], limit);
    if (bodyDigest(body) !== digests.get(request)) {
      throw new UnauthorizedError(bodyMismatch.reason, bodyMismatch.code);
    }
    return Readable.from([body], { objectMode: false });
  });
}

/**
 * Without a secret, a warning in the log; with one and `publicEndpoint`, a guard on every route
 * outside the reconcile routes (which check signatures themselves, and are listed in
 * `reconcileRoutes` as `<METHOD> <url>`) but the two probes. Throws TypeError for a public
 * endpoint without a secret.
 */
export function addAuthPolicy(
  app: HostApp,
  options: { readonly logger: Logger; readonly publicEndpoint?: boolean | undefined },
  signatures: Signatures | undefined,
  reconcileRoutes: ReadonlySet<string>,
): void {
  if (signatures === undefined) {
    if (options.publicEndpoint === true) throw new TypeError('a public endpoint needs auth: a signing secret');
    options.logger.warn(
      'no signing secret (--signing-secret-file): reconcile requests are not authenticated, anyone who can reach this server can make it reconcile',
    );
  } else if (options.publicEndpoint === true) addPublicEndpointGuard(app, signatures, reconcileRoutes);
}

// Such requests carry no body: the signature is over an empty one.
function addPublicEndpointGuard(app: HostApp, signatures: Signatures, reconcileRoutes: ReadonlySet<string>): void {
  const open = new Set(['/healthz', '/readyz']);
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.routeOptions.url;
    if (route !== undefined && (open.has(route) || reconcileRoutes.has(`${request.method} ${route}`))) {
      done();
      return;
    }
    const verification = verifyRequest(
      { method: request.method, url: request.url, headers: request.headers, body: '' },
      signatures.auth,
    );
    if (verification.ok) {
      done();
      return;
    }
    request.log.warn({ url: request.url, error: verification.reason }, 'unauthorized');
    closeIfBodyUnread(request, reply);
    const { status, body } = errorReply(new UnauthorizedError(verification.reason, verification.code));
    void reply.code(status).send(body);
  });
}
