// The leader's work (./index.ts runs it while this replica leads): the watches feeding the
// per-key queue, the known-keys cursor of each watched kind, the periodic triggers, and each
// delivery's way out: recorded by the cursor first, its tokens of the cloud call budget taken, the
// extensions its function wants (the node-set digest, a pass's share of the budget) added.

import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../shared/clock.ts';
import { extensionNames, formatBudget } from '../shared/wire/index.ts';
import type { CallBudget, CallBudgetSettings } from '../shared/cloud/budget.ts';
import type { BackoffPolicy } from './backoff.ts';
import { KnownKeys, type CursorSettings } from './cursor.ts';
import type { DeliveryContext } from './delivery.ts';
import type { RelayMetrics } from './metrics.ts';
import { DeliveryQueue, type DeliveryOutcome } from './queue.ts';
import { watchedResources, type KubeObject, type ResourceChange, type ResourceType } from './resources.ts';
import {
  feedWatches,
  mergeOutgoing,
  periodicFor,
  recheckOf,
  route,
  type Destination,
  type Known,
  type Outgoing,
  type RoutedFunction,
  type Routed,
  type RoutingTable,
} from './routing.ts';
import { Spread } from './spread.ts';
import type { DeliveryTransport } from './transport.ts';
import { ResourceWatch, type WatchSettings } from './watch.ts';

/** What the leader's work needs (./index.ts resolves it from the relay's options). */
export interface Settings {
  readonly kubeConfig: KubeConfig;
  readonly table: RoutingTable;
  readonly watch: WatchSettings;
  readonly queue: { readonly concurrency: number; readonly retry: BackoffPolicy; readonly timeoutMs: number };
  readonly request: DeliveryContext;
  /** How deliveries reach their destinations (./transport.ts). */
  readonly transport: DeliveryTransport;
  readonly cursor: CursorSettings | undefined;
  readonly budget: CallBudget | undefined;
  readonly metrics: RelayMetrics;
  readonly log: Logger;
  readonly random: () => number;
  readonly clock: Clock;
}

// The leader's work: watches feeding the queue, and the periodic triggers.
export class Delivering {
  readonly #settings: Settings;
  readonly #abort = new AbortController();
  /** Read by the queue gauges at scrape time. */
  readonly queue: DeliveryQueue<Outgoing>;
  readonly #watches: ResourceWatch[];
  readonly #loops: Promise<void>[];
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #spreads: Spread<Routed>[] = [];
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
      // An `all` destination (K_SINK) stands in for ApiServerSource: it expects every delete.
      const everything = settings.table.destinations.some((d) => d.feed === 'all');
      const deps = { log: settings.log, metrics: settings.metrics, clock: settings.clock, everything };
      for (const type of types) this.#cursors.set(type.kind, new KnownKeys(core, type, cursor, deps));
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

  /**
   * Writes the cursor once more (what changed since its last write), for a requested stop, before
   * the Lease is let go: a relay stopped and started again (or its successor) then knows every
   * object it delivered, the deliveries that did not wait for the cursor (#wantsDelete) included.
   * At most `timeoutMs`; a cursor not listed yet is not written (it would erase its predecessors').
   */
  async flushCursors(timeoutMs: number): Promise<void> {
    const pending = this.#pendingKeys();
    const writes = this.#watches.flatMap((watch) => {
      const known = this.#cursors.get(watch.type.kind);
      return known !== undefined && watch.listed ? [known.flush(pending)] : [];
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.all(writes), timeout]).finally(() => {
      clearTimeout(timer);
    });
  }

  watches(): Record<string, boolean> {
    return Object.fromEntries(this.#watches.map((watch) => [watch.type.resource, watch.established]));
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    for (const timer of this.#timers) clearInterval(timer);
    for (const spread of this.#spreads) spread.stop();
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
        event: change.resource.resource,
      });
      if (routed.outgoing.kind === 'trigger')
        this.#settings.metrics.triggers.inc({ destination: routed.destination.name, trigger: 'nodes', result });
    }
  }

  // Each function's periodic work (routing.ts periodicFor): its `reconcile.all`, or one recheck per
  // object that needs one, spread over the period (./spread.ts). Neither piles up: a key with a
  // delivery waiting, in flight or in backoff is skipped (a Node's own event, or its last recheck,
  // does the check).
  #startPeriodicTriggers(): void {
    const { table } = this.#settings;
    for (const [target, period] of Object.entries(table.periods)) {
      const destinations = table.destinations.filter((d) => d.feed === target || d.feed === 'all');
      if (period <= 0 || destinations.length === 0) continue;
      const spread = new Spread<Routed>((routed) => {
        this.#recheck(routed);
      });
      this.#spreads.push(spread);
      this.#timers.push(
        setInterval(() => {
          const observedAt = this.#settings.clock.now();
          const rechecks: Routed[] = [];
          for (const destination of destinations)
            for (const routed of periodicFor(table, destination, target, { known: this.#known, observedAt })) {
              if (routed.outgoing.kind === 'object') rechecks.push(routed);
              else this.#pushPeriodic(routed, 'periodic');
            }
          spread.start(rechecks, period);
        }, period),
      );
    }
  }

  // A recheck at its time in the period: of the object as the relay knows it by then (none when it
  // is gone — its delete is an event of its own — or no longer needs one).
  #recheck(routed: Routed): void {
    if (routed.outgoing.kind !== 'object') return;
    const { change } = routed.outgoing;
    const latest = this.#watches.find((w) => w.type.kind === change.resource.kind)?.get(change.key);
    const fn = this.#settings.table.functions.get(routed.destination.feed);
    if (latest === undefined || fn === undefined) return;
    const now = latest === change.object ? routed : this.#recheckNow(routed.destination, fn, change, latest);
    if (now !== undefined) this.#pushPeriodic(now, 'recheck');
  }

  #recheckNow(
    destination: Destination,
    fn: RoutedFunction,
    change: ResourceChange,
    object: KubeObject,
  ): Routed | undefined {
    const observedAt = this.#settings.clock.now();
    const { resource, key } = change;
    return recheckOf(this.#settings.table, { destination, fn, resource }, { key, object, observedAt });
  }

  #pushPeriodic(routed: Routed, trigger: 'periodic' | 'recheck'): void {
    const { destination } = routed;
    const result = this.queue.push(destination.name, routed.key, routed.outgoing, { skipIfBusy: true });
    this.#settings.metrics.triggers.inc({ destination: destination.name, trigger, result });
  }

  // Waits until the delivery may go: its object recorded by the cursor, its tokens of the budget
  // taken; what it was charged, and from which flow.
  async #mayGo(destinationName: string, outgoing: Outgoing, signal: AbortSignal): Promise<Charge | undefined> {
    await this.#whenRecorded(destinationName, outgoing, signal);
    const { budget } = this.#settings;
    if (budget === undefined || signal.aborted) return undefined;
    const flow = flowOf(destinationName, outgoing);
    const calls = outgoing.kind === 'object' ? this.#callsPerObject(destinationName) : 1;
    const { waitedMs, tokens } = await budget.take(signal, calls, flow);
    if (waitedMs > 0) this.#settings.metrics.budgetWait.inc({ destination: destinationName }, waitedMs / 1000);
    return { flow, tokens };
  }

  // Waits until the cursor has recorded the object of `outgoing`, where that is needed.
  async #whenRecorded(destinationName: string, outgoing: Outgoing, signal: AbortSignal): Promise<void> {
    // No function that acts on an object's delete hears of the object before the cursor records
    // it: a leader that dies after this delivery leaves its successor the key, and so the delete
    // if the object goes meanwhile. A function its delete would not reach (node-init, for one)
    // need not wait for the cursor's next write.
    if (
      outgoing.kind === 'object' &&
      outgoing.change.type !== 'delete' &&
      this.#wantsDelete(destinationName, outgoing.change)
    ) {
      const { change } = outgoing;
      await this.#cursors.get(change.resource.kind)?.whenDurable(change.key, change.object.metadata?.uid ?? '', signal);
    }
  }

  // Whether the object's delete, were it deleted now, would reach `destinationName` as an event of
  // its own: every delete reaches a destination fed everything (an `all` one, K_SINK); otherwise
  // what its function's feed decides.
  #wantsDelete(destinationName: string, change: ResourceChange): boolean {
    const { table } = this.#settings;
    const feed = this.#destinations.get(destinationName)?.feed;
    if (feed === 'all') return true;
    const fns = feed === undefined ? [...table.functions.values()] : [table.functions.get(feed)];
    const deleted: ResourceChange = { ...change, type: 'delete', previous: undefined };
    return fns.some((fn) => fn === undefined || fn.feed(deleted) === 'object');
  }

  // Gives back the tokens of `charge` the function says it did not use: a reply that reports its
  // cloud calls (the host's `cloudCalls`) and made fewer than it was charged.
  #settle(charge: Charge | undefined, outcome: DeliveryOutcome): void {
    if (charge === undefined || outcome.kind !== 'accepted' || outcome.cloudCalls === undefined) return;
    const unused = charge.tokens - outcome.cloudCalls;
    if (unused > 0) this.#settings.budget?.giveBack(unused, charge.flow);
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
    const charge = await this.#mayGo(destinationName, outgoing, signal);
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
      const outcome = await this.#settings.transport.send({
        destination,
        outgoing: this.#latest(outgoing),
        context: request,
        timeoutMs: this.#settings.queue.timeoutMs,
        signal,
      });
      this.#settle(charge, outcome);
      return outcome;
    } finally {
      giveBack?.();
    }
  }

  // An object's delivery carries the object as the watch has it at the moment of sending, as the
  // node-set digest does: changes its feed let pass since it was queued (a function's own status
  // write) are in it, so that a function starting from it (ADR 0022) starts from the latest copy
  // the relay has. A delete keeps its last known state; another incarnation (uid) is not this one.
  // Only for a kind whose kept copy is a whole claim (resources.ts `retainedIsClaim`: a Node's has no
  // status): a Node's delivery carries its queued state, and a write from a stale one meets a 409.
  #latest(outgoing: Outgoing): Outgoing {
    if (outgoing.kind !== 'object' || outgoing.change.type === 'delete') return outgoing;
    const { change } = outgoing;
    if (!change.resource.retainedIsClaim) return outgoing;
    const latest = this.#watches.find((w) => w.type.kind === change.resource.kind)?.get(change.key);
    if (latest === undefined || latest === change.object) return outgoing;
    if (latest.metadata?.uid !== change.object.metadata?.uid) return outgoing;
    return { kind: 'object', change: { ...change, object: latest } };
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

// What a delivery took from the budget, and the flow it took it as.
interface Charge {
  readonly flow: string;
  readonly tokens: number;
}

/**
 * The flow of the budget (and lane of the queue) a delivery waits in: its destination and the kind
 * of what it carries (`Node`, `Service`, `reconcile.all`), so that a flood of one kind of change to
 * one destination never holds back another (ADR 0018) — also where one destination is fed
 * everything (Knative's sink).
 */
export function flowOf(destination: string, outgoing: Outgoing): string {
  return `${destination}/${outgoing.kind === 'object' ? outgoing.change.resource.kind : 'reconcile.all'}`;
}

function neededResources(table: RoutingTable): ResourceType[] {
  return watchedResources.filter((type) => table.destinations.some((d) => feedWatches(table, d.feed, type.kind)));
}
