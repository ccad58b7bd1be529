// The routes function: the route controller as an HTTP function, watch-based as KEP-5237 has it
// (k8s.io/cloud-provider controllers/route/route_controller.go, CloudControllerManagerWatchBasedRoutesReconciliation).
// Routes are cluster-wide, so a Node change (the Node's own event, ./feed.ts), the relay's periodic
// drift check (every --route-reconciliation-period) and a manual reconcile all run the same
// whole-cluster pass; requests that arrive while one runs share the next pass (shared/coalesce.ts)
// instead of piling up, and passes are at least a second apart. A pass always lists the cloud's
// routes (the drift check's point); it reads the Nodes only when the relay does not vouch for the
// instance's copy of them (./nodes.ts, ADR 0030).

import type { V1Node } from '@kubernetes/client-node';
import type { Core } from '../../shared/kube/core.ts';
import { Counter, type Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { Routes } from '../../shared/cloud/provider.ts';
import type { OwnershipCheck } from '../../shared/cloud/skips.ts';
import { InvalidRequestError } from '../../shared/host/errors.ts';
import type {
  FunctionDefinition,
  ObjectKey,
  ObjectReport,
  ReconcileOptions,
  Report,
} from '../../shared/host/function.ts';
import { invalidNodeName } from '../../shared/kube/names.ts';
import { Coalescer } from '../../shared/coalesce.ts';
import { NodeCopy, type Demand, type NodeSource } from './nodes.ts';
import { parseClusterCidrs } from './plan.ts';
import { reconcileRoutes, type RoutesDeps, type SyncOptions } from './sync.ts';
import { PassDemand, passOutcome, type Trigger } from './passes.ts';

/** One provider's route table and the Nodes it routes (its own: never another provider's or CCM's). */
export interface RouteTable {
  readonly provider: string;
  readonly routes: Routes;
  /** Whether the table routes `node`; a Node left alone is counted and logged (`log`) as a skip. */
  readonly owns: (node: V1Node, log?: Logger) => boolean;
}

/** What routes needs. */
export interface RoutesOptions {
  readonly core: Core;
  /**
   * The provider's routes (the catalogue refuses a provider without them, or with routes disabled);
   * in a hybrid cluster, each provider's with the Nodes it routes (`tables`), one pass over each.
   */
  readonly routes: Routes | readonly RouteTable[];
  /** `--cluster-name`, handed to every route call. */
  readonly clusterName: string;
  /**
   * `--cluster-cidr`, split on commas and trimmed: one CIDR, or two of different IP families.
   * Only routes inside them are ever deleted.
   */
  readonly clusterCidrs: readonly string[];
  /** The ownership check the tables' `owns` count their skips with: its counter is registered with the function's. */
  readonly ownership?: OwnershipCheck | undefined;
  /** Provider route calls in flight at once, and node status writes at once (default 10). */
  readonly concurrency?: number;
  /** A pass starts no sooner than this after the previous one started (default {@link defaultMinPassIntervalMs}). */
  readonly minPassIntervalMs?: number;
}

// The start-up checks of upstream's startRouteController that follow those of the catalogue
// (routes enabled, a provider with routes), in its order, plus our own option.
function startup(options: RoutesOptions): Pick<RoutesDeps, 'clusterCidrs' | 'concurrency'> {
  const concurrency = options.concurrency ?? defaultRouteConcurrency;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new Error(`routes: concurrency must be a positive integer, got ${concurrency}`);
  try {
    return { clusterCidrs: parseClusterCidrs(options.clusterCidrs), concurrency };
  } catch (error) {
    throw new Error(`routes: ${(error as Error).message}`, { cause: error });
  }
}

/** The default bound on route calls in flight: gentle on cloud API rate limits (upstream: 200). */
export const defaultRouteConcurrency = 10;

/**
 * The default spacing of passes: a burst of node changes (500 nodes joining) costs one pass, one
 * LIST of the nodes and one of the routes, per second instead of one per node. Upstream's
 * periodic reconcile runs every 10 s, and its watch-based one (alpha) at most once per 10 s.
 */
export const defaultMinPassIntervalMs = 1_000;

/**
 * The routes function. Every request reconciles the whole cluster (the key of a Node event or a
 * manual reconcile is only checked to be a valid node name) and answers 2xx with a report of every
 * node and every deleted route; failed creations, deletions and condition writes are reported on
 * their objects with `result: 'failed'` and retried by the next pass. Only a failure to list routes
 * or nodes fails the request (500, or 503 when the provider throws RetryError).
 *
 * A Node's event from the relay (verified: ReconcileOptions.claimVerified) updates the instance's
 * copy of the Nodes with the Node it carries, and a pass reads the Nodes only when no request it
 * serves carries the copy's digest (./nodes.ts). `route_controller_route_sync_total` counts the
 * real passes by `trigger` (periodic, node_change, manual) and `outcome` (changed, noop, error).
 *
 * Concurrent requests coalesce within the process: a request joins the pass queued behind the
 * running one (at most one runs and one waits), so its report reflects state at least as new as
 * its arrival; a pass starts no sooner than `minPassIntervalMs` after the one before it. Dry runs coalesce among themselves only. Replicas do not coalesce with each other
 * (harmless, but duplicate cloud calls): deploy routes as a single instance.
 *
 * Throws at start-up, saying which, when a cluster CIDR is missing or invalid, or `concurrency` is
 * not a positive integer.
 */
export function routesFunction(options: RoutesOptions): FunctionDefinition {
  const tables: readonly (RouteTable | { routes: Routes; owns?: undefined })[] = Array.isArray(options.routes)
    ? options.routes
    : [{ routes: options.routes as Routes }];
  const [first] = tables;
  if (first === undefined) throw new Error('routes: no provider with routes');
  const copy = new NodeCopy(options.core);
  const common = { core: options.core, clusterName: options.clusterName, ...startup(options) };
  const demands = { real: new PassDemand(), dry: new PassDemand() };
  let syncs: Counter<'trigger' | 'outcome'> | undefined;
  // One provider's table after another: each lists its own routes and plans for its own Nodes, all
  // from one read of the Nodes (the copy, or one LIST).
  const pass = async (run: SyncOptions, signal: AbortSignal): Promise<ObjectReport[]> => {
    const demand = (run.dryRun ? demands.dry : demands.real).take();
    const nodes = nodeSide(copy, demand, run);
    const written = (node: V1Node): void => {
      copy.learn(node);
    };
    const deps = { ...common, nodes, written: run.dryRun ? undefined : written };
    try {
      const reports: ObjectReport[] = [];
      for (const table of tables)
        reports.push(
          ...(await reconcileRoutes({ ...deps, routes: table.routes, owns: table.owns }, { ...run, signal })),
        );
      if (!run.dryRun) syncs?.inc({ trigger: demand.trigger, outcome: passOutcome(reports) });
      return reports;
    } catch (error) {
      if (!run.dryRun) syncs?.inc({ trigger: demand.trigger, outcome: 'error' });
      throw error;
    }
  };
  // Separate queues: a dry run must not answer with a real pass's report, nor a real request with a dry one's.
  const spacing = { minIntervalMs: options.minPassIntervalMs ?? defaultMinPassIntervalMs };
  const passes = { real: new Coalescer(pass, spacing), dry: new Coalescer(pass, spacing) };
  const reconcile = async (run: ReconcileOptions, trigger: Trigger): Promise<Report> => {
    // Noted before joining, in the same turn: the pass that this request joins takes it.
    (run.dryRun ? demands.dry : demands.real).note(trigger, run.nodeSet);
    const objects = await (run.dryRun ? passes.dry : passes.real).join(
      { dryRun: run.dryRun, log: run.log },
      run.signal,
    );
    return { function: 'routes', dryRun: run.dryRun, objects };
  };
  return {
    name: 'routes',
    kinds: ['Node'],
    reconcileOne: async (key: ObjectKey, run: ReconcileOptions) => {
      const problem = invalidNodeName(key.name);
      if (problem !== undefined) throw new InvalidRequestError(problem);
      learn(copy, run);
      return reconcile(run, run.nodeSet === undefined && run.claimed === undefined ? 'manual' : 'node_change');
    },
    reconcileAll: async (run: ReconcileOptions) => reconcile(run, run.periodic === true ? 'periodic' : 'manual'),
    registerMetrics: (registry: Registry) => {
      options.ownership?.register(registry);
      syncs = new Counter({
        name: 'route_controller_route_sync_total',
        help:
          'Passes of the route controller over the whole cluster (coalesced requests share one), by trigger ' +
          '(periodic: the drift check; node_change; manual) and outcome (changed, noop, error).',
        labelNames: ['trigger', 'outcome'],
        registers: [registry],
      });
    },
  };
}

// The Node side of one pass, read once however many tables ask: the copy or a LIST; a LIST when a
// table's provider compares node addresses (the digest does not cover them).
function nodeSide(copy: NodeCopy, demand: Demand, run: SyncOptions): (fresh: boolean) => Promise<readonly V1Node[]> {
  let read: Promise<{ readonly nodes: readonly V1Node[]; readonly source: NodeSource }> | undefined;
  return async (fresh) => {
    const held = read;
    read = held !== undefined && (!fresh || (await held).source === 'list') ? held : copy.nodes(demand, fresh);
    const { nodes, source } = await read;
    run.log.debug({ nodes: nodes.length, source }, 'nodes for the routes pass');
    return nodes;
  };
}

// A verified Node event's object into the copy: the Node it carries, or, for a delete, its
// incarnation gone. A dry run (a manual reconcile) teaches it nothing.
function learn(copy: NodeCopy, run: ReconcileOptions): void {
  if (run.dryRun) return;
  if (run.lastKnownVerified === true && isNode(run.lastKnown)) copy.forget(run.lastKnown);
  else if (run.claimVerified === true && isNode(run.claimed)) copy.learn(run.claimed);
}

function isNode(value: unknown): value is V1Node {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'Node';
}
