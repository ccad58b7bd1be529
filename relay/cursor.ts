// The known-keys cursor (ADR 0014): which objects the relay's leader knows, recorded in the cluster,
// so that a new leader — after a fail-over, a restart, or a gap in which no replica led — delivers
// as a `delete` every object that was known and is gone from its first LIST. Without it a new
// leader starts from nothing and such deletes are never delivered.
//
// One ConfigMap per watched resource, `<namespace>/<name>-<resource>` (by default the Lease's
// namespace and name: `kube-system/cirrus-relay-known-services`), its data cut into 16 shards by a
// hash of the key, each shard a JSON object `{ "<key>": { "uid": …, "spec": {…} } }` with only the
// spec fields the resource names (resources.ts `tombstoneSpec`). Writes are:
//
// - batched: at most one write per resource each `flushMs`, a merge patch of the changed shards
//   only, conditional on the resourceVersion last read or written (a deposed leader's write fails);
// - ahead of delivery: an object whose key (with its uid) is not recorded yet is not delivered
//   before the write that records it, so no function acts on an object the cursor does not know;
// - behind deletes: a deleted key leaves the cursor only once no delivery of it is waiting or in
//   flight, so a leader that dies first leaves the delete to its successor;
// - compacted by construction: the cursor holds the live keys plus deletes not yet delivered, and a
//   new leader rewrites what its LIST and deletes make of it.
//
// When the cursor cannot be read or written (no permission, the ConfigMap over 1 MiB), the relay
// says so in its log and metrics and delivers without it, as before the cursor existed.

import type { CoreV1Api, V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../shared/clock.ts';
import { apiMessage, apiStatus, mergePatch } from '../shared/kube/api.ts';
import type { RelayMetrics } from './metrics.ts';
import type { KubeObject, ResourceChange, ResourceType } from './resources.ts';

/** Where the cursor lives and how often it is written. */
export interface CursorSettings {
  readonly namespace: string;
  /** The ConfigMaps are `<name>-<resource>`. */
  readonly name: string;
  /** Changes are written at most this often (ms). */
  readonly flushMs: number;
}

export const defaultCursorFlushMs = 1_000;

/** Shards per ConfigMap: a write carries the changed sixteenths only. */
const shards = 16;

// What the cursor records of an object: enough to deliver its delete.
interface Entry {
  readonly uid: string;
  readonly spec?: Readonly<Record<string, unknown>>;
}

/** One resource's cursor; see the module comment. */
export class KnownKeys {
  readonly #core: CoreV1Api;
  readonly #type: ResourceType;
  readonly #settings: CursorSettings;
  readonly #log: Logger;
  readonly #metrics: RelayMetrics;
  readonly #clock: Clock;
  /** Objects as the watch has them now, by key. */
  readonly #live = new Map<string, Entry>();
  /** Deleted keys whose delete may not be delivered yet: the entry of the deleted incarnation. */
  readonly #deleting = new Map<string, Entry>();
  /** Each shard's text as last read or written. */
  readonly #written: (string | undefined)[] = Array.from({ length: shards }, () => undefined);
  /** The recorded uid of each key, from what was last read or written. */
  #recorded = new Map<string, string>();
  #resourceVersion: string | undefined;
  #healthy = true;
  #waiters: (() => void)[] = [];

  constructor(
    core: CoreV1Api,
    type: ResourceType,
    settings: CursorSettings,
    deps: { log: Logger; metrics: RelayMetrics; clock?: Clock },
  ) {
    this.#core = core;
    this.#type = type;
    this.#settings = settings;
    this.#log = deps.log.child({ cursor: this.where });
    this.#metrics = deps.metrics;
    this.#clock = deps.clock ?? systemClock;
  }

  /** `namespace/name` of the ConfigMap. */
  get where(): string {
    return `${this.#settings.namespace}/${this.#settings.name}-${this.#type.resource}`;
  }

  /**
   * Reads the cursor: the objects it records, as the objects their deletes carry (kind, apiVersion,
   * name, namespace, uid and the recorded spec fields). A missing ConfigMap records nothing. When
   * it cannot be read, logs why and returns nothing (the relay goes on without it).
   */
  async load(): Promise<Map<string, KubeObject>> {
    let configMap: V1ConfigMap | undefined;
    try {
      configMap = await this.#core.readNamespacedConfigMap({
        name: `${this.#settings.name}-${this.#type.resource}`,
        namespace: this.#settings.namespace,
      });
    } catch (error) {
      if (apiStatus(error) !== 404) {
        this.#unhealthy(`could not read the cursor: ${apiMessage(error)}`, error);
        return new Map();
      }
    }
    const entries = this.#adopt(configMap);
    return new Map([...entries].map(([key, entry]) => [key, this.#tombstone(key, entry)]));
  }

  /** Follows a change the watch emitted. */
  record(change: ResourceChange): void {
    if (change.type === 'delete') {
      const gone = this.#live.get(change.key) ?? entryOf(this.#type, change.object);
      this.#live.delete(change.key);
      if (gone.uid !== '') this.#deleting.set(change.key, gone);
      return;
    }
    const entry = entryOf(this.#type, change.object);
    const deleting = this.#deleting.get(change.key);
    // A new incarnation under the name: the old one's delete, if still undelivered, keeps no entry.
    if (deleting !== undefined && deleting.uid !== entry.uid) this.#deleting.delete(change.key);
    this.#live.set(change.key, entry);
  }

  /** Whether `key` with `uid` is recorded, or the cursor is not working (then nothing waits for it). */
  durable(key: string, uid: string): boolean {
    return !this.#healthy || uid === '' || this.#recorded.get(key) === uid;
  }

  /** Resolves once `key` with `uid` is {@link durable}, or `signal` aborts. */
  async whenDurable(key: string, uid: string, signal: AbortSignal): Promise<void> {
    while (!this.durable(key, uid) && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.#waiters.push(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  /**
   * Writes every `flushMs` until `signal` aborts, once `listed()` (the watch's first LIST has been
   * diffed against the cursor: before that, what the relay knows is not the whole picture, and
   * writing it would erase what predecessors recorded). `pending()` is the keys with a delivery
   * still waiting or in flight (their deletes stay recorded until they have none).
   */
  async run(signal: AbortSignal, listed: () => boolean, pending: () => ReadonlySet<string>): Promise<void> {
    // A function, as the sleep ends early when the signal aborts.
    const stopped = (): boolean => signal.aborted;
    for (;;) {
      await this.#clock.sleep(this.#settings.flushMs, signal);
      if (stopped()) break;
      if (listed()) await this.flush(pending());
    }
    this.#release();
  }

  /** Writes the shards that differ from what was last written; one request at most. */
  async flush(pending: ReadonlySet<string>): Promise<void> {
    for (const key of [...this.#deleting.keys()]) if (!pending.has(key)) this.#deleting.delete(key);
    const texts = this.#shardTexts();
    const changed = texts.flatMap((text, index) => (text === this.#written[index] ? [] : [index]));
    if (changed.length === 0) {
      this.#setHealthy(true);
      return;
    }
    try {
      await this.#write(changed, texts);
    } catch (error) {
      const status = apiStatus(error);
      if (status === 409 || (status === 404 && this.#resourceVersion !== undefined)) {
        // Written by someone else since (another leader): read again; the next flush writes the difference.
        this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'conflict' });
        this.#log.info('the cursor changed since it was read; reading it again');
        await this.load();
        return;
      }
      this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'failed' });
      this.#unhealthy(`could not write the cursor: ${apiMessage(error)}`, error);
    }
  }

  // Writes the `changed` shards of `texts` (creating the ConfigMap the first time), and takes them as recorded.
  async #write(changed: readonly number[], texts: readonly string[]): Promise<void> {
    const data = Object.fromEntries(changed.map((index) => [shardName(index), texts[index] ?? '{}']));
    const written =
      this.#resourceVersion === undefined ? await this.#create(data) : await this.#patch(this.#resourceVersion, data);
    this.#resourceVersion = written.metadata?.resourceVersion;
    for (const index of changed) this.#written[index] = texts[index];
    this.#recorded = recordedOf(this.#written);
    this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'written' });
    this.#setHealthy(true);
  }

  // Takes what was read as the last written state; returns its entries by key.
  #adopt(configMap: V1ConfigMap | undefined): Map<string, Entry> {
    this.#resourceVersion = configMap?.metadata?.resourceVersion;
    const entries = new Map<string, Entry>();
    for (let index = 0; index < shards; index += 1) {
      const text = configMap?.data?.[shardName(index)];
      this.#written[index] = text;
      for (const [key, entry] of parseShard(text, this.#log)) entries.set(key, entry);
    }
    this.#recorded = new Map([...entries].map(([key, entry]) => [key, entry.uid]));
    return entries;
  }

  async #create(data: Record<string, string>): Promise<V1ConfigMap> {
    const full = Object.fromEntries(
      Array.from({ length: shards }, (_, index) => [shardName(index), data[shardName(index)] ?? '{}']),
    );
    return this.#core.createNamespacedConfigMap({
      namespace: this.#settings.namespace,
      body: {
        metadata: {
          name: `${this.#settings.name}-${this.#type.resource}`,
          namespace: this.#settings.namespace,
          labels: { 'app.kubernetes.io/managed-by': 'cirrus' },
          annotations: {
            description:
              `The ${this.#type.resource} cirrus's relay knows, so that a new leader delivers the deletes of those ` +
              'gone meanwhile (ADR 0014). Written by the leading relay; deleting it loses only those deletes.',
          },
        },
        data: full,
      },
    });
  }

  async #patch(resourceVersion: string, data: Record<string, string>): Promise<V1ConfigMap> {
    return this.#core.patchNamespacedConfigMap(
      {
        name: `${this.#settings.name}-${this.#type.resource}`,
        namespace: this.#settings.namespace,
        body: { metadata: { resourceVersion }, data },
      },
      mergePatch,
    );
  }

  // Each shard's text as it should be: live entries, and deletes not yet delivered.
  #shardTexts(): string[] {
    const buckets = Array.from({ length: shards }, () => new Map<string, Entry>());
    for (const [key, entry] of this.#deleting) buckets[shardOf(key)]?.set(key, entry);
    for (const [key, entry] of this.#live) if (!this.#deleting.has(key)) buckets[shardOf(key)]?.set(key, entry);
    return buckets.map((bucket) =>
      JSON.stringify(Object.fromEntries([...bucket].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))),
    );
  }

  #tombstone(key: string, entry: Entry): KubeObject {
    const parts = key.split('/');
    const name = parts.at(-1) ?? '';
    const namespace = this.#type.namespaced ? (parts[1] ?? '') : undefined;
    return {
      apiVersion: this.#type.apiVersion,
      kind: this.#type.kind,
      metadata: { name, ...(namespace === undefined ? {} : { namespace }), uid: entry.uid },
      ...(entry.spec === undefined ? {} : { spec: entry.spec }),
    };
  }

  #unhealthy(message: string, error: unknown): void {
    if (this.#healthy) this.#log.error({ err: error }, `${message}; delivering without it`);
    this.#setHealthy(false);
  }

  #setHealthy(healthy: boolean): void {
    this.#healthy = healthy;
    this.#release();
  }

  #release(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}

function entryOf(type: ResourceType, object: KubeObject): Entry {
  const uid = object.metadata?.uid ?? '';
  const spec = (object['spec'] ?? {}) as Record<string, unknown>;
  const kept = Object.fromEntries(type.tombstoneSpec.flatMap((field) => (field in spec ? [[field, spec[field]]] : [])));
  return Object.keys(kept).length === 0 ? { uid } : { uid, spec: kept };
}

function shardName(index: number): string {
  return `keys-${index.toString().padStart(2, '0')}`;
}

// FNV-1a: stable across processes and versions, which a new leader reading an old one's cursor needs.
function shardOf(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i += 1) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % shards;
}

function parseShard(text: string | undefined, log: Logger): [string, Entry][] {
  if (text === undefined || text === '') return [];
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== 'object' || parsed === null) throw new Error('not an object');
    return Object.entries(parsed as Record<string, unknown>).flatMap(([key, value]) => {
      const entry = value as Partial<Entry> | null;
      return typeof entry?.uid === 'string' ? [[key, entry as Entry]] : [];
    });
  } catch (error) {
    log.warn({ err: error }, 'a shard of the cursor is not what the relay writes; ignored');
    return [];
  }
}

function recordedOf(texts: readonly (string | undefined)[]): Map<string, string> {
  const recorded = new Map<string, string>();
  for (const text of texts) {
    if (text === undefined) continue;
    for (const [key, entry] of Object.entries(JSON.parse(text) as Record<string, Entry>)) recorded.set(key, entry.uid);
  }
  return recorded;
}
