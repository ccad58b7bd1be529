// Kubernetes objects as the raw JSON the API server sends, for code that reads a few fields and
// passes the rest on untouched (the relay, the functions' feeds) without client-node's typed
// classes, whose deserialization costs ~0.1 ms per Node and turns timestamps into Dates.

/** Object metadata, as far as such code reads it; everything else is kept as it came. */
export interface ObjectMeta {
  readonly name?: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
  readonly deletionTimestamp?: string | null;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly finalizers?: readonly string[];
  readonly [field: string]: unknown;
}

/** A Kubernetes object as JSON. */
export interface KubeObject {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: ObjectMeta;
  readonly [field: string]: unknown;
}
