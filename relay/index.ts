// The relay: Kubernetes watches on Nodes and Services turned into CloudEvents for the functions,
// with nothing lost. It is the one long-running piece of cirrus:
//
//   ResourceWatch (./watch.ts) ──changes──► route (./routing.ts) ──► DeliveryQueue (./queue.ts) ──► deliver (./delivery.ts)
//        LIST + WATCH, 410 → relist diff       which function gets what      per-key coalescing, retries     ApiServerSource wire format
//
// Several replicas may run; a Lease (./lease.ts) elects the one that delivers. A replica that
// becomes the leader lists, and delivers the current state of every object as an `add`, so no
// final state is lost across a hand-over; with the known-keys cursor (./cursor.ts, ADR 0014) it
// also delivers as a `delete` every object its predecessors knew that is gone (a single relay
// without leader election keeps the cursor too, for its own restarts). One that stops
// leading drops its queue at once, so that two replicas never deliver together for longer than
// it takes to notice the lost Lease. What the leader does is ./leader.ts.

import { CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { systemClock, type Clock } from '../shared/clock.ts';
import type { Readiness } from '../shared/host/probes.ts';
import { CallBudget, type CallBudgetSettings } from '../shared/cloud/budget.ts';
import { checkBackoff, type BackoffPolicy } from './backoff.ts';
import { defaultCursorFlushMs, type CursorSettings } from './cursor.ts';
import { Delivering, type Settings } from './leader.ts';
import {
  checkLeaseSettings,
  defaultIdentity,
  defaultLeaseSettings,
  LeaderElection,
  type LeaseSettings,
} from './lease.ts';
import { createRelayMetrics, type RelayMetrics } from './metrics.ts';
import { httpTransport, type DeliveryTransport } from './transport.ts';
import type { RoutingTable } from './routing.ts';
import { defaultWatchSettings, type WatchSettings } from './watch.ts';

export { buildRoutingTable, loadRoutingFile, readKnativeEnvironment, RoutingError, defaultPeriods } from './routing.ts';
export type { Destination, Feed, RoutedFunction, RoutingSources, RoutingTable } from './routing.ts';
export { defaultWatchSettings, type WatchSettings } from './watch.ts';
export { httpTransport, inProcessTransport, type Delivery, type DeliveryTransport } from './transport.ts';
export { defaultLeaseSettings, defaultIdentity, type LeaseSettings } from './lease.ts';
export type { BackoffPolicy } from './backoff.ts';
export {
  defaultCursorClaimMs,
  defaultCursorFlushMs,
  defaultCursorParts,
  writerAnnotation,
  type CursorSettings,
  type CursorWriter,
} from './cursor.ts';
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
   * The known-keys cursor (ADR 0014): ConfigMaps `<namespace>/<name>-nodes` and `-services` (and
   * `-nodes-1`, … up to `parts`, default 4) where the leader records the objects it knows, so that a new leader delivers the deletes of those gone
   * meanwhile — a new leader, or the one relay restarted. Default: on, in the Lease's namespace, named
   * `<lease name>-known` (without leader election, the default Lease's: `kube-system/cirrus-relay-known`),
   * written at most once a second; with or without leader election (ADR 0014). False: off.
   */
  readonly cursor?: Partial<CursorSettings> | false | undefined;
  /**
   * The cloud call budget (ADR 0015): deliveries to the functions, each charged the cloud calls its reconcile may make, start at most
   * `rate` a second after a burst of `burst`, across every instance of every function. Default: none.
   */
  readonly cloudCallBudget?: CallBudgetSettings | undefined;
  /**
   * How deliveries reach the functions (./transport.ts): default over HTTP, on a connection pool of
   * the relay's own; `inProcessTransport` hands them to functions of this process (`cirrus start`).
   * The relay closes it when it stops.
   */
  readonly transport?: DeliveryTransport | undefined;
  /** Extensions added to every event (Knative's K_CE_OVERRIDES). */
  readonly ceOverrides?: Readonly<Record<string, string>> | undefined;
  /** Also export prom-client's process metrics (default true). */
  readonly processMetrics?: boolean | undefined;
  /** Source of randomness for jitter (tests). */
  readonly random?: (() => number) | undefined;
  /** What the lease, the watches and the queue read the time and wait on (tests; `leaderElection.clock` overrides it for the lease). Default: the system clock. */
  readonly clock?: Clock | undefined;
}

// How long a requested stop waits for the cursor's last write before it lets the Lease go.
const cursorStopFlushMs = 2_000;

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
  // One identity for the Lease and the cursor's writer record.
  const identity =
    (options.leaderElection === false ? undefined : options.leaderElection?.identity) ?? defaultIdentity();
  const settings = resolveSettings(options, metrics, identity);
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
  const election = startElection(options, { settings, identity }, callbacks, abort.signal);
  let stopped = false;
  settings.log.info(
    {
      identity: election.identity,
      leaderElection: election.election !== undefined,
      cursor: settings.cursor === undefined ? 'off' : `${settings.cursor.namespace}/${settings.cursor.name}`,
      destinations: settings.table.destinations.map((d) => ({
        name: d.name,
        url: d.url,
        feed: d.feed,
        transport: settings.transport.describe(d),
      })),
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
      // While still leading: the cursor's last changes, so that the next relay knows them.
      await delivering?.flushCursors(cursorStopFlushMs);
      abort.abort();
      await election.done;
      callbacks.onStoppedLeading();
      await Promise.all(stops);
      await settings.transport.close();
      ready.reject(new Error('the relay stopped before it was ready'));
      settings.log.info('relay stopped');
    },
  };
}

function resolveSettings(options: RelayOptions, metrics: RelayMetrics, identity: string): Settings {
  const cluster = options.kubeConfig.getCurrentCluster();
  if (cluster === null) throw new RangeError('relay: the kubeconfig names no current cluster');
  const retry = { ...defaultDelivery.retry, ...options.retry };
  checkBackoff(retry, 'relay retry');
  const watch = { ...defaultWatchSettings, ...options.watch };
  checkBackoff(watch.backoff, 'relay watch backoff');
  const concurrency = options.concurrency ?? defaultDelivery.concurrency;
  const clock = options.clock ?? systemClock;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new RangeError(`relay: concurrency must be a positive integer, got ${concurrency}`);
  return {
    kubeConfig: options.kubeConfig,
    table: options.routing,
    watch,
    queue: { concurrency, retry, timeoutMs: options.deliveryTimeoutMs ?? defaultDelivery.deliveryTimeoutMs },
    request: { source: cluster.server, ceOverrides: options.ceOverrides, secret: options.secret, clock },
    transport: options.transport ?? httpTransport(),
    cursor: cursorSettings(options, identity),
    budget: options.cloudCallBudget === undefined ? undefined : new CallBudget(options.cloudCallBudget, options.clock),
    metrics,
    log: options.logger,
    random: options.random ?? Math.random,
    clock,
  };
}

// The cursor's settings from the options: see RelayOptions.cursor. Its writer is this relay: its
// identity, and the Lease it leads on.
function cursorSettings(options: RelayOptions, identity: string): CursorSettings | undefined {
  const given = options.cursor;
  if (given === false) return undefined;
  const elected = options.leaderElection !== false;
  const lease = { ...defaultLeaseSettings, ...(options.leaderElection === false ? {} : options.leaderElection) };
  const cursor = {
    namespace: lease.namespace,
    name: `${lease.name}-known`,
    flushMs: defaultCursorFlushMs,
    ...given,
    writer: { identity, ...(elected ? { lease: `${lease.namespace}/${lease.name}` } : {}) },
  };
  checkCursorSettings(cursor);
  return cursor;
}

function checkCursorSettings(cursor: CursorSettings): void {
  if (!Number.isFinite(cursor.flushMs) || cursor.flushMs <= 0)
    throw new RangeError(`relay cursor: flushMs must be more than 0, got ${cursor.flushMs}`);
  if (cursor.namespace === '' || cursor.name === '') throw new RangeError('relay cursor: needs a namespace and a name');
  if (cursor.parts !== undefined && (!Number.isInteger(cursor.parts) || cursor.parts < 1))
    throw new RangeError(`relay cursor: parts must be a whole number of at least 1, got ${cursor.parts}`);
  checkClaimMs(cursor.claimMs);
}

function checkClaimMs(claimMs: number | undefined): void {
  if (claimMs !== undefined && !(Number.isFinite(claimMs) && claimMs >= 300))
    throw new RangeError(`relay cursor: claimMs must be at least 300, got ${claimMs}`);
}

function startElection(
  options: RelayOptions,
  { settings, identity }: { settings: Settings; identity: string },
  callbacks: { onStartedLeading(): void; onStoppedLeading(): void },
  signal: AbortSignal,
): { identity: string; election: LeaderElection | undefined; done: Promise<void> } {
  if (options.leaderElection === false) {
    callbacks.onStartedLeading();
    return { identity, election: undefined, done: Promise.resolve() };
  }
  const lease: LeaseSettings = {
    ...defaultLeaseSettings,
    clock: settings.clock,
    ...options.leaderElection,
    identity,
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
