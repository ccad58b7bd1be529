// An app that listens before its process's start-up checks have answered (`cirrus serve`: the
// reach, rights and provider checks of app/cli/preflight.ts run while it already answers its
// probes, so that a cold start does not wait for their round trips). Until they pass, `GET /readyz`
// answers 503 `{ status: 'starting' }` (a kubelet or Knative's queue-proxy routes nothing to it
// yet) and a request to any other route waits for them, then runs as it would have; if they fail,
// the waiting requests and any later ones are answered 503 CIRRUS_ERR_CLOSING, and the process
// stops with the check's message. `/healthz` and `/metrics` answer throughout: the process is
// alive, and says what it does.

import { errorBody } from './errors.ts';
import type { HostApp } from './app-type.ts';
import type { Readiness } from './probes.ts';

// The probe routes (./probes.ts), which never wait.
const probes = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * Holds every request but the probes until `started` settles (see above); returns what
 * `GET /readyz` answers meanwhile and after. Without `started`, adds nothing: ready at once.
 */
export function addStartGate(app: HostApp, started: Promise<unknown> | undefined): (() => Readiness) | undefined {
  if (started === undefined) return undefined;
  let state: 'starting' | 'ready' | 'failed' = 'starting';
  const settled = started.then(
    () => {
      state = 'ready';
    },
    () => {
      state = 'failed';
    },
  );
  app.addHook('onRequest', async (request, reply) => {
    if (state === 'ready' || probes.has(request.routeOptions.url ?? '')) return;
    await settled;
    if (state === 'failed')
      return reply
        .code(503)
        .send(errorBody('CIRRUS_ERR_CLOSING', 'this instance is shutting down: its start-up checks failed'));
  });
  return () => ({ ready: state === 'ready', body: { status: state } });
}
