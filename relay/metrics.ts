// The relay's metrics, in a registry of its own (several relays can share a process in tests, and
// the function host keeps its registries per app for the same reason).

import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Buckets of the delivery latency: 5 ms (a quick function) to 10 min (a key that needed retries). */
export const latencyBuckets: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600,
];

/** The relay's series. */
export interface RelayMetrics {
  readonly registry: Registry;
  /** Watch events received, by resource and watch event type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR). */
  readonly watchEvents: Counter<'resource' | 'type'>;
  /** Watches that ended and were opened again, by why: closed, timeout, gone, error, handler. */
  readonly watchRestarts: Counter<'resource' | 'reason'>;
  /** LIST requests that completed, by why: initial, gone (a 410), handler (the relay's own failure). */
  readonly lists: Counter<'resource' | 'reason'>;
  /** 1 while the resource's watch is open. */
  readonly watchEstablished: Gauge<'resource'>;
  /** Changes the relay emitted (after diffing), by resource and add/update/delete. */
  readonly changes: Counter<'resource' | 'type'>;
  /** Delivery attempts, by destination and outcome: accepted, rejected (400), retry (any other failure). */
  readonly deliveries: Counter<'destination' | 'outcome'>;
  /** Retries scheduled, by destination and why: status (an HTTP error), retry-after (429/503 with Retry-After), unreachable. */
  readonly retries: Counter<'destination' | 'reason'>;
  /** Seconds from the relay observing a change (the oldest one a delivery carries) to the function accepting it. */
  readonly latency: Histogram<'destination'>;
  /**
   * Seconds from the relay observing a watch event (the oldest one a delivery carries; a LIST's
   * change too) to the function accepting the delivery, by the event's resource: periodic triggers
   * and rechecks, which no event caused, are not observed.
   */
  readonly eventAge: Histogram<'destination' | 'resource'>;
  /** Events merged into one already waiting for the same key. */
  readonly coalesced: Counter<'destination'>;
  /** Periodic and node-change triggers, by function and result: queued, skipped (one still waiting or in flight). */
  readonly triggers: Counter<'destination' | 'trigger' | 'result'>;
  /** 1 while this relay holds the lease (or runs without leader election). */
  readonly leader: Gauge;
  /** Writes of the known-keys cursor (./cursor.ts), by resource and result: written, conflict, failed. */
  readonly cursorWrites: Counter<'resource' | 'result'>;
  /** Seconds the call budget (./budget.ts) held deliveries back, by destination. */
  readonly budgetWait: Counter<'destination'>;
}

/** Live numbers the queue reports at scrape time. */
export interface QueueGauges {
  /** Keys with a delivery waiting (not in flight), by destination. */
  depth(): ReadonlyMap<string, number>;
  /** Deliveries in flight, by destination. */
  inFlight(): ReadonlyMap<string, number>;
  /** Keys waiting for a retry after a failure, by destination. */
  retrying(): ReadonlyMap<string, number>;
}

/**
 * Creates the registry with every `cirrus_relay_*` series, and prom-client's process metrics when
 * `processMetrics` is true. `gauges` is read at each scrape (queue depth, in flight, retrying);
 * it may be bound later, which is why it is a getter.
 */
export function createRelayMetrics(options: {
  readonly processMetrics: boolean;
  readonly gauges: () => QueueGauges | undefined;
}): RelayMetrics {
  const registry = new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  queueGauge(
    registry,
    'cirrus_relay_queue_depth',
    'Keys with a delivery waiting to be sent (not in flight), by destination.',
    () => options.gauges()?.depth(),
  );
  queueGauge(registry, 'cirrus_relay_in_flight', 'Deliveries in flight, by destination.', () =>
    options.gauges()?.inFlight(),
  );
  queueGauge(
    registry,
    'cirrus_relay_retrying',
    'Keys waiting for a retry after a failed delivery, by destination.',
    () => options.gauges()?.retrying(),
  );
  return {
    registry,
    watchEvents: new Counter({
      name: 'cirrus_relay_watch_events_total',
      help: 'Watch events received.',
      labelNames: ['resource', 'type'] as const,
      registers,
    }),
    watchRestarts: new Counter({
      name: 'cirrus_relay_watch_restarts_total',
      help: 'Watches that ended and were reopened, by reason.',
      labelNames: ['resource', 'reason'] as const,
      registers,
    }),
    lists: new Counter({
      name: 'cirrus_relay_lists_total',
      help: 'Completed LISTs, by reason (initial, gone, handler).',
      labelNames: ['resource', 'reason'] as const,
      registers,
    }),
    watchEstablished: new Gauge({
      name: 'cirrus_relay_watch_established',
      help: '1 while the watch is open.',
      labelNames: ['resource'] as const,
      registers,
    }),
    changes: new Counter({
      name: 'cirrus_relay_changes_total',
      help: 'Object changes emitted after diffing.',
      labelNames: ['resource', 'type'] as const,
      registers,
    }),
    deliveries: new Counter({
      name: 'cirrus_relay_deliveries_total',
      help: 'Delivery attempts, by outcome (accepted, rejected, retry).',
      labelNames: ['destination', 'outcome'] as const,
      registers,
    }),
    retries: new Counter({
      name: 'cirrus_relay_retries_total',
      help: 'Retries scheduled, by reason (status, retry-after, unreachable).',
      labelNames: ['destination', 'reason'] as const,
      registers,
    }),
    latency: new Histogram({
      name: 'cirrus_relay_delivery_latency_seconds',
      help: 'Seconds from a change being observed to the function accepting it.',
      labelNames: ['destination'] as const,
      buckets: [...latencyBuckets],
      registers,
    }),
    eventAge: new Histogram({
      name: 'cirrus_relay_event_age_seconds',
      help: "Seconds from the relay observing a watch event to the function accepting it, by the event's resource (periodic triggers and rechecks not included).",
      labelNames: ['destination', 'resource'] as const,
      buckets: [...latencyBuckets],
      registers,
    }),
    coalesced: new Counter({
      name: 'cirrus_relay_coalesced_total',
      help: 'Events merged into a delivery already waiting for the same key.',
      labelNames: ['destination'] as const,
      registers,
    }),
    triggers: new Counter({
      name: 'cirrus_relay_triggers_total',
      help: 'reconcile.all triggers, by result (queued, skipped).',
      labelNames: ['destination', 'trigger', 'result'] as const,
      registers,
    }),
    leader: new Gauge({ name: 'cirrus_relay_leader', help: '1 while this relay is the one delivering.', registers }),
    cursorWrites: new Counter({
      name: 'cirrus_relay_cursor_writes_total',
      help: 'Writes of the known-keys cursor ConfigMap, by result (written, conflict, failed).',
      labelNames: ['resource', 'result'] as const,
      registers,
    }),
    budgetWait: new Counter({
      name: 'cirrus_relay_budget_wait_seconds_total',
      help: 'Seconds deliveries waited for the cloud call budget, by destination.',
      labelNames: ['destination'] as const,
      registers,
    }),
  };
}

function queueGauge(
  registry: Registry,
  name: string,
  help: string,
  read: () => ReadonlyMap<string, number> | undefined,
): void {
  new Gauge({
    name,
    help,
    labelNames: ['destination'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [destination, value] of read() ?? []) this.set({ destination }, value);
    },
  });
}
