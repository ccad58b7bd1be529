// One resource's LIST + WATCH loop, done by hand on client-node's raw `Watch` because its informer
// stops for good on any error but a 410 (reference/ecosystem.md §4.3). What this loop does
// instead, after client-go's reflector:
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
// What is kept in memory per object: its last state (without managedFields), which is both what
// the diff compares (by resourceVersion) and what a `delete` carries.

import {
  HttpMethod,
  IsomorphicFetchHttpLibrary,
  RequestContext,
  Watch,
  type KubeConfig,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../shared/clock.ts';
import { Backoff, type BackoffPolicy } from './backoff.ts';
import type { RelayMetrics } from './metrics.ts';
import { normalize, objectKey, resourceVersionOf, type KubeObject, type ResourceType } from './resources.ts';
import type { WatchChange } from '../shared/catalogue.ts';

export type { ChangeType } from '../shared/catalogue.ts';

/** One object change, after diffing against what the relay knew: what a feed reads, and where it came from. */
export interface ResourceChange extends WatchChange {
  readonly resource: ResourceType;
  /** `Node/worker-1`, `Service/default/web`. */
  readonly key: string;
  /** The new state; for `delete`, the last known one. */
  readonly object: KubeObject;
  /** The state before this change, when the relay knew one. */
  readonly previous?: KubeObject | undefined;
  /** When the relay saw the change (its clock's now(): `Date.now()` in production). */
  readonly observedAt: number;
}

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

// Why a watch ended.
type WatchEnd = 'closed' | 'timeout' | 'gone' | 'error' | 'handler' | 'stopped';

/** A failed request to the API server, with its HTTP status. */
export class ApiStatusError extends Error {
  override readonly name = 'ApiStatusError';
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.statusCode = statusCode;
  }
}

/** The LIST + WATCH loop of one resource; see the module comment. */
export class ResourceWatch {
  readonly type: ResourceType;
  readonly #deps: WatchDeps;
  readonly #log: Logger;
  readonly #backoff: Backoff;
  readonly #random: () => number;
  readonly #clock: Clock;
  // Last known state per key; undefined until the first LIST.
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

  /** The last known state of every object, by key. */
  objects(): IterableIterator<[string, KubeObject]> {
    return this.#known.entries();
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
      const { next, changes } = this.#diff(listed);
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

  // The state `listed` makes, and the changes from the last known state to it.
  #diff(listed: Listed): { next: Map<string, KubeObject>; changes: ResourceChange[] } {
    const next = new Map<string, KubeObject>();
    const changes: ResourceChange[] = [];
    const observedAt = this.#clock.now();
    for (const raw of listed.items) {
      const object = normalize(this.type, raw);
      const key = objectKey(this.type, object);
      if (key === undefined) continue;
      next.set(key, object);
      const previous = this.#known.get(key);
      if (previous !== undefined && resourceVersionOf(previous) === resourceVersionOf(object)) continue;
      const type = previous === undefined ? 'add' : 'update';
      changes.push({ resource: this.type, type, key, object, previous, observedAt });
    }
    for (const [key, object] of this.#known) {
      if (!next.has(key))
        changes.push({ resource: this.type, type: 'delete', key, object, previous: object, observedAt });
    }
    // First, so that the delete of an old incarnation goes out before the add of the new one.
    return { next, changes: [...this.#goneSinceRecorded(next, observedAt), ...changes] };
  }

  // What the cursor recorded (an earlier leader knew) that `next` lacks or has with another uid:
  // deleted while no relay led.
  #goneSinceRecorded(next: ReadonlyMap<string, KubeObject>, observedAt: number): ResourceChange[] {
    const gone: ResourceChange[] = [];
    for (const [key, object] of this.#seed ?? []) {
      if (this.#known.has(key)) continue;
      const live = next.get(key);
      if (live === undefined || live.metadata?.uid !== object.metadata?.uid)
        gone.push({ resource: this.type, type: 'delete', key, object, previous: object, observedAt });
    }
    return gone;
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
        this.#known.set(key, object);
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

/** The result of a LIST: every item, and the resourceVersion to watch from. */
export interface Listed {
  readonly items: readonly KubeObject[];
  readonly resourceVersion: string;
}

interface ListPage {
  readonly items?: KubeObject[] | null;
  readonly metadata?: { readonly resourceVersion?: string; readonly continue?: string };
}

/**
 * Lists every object of `type`, page by page (a paged LIST is one consistent snapshot), as raw
 * JSON. Throws ApiStatusError for a non-200 answer, and whatever the transport throws.
 */
export async function listAll(
  kubeConfig: KubeConfig,
  type: ResourceType,
  options: { readonly pageSize: number; readonly timeoutMs: number; readonly signal: AbortSignal },
): Promise<Listed> {
  const items: KubeObject[] = [];
  let resourceVersion = '';
  let token: string | undefined;
  do {
    const query: Record<string, string> = {
      limit: String(options.pageSize),
      ...(token === undefined ? {} : { continue: token }),
    };
    const signal = AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]);
    const page = (await getJson(kubeConfig, type.path, query, signal)) as ListPage;
    items.push(...(page.items ?? []));
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    token = page.metadata?.continue || undefined;
  } while (token !== undefined);
  if (resourceVersion === '') throw new Error(`LIST ${type.path}: the answer has no resourceVersion`);
  return { items, resourceVersion };
}

// A GET through client-node's own transport (its TLS and credentials from the kubeconfig), keeping
// the JSON as JSON: the generated API would deserialize every item into classes.
async function getJson(
  kubeConfig: KubeConfig,
  path: string,
  query: Record<string, string>,
  signal: AbortSignal,
): Promise<unknown> {
  const cluster = kubeConfig.getCurrentCluster();
  if (cluster === null) throw new Error('no current cluster in the kubeconfig');
  const url = new URL(cluster.server + path);
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  const context = new RequestContext(url.toString(), HttpMethod.GET);
  context.setHeaderParam('Accept', 'application/json');
  context.setSignal(signal);
  await kubeConfig.applySecurityAuthentication(context);
  const response = await new IsomorphicFetchHttpLibrary().send(context).toPromise();
  const text = await response.body.text();
  if (response.httpStatusCode !== 200)
    throw new ApiStatusError(
      response.httpStatusCode,
      `GET ${path}: HTTP ${response.httpStatusCode}: ${text.slice(0, 300)}`,
    );
  return JSON.parse(text) as unknown;
}
