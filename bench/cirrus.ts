// cirrus in this process, wired as `cirrus start` wires it (shared/cli/start.ts): every function
// behind one port (buildMultiApp), and the relay, without leader election, delivering to it.

import { randomBytes } from 'node:crypto';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { nodeInitFunction } from '../functions/node-init/index.ts';
import { nodeLifecycleFunction } from '../functions/node-lifecycle/index.ts';
import { buildRoutingTable, startRelay, type Relay } from '../functions/relay/index.ts';
import { routesFunction } from '../functions/routes/index.ts';
import { serviceLbFunction } from '../functions/service-lb/index.ts';
import type { CloudProvider } from '../shared/cloud/provider.ts';
import { buildMultiApp, serve } from '../shared/host/index.ts';
import type { LevelWithSilent } from 'pino';
import { createLogger } from '../shared/log.ts';

export interface Cirrus {
  readonly url: string;
  readonly relay: Relay;
  stop(): Promise<void>;
}

export const clusterCidr = '10.244.0.0/16';

export async function startCirrus(kubeConfig: KubeConfig, cloud: CloudProvider, logLevel: LevelWithSilent): Promise<Cirrus> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const definitions = [
    nodeInitFunction({ core, cloud }),
    nodeLifecycleFunction({ core, cloud }),
    serviceLbFunction({ core, cloud, clusterName: 'kubernetes' }),
    routesFunction({ core, cloud, clusterName: 'kubernetes', clusterCidrs: [clusterCidr] }),
  ];
  const secret = randomBytes(32).toString('hex');
  const app = await buildMultiApp(definitions, { logger: createLogger({ name: 'cirrus', level: logLevel }), auth: { secret } });
  const controller = new AbortController();
  const server = await serve(app, { host: '127.0.0.1', port: 0, signal: controller.signal });
  const url = `http://127.0.0.1:${server.port}`;
  const routing = buildRoutingTable({ to: definitions.map((d) => `${d.name}=${url}/${d.name}`) });
  const relay = startRelay({ kubeConfig, routing, logger: createLogger({ name: 'relay', level: logLevel }), secret, leaderElection: false });
  await relay.ready;
  return {
    url,
    relay,
    stop: async () => {
      await relay.stop();
      controller.abort();
      await server.closed;
    },
  };
}
