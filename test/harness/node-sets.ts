// The node sets of the benchmark cloud's updateLoadBalancer log, kept and served small, alike in
// both clouds (this file for cirrus, bench/go-ccm/calls.go for the Go CCM): each node name gets a
// number the first time the cloud sees it, and an update's node set is the bitset of its names'
// numbers (bit i is bit i % 8 of byte ⌊i / 8⌋, up to the last byte with a bit set), in base64.
// The same set is the same string whatever the order of its nodes (upstream's service controller
// lists them from its informer's store in map order: k8s.io/cloud-provider,
// controllers/service/controller.go, listWithPredicates), and each distinct set is kept once.
// At 5,000 Nodes a set is ~850 characters where its names were ~70 KB.
//
// The harness, in its own process, turns a set back into names with the cloud's table of names
// (NodeSetReader), so that reading the log costs the CCM's process no more than a page of these.

/** Numbers node names and keeps each distinct node set once, as its bitset in base64. */
export class NodeSetRecorder {
  /** Each node name seen, in the order first seen: a name's number is its index. */
  readonly names: string[] = [];
  readonly #ids = new Map<string, number>();
  readonly #sets = new Map<string, string>();
  #bits = new Uint8Array(64);

  /** The set of the names of `items`, the one string of its kind that this recorder keeps. */
  record<T>(items: readonly T[], nameOf: (item: T) => string): string {
    let top = -1;
    for (const item of items) {
      const name = nameOf(item);
      let id = this.#ids.get(name);
      if (id === undefined) {
        id = this.names.length;
        this.#ids.set(name, id);
        this.names.push(name);
      }
      const byte = id >> 3;
      if (byte >= this.#bits.length) {
        const grown = new Uint8Array(Math.max(byte + 1, this.#bits.length * 2));
        grown.set(this.#bits);
        this.#bits = grown;
      }
      this.#bits[byte] = (this.#bits[byte] ?? 0) | (1 << (id & 7));
      top = Math.max(top, byte);
    }
    const used = this.#bits.subarray(0, top + 1);
    const set = Buffer.from(used.buffer, used.byteOffset, used.length).toString('base64');
    used.fill(0);
    let kept = this.#sets.get(set);
    if (kept === undefined) this.#sets.set(set, (kept = set));
    return kept;
  }
}

/** Turns sets back into node names, given the recorder's names (appended as they come). */
export class NodeSetReader {
  readonly names: string[] = [];
  // One array per distinct set, shared by every update of it.
  readonly #decoded = new Map<string, string[]>();

  /** The names of `set`, in the order of their numbers; the same array for the same set. */
  decode(set: string): string[] {
    let names = this.#decoded.get(set);
    if (names !== undefined) return names;
    names = [];
    const bits = Buffer.from(set, 'base64');
    for (let byte = 0; byte < bits.length; byte++) {
      const value = bits[byte] ?? 0;
      for (let bit = 0; bit < 8; bit++) {
        if ((value & (1 << bit)) === 0) continue;
        const name = this.names[byte * 8 + bit];
        if (name === undefined) throw new Error(`node set names node ${byte * 8 + bit}, of ${this.names.length} known`);
        names.push(name);
      }
    }
    this.#decoded.set(set, names);
    return names;
  }
}
