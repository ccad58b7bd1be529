// Which change goes to which function: the routing table (destinations, each fed what one function
// needs, and the periodic triggers) and the pure decisions behind each feed.
//
// Feeds, after the Go controllers' event handlers (reference/ccm-behaviour.md):
// - node-init: per-node events for Nodes carrying the uninitialized taint;
// - node-lifecycle: per-node events for Nodes that are not Ready, or still carry the shutdown
//   taint (so that it comes off once they are Ready again);
// - service-lb: per-Service events for Services that have or had a load balancer, and one
//   coalesced `reconcile.all` when a node change can change load balancers' node sets (a node
//   added or deleted; its exclude label, providerID, deletionTimestamp or ToBeDeletedByClusterAutoscaler
//   taint changed — the service controller's shouldSyncUpdatedNode and stable node predicates);
// - routes: one coalesced `reconcile.all` when a node is added or deleted or its podCIDR(s) change;
// - all: everything (what Knative's K_SINK receives): every Node and Service event, and every
//   trigger, each naming the function it is for.

import { readFile } from 'node:fs/promises';
import { load, YAMLException } from 'js-yaml';
import { z } from 'zod';
import { finalizer as loadBalancerFinalizer, inLoadBalancers, syncedAnnotation } from '../service-lb/predicates.ts';
import type { V1Node } from '@kubernetes/client-node';
import { taintShutdown, taintUninitialized } from '../../shared/kube/well-known.ts';
import type { KubeObject } from './resources.ts';
import type { Change, ChangeType } from './watch.ts';

/** The functions the relay feeds. */
export const functionNames = ['node-init', 'node-lifecycle', 'service-lb', 'routes'] as const;
export type FunctionName = (typeof functionNames)[number];

/** What a destination receives: one function's feed, or everything. */
export type Feed = FunctionName | 'all';

/** Where events go. */
export interface Destination {
  /** Unique; the metrics label. */
  readonly name: string;
  readonly url: string;
  readonly feed: Feed;
}

/** A validated routing table. */
export interface RoutingTable {
  readonly destinations: readonly Destination[];
  /** Period of each function's `reconcile.all` trigger in ms; 0 sends none. */
  readonly periods: Readonly<Record<FunctionName, number>>;
}

/**
 * The Go CCM's periods: `--node-monitor-period` 5 s (node-lifecycle), `--route-reconciliation-period`
 * 10 s (routes), `--node-status-update-frequency` 5 min (node-init's address refresh). The service
 * controller has no periodic pass over all Services (its resyncs are filtered out), so none by default.
 */
export const defaultPeriods: Readonly<Record<FunctionName, number>> = {
  'node-init': 300_000,
  'node-lifecycle': 5_000,
  'service-lb': 0,
  routes: 10_000,
};

/** The destination name K_SINK gets. */
export const sinkName = 'sink';

/** A routing table that cannot be used; `problems` lists each thing wrong. */
export class RoutingError extends Error {
  override readonly name = 'RoutingError';
  readonly problems: readonly string[];
  constructor(message: string, problems: readonly string[] = [message]) {
    super(problems.length > 1 || problems[0] !== message ? `${message}: ${problems.join('; ')}` : message);
    this.problems = problems;
  }
}

const goDuration = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/;
const unitMs: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go duration (`300ms`, `5s`, `1m30s`, `0`) in ms; undefined when `text` is not one. */
export function parseDuration(text: string): number | undefined {
  const value = text.trim();
  if (value === '0') return 0;
  if (!goDuration.test(value)) return undefined;
  let total = 0;
  for (const [, amount = '0', , unit = 's'] of value.matchAll(/(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) total += Number(amount) * (unitMs[unit] ?? 0);
  return Math.round(total);
}

const urlSchema = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });
const durationSchema = z.union([z.number(), z.string()], { error: 'must be a duration such as 300ms, 5s, 1m30s or 0' }).transform((value, context) => {
  const ms = typeof value === 'number' ? value : parseDuration(value);
  if (ms === undefined || ms < 0) context.addIssue({ code: 'custom', message: `${JSON.stringify(value)} is not a duration such as 300ms, 5s, 1m30s or 0` });
  return ms ?? 0;
});
const feedSchema = z.enum([...functionNames, 'all'], { error: `must be one of ${[...functionNames, 'all'].join(', ')}` });
const destinationSchema = z.union([urlSchema, z.strictObject({ url: urlSchema, feed: feedSchema.optional() })]);

/**
 * The routing file (YAML or JSON). `destinations` maps a name to a URL or `{url, feed}`; a name
 * that is a function name (or `all`) is its own feed. `periods` maps a function to a Go duration
 * (or ms as a number); 0 turns its trigger off.
 *
 * ```yaml
 * destinations:
 *   node-init: http://node-init.cirrus.svc.cluster.local
 *   service-lb: http://service-lb.cirrus.svc.cluster.local
 *   broker: { url: http://broker-ingress.knative-eventing.svc.cluster.local/cirrus/default, feed: all }
 * periods:
 *   node-lifecycle: 5s
 *   routes: 0
 * ```
 */
export const routingFileSchema = z.strictObject({
  destinations: z.record(z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'names are lower-case letters, digits and "-"'), destinationSchema).optional(),
  periods: z.partialRecord(z.enum(functionNames), durationSchema).optional(),
});

/** The routing file's contents, before defaults. */
export type RoutingFile = z.infer<typeof routingFileSchema>;

/** Where the routing table comes from; later sources override earlier ones. */
export interface RoutingSources {
  /** A parsed routing file (see {@link routingFileSchema}), e.g. from {@link loadRoutingFile}. */
  readonly file?: unknown;
  /** `--to` values, `<function or all>=<url>`; each replaces a file destination of that name. */
  readonly to?: readonly string[];
  /** Period overrides in ms (from flags), 0 for off. */
  readonly periods?: Partial<Record<FunctionName, number>>;
  /** Knative's K_SINK: a destination named `sink` fed everything. */
  readonly sink?: string | undefined;
}

/**
 * Builds and validates the routing table: file, then `--to` flags, then K_SINK, then period
 * overrides, on top of {@link defaultPeriods}. Throws RoutingError listing every problem (an
 * invalid URL or feed, a `--to` without `=`, an unknown function, no destination at all).
 */
export function buildRoutingTable(sources: RoutingSources): RoutingTable {
  const problems: string[] = [];
  const parsed = routingFileSchema.safeParse(sources.file ?? {});
  if (!parsed.success) problems.push(...parsed.error.issues.map((issue) => `routing file: ${issue.path.length === 0 ? '' : `${issue.path.join('.')}: `}${issue.message}`));
  const destinations = collectDestinations(parsed.data?.destinations ?? {}, sources, problems);
  const periods = { ...defaultPeriods, ...parsed.data?.periods, ...sources.periods };
  problems.push(...periodProblems(periods));
  if (problems.length === 0 && destinations.size === 0) problems.push('no destination: pass --to <function>=<url>, a routing file, or set K_SINK');
  if (problems.length > 0) throw new RoutingError('invalid relay routing', problems);
  return { destinations: [...destinations.values()], periods };
}

function collectDestinations(file: NonNullable<RoutingFile['destinations']>, sources: RoutingSources, problems: string[]): Map<string, Destination> {
  const destinations = new Map<string, Destination>();
  for (const [name, value] of Object.entries(file)) {
    addDestination(destinations, typeof value === 'string' ? { name, url: value } : { name, ...value }, problems, 'routing file');
  }
  for (const flag of sources.to ?? []) parseTo(flag, destinations, problems);
  if (sources.sink !== undefined && sources.sink !== '') addDestination(destinations, { name: sinkName, url: sources.sink, feed: 'all' }, problems, 'K_SINK');
  return destinations;
}

function periodProblems(periods: Record<string, number>): string[] {
  return Object.entries(periods).filter(([, ms]) => !Number.isFinite(ms) || ms < 0).map(([name, ms]) => `period of ${name}: must be 0 or more ms, got ${ms}`);
}

function parseTo(flag: string, destinations: Map<string, Destination>, problems: string[]): void {
  const at = flag.indexOf('=');
  if (at <= 0) {
    problems.push(`--to ${flag}: expected <function>=<url>, e.g. node-init=http://node-init.cirrus.svc`);
    return;
  }
  addDestination(destinations, { name: flag.slice(0, at), url: flag.slice(at + 1) }, problems, '--to');
}

function addDestination(
  destinations: Map<string, Destination>,
  entry: { readonly name: string; readonly url: string; readonly feed?: Feed | undefined },
  problems: string[],
  origin: string,
): void {
  const feed = entry.feed ?? feedSchema.safeParse(entry.name).data;
  if (feed === undefined) {
    problems.push(`${origin} ${entry.name}: not a function (${functionNames.join(', ')}) or "all"; give a feed for other names`);
    return;
  }
  if (!urlSchema.safeParse(entry.url).success) {
    problems.push(`${origin} ${entry.name}: "${entry.url}" must be an http:// or https:// URL`);
    return;
  }
  destinations.set(entry.name, { name: entry.name, url: entry.url, feed });
}

/**
 * Reads a routing file (YAML or JSON) for {@link buildRoutingTable}'s `file`. Throws RoutingError
 * naming the file when it cannot be read or parsed; validation happens in buildRoutingTable.
 */
export async function loadRoutingFile(path: string): Promise<unknown> {
  try {
    return load(await readFile(path, 'utf8'));
  } catch (error) {
    const reason = error instanceof YAMLException ? error.message : (error as Error).message;
    throw new RoutingError(`routing file ${path}: ${reason}`);
  }
}

/**
 * Knative's ContainerSource/SinkBinding convention: the sink URL from `K_SINK`, and extensions to
 * add to every event from `K_CE_OVERRIDES` (`{"extensions": {"name": "value"}}`). Throws
 * RoutingError when K_CE_OVERRIDES is not that shape or names an extension that is not lower-case
 * letters and digits.
 */
export function readKnativeEnvironment(env: NodeJS.ProcessEnv): { readonly sink?: string; readonly ceOverrides?: Readonly<Record<string, string>> } {
  const sink = env['K_SINK'] === undefined || env['K_SINK'] === '' ? undefined : env['K_SINK'];
  const overrides = env['K_CE_OVERRIDES'];
  if (overrides === undefined || overrides === '') return sink === undefined ? {} : { sink };
  let parsed: unknown;
  try {
    parsed = JSON.parse(overrides);
  } catch {
    throw new RoutingError('K_CE_OVERRIDES: not JSON');
  }
  const result = ceOverridesSchema.safeParse(parsed);
  if (!result.success) throw new RoutingError('K_CE_OVERRIDES', result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`));
  const ceOverrides = Object.fromEntries(Object.entries(result.data.extensions ?? {}).map(([name, value]) => [name, String(value)]));
  return sink === undefined ? { ceOverrides } : { sink, ceOverrides };
}

const ceOverridesSchema = z.object({
  extensions: z.record(z.string().regex(/^[a-z0-9]{1,20}$/, 'extension names are 1 to 20 lower-case letters and digits'), z.union([z.string(), z.number(), z.boolean()])).optional(),
});

/** What the relay sends: one object's change, or a `reconcile.all` for a function. */
export type Outgoing =
  | { readonly kind: 'object'; readonly change: Change }
  | { readonly kind: 'trigger'; readonly target: FunctionName; readonly reason: 'periodic' | 'nodes' };

/** One delivery to make: to which destination, under which queue key. */
export interface Routed {
  readonly destination: Destination;
  /** The per-destination queue key: the object key, or `reconcile.all/<function>`. */
  readonly key: string;
  readonly outgoing: Outgoing;
}

/** The queue key of a function's `reconcile.all`. */
export function triggerKey(target: FunctionName): string {
  return `reconcile.all/${target}`;
}

/** The deliveries one change makes under `table`. */
export function route(table: RoutingTable, change: Change): Routed[] {
  const routed: Routed[] = [];
  for (const destination of table.destinations) {
    for (const outgoing of feeds[destination.feed](change)) {
      routed.push({ destination, key: outgoing.kind === 'object' ? change.key : triggerKey(outgoing.target), outgoing });
    }
  }
  return routed;
}

const isNode = (change: Change): boolean => change.resource.kind === 'Node';
const objectEvent = (change: Change): Outgoing[] => [{ kind: 'object', change }];
const nodesTrigger = (target: FunctionName): Outgoing[] => [{ kind: 'trigger', target, reason: 'nodes' }];

const serviceLbFeed = (change: Change): Outgoing[] => {
  if (isNode(change)) return nodeSetMayChange(change) ? nodesTrigger('service-lb') : [];
  return involvesLoadBalancer(change.object) || involvesLoadBalancer(change.previous) ? objectEvent(change) : [];
};
const routesFeed = (change: Change): Outgoing[] => (isNode(change) && routesMayChange(change) ? nodesTrigger('routes') : []);

// What each feed makes of a change.
const feeds: Readonly<Record<Feed, (change: Change) => Outgoing[]>> = {
  'node-init': (change) => (isNode(change) && needsInitialization(change) ? objectEvent(change) : []),
  'node-lifecycle': (change) => (isNode(change) && needsLifecycleCheck(change) ? objectEvent(change) : []),
  'service-lb': serviceLbFeed,
  routes: routesFeed,
  all: (change) => [...objectEvent(change), ...(isNode(change) ? [...serviceLbFeed(change), ...routesFeed(change)] : [])],
};

interface Taint {
  readonly key?: string;
}

function taints(node: KubeObject | undefined): readonly Taint[] {
  const spec = node?.['spec'] as { taints?: readonly Taint[] } | undefined;
  return spec?.taints ?? [];
}

function hasTaint(node: KubeObject | undefined, key: string): boolean {
  return taints(node).some((taint) => taint.key === key);
}

/** A live node still carrying the uninitialized taint: node-init has work to do. */
export function needsInitialization(change: Change): boolean {
  return change.type !== 'delete' && hasTaint(change.object, taintUninitialized);
}

/** The status of the node's Ready condition; `Unknown` when it has none (as the Go controller reads it). */
export function readyStatus(node: KubeObject | undefined): string {
  const status = node?.['status'] as { conditions?: readonly { type?: string; status?: string }[] } | undefined;
  return status?.conditions?.find((condition) => condition.type === 'Ready')?.status ?? 'Unknown';
}

/** A live node that is not Ready, or Ready with the shutdown taint still on: node-lifecycle has work to do. */
export function needsLifecycleCheck(change: Change): boolean {
  if (change.type === 'delete') return false;
  return readyStatus(change.object) !== 'True' || hasTaint(change.object, taintShutdown);
}

// The service-lb predicates are typed for client-node's V1Node; they read only labels, taints and
// deletionTimestamp (for presence), which the raw JSON has in the same shape.
function asNode(object: KubeObject): V1Node {
  return object as unknown as V1Node;
}

function providerId(node: KubeObject | undefined): string | undefined {
  return (node?.['spec'] as { providerID?: string } | undefined)?.providerID;
}

/**
 * A node change after which a load balancer's node set may differ: a node added or deleted, or
 * one whose membership (exclude label, deletionTimestamp, ToBeDeletedByClusterAutoscaler taint)
 * or providerID changed.
 */
export function nodeSetMayChange(change: Change): boolean {
  if (change.type !== 'update' || change.previous === undefined) return true;
  return inLoadBalancers(asNode(change.previous)) !== inLoadBalancers(asNode(change.object)) || providerId(change.previous) !== providerId(change.object);
}

function podCidrs(node: KubeObject | undefined): string {
  const spec = node?.['spec'] as { podCIDR?: string; podCIDRs?: readonly string[] } | undefined;
  return JSON.stringify([spec?.podCIDR ?? '', spec?.podCIDRs ?? []]);
}

/** A node change that may change routes: a node added or deleted, or its podCIDR(s) changed. */
export function routesMayChange(change: Change): boolean {
  if (change.type !== 'update' || change.previous === undefined) return true;
  return podCidrs(change.previous) !== podCidrs(change.object);
}

/**
 * A Service service-lb must hear about: of type LoadBalancer, or carrying cirrus's finalizer or
 * sync record (a load balancer may exist that must go). Other Services are no work for it.
 */
export function involvesLoadBalancer(service: KubeObject | undefined): boolean {
  if (service === undefined) return false;
  const type = (service['spec'] as { type?: string } | undefined)?.type;
  const metadata = service.metadata;
  return type === 'LoadBalancer' || (metadata?.finalizers ?? []).includes(loadBalancerFinalizer) || metadata?.annotations?.[syncedAnnotation] !== undefined;
}

/**
 * Merges two deliveries waiting for the same key, the newer state winning; undefined when they
 * must both go (a delete of one incarnation of a name and the add of the next: different UIDs).
 * An add followed by updates stays an add; anything followed by a delete is a delete, which is
 * delivered however short-lived the object was.
 */
export function mergeOutgoing(older: Outgoing, newer: Outgoing): Outgoing | undefined {
  if (older.kind === 'trigger' || newer.kind === 'trigger') return older.kind === newer.kind ? newer : undefined;
  if (older.change.object.metadata?.uid !== newer.change.object.metadata?.uid) return undefined;
  const type: ChangeType = older.change.type === 'add' && newer.change.type === 'update' ? 'add' : newer.change.type;
  return { kind: 'object', change: { ...newer.change, type, previous: older.change.previous } };
}

/** Whether `feed` needs the watch of `kind`: every feed needs Nodes (service-lb for its node-set triggers), only service-lb and all need Services. */
export function feedWatches(feed: Feed, kind: 'Node' | 'Service'): boolean {
  return kind === 'Node' || feed === 'service-lb' || feed === 'all';
}
