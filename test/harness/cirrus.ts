// cirrus in this process, wired as `cirrus start` wires it (app/cli/start.ts): every function
// behind one port (buildMultiHost), and the relay, without leader election, sending its events to
// that port — or, with `transport: 'in-process'`, handing them to the functions in process, as
// `cirrus start` does (the tests that pin API request counts were calibrated over HTTP).

import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { catalogue } from '../../functions/catalogue.ts';
import { buildRoutingTable, inProcessTransport, startRelay, type Relay } from '../../relay/index.ts';
import { findFunction, type FunctionSettings } from '../../shared/catalogue.ts';
import type { Fleet } from '../../shared/cloud/fleet.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import type { FunctionDefinition } from '../../shared/host/function.ts';
import { buildMultiHost, serve } from '../../shared/host/index.ts';
import { LeanCore, type Core } from '../../shared/kube/core.ts';
import type { CloudEvent, LocalHandler } from '../../shared/wire/index.ts';
import type { DestinationStream, LevelWithSilent } from 'pino';
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

/** How {@link startCirrus}'s relay reaches the functions. */
export interface CirrusOptions {
  /** `http` (default: signed requests to the functions' port) or `in-process` (as `cirrus start`). */
  readonly transport?: 'in-process' | 'http';
  /**
   * With `in-process`: deep-freeze every event's object before it is handed over, so that a function
   * that writes to its `claimed` or `lastKnown` — the relay's own copy — fails with a TypeError.
   */
  readonly freeze?: boolean;
  /** A hybrid cluster's providers (ADR 0026): every function gets this fleet, `cloud` being one of them. */
  readonly fleet?: Fleet;
  /** The relay's periods in ms by function (0: off), over the catalogue's defaults. */
  readonly periods?: Readonly<Record<string, number>>;
  /** Where the functions and the relay write their logs (default: stdout). */
  readonly logDestination?: DestinationStream;
}

export async function startCirrus(
  kubeConfig: KubeConfig,
  cloud: CloudProvider,
  logLevel: LevelWithSilent,
  options: CirrusOptions = {},
): Promise<Cirrus> {
  const core = new LeanCore(kubeConfig);
  const config = functionSettings();
  // As `cirrus start`: a function the provider cannot serve (routes with the static provider) is skipped.
  const definitions = await Promise.all(
    catalogue
      .filter((entry) => entry.skipReason(cloud, config) === undefined)
      .map((entry) => entry.load({ core, cloud, config, fleet: options.fleet })),
  );
  const secret = randomBytes(32).toString('hex');
  const { app, local } = await buildMultiHost(definitions, {
    logger: createLogger({ name: 'cirrus', level: logLevel, destination: options.logDestination }),
    auth: { secret },
  });
  const controller = new AbortController();
  const server = await serve(app, { host: '127.0.0.1', port: 0, signal: controller.signal });
  const url = `http://127.0.0.1:${server.port}`;
  const routing = buildRoutingTable(catalogue, {
    to: definitions.map((d) => `${d.name}=${url}/${d.name}`),
    ...(options.periods === undefined ? {} : { periods: options.periods }),
  });
  const handlers = options.freeze === true ? frozen(local.handlers) : local.handlers;
  const relay = startRelay({
    kubeConfig,
    routing,
    logger: createLogger({ name: 'relay', level: logLevel, destination: options.logDestination }),
    secret,
    leaderElection: false,
    // Not the default cursor in kube-system: relays of other test files on the same API server would share it.
    cursor: false,
    ...(options.transport === 'in-process' ? { transport: inProcessTransport(handlers) } : {}),
  });
  await relay.ready;
  return {
    url,
    relay,
    stop: async () => {
      await relay.stop();
      controller.abort();
      await Promise.all([server.closed, local.settled()]);
    },
  };
}

/** `handlers`, each deep-freezing the event (its object included) before handing it over. */
export function frozen(handlers: ReadonlyMap<string, LocalHandler>): Map<string, LocalHandler> {
  return new Map(
    [...handlers].map(([name, handler]) => [name, (event: CloudEvent, signal) => handler(deepFreeze(event), signal)]),
  );
}

/** `value`, frozen with everything it holds. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const inner of Object.values(value)) deepFreeze(inner);
  return Object.freeze(value);
}
