// One LIST of a resource, and what it means against what the relay knew. The watch loop
// (./watch.ts) lists at its start and after a 410 Gone; the differences from its last known state
// are emitted as ordinary changes, and what the known-keys cursor recorded but the LIST lacks is
// a delete no relay delivered (ADR 0014).

import { HttpMethod, IsomorphicFetchHttpLibrary, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import {
  normalize,
  objectKey,
  resourceVersionOf,
  type KubeObject,
  type ResourceChange,
  type ResourceType,
} from './resources.ts';

/** A failed request to the API server, with its HTTP status. */
export class ApiStatusError extends Error {
  override readonly name = 'ApiStatusError';
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.statusCode = statusCode;
  }
}

/** The result of a LIST: every item, and the resourceVersion to watch from. */
export interface Listed {
  readonly items: readonly KubeObject[];
  readonly resourceVersion: string;
}

interface ListPage {
  readonly items?: KubeObject[] | null;
  readonly metadata?: { readonly resourceVersion?: string; readonly continue?: string };
}

/**
 * Lists every object of `type`, page by page (a paged LIST is one consistent snapshot), as raw
 * JSON. Throws ApiStatusError for a non-200 answer, and whatever the transport throws.
 */
export async function listAll(
  kubeConfig: KubeConfig,
  type: ResourceType,
  options: { readonly pageSize: number; readonly timeoutMs: number; readonly signal: AbortSignal },
): Promise<Listed> {
  const items: KubeObject[] = [];
  let resourceVersion = '';
  let token: string | undefined;
  do {
    const query: Record<string, string> = {
      limit: String(options.pageSize),
      ...(token === undefined ? {} : { continue: token }),
    };
    const signal = AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]);
    const page = (await getJson(kubeConfig, type.path, query, signal)) as ListPage;
    items.push(...(page.items ?? []));
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    token = page.metadata?.continue || undefined;
  } while (token !== undefined);
  if (resourceVersion === '') throw new Error(`LIST ${type.path}: the answer has no resourceVersion`);
  return { items, resourceVersion };
}

// A GET through client-node's own transport (its TLS and credentials from the kubeconfig), keeping
// the JSON as JSON: the generated API would deserialize every item into classes.
async function getJson(
  kubeConfig: KubeConfig,
  path: string,
  query: Record<string, string>,
  signal: AbortSignal,
): Promise<unknown> {
  const cluster = kubeConfig.getCurrentCluster();
  if (cluster === null) throw new Error('no current cluster in the kubeconfig');
  const url = new URL(cluster.server + path);
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  const context = new RequestContext(url.toString(), HttpMethod.GET);
  context.setHeaderParam('Accept', 'application/json');
  context.setSignal(signal);
  await kubeConfig.applySecurityAuthentication(context);
  const response = await new IsomorphicFetchHttpLibrary().send(context).toPromise();
  const text = await response.body.text();
  if (response.httpStatusCode !== 200)
    throw new ApiStatusError(
      response.httpStatusCode,
      `GET ${path}: HTTP ${response.httpStatusCode}: ${text.slice(0, 300)}`,
    );
  return JSON.parse(text) as unknown;
}

/** What a LIST is diffed against: the last known state, and what the cursor recorded (until the first LIST). */
export interface Before {
  readonly known: ReadonlyMap<string, KubeObject>;
  readonly seed: ReadonlyMap<string, KubeObject> | undefined;
  /** When the relay saw the LIST (its clock's now()). */
  readonly observedAt: number;
}

/**
 * The state `listed` makes (what the resource's `retain` keeps of each object), and the changes
 * from `before.known` to it, each add and update carrying the whole listed object: first the deletes of what
 * the cursor recorded that the LIST lacks or has with another uid (deleted while no relay led), so
 * that the delete of an old incarnation goes out before the add of the new one; then adds,
 * updates (a resourceVersion that moved) and deletes (known, not listed).
 */
export function diffListed(
  type: ResourceType,
  listed: Listed,
  before: Before,
): { next: Map<string, KubeObject>; changes: ResourceChange[] } {
  const { known, observedAt } = before;
  const next = new Map<string, KubeObject>();
  const changes: ResourceChange[] = [];
  for (const raw of listed.items) {
    const object = normalize(type, raw);
    const key = objectKey(type, object);
    if (key === undefined) continue;
    next.set(key, type.retain(object));
    const previous = known.get(key);
    if (previous !== undefined && resourceVersionOf(previous) === resourceVersionOf(object)) continue;
    changes.push({
      resource: type,
      type: previous === undefined ? 'add' : 'update',
      key,
      object,
      previous,
      observedAt,
    });
  }
  for (const [key, object] of known) {
    if (!next.has(key)) changes.push({ resource: type, type: 'delete', key, object, previous: object, observedAt });
  }
  return { next, changes: [...goneSinceRecorded(type, next, before), ...changes] };
}

// What the cursor recorded (an earlier leader knew) that `next` lacks or has with another uid.
function goneSinceRecorded(
  type: ResourceType,
  next: ReadonlyMap<string, KubeObject>,
  before: Before,
): ResourceChange[] {
  const gone: ResourceChange[] = [];
  for (const [key, object] of before.seed ?? []) {
    if (before.known.has(key)) continue;
    const live = next.get(key);
    if (live === undefined || live.metadata?.uid !== object.metadata?.uid)
      gone.push({ resource: type, type: 'delete', key, object, previous: object, observedAt: before.observedAt });
  }
  return gone;
}
