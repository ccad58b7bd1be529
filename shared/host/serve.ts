// Listening and graceful shutdown, kept apart from buildApp so that tests drive the app through
// inject() and only this file owns a socket.

import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';

/** Where to listen, and when to stop. */
export interface ServeOptions {
  /** 0 picks a free port. */
  readonly port: number;
  /** Default `0.0.0.0`: in Kubernetes the kubelet and the queue-proxy reach the pod on its own IP. */
  readonly host?: string | undefined;
  /** Aborting it starts a graceful shutdown. */
  readonly signal?: AbortSignal | undefined;
  /**
   * How long in-flight requests may run after `signal` aborts, in ms (default 10 000). Then their
   * connections are cut, which aborts the ReconcileOptions.signal of each. Keep it below the
   * platform's grace period (Knative: the revision's timeoutSeconds).
   */
  readonly graceMs?: number | undefined;
}

/** A listening app. */
export interface Serving {
  /** The bound address as a URL, e.g. `http://127.0.0.1:8080`. */
  readonly address: string;
  readonly port: number;
  /**
   * Resolves once `signal` has aborted and the app has closed: no new requests (503 on open
   * connections), in-flight ones finished or cut at the grace period, onClose hooks run.
   * Rejects if closing fails. Never settles without a signal.
   */
  readonly closed: Promise<void>;
}

/** The default of {@link ServeOptions.graceMs}. */
export const defaultGraceMs = 10_000;

type AnyApp<L extends FastifyBaseLogger> = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  L
>;

/**
 * Listens with `app` and resolves with the bound address; rejects if listening fails (the port is
 * taken). When `signal` aborts (or was aborted already) the app closes gracefully, and `closed`
 * settles.
 */
export async function serve<L extends FastifyBaseLogger>(app: AnyApp<L>, options: ServeOptions): Promise<Serving> {
  const address = await app.listen({ port: options.port, host: options.host ?? '0.0.0.0' });
  const bound = app.server.address();
  const port = typeof bound === 'object' && bound !== null ? bound.port : options.port;
  const closed = new Promise<void>((resolve, reject) => {
    const close = (): void => {
      closeGracefully(app, options.graceMs ?? defaultGraceMs).then(resolve, reject);
    };
    if (options.signal?.aborted === true) close();
    else options.signal?.addEventListener('abort', close, { once: true });
  });
  // A caller that never awaits `closed` must not turn a failed close into an unhandled rejection.
  closed.catch(() => undefined);
  return { address, port, closed };
}

async function closeGracefully<L extends FastifyBaseLogger>(app: AnyApp<L>, graceMs: number): Promise<void> {
  // Node's server.close() waits for every open connection; past the grace period, cut them.
  const timer = setTimeout(() => {
    app.log.warn({ graceMs }, 'grace period over: closing the connections of requests still in flight');
    app.server.closeAllConnections();
  }, graceMs);
  try {
    await app.close();
  } finally {
    clearTimeout(timer);
  }
}
