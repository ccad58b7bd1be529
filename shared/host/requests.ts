// What a reconcile request asks for: a CloudEvent (`POST /`) or a manual request
// (`POST /reconcile`) read into a Job, or an InvalidRequestError (400) naming every problem, with
// the code that says which part was wrong (shared/wire/replies.ts).

import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { CallBudgetSettings } from '../cloud/budget.ts';
import { formatIssue, readCloudEvent, type CloudEvent } from '../wire/cloudevents.ts';
import { eventObjectKey, type ObjectKey } from '../wire/keys.ts';
import { queryParameters } from '../wire/signing.ts';
import { acceptedEventTypes, eventMode, eventTypes, extensionNames, parseBudget } from '../wire/types.ts';
import { InvalidRequestError } from './errors.ts';
import type { FunctionDefinition } from './function.ts';

/** What one reconcile request asks for. */
export interface Job {
  readonly trigger: string;
  readonly target: ObjectKey | 'all';
  readonly dryRun: boolean;
  readonly success: 200 | 202;
  readonly eventId?: string;
  readonly lastKnown?: unknown;
  readonly claimed?: unknown;
  /** The claim came from the relay over a verified channel (a signed request whose signature the host checked, or a hand-over in process): a function may start from it and condition its writes on its resourceVersion. */
  readonly claimVerified?: boolean;
  /** A delete's lastKnown came from the relay over a verified channel (as claimVerified). */
  readonly lastKnownVerified?: boolean;
  readonly nodeSet?: string;
  /** The relay's periodic recheck of an unchanged object (`cirrusreason: recheck`): routine when it changes nothing. */
  readonly recheck?: boolean;
  /** The relay's periodic trigger (`reconcile.all` with `cirrusreason: periodic`): the function's drift check. */
  readonly periodic?: boolean;
  /** A trigger's share of the relay's cloud call budget: the pass's calls are paced to it. */
  readonly callBudget?: CallBudgetSettings;
}

/**
 * The Job of a CloudEvent request to `definition`; answered 202. `noteTrigger` hears the event's
 * type as soon as it is known to be accepted, for the metrics of a request that fails later.
 * `signed`: the host verified the request's signature (./auth.ts), so its claim is the relay's.
 */
export function eventJob(
  definition: FunctionDefinition,
  request: FastifyRequest,
  noteTrigger: (type: string) => void,
  signed: boolean,
): Job {
  const dryRun = readDryRun(request.url);
  const event = readCloudEvent(request.headers, request.body);
  return jobOfEvent(definition, event, { dryRun, noteTrigger, verified: signed });
}

/**
 * The Job of `event` to `definition`, however the event came: read from a request (eventJob), or
 * handed over in process by the relay (./local.ts), its data then taken as it is, by reference.
 * `verified`: the event is the relay's (a signature checked, or a hand-over in process), so its
 * claim may be a reconcile's starting point. Throws InvalidRequestError as eventJob does.
 */
export function jobOfEvent(
  definition: FunctionDefinition,
  event: CloudEvent,
  {
    dryRun,
    noteTrigger,
    verified,
  }: { readonly dryRun: boolean; readonly noteTrigger: (type: string) => void; readonly verified: boolean },
): Job {
  const mode = eventMode(event.type);
  if (mode === undefined) {
    throw new InvalidRequestError(
      `event type "${event.type}" is not accepted; accepted types: ${acceptedEventTypes.join(', ')}`,
      [`type: must be one of ${acceptedEventTypes.join(', ')}`],
      { code: 'CIRRUS_ERR_UNSUPPORTED_EVENT_TYPE' },
    );
  }
  noteTrigger(event.type);
  const target = mode === 'all' ? 'all' : acceptKind(definition, eventObjectKey(event, mode));
  const lastKnown = event.type === eventTypes.resourceDelete ? event.data : undefined;
  const claimed = mode === 'resource' && lastKnown === undefined ? claimFor(target, event.data) : undefined;
  const nodeSet = event.extensions[extensionNames.nodeSet];
  const callBudget = mode === 'all' ? readBudget(event.extensions[extensionNames.budget]) : undefined;
  return {
    trigger: event.type,
    ...reasonOf(event),
    target,
    dryRun,
    success: 202,
    eventId: event.id,
    lastKnown,
    claimed,
    ...verifiedIf(verified, claimed, lastKnown),
    ...(typeof nodeSet === 'string' && nodeSet !== '' ? { nodeSet } : {}),
    ...(callBudget === undefined ? {} : { callBudget }),
  };
}

// The relay's periodic work: a recheck of an unchanged object (an object's event with
// `cirrusreason: recheck`), or a function's periodic trigger (`reconcile.all`, `cirrusreason: periodic`).
function reasonOf(event: CloudEvent): { readonly recheck?: true; readonly periodic?: true } {
  const mode = eventMode(event.type);
  const reason = event.extensions[extensionNames.reason];
  if (mode === 'resource' && reason === 'recheck') return { recheck: true };
  return mode === 'all' && reason === 'periodic' ? { periodic: true } : {};
}

/** The Job of a manual request to `definition` (`kind` defaults to `defaultKind`); answered 200. */
export function manualJob(definition: FunctionDefinition, defaultKind: string, request: FastifyRequest): Job {
  const dryRun = readDryRun(request.url);
  const target = readManualTarget(definition, defaultKind, request.body);
  return { trigger: 'manual', target, dryRun, success: 200 };
}

// A trigger's `cirrusbudget` extension: absent → no pacing; present and malformed → 400, since a
// pass run without the pace the relay asked for would break the budget.
function readBudget(value: unknown): CallBudgetSettings | undefined {
  if (value === undefined) return undefined;
  const budget = typeof value === 'string' ? parseBudget(value) : undefined;
  if (budget !== undefined) return budget;
  const problem = `${extensionNames.budget}: must be <calls a second>/<burst>, e.g. 2.5/2, not ${quote(typeof value === 'string' ? value : JSON.stringify(value))}`;
  throw new InvalidRequestError(`invalid ${extensionNames.budget} extension`, [problem], {
    code: 'CIRRUS_ERR_INVALID_EVENT',
  });
}

// An add or update event's object, when it is the object the event's key names (its name and
// namespace); anything else claims nothing, and the function reads the object as for any event.
function claimFor(target: ObjectKey | 'all', data: unknown): unknown {
  if (target === 'all' || typeof data !== 'object' || data === null) return undefined;
  const metadata = (data as { metadata?: { name?: unknown; namespace?: unknown } }).metadata;
  const sameName = metadata?.name === target.name;
  const sameNamespace = (metadata?.namespace ?? '') === (target.namespace ?? '');
  return sameName && sameNamespace ? data : undefined;
}

// A claim (or a delete's last known state) in a request whose signature the host verified is the
// relay's (ReconcileOptions.claimVerified, lastKnownVerified).
function verifiedIf(
  signed: boolean,
  claimed: unknown,
  lastKnown: unknown,
): { claimVerified?: true; lastKnownVerified?: true } {
  if (!signed) return {};
  if (claimed !== undefined) return { claimVerified: true };
  return lastKnown === undefined ? {} : { lastKnownVerified: true };
}

// The query, read from the request target itself (the parameters the signature covers), not from
// Fastify's parsed request.query, which keeps unknown names and turns `dryRun[]` into a name of
// its own: a misspelt or array-shaped dryRun must not silently become a real write.
function readDryRun(url: string): boolean {
  const problems: string[] = [];
  const values: string[] = [];
  for (const { name, value } of queryParameters(url)) {
    if (name === 'dryRun') values.push(value);
    else problems.push(`unknown query parameter ${quote(name)}: the only one is dryRun (true or false)`);
  }
  if (values.length > 1) problems.push(`query parameter "dryRun" is given ${values.length} times: give it once`);
  const [value] = values;
  if (values.length === 1 && value !== 'true' && value !== 'false')
    problems.push(`query parameter "dryRun" must be true or false, not ${quote(value ?? '')}`);
  const [first] = problems;
  if (first !== undefined)
    throw new InvalidRequestError(problems.length === 1 ? `invalid query: ${first}` : 'invalid query', problems, {
      code: 'CIRRUS_ERR_INVALID_QUERY',
    });
  return value === 'true';
}

// A name or value from the request, quoted and cut short for an error message.
function quote(text: string): string {
  return JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);
}

const manualBodyHint =
  'the body must be a JSON object: {"name": "...", "namespace"?: "...", "kind"?: "..."} or {"all": true}';
const nonEmpty = z.string({ error: 'must be a string' }).min(1, 'must not be empty');

const manualBody = z
  .strictObject(
    {
      name: nonEmpty.optional(),
      namespace: z
        .string({ error: 'must be a string' })
        .min(1, 'must not be empty (leave it out for a cluster-scoped object)')
        .optional(),
      kind: nonEmpty.optional(),
      all: z.boolean({ error: 'must be true or false' }).optional(),
    },
    { error: (issue) => (issue.code === 'invalid_type' ? manualBodyHint : undefined) },
  )
  .superRefine((body, context) => {
    const named = body.name !== undefined || body.namespace !== undefined || body.kind !== undefined;
    if (body.all === true && named)
      context.addIssue({ code: 'custom', message: '"all": true takes no name, namespace or kind' });
    if (body.all !== true && body.name === undefined)
      context.addIssue({ code: 'custom', path: ['name'], message: 'is required (or send {"all": true})' });
  });

function readManualTarget(definition: FunctionDefinition, defaultKind: string, body: unknown): ObjectKey | 'all' {
  const parsed = manualBody.safeParse(body);
  if (!parsed.success)
    throw new InvalidRequestError('invalid reconcile request', parsed.error.issues.map(formatIssue), {
      code: 'CIRRUS_ERR_INVALID_RECONCILE_REQUEST',
    });
  const { all, name, namespace, kind = defaultKind } = parsed.data;
  if (all === true || name === undefined) return 'all'; // name is set unless all is true (refined above)
  return acceptKind(definition, namespace === undefined ? { kind, name } : { kind, name, namespace });
}

function acceptKind(definition: FunctionDefinition, key: ObjectKey): ObjectKey {
  if (definition.kinds.includes(key.kind)) return key;
  const kinds = definition.kinds.join(', ');
  throw new InvalidRequestError(
    `${definition.name} does not handle kind "${key.kind}"; it accepts ${kinds}`,
    [`kind: must be one of ${kinds}, not "${key.kind}"`],
    { code: 'CIRRUS_ERR_UNSUPPORTED_KIND' },
  );
}
