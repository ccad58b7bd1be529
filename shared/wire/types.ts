// The event contract's vocabulary (docs/http-contract.md): the CloudEvent types a
// function accepts and the relay sends, and the names of the extension attributes that carry an
// object's identity or a trigger's purpose. Knative's ApiServerSource (Resource and Reference
// mode) fixes the Kubernetes ones; cirrus's own triggers live under `dev.cirrus-ccm`.

/** The event types a function accepts. */
export const eventTypes = {
  /** ApiServerSource, Resource mode: `data` is the object (for delete, its last known state). */
  resourceAdd: 'dev.knative.apiserver.resource.add',
  resourceUpdate: 'dev.knative.apiserver.resource.update',
  resourceDelete: 'dev.knative.apiserver.resource.delete',
  /** ApiServerSource, Reference mode: `data` is `{ apiVersion, kind, name, namespace }`. */
  refAdd: 'dev.knative.apiserver.ref.add',
  refUpdate: 'dev.knative.apiserver.ref.update',
  refDelete: 'dev.knative.apiserver.ref.delete',
  /** cirrus's own periodic or manual trigger: reconcile everything the function owns; `data` is ignored. */
  reconcileAll: 'dev.cirrus-ccm.reconcile.all',
} as const;

/** One of {@link eventTypes}. */
export type EventType = (typeof eventTypes)[keyof typeof eventTypes];

/** Every accepted type, in a stable order (for error messages). */
export const acceptedEventTypes: readonly EventType[] = Object.values(eventTypes);

/** What an event asks for: one object, carried whole (`resource`) or by reference (`ref`), or `all`. */
export type EventMode = 'resource' | 'ref' | 'all';

const modes: ReadonlyMap<string, EventMode> = new Map<EventType, EventMode>([
  [eventTypes.resourceAdd, 'resource'],
  [eventTypes.resourceUpdate, 'resource'],
  [eventTypes.resourceDelete, 'resource'],
  [eventTypes.refAdd, 'ref'],
  [eventTypes.refUpdate, 'ref'],
  [eventTypes.refDelete, 'ref'],
  [eventTypes.reconcileAll, 'all'],
]);

/** The mode of an accepted event type; undefined for any other type. */
export function eventMode(type: string): EventMode | undefined {
  return modes.get(type);
}

/**
 * The extension attributes of the contract, by role. ApiServerSource copies the object's
 * identity into the first four (an empty `namespace` for a cluster-scoped kind); the relay's
 * `reconcile.all` triggers name the function they are for and why they were sent.
 */
export const extensionNames = {
  kind: 'kind',
  apiVersion: 'apiversion',
  name: 'name',
  namespace: 'namespace',
  /** Trigger: the function it is for, e.g. `node-lifecycle`. */
  target: 'cirrustarget',
  /** Trigger: why it was sent (`periodic`, `nodes`). */
  reason: 'cirrusreason',
  /**
   * A digest of the Nodes as the relay's watch sees them when it sends the event: on service-lb's
   * events, of the node set its load balancers should have; on routes', of every Node's route view
   * (ADR 0030). A hint to pick a cached node list by; an event without it (ApiServerSource) makes
   * the function read the nodes itself.
   */
  nodeSet: 'cirrusnodeset',
  /**
   * Trigger: the share of the relay's cloud call budget lent to the pass while the trigger is in
   * flight, as `<calls a second>/<burst>` (e.g. `2.5/2`); the pass's cloud calls are paced to it
   * (ADR 0015). A trigger without it is not paced.
   */
  budget: 'cirrusbudget',
} as const;

/** The value of the `cirrusbudget` extension for `rate` calls a second and `burst`. */
export function formatBudget(share: { readonly rate: number; readonly burst: number }): string {
  return `${share.rate}/${share.burst}`;
}

/** The `cirrusbudget` extension's value read back; undefined when it is not `<rate > 0>/<whole burst >= 1>`. */
export function parseBudget(value: string): { rate: number; burst: number } | undefined {
  const match = /^(\d+(?:\.\d+)?(?:e-?\d+)?)\/(\d+)$/.exec(value);
  if (match === null) return undefined;
  const rate = Number(match[1]);
  const burst = Number(match[2]);
  return Number.isFinite(rate) && rate > 0 && Number.isSafeInteger(burst) && burst >= 1 ? { rate, burst } : undefined;
}

/** `source` of the relay's own `reconcile.all` triggers. */
export const triggerSource = '/cirrus/relay';
