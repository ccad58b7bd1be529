// The known-keys cursor (ADR 0014): which objects the relay's leader knows, recorded in the cluster,
// so that a new leader — after a fail-over, a restart, or a gap in which no replica led — delivers
// as a `delete` every object that was known and is gone from its first LIST. Without it a new
// leader starts from nothing and such deletes are never delivered. A relay without leader election
// (one replica) is its own leader: it keeps the cursor as well, for its restarts.
//
// It records only what a delete needs (resources.ts `needsTombstone`): every Node, and the
// Services that have or had a load balancer — not every Service, which tenants could use to push
// it past the API server's 1 MiB object limit. Per watched resource it is `parts` ConfigMaps
// (default 4), `<namespace>/<name>-<resource>` then `…-<resource>-1`, `-2`, … (by default the
// Lease's namespace and name: `kube-system/cirrus-relay-known-services`), each key in the part its
// hash names; a part's data is cut into 16 shards by the same hash, each shard a JSON object
// `{ "<key>": { "uid": …, "spec": {…} } }` with only the spec fields the resource names
// (`tombstoneSpec`). A part that would grow past `partLimitBytes` is not written (logged, counted
// as failed; its keys go out without waiting for it). Writes are:
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
// One relay writes a cursor (./cursor-writer.ts): its first ConfigMap of each resource names the
// writer, renewed every third of `claimMs` without leader election (a leader's Lease stands for
// it); a relay that finds another live writer there neither
// writes nor lists (its watch waits, and it is not ready) until that writer stops (a requested stop
// takes the record away) or its record goes stale, and says so in an error naming that writer.
// With an `all` destination (Knative's K_SINK, standing in for ApiServerSource) it records every
// object, not only those whose delete a function acts on: the sink expects every delete.
//
// When the cursor cannot be read or written (no permission, a missing ConfigMap it may not create),
// the relay says so in its log (an error naming the ConfigMap and the API server's answer, once
// until it works again) and metrics, and delivers without it, as before the cursor existed.

import type { CoreV1Api, V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../shared/clock.ts';
import { apiMessage, apiStatus, mergePatch } from '../shared/kube/api.ts';
import type { RelayMetrics } from './metrics.ts';
import { defaultIdentity } from './lease.ts';
import {
  defaultCursorClaimMs,
  formatRecord,
  refusal,
  WriterJudge,
  writerAnnotation,
  type CursorWriter,
  type Verdict,
  type WriterRecord,
} from './cursor-writer.ts';
import {
  entryOf,
  parseShard,
  partLimitBytes,
  placeOf,
  recordedOf,
  shardName,
  shards,
  shardTexts,
  type Entry,
} from './cursor-format.ts';
import type { KubeObject, ResourceChange, ResourceType } from './resources.ts';

export { partLimitBytes } from './cursor-format.ts';
export { defaultCursorClaimMs, writerAnnotation, type CursorWriter } from './cursor-writer.ts';

/** Where the cursor lives and how often it is written. */
export interface CursorSettings {
  readonly namespace: string;
  /** The ConfigMaps are `<name>-<resource>`. */
  readonly name: string;
  /** Changes are written at most this often (ms), unless a delivery waits for the cursor (`urgentMs`). */
  readonly flushMs: number;
  /**
   * While a delivery waits for its object to be recorded, the next write comes this long (ms) after
   * the wait began, or after the write before, whichever is later — at most one write this often —
   * instead of at the next `flushMs` (default {@link defaultCursorUrgentMs}, never more than `flushMs`).
   */
  readonly urgentMs?: number;
  /** ConfigMaps per resource (default {@link defaultCursorParts}); the deploy manifests create as many. */
  readonly parts?: number;
  /**
   * How long the writer's record holds after each renewal (ms, default {@link defaultCursorClaimMs}; renewed every
   * third of it): another relay takes the cursor over once the record has not changed for that long.
   */
  readonly claimMs?: number;
  /** Who writes: the relay's identity and Lease (set by the relay; default a new identity, no Lease). */
  readonly writer?: CursorWriter;
}

export const defaultCursorFlushMs = 1_000;

/** How soon a write follows a delivery that waits for the cursor: a batch of such waits, 50 ms. */
export const defaultCursorUrgentMs = 50;

/** ConfigMaps per resource: about 40,000 keys of ~90 bytes, 7,000 of the longest names. */
export const defaultCursorParts = 4;

// How long a requested stop waits for the writer record to be taken away.
const giveUpMs = 2_000;

// One ConfigMap of the cursor as last read or written.
interface Part {
  readonly name: string;
  resourceVersion: string | undefined;
  /** Each shard's text as last read or written. */
  readonly written: (string | undefined)[];
  /** Left unwritten because it would be over partLimitBytes. */
  overfull: boolean;
  /** The writer record read or written (the first part's only). */
  writer: string | undefined;
}

// What a relay's claim on the cursor came to.
type Claimed = 'claimed' | 'conflict' | 'failed';

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
  readonly #parts: Part[];
  /** The recorded uid of each key, from what was last read or written. */
  #recorded = new Map<string, string>();
  #healthy = true;
  #waiters: (() => void)[] = [];
  /** Brings the next write forward: set while the run loop waits for it. */
  #hurry: (() => void) | undefined;
  /** Records every object, not only those whose delete a function needs (an `all` destination). */
  readonly #everything: boolean;
  readonly #writer: CursorWriter;
  readonly #judge: WriterJudge;
  readonly #claimMs: number;
  /** When this relay last wrote its writer record (its clock); undefined while it holds none. */
  #claimedAt: number | undefined;
  /** When the record is to be renewed next (sooner after a renewal that failed). */
  #renewAt = 0;
  /** Another writer took the cursor over: this relay writes it no more. */
  #lost = false;
  /** The writer last named in a refusal, so that each is logged once. */
  #refusedBy: string | undefined;
  /** When the run loop's next periodic write is due. */
  #flushAt = 0;
  /** Aborted when the relay stops (run's signal): ends a wait for another writer. */
  readonly #stopping = new AbortController();

  constructor(
    core: CoreV1Api,
    type: ResourceType,
    settings: CursorSettings,
    deps: { log: Logger; metrics: RelayMetrics; clock?: Clock; everything?: boolean },
  ) {
    this.#core = core;
    this.#type = type;
    this.#settings = settings;
    this.#log = deps.log.child({ cursor: this.where });
    this.#metrics = deps.metrics;
    this.#clock = deps.clock ?? systemClock;
    this.#everything = deps.everything ?? false;
    this.#writer = settings.writer ?? { identity: defaultIdentity() };
    this.#judge = new WriterJudge(this.#writer, this.#clock);
    this.#claimMs = settings.claimMs ?? defaultCursorClaimMs;
    const base = `${settings.name}-${type.resource}`;
    this.#parts = Array.from({ length: settings.parts ?? defaultCursorParts }, (_, index) => ({
      name: index === 0 ? base : `${base}-${index}`,
      resourceVersion: undefined,
      written: Array.from({ length: shards }, () => undefined),
      overfull: false,
      writer: undefined,
    }));
  }

  /** `namespace/name` of the first ConfigMap (the others add `-1`, `-2`, …). */
  get where(): string {
    return `${this.#settings.namespace}/${this.#settings.name}-${this.#type.resource}`;
  }

  /**
   * Takes the cursor and reads it: the objects it records, as the objects their deletes carry (kind,
   * apiVersion, name, namespace, uid and the recorded spec fields). A missing ConfigMap records
   * nothing. While another relay writes it (./cursor-writer.ts), waits — saying so — until that one
   * stops or its record goes stale. When it cannot be read or taken, logs why and returns nothing
   * (the relay goes on without it).
   */
  async load(): Promise<Map<string, KubeObject>> {
    for (;;) {
      const entries = await this.#read();
      if (entries === undefined) return new Map();
      const claimed = await this.#take(this.#judge.judge(this.#parts[0]?.writer));
      if (claimed === 'failed' || this.#stopping.signal.aborted) return new Map();
      if (claimed === 'claimed') return new Map([...entries].map(([key, entry]) => [key, this.#tombstone(key, entry)]));
    }
  }

  // Claims the cursor unless another relay writes it; if one does, says so and waits a renewal
  // period ('conflict': read it again).
  async #take(verdict: Verdict): Promise<Claimed> {
    if (verdict.kind === 'held') {
      this.#refuse(verdict.holder, true);
      await this.#clock.sleep(this.#renewMs, this.#stopping.signal);
      return 'conflict';
    }
    const waited = this.#refusedBy;
    const claimed = await this.#claim();
    if (claimed === 'claimed' && (waited !== undefined || (verdict.kind === 'free' && verdict.reason !== 'none')))
      this.#log.warn(
        { writer: this.#writer, after: waited, reason: verdict.kind === 'free' ? verdict.reason : 'mine' },
        'took the cursor over',
      );
    return claimed;
  }

  // Every part as it is now, taken as last written; undefined (logged) when one cannot be read.
  async #read(): Promise<Map<string, Entry> | undefined> {
    const entries = new Map<string, Entry>();
    for (const part of this.#parts) {
      let configMap: V1ConfigMap | undefined;
      try {
        configMap = await this.#core.readNamespacedConfigMap({ name: part.name, namespace: this.#settings.namespace });
      } catch (error) {
        if (apiStatus(error) !== 404) {
          this.#unhealthy(`could not read the cursor's ${part.name}: ${apiMessage(error)}`, error);
          return undefined;
        }
      }
      for (const [key, entry] of this.#adopt(part, configMap)) entries.set(key, entry);
    }
    this.#recorded = new Map([...entries].map(([key, entry]) => [key, entry.uid]));
    return entries;
  }

  get #renewMs(): number {
    return this.#claimMs / 3;
  }

  // Whether this relay renews its writer record. Not while it leads on a Lease: the Lease says it
  // is alive, a relay that takes the Lease over takes the cursor with it (WriterJudge: `lease`), and
  // the cursor then costs no write while nothing changes (ADR 0014). A relay without leader
  // election has only its record to show it is alive.
  get #renews(): boolean {
    return this.#writer.lease === undefined;
  }

  // Writes this relay's record as the writer's (creating the first part if it is missing),
  // conditional on the first part's resourceVersion as read: 'conflict' when another write came first.
  async #claim(): Promise<Claimed> {
    const [first] = this.#parts;
    if (first === undefined) return 'failed';
    const record = formatRecord(this.#writer, this.#clock.now(), this.#claimMs);
    try {
      const written =
        first.resourceVersion === undefined
          ? await this.#create(first.name, {}, record)
          : await this.#core.patchNamespacedConfigMap(
              {
                name: first.name,
                namespace: this.#settings.namespace,
                body: {
                  metadata: { resourceVersion: first.resourceVersion, annotations: { [writerAnnotation]: record } },
                },
              },
              mergePatch,
            );
      first.resourceVersion = written.metadata?.resourceVersion;
      first.writer = record;
      for (let shard = 0; shard < shards; shard += 1) first.written[shard] = written.data?.[shardName(shard)];
      this.#claimedAt = this.#clock.now();
      this.#renewAt = this.#claimedAt + this.#renewMs;
      this.#refusedBy = undefined;
      return 'claimed';
    } catch (error) {
      const status = apiStatus(error);
      if (status === 409 || (status === 404 && first.resourceVersion !== undefined)) return 'conflict';
      this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'failed' });
      this.#unhealthy(`could not write the cursor's ${first.name}: ${apiMessage(error)}`, error);
      return 'failed';
    }
  }

  // Another relay writes the cursor: say so (once per writer), count it; `starting`: this one waits.
  #refuse(holder: WriterRecord, starting: boolean): void {
    this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'refused' });
    if (this.#refusedBy === holder.identity) return;
    this.#refusedBy = holder.identity;
    this.#log.error({ writer: holder }, refusal(this.where, holder, starting));
  }

  // Whether this relay holds the cursor now, taking it when it is free; false (said) when another has it.
  async #holding(): Promise<boolean> {
    if (this.#lost) return false;
    if (this.#claimedAt !== undefined) return true;
    const verdict = this.#judge.judge(this.#parts[0]?.writer);
    if (verdict.kind === 'held') {
      this.#lose(verdict.holder);
      return false;
    }
    if ((await this.#claim()) === 'conflict') await this.#reread();
    return this.#held;
  }

  get #held(): boolean {
    return this.#claimedAt !== undefined;
  }

  // Another writer took the cursor over: this relay writes it no more, and nothing waits for it.
  #lose(holder: WriterRecord): void {
    this.#lost = true;
    this.#claimedAt = undefined;
    this.#refuse(holder, false);
    this.#setHealthy(false);
  }

  // Renews this relay's record when a third of claimMs has passed since it was written.
  async #renew(): Promise<void> {
    const now = this.#clock.now();
    if (!this.#renews || this.#lost || this.#claimedAt === undefined || now < this.#renewAt) return;
    // Should it fail, the next try comes sooner than a renewal period; a write that works sets the next.
    this.#renewAt = now + this.#renewMs / 3;
    const claimed = await this.#claim();
    if (claimed === 'conflict') await this.#reread();
  }

  // After a write that lost to another: reads everything again, and keeps, takes or loses the cursor.
  async #reread(): Promise<void> {
    if ((await this.#read()) === undefined) return;
    const verdict = this.#judge.judge(this.#parts[0]?.writer);
    if (verdict.kind === 'held') this.#lose(verdict.holder);
    else if (verdict.kind === 'free' || this.#claimedAt === undefined) {
      this.#claimedAt = undefined;
      await this.#claim();
    }
  }

  // Takes this relay's record away (a requested stop), so that the next relay takes over at once.
  async #giveUp(): Promise<void> {
    const first = this.#parts[0];
    if (this.#lost || this.#claimedAt === undefined || first?.resourceVersion === undefined) return;
    this.#claimedAt = undefined;
    const patch = this.#core.patchNamespacedConfigMap(
      {
        name: first.name,
        namespace: this.#settings.namespace,
        body: { metadata: { resourceVersion: first.resourceVersion, annotations: { [writerAnnotation]: null } } },
      },
      mergePatch,
    );
    // Another writer may have it by now (409), or the API server be gone: the record then goes stale.
    await Promise.race([patch.catch(() => undefined), this.#clock.sleep(giveUpMs)]);
  }

  /** Follows a change the watch emitted. */
  record(change: ResourceChange): void {
    const needed = this.#everything || this.#type.needsTombstone(change.object);
    if (change.type === 'delete') {
      const gone = this.#live.get(change.key) ?? (needed ? entryOf(this.#type, change.object) : undefined);
      this.#live.delete(change.key);
      if (gone !== undefined && gone.uid !== '') this.#deleting.set(change.key, gone);
      return;
    }
    const entry = entryOf(this.#type, change.object);
    const deleting = this.#deleting.get(change.key);
    // A new incarnation under the name: the old one's delete, if still undelivered, keeps no entry.
    if (deleting !== undefined && deleting.uid !== entry.uid) this.#deleting.delete(change.key);
    // An object whose delete would need nothing (a Service that never had a load balancer) is not kept.
    if (needed) this.#live.set(change.key, entry);
    else this.#live.delete(change.key);
  }

  /**
   * Whether a delivery of `key` with `uid` may go: it is recorded, or the cursor is not to record
   * it (not an object a delete needs, another incarnation, a part too full to write), or the
   * cursor is not working (then nothing waits for it).
   */
  durable(key: string, uid: string): boolean {
    if (!this.#healthy || uid === '') return true;
    const intended = this.#deleting.get(key) ?? this.#live.get(key);
    if (intended?.uid !== uid || this.#parts[placeOf(key, this.#parts.length).part]?.overfull === true) return true;
    return this.#recorded.get(key) === uid;
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
        this.#hurry?.();
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
    const stop = (): void => {
      this.#stopping.abort();
    };
    if (signal.aborted) stop();
    signal.addEventListener('abort', stop, { once: true });
    this.#flushAt = this.#clock.now() + this.#settings.flushMs;
    for (;;) {
      const flushDue = await this.#nextWrite(signal);
      if (stopped()) break;
      await this.#renew();
      if (flushDue && listed()) await this.flush(pending());
    }
    await this.#flushing;
    await this.#giveUp();
    this.#release();
  }

  // Waits until the next write is due, and says whether it is a flush (else a renewal of the
  // writer record): `flushMs` after the last flush; or, when a delivery waits for the cursor (now,
  // or once this wait began), `urgentMs`: enough for the other deliveries of a burst to join the
  // same write; or the renewal, a third of claimMs after the record was last written.
  async #nextWrite(signal: AbortSignal): Promise<boolean> {
    const { flushMs } = this.#settings;
    const urgentMs = Math.min(this.#settings.urgentMs ?? defaultCursorUrgentMs, flushMs);
    const cycle = new AbortController();
    const both = AbortSignal.any([signal, cycle.signal]);
    const hurried = new Promise<void>((resolve) => {
      this.#hurry = resolve;
      if (this.#waiters.length > 0) resolve();
    });
    const now = this.#clock.now();
    const waits = [
      this.#clock.sleep(this.#flushAt - now, both).then(() => true),
      hurried.then(async () => this.#clock.sleep(urgentMs, both)).then(() => true),
    ];
    if (this.#claimedAt !== undefined && this.#renews)
      waits.push(this.#clock.sleep(this.#renewAt - now, both).then(() => false));
    try {
      const flush = await Promise.race(waits);
      if (flush) this.#flushAt = this.#clock.now() + flushMs;
      return flush;
    } finally {
      this.#hurry = undefined;
      cycle.abort();
    }
  }

  /**
   * Writes the shards that differ from what was last written; one request per part changed at most.
   * One write at a time: a flush asked for while one runs (the loop's, a stop's) follows it.
   */
  async flush(pending: ReadonlySet<string>): Promise<void> {
    const next = this.#flushing.then(() => this.#flushNow(pending));
    this.#flushing = next.catch(() => undefined);
    return next;
  }

  #flushing: Promise<void> = Promise.resolve();

  async #flushNow(pending: ReadonlySet<string>): Promise<void> {
    if (!(await this.#holding())) return;
    for (const key of [...this.#deleting.keys()]) if (!pending.has(key)) this.#deleting.delete(key);
    const texts = shardTexts(this.#live, this.#deleting, this.#parts.length);
    for (const [index, part] of this.#parts.entries()) {
      const partTexts = texts[index] ?? [];
      const changed = partTexts.flatMap((text, shard) => (text === part.written[shard] ? [] : [shard]));
      if (changed.length === 0 || !this.#fits(part, partTexts)) continue;
      try {
        await this.#write(part, changed, partTexts);
      } catch (error) {
        if (await this.#conflicted(part, error)) return;
        this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'failed' });
        this.#unhealthy(`could not write the cursor's ${part.name}: ${apiMessage(error)}`, error);
        return;
      }
    }
    this.#setHealthy(true);
  }

  // Whether `part` may be written with `texts`: not over partLimitBytes (else logged once, counted, and left as it is).
  #fits(part: Part, texts: readonly string[]): boolean {
    const bytes = texts.reduce((sum, text, shard) => sum + Buffer.byteLength(text) + shardName(shard).length, 0);
    const overfull = bytes > partLimitBytes;
    if (overfull) {
      this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'failed' });
      if (!part.overfull)
        this.#log.error(
          { configMap: part.name, bytes, limit: partLimitBytes, parts: this.#parts.length },
          "a part of the cursor would grow past the API server's object limit; its keys are delivered without it (give the relay more parts, and create their ConfigMaps)",
        );
    }
    part.overfull = overfull;
    if (overfull) this.#release();
    return !overfull;
  }

  // A write that lost to another writer (another leader): read everything again, the next flush
  // writes the difference — unless another relay has taken the cursor over.
  async #conflicted(part: Part, error: unknown): Promise<boolean> {
    const status = apiStatus(error);
    if (status !== 409 && !(status === 404 && part.resourceVersion !== undefined)) return false;
    this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'conflict' });
    this.#log.info({ configMap: part.name }, 'the cursor changed since it was read; reading it again');
    await this.#reread();
    return true;
  }

  // Writes the `changed` shards of `texts` to `part` (creating it the first time), and takes them as recorded.
  async #write(part: Part, changed: readonly number[], texts: readonly string[]): Promise<void> {
    const data = Object.fromEntries(changed.map((shard) => [shardName(shard), texts[shard] ?? '{}']));
    const written =
      part.resourceVersion === undefined
        ? await this.#create(part.name, data)
        : await this.#patch(part.name, part.resourceVersion, data);
    part.resourceVersion = written.metadata?.resourceVersion;
    for (const shard of changed) part.written[shard] = texts[shard];
    this.#recorded = recordedOf(this.#parts.flatMap((p) => p.written));
    this.#metrics.cursorWrites.inc({ resource: this.#type.resource, result: 'written' });
  }

  // Takes what was read as `part`'s last written state; returns its entries by key.
  #adopt(part: Part, configMap: V1ConfigMap | undefined): Map<string, Entry> {
    part.resourceVersion = configMap?.metadata?.resourceVersion;
    part.overfull = false;
    part.writer = configMap?.metadata?.annotations?.[writerAnnotation];
    const entries = new Map<string, Entry>();
    for (let shard = 0; shard < shards; shard += 1) {
      const text = configMap?.data?.[shardName(shard)];
      part.written[shard] = text;
      for (const [key, entry] of parseShard(text, this.#log)) entries.set(key, entry);
    }
    return entries;
  }

  async #create(name: string, data: Record<string, string>, writer?: string): Promise<V1ConfigMap> {
    const full = Object.fromEntries(
      Array.from({ length: shards }, (_, index) => [shardName(index), data[shardName(index)] ?? '{}']),
    );
    return this.#core.createNamespacedConfigMap({
      namespace: this.#settings.namespace,
      body: {
        metadata: {
          name,
          namespace: this.#settings.namespace,
          labels: { 'app.kubernetes.io/managed-by': 'cirrus' },
          annotations: {
            ...(writer === undefined ? {} : { [writerAnnotation]: writer }),
            description:
              `The ${this.#type.resource} cirrus's relay knows, so that a new leader delivers the deletes of those ` +
              'gone meanwhile (ADR 0014). Written by the leading relay; deleting it loses only those deletes.',
          },
        },
        data: full,
      },
    });
  }

  async #patch(name: string, resourceVersion: string, data: Record<string, string>): Promise<V1ConfigMap> {
    return this.#core.patchNamespacedConfigMap(
      {
        name,
        namespace: this.#settings.namespace,
        body: { metadata: { resourceVersion }, data },
      },
      mergePatch,
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
    if (this.#healthy)
      this.#log.error(
        { err: error },
        `${message}; delivering without it: objects deleted while no relay runs will not be delivered as deletes ` +
          "(the relay needs get, create and patch on the cursor's ConfigMaps; or turn the cursor off)",
      );
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
