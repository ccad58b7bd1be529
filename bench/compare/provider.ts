// The benchmark cloud (test/harness/cloud.ts) as an out-of-tree provider for `cirrus start`, so that cirrus
// runs in a process of its own like the Go CCM: `cirrus start --provider-module
// bench/compare/provider.ts --cloud-provider bench --cloud-config <file>`. The cloud-config (JSON)
// sets the latencies and the port of a /calls endpoint that answers as the Go CCM's cloud does
// (bench/go-ccm/calls.go): calls and most in flight per method, and the updateLoadBalancer log
// (each update's node set as test/harness/node-sets.ts keeps it, and the names it numbers);
// POST /forget?name=N (repeatable) makes those nodes' machines gone, as there.
//
//   {"latencyMs": 50, "lbLatencyMs": 1000, "statsPort": 40123}

import { createServer } from 'node:http';
import { CloudConfigError } from '../../shared/cloud/errors.ts';
import { registerCloudProvider } from '../../shared/cloud/registry.ts';
import { BenchCloud } from '../../test/harness/cloud.ts';

/** The cloud-config of the `bench` provider; the Go CCM takes the same as --bench-* flags. */
export interface BenchCloudConfig {
  readonly latencyMs: number;
  readonly lbLatencyMs: number;
  readonly statsPort: number;
}

export const benchProviderName = 'bench';

registerCloudProvider(benchProviderName, ({ config, configPath, signal }) => {
  const settings = parse(config, configPath);
  const cloud = new BenchCloud();
  cloud.latencyMs = settings.latencyMs;
  cloud.lbLatencyMs = settings.lbLatencyMs;
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (request.method === 'POST' && url.pathname === '/forget') {
      for (const name of url.searchParams.getAll('name')) cloud.forget(name);
      response.statusCode = 204;
      response.end();
      return;
    }
    const from = Number(url.searchParams.get('updatesFrom') ?? 0);
    const limit = Number(url.searchParams.get('limit') ?? Infinity);
    const namesFrom = Number(url.searchParams.get('namesFrom') ?? 0);
    const page = cloud.recorded(from, limit > 0 ? limit : Infinity, namesFrom);
    const updates = page.updates.map((u) => ({ ...u, at: performance.timeOrigin + u.at }));
    const updatesTotal = cloud.updatesTotal;
    response.setHeader('content-type', 'application/json');
    response.end(
      JSON.stringify({ calls: cloud.calls, maxInFlight: cloud.maxInFlight, updates, updatesTotal, names: page.names }),
    );
  });
  server.listen(settings.statsPort, '127.0.0.1');
  signal.addEventListener('abort', () => server.close(), { once: true });
  return cloud;
});

function parse(text: string | undefined, file: string | undefined): BenchCloudConfig {
  if (text === undefined) throw new CloudConfigError(file, '', 'the bench provider needs --cloud-config');
  const raw = JSON.parse(text) as Partial<Record<keyof BenchCloudConfig, unknown>>;
  for (const field of ['latencyMs', 'lbLatencyMs', 'statsPort'] as const) {
    if (typeof raw[field] !== 'number' || raw[field] < 0)
      throw new CloudConfigError(file, field, 'must be a number ≥ 0');
  }
  return raw as BenchCloudConfig;
}
