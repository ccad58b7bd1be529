// The host's own metrics, in a registry per app: several functions can share a process (and a
// test can build many apps) without their series colliding in prom-client's global registry.

import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Buckets of `cirrus_reconcile_duration_seconds`: 5 ms (a no-op reconcile) to 60 s (a slow cloud call). */
export const durationBuckets: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The registry of one app and the series the host writes to it. */
export interface HostMetrics {
  readonly registry: Registry;
  /** Every request to a reconcile route, by its reply's status code (rejected and overloaded ones too); and every hand-over in process (./local.ts). */
  readonly requests: Counter<'function' | 'trigger' | 'code'>;
  /** The time a function's reconcile took, success or failure; requests rejected before it ran are not observed. */
  readonly duration: Histogram<'function' | 'trigger'>;
  /** Objects reconciled, by the result the report gives each (initialized, unchanged, ensured, failed, …). */
  readonly results: Counter<'function' | 'result'>;
  /** Requests whose client closed the connection before the request was in ({@link abortedRequests}). */
  readonly aborted: Counter;
  /**
   * Marks `fn`'s answer to a reconcile request or hand-over: the first one of the process sets
   * `cirrus_cold_start_seconds{function}` to the seconds since the process started.
   */
  answered(fn: string): void;
}

/**
 * `cirrus_http_requests_aborted_total` in `registry`, created on first use (an app's host metrics
 * and its server's error handler share it; under `cirrus start` both listeners count into one).
 * A client that goes away mid-body is counted here instead of logged as an error.
 */
export function abortedRequests(registry: Registry): Counter {
  const name = 'cirrus_http_requests_aborted_total';
  const existing = registry.getSingleMetric(name);
  if (existing instanceof Counter) return existing;
  return new Counter({
    name,
    help: 'Requests whose client closed the connection before the whole request had arrived (not logged as errors).',
    registers: [registry],
  });
}

/**
 * Creates a fresh registry (or fills `registry`) with `cirrus_reconcile_requests_total{function,trigger,code}`,
 * `cirrus_reconcile_duration_seconds{function,trigger}`, `cirrus_reconcile_objects_total{function,result}` and
 * `cirrus_cold_start_seconds{function}`, plus prom-client's process metrics
 * (`process_*`, `nodejs_*`) when `processMetrics` is true. Those cost about 1.5 ms and 1 MB at
 * start (measured on Node 24), but each registry that collects them adds its own GC observer
 * and event-loop monitor, so a process serving several functions should enable them once.
 */
export function createHostMetrics(options: {
  readonly processMetrics: boolean;
  readonly registry?: Registry | undefined;
}): HostMetrics {
  const registry = options.registry ?? new Registry();
  if (options.processMetrics) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'cirrus_reconcile_requests_total',
    help: 'Requests to the reconcile routes (events and manual reconciles), by reply status code.',
    labelNames: ['function', 'trigger', 'code'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'cirrus_reconcile_duration_seconds',
    help: "Time spent in a function's reconcile, successful or not.",
    labelNames: ['function', 'trigger'] as const,
    buckets: [...durationBuckets],
    registers: [registry],
  });
  const results = new Counter({
    name: 'cirrus_reconcile_objects_total',
    help: 'Objects reconciled, by the result reported for each (initialized, ensured, unchanged, failed, …).',
    labelNames: ['function', 'result'] as const,
    registers: [registry],
  });
  const coldStart = new Gauge({
    name: 'cirrus_cold_start_seconds',
    help: "Seconds from the process's start to a function's first answer (any reply, to a request or a hand-over in process): its cold start.",
    labelNames: ['function'] as const,
    registers: [registry],
  });
  const answered = new Set<string>();
  return {
    registry,
    requests,
    duration,
    results,
    aborted: abortedRequests(registry),
    answered: (fn) => {
      if (answered.has(fn)) return;
      answered.add(fn);
      // Node's uptime counts from the process's start, before any module was loaded.
      coldStart.set({ function: fn }, process.uptime());
    },
  };
}
