// The reconcile routes of one function, `POST /` (events) and `POST /reconcile` (manual), in an
// encapsulated context of their own so that the signature check, load shedding, the error table
// and the body parsers apply to them and not to the probes and /metrics. The first hooks decide
// without reading the body, cheapest and least trusting first: the signature header (401), then
// load (503); only a request that passed both is counted in flight and has its body read.

import type {
  FastifyPluginAsync,
  FastifyPluginOptions,
  FastifyRequest,
  FastifyTypeProviderDefault,
  RawServerDefault,
} from 'fastify';
import type { Logger } from 'pino';
import { addSignatureCheck, type Signatures } from './auth.ts';
import { addBodyParsers, closeIfBodyUnread, noteClientGone, takesBody } from './body.ts';
import { failure } from './errors.ts';
import { eventJob, manualJob } from './requests.ts';
import { runReconcile, send, type Runner } from './run.ts';
import { addLoadShedding, type PressureOptions } from './shedding.ts';

type Scope = FastifyPluginAsync<FastifyPluginOptions, RawServerDefault, FastifyTypeProviderDefault, Logger>;

/** What the reconcile routes need to know about the app they belong to. */
export interface Host extends Runner {
  readonly defaultKind: string;
  readonly signatures?: Signatures | undefined;
  readonly bodyLimit: number;
  /** Where the scope records its routes, as `<METHOD> <url>` (for the public endpoint's guard). */
  readonly routes: Set<string>;
}

/** The plugin that adds one function's reconcile routes (register it with the function's prefix, if any). */
export function reconcileRoutes(host: Host, pressure: Required<PressureOptions> | false): Scope {
  return async (scope) => {
    const triggers = new WeakMap<FastifyRequest, string>();
    scope.addHook('onRoute', (route) => {
      for (const method of [route.method].flat()) host.routes.add(`${method} ${route.url}`);
    });
    scope.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      done();
    });
    const { signatures } = host;
    if (signatures) addSignatureCheck(scope, signatures, host.bodyLimit);
    if (pressure) await addLoadShedding(scope, pressure, host.admission);
    addBodyParsers(scope);
    scope.setErrorHandler((error, request, reply) => {
      // A client gone mid-body: counted, not a failed reconcile (nothing ran).
      if (noteClientGone(error, request, host.metrics.aborted)) return reply.code(400).send();
      closeIfBodyUnread(request, reply);
      return send(reply, failure(error, { log: request.log, retryAfter: host.retryAfter }));
    });
    scope.addHook('onResponse', (request, reply, done) => {
      const trigger =
        request.routeOptions.url?.endsWith('/reconcile') === true ? 'manual' : (triggers.get(request) ?? 'unknown');
      host.metrics.requests.inc({ function: host.definition.name, trigger, code: String(reply.statusCode) });
      host.metrics.answered(host.definition.name);
      done();
    });
    // The only routes of any listener that read a body, up to the host's limit.
    const bodied = { config: takesBody, bodyLimit: host.bodyLimit };
    scope.post('/', bodied, (request, reply) => {
      // With signatures on, every request here passed the signature check (the first hook).
      const job = eventJob(host.definition, request, (type) => triggers.set(request, type), signatures !== undefined);
      return runReconcile(host, request, reply, job);
    });
    scope.post('/reconcile', bodied, (request, reply) =>
      runReconcile(host, request, reply, manualJob(host.definition, host.defaultKind, request)),
    );
  };
}
