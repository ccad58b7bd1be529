// The chaos cloud's JSON-lines file (provider.ts writes it): what the cloud was asked and what it
// did, read back into the load balancers that exist and the mutations that changed nothing.

/** One cloud call, as asked (reads included), before its latency and errors. */
export interface CallRecord {
  readonly kind: 'call';
  readonly method: string;
  /** Unix ms. */
  readonly at: number;
  readonly pid: number;
}

/** A load-balancer mutation that returned. */
export interface LbRecord {
  readonly kind: 'ensure' | 'update' | 'delete';
  /** namespace/name of the Service. */
  readonly key: string;
  readonly uid: string;
  /** `TCP/80`, sorted. */
  readonly ports: readonly string[];
  /** The node names, sorted (ensure and update). */
  readonly nodes?: readonly string[];
  /** `name=providerID` of each node, sorted (ensure and update): what a cloud would target. */
  readonly targets?: readonly string[];
  readonly at: number;
  readonly pid: number;
}

export type CloudRecord = CallRecord | LbRecord;

/** A load balancer as the cloud has it. */
export interface CloudLb {
  readonly uid: string;
  readonly ports: readonly string[];
  readonly nodes: readonly string[];
  readonly targets: readonly string[];
}

/** Parses the file; a line cut short by a SIGKILL mid-write (never seen: writes are synchronous) is skipped. */
export function parseRecords(text: string): CloudRecord[] {
  const records: CloudRecord[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      records.push(JSON.parse(line) as CloudRecord);
    } catch {
      // a torn last line
    }
  }
  return records;
}

/** The load balancers after every mutation, by Service key. */
export function replayLoadBalancers(records: readonly CloudRecord[]): Map<string, CloudLb> {
  return replay(records).lbs;
}

/** What the mutations did: the load balancers left, and the mutations that changed nothing. */
export interface Replayed {
  readonly lbs: Map<string, CloudLb>;
  readonly mutations: number;
  /**
   * An ensure that found the same load balancer, an update to the same targets, a delete of
   * nothing. (An update to the same node names with a provider ID newly set is not redundant: the
   * Go CCM also updates load balancers when a node's provider ID changes.)
   */
  readonly redundant: number;
  readonly redundantByKind: Record<string, number>;
}

export function replay(records: readonly CloudRecord[]): Replayed {
  const lbs = new Map<string, CloudLb>();
  let mutations = 0;
  let redundant = 0;
  const redundantByKind: Record<string, number> = {};
  for (const record of records) {
    if (record.kind === 'call') continue;
    mutations++;
    if (apply(lbs, record)) {
      redundant++;
      redundantByKind[record.kind] = (redundantByKind[record.kind] ?? 0) + 1;
    }
  }
  return { lbs, mutations, redundant, redundantByKind };
}

/** The most calls in any window of `windowMs` (a sliding window over the call times). */
export function peakCalls(records: readonly CloudRecord[], windowMs: number): number {
  const times = records.flatMap((r) => (r.kind === 'call' ? [r.at] : [])).sort((a, b) => a - b);
  let peak = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while ((times[end] ?? 0) - (times[start] ?? 0) >= windowMs) start++;
    peak = Math.max(peak, end - start + 1);
  }
  return peak;
}

// Applies one mutation; true when it changed nothing.
function apply(lbs: Map<string, CloudLb>, record: LbRecord): boolean {
  const before = lbs.get(record.key);
  const nodes = record.nodes ?? [];
  const targets = record.targets ?? nodes;
  if (record.kind === 'delete') {
    lbs.delete(record.key);
    return before === undefined;
  }
  if (record.kind === 'update') {
    if (before === undefined) return false;
    lbs.set(record.key, { ...before, nodes, targets });
    return equal(before.targets, targets);
  }
  lbs.set(record.key, { uid: record.uid, ports: record.ports, nodes, targets });
  return (
    before !== undefined &&
    before.uid === record.uid &&
    equal(before.ports, record.ports) &&
    equal(before.targets, targets)
  );
}

function equal(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
