// What a resource's LIST + WATCH loop (./watch.ts) is given: its timings, with client-go's
// reflector's as the defaults, and where its changes go.

import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../shared/clock.ts';
import type { BackoffPolicy } from './backoff.ts';
import type { RelayMetrics } from './metrics.ts';
import type { KubeObject, ResourceChange } from './resources.ts';

/** Timings of the LIST + WATCH loop. */
export interface WatchSettings {
  /** Each watch asks the server to end it after a random whole number of seconds in [min, max]. */
  readonly timeoutSeconds: { readonly min: number; readonly max: number };
  /** Waits before reopening a watch that broke, or retrying a failed LIST. */
  readonly backoff: BackoffPolicy;
  /** A watch that lived this long resets the backoff. */
  readonly resetAfterMs: number;
  /**
   * client-node aborts a watch after this long without data (which also catches silently stalled
   * connections). A server sends a bookmark about every minute when its resourceVersion moves, so
   * the 30 s client-node default would cut healthy quiet watches twice a minute.
   */
  readonly inactivityTimeoutMs: number;
  /** Items per LIST page. */
  readonly listPageSize: number;
  /** How long one LIST page may take. */
  readonly listTimeoutMs: number;
}

/** client-go's reflector timings, with a page size for LIST. */
export const defaultWatchSettings: WatchSettings = {
  timeoutSeconds: { min: 300, max: 600 },
  backoff: { initialMs: 800, maxMs: 30_000, jitter: 1 },
  resetAfterMs: 120_000,
  inactivityTimeoutMs: 90_000,
  listPageSize: 500,
  listTimeoutMs: 60_000,
};

/** What a ResourceWatch needs. */
export interface WatchDeps {
  readonly kubeConfig: KubeConfig;
  readonly settings: WatchSettings;
  /** Called synchronously for each change, in order. A throw makes the watch relist (and the change come again). */
  readonly onChange: (change: ResourceChange) => void;
  /** Called when the watch opens or closes. */
  readonly onEstablished?: (established: boolean) => void;
  readonly metrics: RelayMetrics;
  readonly log: Logger;
  readonly random?: () => number;
  /** What the loop's backoffs wait on, and what it times watches and changes by; default the system clock. */
  readonly clock?: Clock;
  /**
   * The objects known before this watch started (the known-keys cursor, ./cursor.ts), read once
   * before the first LIST: those the LIST lacks, or has with another uid, are emitted as deletes
   * carrying the recorded object. Never rejects.
   */
  readonly tombstones?: () => Promise<ReadonlyMap<string, KubeObject>>;
}
