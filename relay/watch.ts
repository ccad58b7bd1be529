// One resource's LIST + WATCH loop, done by hand on client-node's raw `Watch` because its informer
// stops for good on any error but a 410 or a client-side timeout (@kubernetes/client-node
// src/cache.ts, ListWatch.doneHandler: other errors go to the error handlers and it does not
// restart). What this loop does instead, after client-go's reflector (tools/cache/reflector.go):
//
// - LIST (paged), then WATCH from the list's resourceVersion with bookmarks, so that a quiet
//   watch still advances and can resume without a LIST;
// - each watch asks the server to end it after a random 5 to 10 minutes, spreading reconnects;
// - a watch that ends or breaks is reopened from the last resourceVersion seen: at once when it
//   was healthy (lived 2 minutes, or was quiet until the inactivity limit), else after a jittered
//   exponential backoff (0.8 s doubling to 30 s);
// - only a 410 Gone (the server no longer has history that old) — or a failure of the relay's own
//   handling — leads to a LIST, exactly one per recovery, whose differences from the last known
//   state are emitted as ordinary changes: objects deleted while the watch was down become
//   `delete` changes carrying their last known state;
// - nothing ends the loop but the stop signal: every failure is logged, counted and retried.
//
// What is kept in memory per object: what the resource's `retain` keeps of its last state
// (resources.ts `retained`: metadata without managedFields, spec, a Service's load balancer status),
// which is what the diff compares (by resourceVersion), what feeds see as `previous`, what fan-outs
// and the node-set digest read, and what a `delete` found by a LIST carries. A change carries the
// whole object to the queue, which holds it until it is delivered (ADR 0024).

import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../shared/clock.ts';
import { Backoff } from './backoff.ts';
import { diffListed, listAll, type Listed } from './list.ts';
import type { WatchDeps } from './watch-options.ts';
import {
  normalize,
  objectKey,
  resourceVersionOf,
  type KubeObject,
  type ResourceChange,
  type ResourceType,
} from './resources.ts';

export type { ChangeType } from '../shared/catalogue.ts';
export type { ResourceChange } from './resources.ts';
export { defaultWatchSettings, type WatchDeps, type WatchSettings } from './watch-options.ts';

// Why a watch ended.
type WatchEnd = 'closed' | 'timeout' | 'gone' | 'error' | 'handler' | 'stopped';

/** The LIST + WATCH loop of one resource; see the module comment. */
export class ResourceWatch {
  readonly type: ResourceType;
  readonly #deps: WatchDeps;
  readonly #log: Logger;
  readonly #backoff: Backoff;
  readonly #random: () => number;
  readonly #clock: Clock;
  // What is kept of the last known state per key (the resource's `retain`).
  #known = new Map<string, KubeObject>();
  // Where the next watch starts; undefined means a LIST is needed first.
  #resourceVersion: string | undefined;
  #listReason = 'initial';
  #established = false;
  #listed = false;
  // What the cursor recorded, until the first LIST has been diffed against it.
  #seed: ReadonlyMap<string, KubeObject> | undefined;
  #seeded = false;

  constructor(type: ResourceType, deps: WatchDeps) {
    this.type = type;
    this.#deps = deps;
    this.#log = deps.log.child({ resource: type.resource });
    this.#random = deps.random ?? Math.random;
    this.#clock = deps.clock ?? systemClock;
    this.#backoff = new Backoff(deps.settings.backoff, this.#random);
  }

  /** True while a watch is open (after the first LIST). */
  get established(): boolean {
    return this.#established;
  }

  /** True once a LIST has completed. */
  get listed(): boolean {
    return this.#listed;
  }

  /** Objects known. */
  get size(): number {
    return this.#known.size;
  }

  /** What is kept of the last known state of every object (the resource's `retain`), by key. */
  objects(): IterableIterator<[string, KubeObject]> {
    return this.#known.entries();
  }

  /** The last known state of the object of `key`, if any. */
  get(key: string): KubeObject | undefined {
    return this.#known.get(key);
  }

  /** Lists and watches until `signal` aborts; never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    let previous: WatchEnd | undefined;
    while (!signal.aborted) {
      if (this.#resourceVersion === undefined && !(await this.#relist(signal))) continue;
      const started = this.#clock.now();
      const from = this.#resourceVersion;
      const end = await this.#watchOnce(signal);
      if (end === 'stopped') break;
      this.#deps.metrics.watchRestarts.inc({ resource: this.type.resource, reason: end });
      const progressed = this.#resourceVersion !== undefined && this.#resourceVersion !== from;
      await this.#pause(end, { lived: this.#clock.now() - started, previous, progressed }, signal);
      previous = end;
    }
    this.#setEstablished(false);
  }

  // How long to wait before the next attempt. A healthy watch resets the backoff and reopens at
  // once: one that lived long, one cut for inactivity (the server had kept it open; on a quiet
  // cluster it may send no bookmark for minutes, as its resourceVersion does not move), or one the
  // server closed after it had moved the resourceVersion on (under churn the API server closes a
  // watcher that falls behind, seconds after it opened: backing off then would stop the watch for
  // up to 30 s while events pile up, as the fault suite's 1,000-Service churn showed). A 410
  // relists at once unless the last end was a 410 too (a relist loop must back off).
  async #pause(
    end: WatchEnd,
    history: { lived: number; previous: WatchEnd | undefined; progressed: boolean },
    signal: AbortSignal,
  ): Promise<void> {
    const healthy = this.#healthy(end, history);
    if (healthy) this.#backoff.reset();
    const immediate = end === 'gone' || end === 'handler' ? history.previous !== end : healthy;
    const level = end === 'closed' || end === 'timeout' || end === 'gone' ? 'info' : 'warn';
    const delayMs = immediate ? 0 : this.#backoff.next();
    this.#log[level](
      { reason: end, livedMs: history.lived, delayMs, resourceVersion: this.#resourceVersion },
      'watch ended; reopening',
    );
    await this.#clock.sleep(delayMs, signal);
  }

  #healthy(end: WatchEnd, history: { lived: number; progressed: boolean }): boolean {
    if (history.lived >= this.#deps.settings.resetAfterMs || end === 'timeout') return true;
    return end === 'closed' && history.progressed;
  }

  // One LIST, diffed against the last known state. False (after a backoff) when it failed.
  async #relist(signal: AbortSignal): Promise<boolean> {
    if (!this.#seeded && this.#deps.tombstones !== undefined) {
      this.#seed = await this.#deps.tombstones();
      this.#seeded = true;
    }
    let listed: Listed;
    try {
      listed = await listAll(this.#deps.kubeConfig, this.type, {
        pageSize: this.#deps.settings.listPageSize,
        timeoutMs: this.#deps.settings.listTimeoutMs,
        signal,
      });
    } catch (error) {
      if (signal.aborted) return false;
      const delayMs = this.#backoff.next();
      this.#log.warn({ err: error, delayMs }, 'LIST failed; retrying');
      await this.#clock.sleep(delayMs, signal);
      return false;
    }
    this.#deps.metrics.lists.inc({ resource: this.type.resource, reason: this.#listReason });
    return this.#replace(listed, signal);
  }

  // Takes `listed` as the state, then emits the differences from the last known one (recorded
  // first, so that a handler reading objects() sees the state its change belongs to). If emitting
  // fails the last state is put back, so the next LIST emits the same differences.
  async #replace(listed: Listed, signal: AbortSignal): Promise<boolean> {
    const last = this.#known;
    try {
      const { next, changes } = diffListed(this.type, listed, {
        known: this.#known,
        seed: this.#seed,
        observedAt: this.#clock.now(),
      });
      this.#known = next;
      for (const change of changes) this.#emit(change);
    } catch (error) {
      this.#known = last;
      this.#listReason = 'handler';
      const delayMs = this.#backoff.next();
      this.#log.error({ err: error, delayMs }, 'handling the LIST failed; listing again');
      await this.#clock.sleep(delayMs, signal);
      return false;
    }
    this.#log.info(
      {
        objects: this.#known.size,
        known: last.size,
        resourceVersion: listed.resourceVersion,
        reason: this.#listReason,
      },
      'listed',
    );
    this.#resourceVersion = listed.resourceVersion;
    this.#listed = true;
    this.#seed = undefined;
    return true;
  }

  #emit(change: ResourceChange): void {
    this.#deps.onChange(change);
    this.#deps.metrics.changes.inc({ resource: this.type.resource, type: change.type });
  }

  // Emits a change already recorded; if the handler throws, the object's last state is put back.
  #emitOrRestore(change: ResourceChange): void {
    try {
      this.#emit(change);
    } catch (error) {
      if (change.previous === undefined) this.#known.delete(change.key);
      else this.#known.set(change.key, change.previous);
      throw error;
    }
  }

  // Opens one watch from #resourceVersion and resolves with why it ended.
  async #watchOnce(signal: AbortSignal): Promise<WatchEnd> {
    const state: WatchState = { failure: undefined, controller: undefined, finished: false };
    const watch = new Watch(this.#deps.kubeConfig);
    // client-node keeps its inactivity timeout in a private field with no option to set it.
    Object.assign(watch, { requestTimeoutMs: this.#deps.settings.inactivityTimeoutMs });
    let resolveDone: (error: unknown) => void = () => undefined;
    const done = new Promise<unknown>((resolve) => {
      resolveDone = resolve;
    });
    const onDone = (error: unknown): void => {
      state.finished = true;
      resolveDone(error);
    };
    try {
      state.controller = await watch.watch(
        this.type.path,
        this.#watchParams(),
        (type: string, object: unknown) => {
          this.#onWatchEvent(state, type, object);
        },
        onDone,
      );
    } catch (error) {
      onDone(error);
    }
    if (!state.finished && state.failure === undefined) this.#setEstablished(true);
    const stop = (): void => state.controller?.abort();
    signal.addEventListener('abort', stop, { once: true });
    if (state.failure !== undefined || signal.aborted) stop();
    const error = await done;
    signal.removeEventListener('abort', stop);
    this.#setEstablished(false);
    return this.#classify(state, error, signal);
  }

  #watchParams(): Record<string, string | number | boolean> {
    const { min, max } = this.#deps.settings.timeoutSeconds;
    const timeoutSeconds = Math.floor(min + this.#random() * (max - min + 1));
    return { allowWatchBookmarks: true, resourceVersion: this.#resourceVersion ?? '', timeoutSeconds };
  }

  // Runs inside client-node's line handler, which swallows exceptions: every failure is caught
  // here, recorded, and ends the watch so that the loop recovers from it.
  #onWatchEvent(state: WatchState, type: string, object: unknown): void {
    // Lines still buffered after the watch ended belong to a stream the loop has moved on from.
    if (state.failure !== undefined || state.finished) return;
    try {
      this.#deps.metrics.watchEvents.inc({ resource: this.type.resource, type });
      state.failure = this.#apply(type, object as KubeObject);
    } catch (error) {
      this.#log.error({ err: error, type }, 'handling a watch event failed; relisting');
      state.failure = 'handler';
    }
    if (state.failure !== undefined) state.controller?.abort();
  }

  // Applies one watch event; returns why the watch must end, if it must.
  #apply(type: string, raw: KubeObject): WatchEnd | undefined {
    switch (type) {
      case 'ADDED':
      case 'MODIFIED':
        this.#upsert(normalize(this.type, raw));
        return undefined;
      case 'DELETED':
        this.#delete(normalize(this.type, raw));
        return undefined;
      case 'BOOKMARK':
        this.#resourceVersion = resourceVersionOf(raw) || this.#resourceVersion;
        return undefined;
      case 'ERROR':
        return this.#watchError(raw);
      default:
        this.#log.warn({ type }, 'unknown watch event type; ignored');
        return undefined;
    }
  }

  #upsert(object: KubeObject): void {
    const key = objectKey(this.type, object);
    if (key !== undefined) {
      const previous = this.#known.get(key);
      if (previous === undefined || resourceVersionOf(previous) !== resourceVersionOf(object)) {
        // Recorded before it is emitted (a handler reading objects() sees it), and taken back if
        // emitting throws, so that the relist sees the change as new.
        this.#known.set(key, this.type.retain(object));
        const type = previous === undefined ? 'add' : 'update';
        this.#emitOrRestore({ resource: this.type, type, key, object, previous, observedAt: this.#clock.now() });
      }
    }
    this.#resourceVersion = resourceVersionOf(object) || this.#resourceVersion;
  }

  #delete(object: KubeObject): void {
    const key = objectKey(this.type, object);
    if (key !== undefined) {
      const previous = this.#known.get(key);
      this.#known.delete(key);
      this.#emitOrRestore({
        resource: this.type,
        type: 'delete',
        key,
        object,
        previous,
        observedAt: this.#clock.now(),
      });
    }
    this.#resourceVersion = resourceVersionOf(object) || this.#resourceVersion;
  }

  // An ERROR event carries a Status; 410 means the resourceVersion is too old to resume from.
  #watchError(status: KubeObject): WatchEnd {
    const code = typeof status['code'] === 'number' ? status['code'] : undefined;
    this.#log.info({ code, reason: status['reason'], message: status['message'] }, 'watch error event');
    return code === 410 ? this.#gone() : 'error';
  }

  #gone(): WatchEnd {
    this.#resourceVersion = undefined;
    this.#listReason = 'gone';
    return 'gone';
  }

  #classify(state: WatchState, error: unknown, signal: AbortSignal): WatchEnd {
    if (signal.aborted) return 'stopped';
    if (state.failure === 'handler') {
      this.#resourceVersion = undefined;
      this.#listReason = 'handler';
      return 'handler';
    }
    if (state.failure !== undefined) return state.failure;
    if (error === null || error === undefined) return 'closed';
    if ((error as { statusCode?: unknown }).statusCode === 410) return this.#gone();
    if ((error as { name?: unknown }).name === 'TimeoutError') return 'timeout';
    this.#log.warn({ err: error }, 'watch failed');
    return 'error';
  }

  #setEstablished(value: boolean): void {
    if (this.#established === value) return;
    this.#established = value;
    this.#deps.metrics.watchEstablished.set({ resource: this.type.resource }, value ? 1 : 0);
    this.#deps.onEstablished?.(value);
  }
}

// What the event handler and the loop share about one watch.
interface WatchState {
  failure: WatchEnd | undefined;
  controller: AbortController | undefined;
  /** client-node called done: the watch is over (or never opened). */
  finished: boolean;
}
