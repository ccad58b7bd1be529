// The relay: Kubernetes watches on Nodes and Services turned into CloudEvents for the functions,
// with nothing lost. It is the one long-running piece of cirrus:
//
//   ResourceWatch (./watch.ts) ──changes──► route (./routing.ts) ──► DeliveryQueue (./queue.ts) ──► deliver (./delivery.ts)
//        LIST + WATCH, 410 → relist diff       which function gets what      per-key coalescing, retries     ApiServerSource wire format
//
// Several replicas may run; a Lease (./lease.ts) elects the one that delivers. A replica that
// becomes the leader lists, and delivers the current state of every object as an `add`, so no
// final state is lost across a hand-over; with the known-keys cursor (./cursor.ts, ADR 0014) it
// also delivers as a `delete` every object its predecessors knew that is gone. One that stops
// leading drops its queue at once, so that two replicas never deliver together for longer than
// it takes to notice the lost Lease.

import { CoordinationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { systemClock, type Clock } from '../shared/clock.ts';
import { extensionNames, formatBudget } from '../shared/wire/index.ts';
import type { Readiness } from '../shared/host/probes.ts';
import { checkBackoff, type BackoffPolicy } from './backoff.ts';
import { deliver, eventRequest, type DeliveryContext } from './delivery.ts';
import {
  checkLeaseSettings,
  defaultIdentity,
  defaultLeaseSettings,
  LeaderElection,
  type LeaseSettings,
} from './lease.ts';
import { CallBudget, type CallBudgetSettings } from '../shared/cloud/budget.ts';
import { defaultCursorFlushMs, KnownKeys, type CursorSettings } from './cursor.ts';
import { createRelayMetrics, type RelayMetrics } from './metrics.ts';
import { DeliveryQueue, type DeliveryOutcome } from './queue.ts';
import { watchedResources, type ResourceType } from './resources.ts';
import {
  feedWatches,
  mergeOutgoing,
  route,
  triggerKey,
  type Destination,
  type Known,
  type Outgoing,
  type RoutingTable,
} from './routing.ts';
import { defaultWatchSettings, ResourceWatch, type ResourceChange, type WatchSettings } from './watch.ts';

export { buildRoutingTable, loadRoutingFile, readKnativeEnvironment, RoutingError, defaultPeriods } from './routing.ts';
export type { Destination, Feed, RoutedFunction, RoutingSources, RoutingTable } from './routing.ts';
export { defaultWatchSettings, type WatchSettings } from './watch.ts';
export { defaultLeaseSettings, defaultIdentity, type LeaseSettings } from './lease.ts';
export type { BackoffPolicy } from './backoff.ts';
export { defaultCursorFlushMs, type CursorSettings } from './cursor.ts';
export { checkCallBudget, type CallBudgetSettings } from '../shared/cloud/budget.ts';

/** How to run a relay. Only `kubeConfig`, `routing` and `logger` are required. */
export interface RelayOptions {
  /** The API server and credentials; its server URL is the `source` of object events. */
  readonly kubeConfig: KubeConfig;
  /** Where events go (./routing.ts `buildRoutingTable`). */
  readonly routing: RoutingTable;
  readonly logger: Logger;
  /** Shared secret: every request carries `X-Cirrus-Signature` (shared/wire/signing.ts). Default: unsigned. */
  readonly secret?: string | undefined;
  /** Deliveries in flight at most, across all destinations (default 512). */
  readonly concurrency?: number | undefined;
  /** Retry backoff of a failed delivery (default 5 s doubling to 300 s, up to 25 % jitter on top). */
  readonly retry?: Partial<BackoffPolicy> | undefined;
  /** How long one delivery may take, reply included: a function answers once its work is done (default 5 min). */
  readonly deliveryTimeoutMs?: number | undefined;
  /** Watch timings (default {@link defaultWatchSettings}: client-go's reflector). */
  readonly watch?: Partial<WatchSettings> | undefined;
  /** Lease and timings (default {@link defaultLeaseSettings}), or false to deliver without electing a leader (one replica only). */
  readonly leaderElection?: Partial<LeaseSettings> | false | undefined;
  /**
   * The known-keys cursor (ADR 0014): ConfigMaps `<namespace>/<name>-nodes` and `-services` where
   * the leader records the objects it knows, so that a new leader delivers the deletes of those gone
   * meanwhile. Default with leader election: on, in the Lease's namespace, named `<lease name>-known`,
   * written at most once a second; without leader election: off unless given. False: off.
   */
  readonly cursor?: Partial<CursorSettings> | false | undefined;
  /**
   * The cloud call budget (ADR 0015): deliveries to the functions, each charged the cloud calls its reconcile may make, start at most
   * `rate` a second after a burst of `burst`, across every instance of every function. Default: none.
   */
  readonly cloudCallBudget?: CallBudgetSettings | undefined;
  /** Extensions added to every event (Knative's K_CE_OVERRIDES). */
  readonly ceOverrides?: Readonly<Record<string, string>> | undefined;
  /** Also export prom-client's process metrics (default true). */
  readonly processMetrics?: boolean | undefined;
  /** Source of randomness for jitter (tests). */
  readonly random?: (() => number) | undefined;
  /** What the lease, the watches and the queue read the time and wait on (tests; `leaderElection.clock` overrides it for the lease). Default: the system clock. */
  readonly clock?: Clock | undefined;
}

/** The defaults of {@link RelayOptions}' delivery settings. */
export const defaultDelivery = {
  concurrency: 512,
  retry: { initialMs: 5_000, maxMs: 300_000, jitter: 0.25 },
  deliveryTimeoutMs: 300_000,
} as const satisfies { concurrency: number; retry: BackoffPolicy; deliveryTimeoutMs: number };

/** What a relay is doing. */
export interface RelayStatus {
  /** `leader`: delivering; `standby`: another replica holds the Lease; `stopped`. */
  readonly role: 'leader' | 'standby' | 'stopped';
  /**
   * A leader is ready while all its watches are open. A standby is ready while it can read the
   * Lease: it is doing its job, and a never-ready standby would stall every rolling update.
   */
  readonly ready: boolean;
  readonly identity: string;
  /** The Lease holder last seen, with leader election. */
  readonly holder?: string | undefined;
  /** For a leader: whether each resource's watch is open. */
  readonly watches: Readonly<Record<string, boolean>>;
}

/** A running relay. */
export interface Relay {
  readonly identity: string;
  /**
   * Resolves the first time this relay leads with all its watches open (after the initial LISTs,
   * whose objects are then queued for delivery). Rejects if the relay stops before that.
   */
  readonly ready: Promise<void>;
  /** The relay's metrics (`cirrus_relay_*`), for a /metrics route. */
  readonly registry: Registry;
  status(): RelayStatus;
  /** Resolves once the Lease is released (if held), the watches closed and deliveries aborted. */
  stop(): Promise<void>;
}

// What the delivering part needs.
interface Settings {
  readonly kubeConfig: KubeConfig;
  readonly table: RoutingTable;
  readonly watch: WatchSettings;
  readonly queue: { readonly concurrency: number; readonly retry: BackoffPolicy; readonly timeoutMs: number };
  readonly request: DeliveryContext;
  readonly cursor: CursorSettings | undefined;
  readonly budget: CallBudget | undefined;
  readonly metrics: RelayMetrics;
  readonly log: Logger;
  readonly random: () => number;
  readonly clock: Clock;
}

/**
 * Starts a relay: campaigns for the Lease (or, without leader election, leads at once) and, while
 * leading, watches, routes and delivers. Throws synchronously for invalid settings (RangeError
 * naming the setting) or a kubeconfig without a cluster.
 */
export function startRelay(options: RelayOptions): Relay {
  let delivering: Delivering | undefined;
  const metrics = createRelayMetrics({
    processMetrics: options.processMetrics ?? true,
    gauges: () => delivering?.queue,
  });
  const settings = resolveSettings(options, metrics);
  const stops: Promise<void>[] = [];
  const ready = deferred();
  const callbacks = {
    onStartedLeading: () => {
      settings.metrics.leader.set(1);
      delivering = new Delivering(settings, () => {
        ready.resolve();
      });
    },
    onStoppedLeading: () => {
      settings.metrics.leader.set(0);
      if (delivering !== undefined) stops.push(delivering.stop());
      delivering = undefined;
    },
  };
  const abort = new AbortController();
  const election = startElection(options, settings, callbacks, abort.signal);
  let stopped = false;
  settings.log.info(
    {
      identity: election.identity,
      leaderElection: election.election !== undefined,
      destinations: settings.table.destinations.map((d) => ({ name: d.name, url: d.url, feed: d.feed })),
      periods: settings.table.periods,
    },
    'relay starting',
  );
  return {
    identity: election.identity,
    ready: ready.promise,
    registry: settings.metrics.registry,
    status: () => status({ stopped, delivering, election: election.election, identity: election.identity }),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      abort.abort();
      await election.done;
      callbacks.onStoppedLeading();
      await Promise.all(stops);
      ready.reject(new Error('the relay stopped before it was ready'));
      settings.log.info('relay stopped');
    },
  };
}

function resolveSettings(options: RelayOptions, metrics: RelayMetrics): Settings {
  const cluster = options.kubeConfig.getCurrentCluster();
  if (cluster === null) throw new RangeError('relay: the kubeconfig names no current cluster');
  const retry = { ...defaultDelivery.retry, ...options.retry };
  checkBackoff(retry, 'relay retry');
  const watch = { ...defaultWatchSettings, ...options.watch };
  checkBackoff(watch.backoff, 'relay watch backoff');
  const concurrency = options.concurrency ?? defaultDelivery.concurrency;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new RangeError(`relay: concurrency must be a positive integer, got ${concurrency}`);
  return {
    kubeConfig: options.kubeConfig,
    table: options.routing,
    watch,
    queue: { concurrency, retry, timeoutMs: options.deliveryTimeoutMs ?? defaultDelivery.deliveryTimeoutMs },
    request: { source: cluster.server, ceOverrides: options.ceOverrides, secret: options.secret },
    cursor: cursorSettings(options),
    budget: options.cloudCallBudget === undefined ? undefined : new CallBudget(options.cloudCallBudget, options.clock),
    metrics,
    log: options.logger,
    random: options.random ?? Math.random,
    clock: options.clock ?? systemClock,
  };
}

// The cursor's settings from the options: see RelayOptions.cursor.
function cursorSettings(options: RelayOptions): CursorSettings | undefined {
  const given = options.cursor;
  if (given === false || (given === undefined && options.leaderElection === false)) return undefined;
  const lease = { ...defaultLeaseSettings, ...(options.leaderElection === false ? {} : options.leaderElection) };
  const cursor = {
    namespace: lease.namespace,
    name: `${lease.name}-known`,
    flushMs: defaultCursorFlushMs,
    ...given,
  };
  if (!Number.isFinite(cursor.flushMs) || cursor.flushMs <= 0)
    throw new RangeError(`relay cursor: flushMs must be more than 0, got ${cursor.flushMs}`);
  if (cursor.namespace === '' || cursor.name === '') throw new RangeError('relay cursor: needs a namespace and a name');
  return cursor;
}

function startElection(
  options: RelayOptions,
  settings: Settings,
  callbacks: { onStartedLeading(): void; onStoppedLeading(): void },
  signal: AbortSignal,
): { identity: string; election: LeaderElection | undefined; done: Promise<void> } {
  if (options.leaderElection === false) {
    callbacks.onStartedLeading();
    return { identity: defaultIdentity(), election: undefined, done: Promise.resolve() };
  }
  const lease: LeaseSettings = {
    ...defaultLeaseSettings,
    identity: defaultIdentity(),
    clock: settings.clock,
    ...options.leaderElection,
  };
  checkLeaseSettings(lease);
  const election = new LeaderElection(
    settings.kubeConfig.makeApiClient(CoordinationV1Api),
    lease,
    callbacks,
    settings.log,
  );
  return { identity: lease.identity, election, done: election.run(signal) };
}

function status(state: {
  stopped: boolean;
  delivering: Delivering | undefined;
  election: LeaderElection | undefined;
  identity: string;
}): RelayStatus {
  const holder = state.election?.holder;
  if (state.stopped) return { role: 'stopped', ready: false, identity: state.identity, holder, watches: {} };
  if (state.delivering !== undefined) {
    const watches = state.delivering.watches();
    return { role: 'leader', ready: Object.values(watches).every(Boolean), identity: state.identity, holder, watches };
  }
  return { role: 'standby', ready: state.election?.reachable ?? false, identity: state.identity, holder, watches: {} };
}

// The leader's work: watches feeding the queue, and the periodic triggers.
class Delivering {
  readonly #settings: Settings;
  readonly #abort = new AbortController();
  /** Read by the queue gauges at scrape time. */
  readonly queue: DeliveryQueue<Outgoing>;
  readonly #watches: ResourceWatch[];
  readonly #loops: Promise<void>[];
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #destinations: ReadonlyMap<string, Destination>;
  // Each function's node-set digest over the Node watch, computed when first needed after a change
  // of the Nodes (once per change, not once per event: a fan-out sends one event per Service).
  readonly #nodeSets = new Map<string, string>();
  // The known-keys cursor of each watched kind, when it is on.
  readonly #cursors = new Map<string, KnownKeys>();

  constructor(settings: Settings, onReady: () => void) {
    this.#settings = settings;
    this.#destinations = new Map(settings.table.destinations.map((d) => [d.name, d]));
    this.queue = new DeliveryQueue<Outgoing>({
      concurrency: settings.queue.concurrency,
      retry: settings.queue.retry,
      merge: mergeOutgoing,
      send: (destination, _key, outgoing, signal) => this.#send(destination, outgoing, signal),
      metrics: settings.metrics,
      log: settings.log,
      random: settings.random,
      clock: settings.clock,
    });
    const onEstablished = (): void => {
      if (this.#watches.every((w) => w.established)) onReady();
    };
    const types = neededResources(settings.table);
    const { cursor } = settings;
    if (cursor !== undefined) {
      const core = settings.kubeConfig.makeApiClient(CoreV1Api);
      for (const type of types)
        this.#cursors.set(
          type.kind,
          new KnownKeys(core, type, cursor, { log: settings.log, metrics: settings.metrics, clock: settings.clock }),
        );
    }
    this.#watches = types.map((type) => {
      const known = this.#cursors.get(type.kind);
      return new ResourceWatch(type, {
        kubeConfig: settings.kubeConfig,
        settings: settings.watch,
        onChange: (change) => {
          known?.record(change);
          this.#onChange(change);
        },
        onEstablished,
        metrics: settings.metrics,
        log: settings.log,
        random: settings.random,
        clock: settings.clock,
        ...(known === undefined ? {} : { tombstones: () => known.load() }),
      });
    });
    this.#loops = [
      ...this.#watches.map((watch) => watch.run(this.#abort.signal)),
      ...this.#watches.flatMap((watch) => {
        const known = this.#cursors.get(watch.type.kind);
        return known === undefined
          ? []
          : [
              known.run(
                this.#abort.signal,
                () => watch.listed,
                () => this.#pendingKeys(),
              ),
            ];
      }),
    ];
    this.#startPeriodicTriggers();
  }

  watches(): Record<string, boolean> {
    return Object.fromEntries(this.#watches.map((watch) => [watch.type.resource, watch.established]));
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    for (const timer of this.#timers) clearInterval(timer);
    this.queue.stop();
    await Promise.all(this.#loops);
  }

  // The objects a watch of `kind` knows, for the fan-outs of the routing table.
  readonly #known = (kind: string): ReturnType<Known> => {
    const watch = this.#watches.find((w) => w.type.kind === kind);
    return watch === undefined ? undefined : { resource: watch.type, objects: watch.objects() };
  };

  #onChange(change: ResourceChange): void {
    if (change.resource.kind === 'Node') this.#nodeSets.clear();
    for (const routed of route(this.#settings.table, change, this.#known)) {
      const result = this.queue.push(routed.destination.name, routed.key, routed.outgoing, {
        observedAt: change.observedAt,
      });
      if (routed.outgoing.kind === 'trigger')
        this.#settings.metrics.triggers.inc({ destination: routed.destination.name, trigger: 'nodes', result });
    }
  }

  #startPeriodicTriggers(): void {
    for (const [target, period] of Object.entries(this.#settings.table.periods)) {
      const destinations = this.#settings.table.destinations.filter((d) => d.feed === target || d.feed === 'all');
      if (period <= 0 || destinations.length === 0) continue;
      this.#timers.push(
        setInterval(() => {
          for (const destination of destinations) {
            const result = this.queue.push(
              destination.name,
              triggerKey(target),
              { kind: 'trigger', target, reason: 'periodic' },
              { skipIfBusy: true },
            );
            this.#settings.metrics.triggers.inc({ destination: destination.name, trigger: 'periodic', result });
          }
        }, period),
      );
    }
  }

  // Waits until the delivery may go: its object recorded by the cursor, a token of the budget taken.
  async #mayGo(destinationName: string, outgoing: Outgoing, signal: AbortSignal): Promise<void> {
    // No function hears of an object before the cursor records it: a leader that dies after this
    // delivery leaves its successor the key, and so the delete if the object goes meanwhile.
    if (outgoing.kind === 'object' && outgoing.change.type !== 'delete') {
      const { change } = outgoing;
      await this.#cursors.get(change.resource.kind)?.whenDurable(change.key, change.object.metadata?.uid ?? '', signal);
    }
    const { budget } = this.#settings;
    if (budget === undefined || signal.aborted) return;
    const waitedMs = await budget.take(signal, outgoing.kind === 'object' ? this.#callsPerObject(destinationName) : 1);
    if (waitedMs > 0) this.#settings.metrics.budgetWait.inc({ destination: destinationName }, waitedMs / 1000);
  }

  // The cloud calls one object's reconcile may make at `destinationName`: its function's, or the
  // most of any function for a destination fed every function's changes.
  #callsPerObject(destinationName: string): number {
    const { table } = this.#settings;
    const feed = this.#destinations.get(destinationName)?.feed;
    const fn = feed === undefined ? undefined : table.functions.get(feed);
    if (fn !== undefined) return fn.cloudCallsPerObject;
    return Math.max(1, ...[...table.functions.values()].map((f) => f.cloudCallsPerObject));
  }

  // Keys with a delivery waiting or in flight, to any destination.
  #pendingKeys(): Set<string> {
    return new Set(this.#settings.table.destinations.flatMap((d) => this.queue.keys(d.name)));
  }

  async #send(destinationName: string, outgoing: Outgoing, signal: AbortSignal): Promise<DeliveryOutcome> {
    const destination = this.#destinations.get(destinationName);
    if (destination === undefined)
      return { kind: 'rejected', status: 0, reason: `unknown destination ${destinationName}` };
    await this.#mayGo(destinationName, outgoing, signal);
    if (signal.aborted) return { kind: 'retry', reason: 'unreachable', detail: 'stopped' };
    const nodeSet = this.#nodeSet(destination.feed);
    const share = outgoing.kind === 'trigger' ? this.#passShare() : undefined;
    const extensions = {
      ...(nodeSet === undefined ? {} : { [extensionNames.nodeSet]: nodeSet }),
      ...(share === undefined ? {} : { [extensionNames.budget]: formatBudget(share) }),
    };
    const request =
      Object.keys(extensions).length === 0
        ? this.#settings.request
        : { ...this.#settings.request, ceOverrides: { ...this.#settings.request.ceOverrides, ...extensions } };
    // The pass runs while its trigger is in flight: its share is lent for that long.
    const giveBack = share === undefined ? undefined : this.#settings.budget?.lend(share);
    try {
      return await deliver(destination.url, eventRequest(outgoing, request), {
        timeoutMs: this.#settings.queue.timeoutMs,
        signal,
      });
    } finally {
      giveBack?.();
    }
  }

  // The share of the budget a pass gets while its trigger is in flight: an equal part for every
  // trigger that can be in flight at once (one per function a destination is fed, each under its
  // own queue key) and one for the deliveries of objects, so that the shares lent never reach the
  // whole rate.
  #passShare(): CallBudgetSettings | undefined {
    const { budget, table } = this.#settings;
    if (budget === undefined) return undefined;
    const triggers = table.destinations.reduce((n, d) => n + (d.feed === 'all' ? table.functions.size : 1), 0);
    const parts = triggers + 1;
    return { rate: budget.rate / parts, burst: Math.max(1, Math.floor(budget.burst / parts)) };
  }

  // The digest of the Nodes for the function `feed` names, as the watch of Nodes has them at the
  // moment of sending; undefined when the function wants none, or the watch has not listed them
  // all yet (a digest of a partial list would be wrong, and the function then lists the nodes).
  #nodeSet(feed: string): string | undefined {
    const digest = this.#settings.table.functions.get(feed)?.nodeSetDigest;
    const watch = this.#watches.find((w) => w.type.kind === 'Node');
    if (digest === undefined || watch === undefined || !watch.established) return undefined;
    let value = this.#nodeSets.get(feed);
    if (value === undefined) {
      value = digest(Array.from(watch.objects(), ([, node]) => node));
      this.#nodeSets.set(feed, value);
    }
    return value;
  }
}

function neededResources(table: RoutingTable): ResourceType[] {
  return watchedResources.filter((type) => table.destinations.some((d) => feedWatches(table, d.feed, type.kind)));
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(error: Error): void;
}

function deferred(): Deferred {
  let resolve: () => void = () => undefined;
  let reject: (error: Error) => void = () => undefined;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Nobody has to wait for readiness: a stop before it must not be an unhandled rejection.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * What the relay's `GET /readyz` answers (served by shared/host/probes.ts `buildProbeApp`): ready
 * as `status.ready` says (see {@link RelayStatus}), with the status as the body and `status` one of
 * `ready`, `not-ready` (a leader whose watches are not all open), `standby` or `stopped`.
 */
export function relayReadiness(status: RelayStatus): Readiness {
  const state = status.role === 'leader' ? (status.ready ? 'ready' : 'not-ready') : status.role;
  return { ready: status.ready, body: { status: state, ...status } };
}
