// Which change goes to which function: the routing table (destinations, each fed what one function
// needs, and the periodic triggers). What each function receives is its own feed, from the
// catalogue (functions/catalogue.ts, passed in by the composition root); the destination `all`
// (what Knative's K_SINK receives) gets every Node and Service event and every function's trigger,
// each naming the function it is for.

import { readFile } from 'node:fs/promises';
import { load, YAMLException } from 'js-yaml';
import { z } from 'zod';
import type { ChangeType, FunctionEntry } from '../shared/catalogue.ts';
import type { Ownership } from '../shared/cloud/ownership.ts';
import { parseDuration } from '../shared/duration.ts';
import { destinationFlag, type DestinationEntry } from './destination-flag.ts';
import { ownerGate, providerProblem } from './owners.ts';
import type { KubeObject, ResourceChange, ResourceType } from './resources.ts';

/** The part of a catalogue entry the relay reads. */
export type RoutedFunction = Pick<
  FunctionEntry,
  'name' | 'feed' | 'watches' | 'period' | 'fanOut' | 'nodeSetDigest' | 'cloudCallsPerObject'
>;

/**
 * The objects the relay knows of a kind, by key, for a fan-out — what it keeps of each (resources.ts
 * `retained`: no Node status); undefined when it does not watch that kind.
 */
export type Known = (
  kind: string,
) => { readonly resource: ResourceType; readonly objects: Iterable<readonly [string, KubeObject]> } | undefined;

const noneKnown: Known = () => undefined;

/** What a destination receives: one function's feed (by its name), or everything (`all`). */
export type Feed = string;

/** Where events go. */
export interface Destination {
  /** Unique; the metrics label. */
  readonly name: string;
  readonly url: string;
  readonly feed: Feed;
  /**
   * In a split hybrid deployment, the providers whose Nodes and Services it serves (./owners.ts);
   * undefined: every object, as with one provider.
   */
  readonly providers?: readonly string[] | undefined;
}

/** A validated routing table. */
export interface RoutingTable {
  readonly destinations: readonly Destination[];
  /** The functions fed, by name. */
  readonly functions: ReadonlyMap<string, RoutedFunction>;
  /** Period of each function's `reconcile.all` trigger in ms; 0 sends none. */
  readonly periods: Readonly<Record<string, number>>;
  /** The deployment's ownership rules (several providers), which destinations naming providers route by. */
  readonly ownership?: Ownership | undefined;
}

/** Each function's default period (its catalogue entry's). */
export function defaultPeriods(catalogue: readonly RoutedFunction[]): Record<string, number> {
  return Object.fromEntries(catalogue.map((entry) => [entry.name, entry.period.defaultMs]));
}

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

const urlSchema = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });
const durationSchema = z
  .union([z.number(), z.string()], { error: 'must be a duration such as 300ms, 5s, 1m30s or 0' })
  .transform((value, context) => {
    const ms = typeof value === 'number' ? value : parseDuration(value);
    if (ms === undefined || ms < 0)
      context.addIssue({
        code: 'custom',
        message: `${JSON.stringify(value)} is not a duration such as 300ms, 5s, 1m30s or 0`,
      });
    return ms ?? 0;
  });
const nameRegex = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const oneOf = (names: readonly string[]): z.ZodString =>
  z.string().refine((name) => names.includes(name), `must be one of ${names.join(', ')}`);

/**
 * The routing file (YAML or JSON). `destinations` maps a name to a URL or `{url, feed, providers}`;
 * a name that is a function name (or `all`) is its own feed; `providers` names the providers whose
 * Nodes and Services the destination serves (a split hybrid deployment, ./owners.ts). `periods`
 * maps a function to a Go duration (or ms as a number); 0 turns its trigger off.
 *
 * ```yaml
 * destinations:
 *   node-init: http://node-init.cirrus.svc.cluster.local
 *   service-lb: http://service-lb.cirrus.svc.cluster.local
 *   broker: { url: http://broker-ingress.knative-eventing.svc.cluster.local/cirrus/default, feed: all }
 *   node-init-aws: { url: http://node-init-aws.cirrus.svc.cluster.local, feed: node-init, providers: [aws] }
 * periods:
 *   node-lifecycle: 5s
 *   routes: 0
 * ```
 */
function routingFileSchema(names: readonly string[]) {
  const destinationSchema = z.union([
    urlSchema,
    z.strictObject({
      url: urlSchema,
      feed: oneOf([...names, 'all']).optional(),
      providers: z.array(z.string().regex(nameRegex, 'must be a provider name')).min(1).optional(),
    }),
  ]);
  return z.strictObject({
    destinations: z
      .record(z.string().regex(nameRegex, 'names are lower-case letters, digits and "-"'), destinationSchema)
      .optional(),
    periods: z.record(oneOf(names), durationSchema).optional(),
  });
}

// The routing file's contents, before defaults.
type RoutingFile = z.infer<ReturnType<typeof routingFileSchema>>;

/** Where the routing table comes from; later sources override earlier ones. */
export interface RoutingSources {
  /** A parsed routing file (see {@link routingFileSchema}), e.g. from {@link loadRoutingFile}. */
  readonly file?: unknown;
  /**
   * `--to` values, `<function or all>=<url>`, or `<function or all>@<provider>=<url>` for a
   * destination serving one provider's objects (named `<function>-<provider>`, ./destination-flag.ts);
   * each replaces a file destination of that name.
   */
  readonly to?: readonly string[];
  /** The deployment's ownership rules (several providers), which destinations naming providers need. */
  readonly ownership?: Ownership | undefined;
  /** Period overrides in ms (from flags) by function name, 0 for off. */
  readonly periods?: Readonly<Record<string, number>>;
  /** Knative's K_SINK: a destination named `sink` fed everything. */
  readonly sink?: string | undefined;
}

/**
 * Builds and validates the routing table for the functions of `catalogue`: file, then `--to`
 * flags, then K_SINK, then period overrides, on top of each function's default period. Throws
 * RoutingError listing every problem (an invalid URL or feed, a `--to` without `=`, an unknown
 * function, providers without ownership rules or not among them, no destination at all).
 */
export function buildRoutingTable(catalogue: readonly RoutedFunction[], sources: RoutingSources): RoutingTable {
  const problems: string[] = [];
  const names = catalogue.map((entry) => entry.name);
  const parsed = routingFileSchema(names).safeParse(sources.file ?? {});
  if (!parsed.success)
    problems.push(
      ...parsed.error.issues.map(
        (issue) => `routing file: ${issue.path.length === 0 ? '' : `${issue.path.join('.')}: `}${issue.message}`,
      ),
    );
  const destinations = collectDestinations(names, parsed.data?.destinations ?? {}, sources, problems);
  const periods = { ...defaultPeriods(catalogue), ...parsed.data?.periods, ...sources.periods };
  problems.push(...periodProblems(names, periods));
  if (problems.length === 0 && destinations.size === 0)
    problems.push('no destination: pass --to <function>=<url>, a routing file, or set K_SINK');
  if (problems.length > 0) throw new RoutingError('invalid relay routing', problems);
  return {
    destinations: [...destinations.values()],
    functions: new Map(catalogue.map((entry) => [entry.name, entry])),
    periods,
    ...(sources.ownership === undefined ? {} : { ownership: sources.ownership }),
  };
}

function collectDestinations(
  names: readonly string[],
  file: NonNullable<RoutingFile['destinations']>,
  sources: RoutingSources,
  problems: string[],
): Map<string, Destination> {
  const destinations = new Map<string, Destination>();
  const add = (entry: DestinationEntry, origin: string): void => {
    addDestination(names, destinations, entry, { problems, origin, ownership: sources.ownership });
  };
  for (const [name, value] of Object.entries(file))
    add(typeof value === 'string' ? { name, url: value } : { name, ...value }, 'routing file');
  for (const flag of sources.to ?? []) {
    const entry = destinationFlag(flag, names);
    if (typeof entry === 'string') problems.push(`--to ${flag}: ${entry}`);
    else add(entry, '--to');
  }
  if (sources.sink !== undefined && sources.sink !== '')
    add({ name: sinkName, url: sources.sink, feed: 'all' }, 'K_SINK');
  return destinations;
}

function periodProblems(names: readonly string[], periods: Record<string, number>): string[] {
  return Object.entries(periods).flatMap(([name, ms]) => {
    if (!names.includes(name)) return [`period of ${name}: not a function (${names.join(', ')})`];
    return !Number.isFinite(ms) || ms < 0 ? [`period of ${name}: must be 0 or more ms, got ${ms}`] : [];
  });
}

function addDestination(
  names: readonly string[],
  destinations: Map<string, Destination>,
  entry: DestinationEntry,
  { problems, origin, ownership }: { problems: string[]; origin: string; ownership: Ownership | undefined },
): void {
  const feed = entry.feed ?? (entry.name === 'all' || names.includes(entry.name) ? entry.name : undefined);
  if (feed === undefined) {
    problems.push(
      `${origin} ${entry.name}: not a function (${names.join(', ')}) or "all"; give a feed for other names`,
    );
    return;
  }
  if (!urlSchema.safeParse(entry.url).success) {
    problems.push(`${origin} ${entry.name}: "${entry.url}" must be an http:// or https:// URL`);
    return;
  }
  const { providers } = entry;
  const wrong = providers === undefined ? undefined : providerProblem(providers, ownership);
  if (wrong !== undefined) problems.push(`${origin} ${entry.name}: ${wrong}`);
  else destinations.set(entry.name, { name: entry.name, url: entry.url, feed, ...(providers && { providers }) });
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
export function readKnativeEnvironment(env: NodeJS.ProcessEnv): {
  readonly sink?: string;
  readonly ceOverrides?: Readonly<Record<string, string>>;
} {
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
  if (!result.success)
    throw new RoutingError(
      'K_CE_OVERRIDES',
      result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`),
    );
  const ceOverrides = Object.fromEntries(
    Object.entries(result.data.extensions ?? {}).map(([name, value]) => [name, String(value)]),
  );
  return sink === undefined ? { ceOverrides } : { sink, ceOverrides };
}

const ceOverridesSchema = z.object({
  extensions: z
    .record(
      z.string().regex(/^[a-z0-9]{1,20}$/, 'extension names are 1 to 20 lower-case letters and digits'),
      z.union([z.string(), z.number(), z.boolean()]),
    )
    .optional(),
});

/** What the relay sends: one object's change, or a `reconcile.all` for a function. */
export type Outgoing =
  | {
      readonly kind: 'object';
      readonly change: ResourceChange;
      /** A periodic recheck of an unchanged object (periodicFor): sent with `cirrusreason: recheck`. */
      readonly reason?: 'recheck';
    }
  | { readonly kind: 'trigger'; readonly target: string; readonly reason: 'periodic' | 'nodes' };

/** One delivery to make: to which destination, under which queue key. */
export interface Routed {
  readonly destination: Destination;
  /** The per-destination queue key: the object key, or `reconcile.all/<function>`. */
  readonly key: string;
  readonly outgoing: Outgoing;
}

/** The queue key of a function's `reconcile.all`. */
export function triggerKey(target: string): string {
  return `reconcile.all/${target}`;
}

/**
 * The deliveries one change makes under `table`; a destination serving some providers gets only
 * theirs (./owners.ts).
 */
export function route(table: RoutingTable, change: ResourceChange, known: Known = noneKnown): Routed[] {
  const routed: Routed[] = [];
  const serves = ownerGate(table.ownership, change); // owners computed only if a destination names providers
  for (const destination of table.destinations) {
    for (const outgoing of outgoingFor(table, destination.feed, change, known)) {
      if (!serves(destination.providers, outgoing.kind === 'object' ? outgoing.change : undefined)) continue;
      routed.push({
        destination,
        key: outgoing.kind === 'object' ? outgoing.change.key : triggerKey(outgoing.target),
        outgoing,
      });
    }
  }
  return routed;
}

// What one feed makes of a change: a function's own decision; for `all`, the object's event and
// every function's trigger.
function outgoingFor(table: RoutingTable, feed: Feed, change: ResourceChange, known: Known): Outgoing[] {
  if (feed === 'all') {
    const triggers = [...table.functions.values()]
      .filter((fn) => fn.feed(change) === 'all')
      .map((fn) => trigger(fn.name));
    return [{ kind: 'object', change }, ...triggers];
  }
  const fn = table.functions.get(feed);
  const decision = fn?.feed(change);
  if (decision === 'object') return [{ kind: 'object', change }];
  if (fn === undefined || decision !== 'all') return [];
  return fn.fanOut === undefined ? [trigger(feed)] : fanOut(fn, fn.fanOut, { change, known });
}

function trigger(target: string, reason: 'periodic' | 'nodes' = 'nodes'): Outgoing {
  return { kind: 'trigger', target, reason };
}

/**
 * What one period of function `target` sends `destination`. For a function whose period rechecks
 * objects (catalogue `period.recheck`, ADR 0029) and a destination fed that function alone: one
 * event per object of that kind the relay knows and the period picks (`period.rechecks`, or else
 * the function's feed: node-lifecycle, each Node that is not Ready, or Ready with the shutdown
 * taint; node-init, every Node, ADR 0031), each under the object's own queue key and carrying what
 * the relay keeps of it; nothing for a cluster where no object needs it, and no pass that lists.
 * Otherwise (a function with a pass, a destination fed everything, a kind not watched): the
 * function's `reconcile.all` trigger. The caller spreads the rechecks over the period (leader.ts).
 */
export function periodicFor(
  table: RoutingTable,
  destination: Destination,
  target: string,
  { known, observedAt }: { readonly known: Known; readonly observedAt: number },
): Routed[] {
  const fn = table.functions.get(target);
  const kind = fn?.period.recheck;
  const found = kind === undefined || destination.feed !== target ? undefined : known(kind);
  if (fn === undefined || found === undefined)
    return [{ destination, key: triggerKey(target), outgoing: trigger(target, 'periodic') }];
  const routed: Routed[] = [];
  for (const [key, object] of found.objects) {
    const each = recheckOf(table, { destination, fn, resource: found.resource }, { key, object, observedAt });
    if (each !== undefined) routed.push(each);
  }
  return routed;
}

/**
 * The recheck of one known object for `destination`'s function, as {@link periodicFor} makes it;
 * undefined when the period does not pick it (any more) or the destination does not serve its
 * owner. Also for a recheck sent later in the period, with the copy the relay has by then.
 */
export function recheckOf(
  table: RoutingTable,
  { destination, fn, resource }: { destination: Destination; fn: RoutedFunction; resource: ResourceType },
  { key, object, observedAt }: { key: string; object: KubeObject; observedAt: number },
): Routed | undefined {
  const each: ResourceChange = { resource, type: 'update', key, object, observedAt };
  const picked = fn.period.rechecks === undefined ? fn.feed(each) === 'object' : fn.period.rechecks(object);
  if (!picked || !ownerGate(table.ownership, each)(destination.providers, each)) return undefined;
  return { destination, key, outgoing: { kind: 'object', change: each, reason: 'recheck' } };
}

// A change that concerns many objects, as one event per known object of `kind` the function's feed
// accepts: each goes through that object's own queue key, so it coalesces with the object's own
// events and never runs beside them. Objects not listed yet are delivered by their LIST anyway. Each
// event carries what the relay keeps of its object (resources.ts `retained`), which has every field
// a feed and a claim read.
function fanOut(
  fn: RoutedFunction,
  kind: string,
  { change, known }: { change: ResourceChange; known: Known },
): Outgoing[] {
  const found = known(kind);
  if (found === undefined) return [trigger(fn.name)];
  const out: Outgoing[] = [];
  for (const [key, object] of found.objects) {
    // No previous state: the object did not change, the function is asked to look at it again.
    const each: ResourceChange = {
      resource: found.resource,
      type: 'update',
      key,
      object,
      observedAt: change.observedAt,
    };
    if (fn.feed(each) === 'object') out.push({ kind: 'object', change: each });
  }
  return out;
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

/** Whether `feed` needs the watch of `kind`: the function's own watches; `all` needs every watch. */
export function feedWatches(table: RoutingTable, feed: Feed, kind: string): boolean {
  return feed === 'all' || (table.functions.get(feed)?.watches.includes(kind) ?? false);
}
