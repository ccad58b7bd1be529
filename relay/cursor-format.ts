// How the known-keys cursor (./cursor.ts, ADR 0014) lays its keys out in its ConfigMaps: which part
// and shard a key goes to, what is recorded of an object, and the text of each shard.

import type { Logger } from 'pino';
import type { KubeObject, ResourceType } from './resources.ts';

/** Shards per ConfigMap: a write carries the changed sixteenths only. */
export const shards = 16;

/**
 * The most bytes of data (keys and values) a part is written with: the API server refuses a
 * ConfigMap whose data is over 1 MiB (k8s.io/kubernetes pkg/apis/core/validation, ValidateConfigMap:
 * MaxSecretSize); 64 KiB are left for the rest of the object.
 */
export const partLimitBytes = 1024 * 1024 - 64 * 1024;

// What the cursor records of an object: enough to deliver its delete.
export interface Entry {
  readonly uid: string;
  readonly spec?: Readonly<Record<string, unknown>>;
}

/** Each part's shards' texts as they should be: the live entries, and the deletes not yet delivered (which win). */
export function shardTexts(
  live: ReadonlyMap<string, Entry>,
  deleting: ReadonlyMap<string, Entry>,
  parts: number,
): string[][] {
  const buckets = Array.from({ length: parts }, () => Array.from({ length: shards }, () => new Map<string, Entry>()));
  const put = (key: string, entry: Entry): void => {
    const { part, shard } = placeOf(key, parts);
    buckets[part]?.[shard]?.set(key, entry);
  };
  for (const [key, entry] of deleting) put(key, entry);
  for (const [key, entry] of live) if (!deleting.has(key)) put(key, entry);
  return buckets.map((part) =>
    part.map((bucket) =>
      JSON.stringify(Object.fromEntries([...bucket].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))),
    ),
  );
}

export function entryOf(type: ResourceType, object: KubeObject): Entry {
  const uid = object.metadata?.uid ?? '';
  const spec = (object['spec'] ?? {}) as Record<string, unknown>;
  const kept = Object.fromEntries(type.tombstoneSpec.flatMap((field) => (field in spec ? [[field, spec[field]]] : [])));
  return Object.keys(kept).length === 0 ? { uid } : { uid, spec: kept };
}

export function shardName(index: number): string {
  return `keys-${index.toString().padStart(2, '0')}`;
}

// The part and shard of `key` among `parts` parts, by FNV-1a: stable across processes and versions,
// which a new leader reading an old one's cursor needs. With one part, the shard is what it was
// before the cursor had parts. A new leader reads every part whatever it finds there, so a key
// recorded where an older count of parts placed it is still read, and rewritten where it belongs.
export function placeOf(key: string, parts: number): { part: number; shard: number } {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i += 1) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  const unsigned = hash >>> 0;
  return { part: unsigned % parts, shard: Math.floor(unsigned / parts) % shards };
}

export function parseShard(text: string | undefined, log: Logger): [string, Entry][] {
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

export function recordedOf(texts: readonly (string | undefined)[]): Map<string, string> {
  const recorded = new Map<string, string>();
  for (const text of texts) {
    if (text === undefined) continue;
    for (const [key, entry] of Object.entries(JSON.parse(text) as Record<string, Entry>)) recorded.set(key, entry.uid);
  }
  return recorded;
}
