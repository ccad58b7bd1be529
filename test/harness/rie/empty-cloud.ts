// A cloud behind the http provider's protocol v1 (docs/providers/http.md) with nothing in it, on
// 127.0.0.1: every capability but the legacy ones; no routes, no load balancers, every
// instance exists. What the Lambda suites and the bench run service-lb and routes against, where
// the static provider serves neither (routes) or only with an address record of its own.

import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { capabilitiesAnswer } from '../../../providers/http/protocol.ts';

/** A cloud behind the http provider's protocol v1 (docs/providers/http.md) with nothing in it: what service-lb and routes call. */
// Every capability of the protocol but the legacy ones (instances, zones, clusters).
const capabilities = capabilitiesAnswer.shape.capabilities.element.options.filter(
  (c) => !['instances', 'zones', 'clusters'].includes(c),
);

export async function emptyHttpCloud(): Promise<{ url: string; calls: string[]; close: () => Promise<void> }> {
  const calls: string[] = [];
  const answers: Record<string, unknown> = { listRoutes: [], getLoadBalancer: null, instanceExists: true };
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const call = (request.url ?? '').replace(/^\/v1\//, '');
      calls.push(call);
      const body =
        call === 'capabilities'
          ? { protocol: 'v1', providerName: 'rie-test', capabilities }
          : { result: answers[call] ?? null };
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    calls,
    close: async () => {
      server.close();
      await once(server, 'close');
    },
  };
}
