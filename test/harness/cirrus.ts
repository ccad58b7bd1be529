// cirrus in this process, wired as `cirrus start` wires it (app/cli/start.ts): every function
// behind one port (buildMultiApp), and the relay, without leader election, delivering to it.

import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { catalogue } from '../../functions/catalogue.ts';
import { buildRoutingTable, startRelay, type Relay } from '../../relay/index.ts';
import { findFunction, type FunctionSettings } from '../../shared/catalogue.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import type { FunctionDefinition } from '../../shared/host/function.ts';
import { buildMultiApp, serve } from '../../shared/host/index.ts';
import { LeanCore, type Core } from '../../shared/kube/core.ts';
import type { LevelWithSilent } from 'pino';
import { createLogger } from '../../app/log.ts';

export interface Cirrus {
  readonly url: string;
  readonly relay: Relay;
  stop(): Promise<void>;
}

export const clusterCidr = '10.244.0.0/16';

/** The function settings of `cirrus start`'s defaults, with a cluster CIDR for routes; `extra` over them. */
export function functionSettings(extra: Partial<FunctionSettings> = {}): FunctionSettings {
  return {
    clusterName: 'kubernetes',
    concurrentNodeSyncs: 10,
    concurrentServiceSyncs: 10,
    configureCloudRoutes: true,
    clusterCidr: [clusterCidr],
    concurrentRouteOperations: 10,
    ...extra,
  };
}

/** The name of the catalogue's function that runs the Go controller `controller` (its name or alias, e.g. `cloud-node`). */
export function functionOfController(controller: string): string {
  const entry = catalogue.find((e) => e.controller.name === controller || e.controller.alias === controller);
  if (entry === undefined) throw new Error(`the catalogue runs no controller ${controller}`);
  return entry.name;
}

/**
 * The catalogue's function `name`, loaded as `cirrus serve <name>` loads it: the catalogue's checks
 * of the provider and the settings, then the function's own.
 */
export async function loadFunction(
  name: string,
  deps: { readonly core: Core; readonly cloud: CloudProvider },
  extra: Partial<FunctionSettings> = {},
): Promise<FunctionDefinition> {
  const entry = findFunction(catalogue, name);
  if (entry === undefined) throw new Error(`the catalogue has no function ${name}`);
  return entry.load({ ...deps, config: functionSettings(extra) });
}

export async function startCirrus(
  kubeConfig: KubeConfig,
  cloud: CloudProvider,
  logLevel: LevelWithSilent,
): Promise<Cirrus> {
  const core = new LeanCore(kubeConfig);
  const config = functionSettings();
  const definitions = await Promise.all(catalogue.map((entry) => entry.load({ core, cloud, config })));
  const secret = randomBytes(32).toString('hex');
  const app = await buildMultiApp(definitions, {
    logger: createLogger({ name: 'cirrus', level: logLevel }),
    auth: { secret },
  });
  const controller = new AbortController();
  const server = await serve(app, { host: '127.0.0.1', port: 0, signal: controller.signal });
  const url = `http://127.0.0.1:${server.port}`;
  const routing = buildRoutingTable(catalogue, { to: definitions.map((d) => `${d.name}=${url}/${d.name}`) });
  const relay = startRelay({
    kubeConfig,
    routing,
    logger: createLogger({ name: 'relay', level: logLevel }),
    secret,
    leaderElection: false,
    // Not the default cursor in kube-system: relays of other test files on the same API server would share it.
    cursor: false,
  });
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
