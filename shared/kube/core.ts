// The core/v1 calls the functions make, without client-node's generated request pipeline (ADR 0023).
//
// client-node's CoreV1Api builds a request through its middleware chain, sends it with undici's
// `fetch`, and walks every object it sends or receives through ObjectSerializer's model classes.
// The functions' hot path (a read, a patch and an Event per reconcile) does not need the model
// classes: `LeanCore` sends the same requests over the same connection pool, with client-node's own
// KubeConfig doing what it does for every CoreV1Api call (tokens, exec plugins, client
// certificates, TLS, proxies: `applySecurityAuthentication`, whose undici dispatcher
// `reuseConnections` caches), and reads the answers with JSON.parse.
//
// What that changes for callers, who see client-node's model types:
// - the objects are the API server's JSON: fields typed `Date` (creationTimestamp,
//   deletionTimestamp, conditions' and taints' times, Events' times) hold the RFC 3339 strings the
//   server sent. Code that reads them goes through `new Date(value)` or compares them for presence
//   only, which is right for either; a Date written (an Event's times) is sent as `toISOString()`,
//   as client-node's serializer sends it.
// - fields that client-node's models do not know (newer than its models) are kept, not dropped.
// - core/v1's JSON names are the models' property names but one: a list's `metadata.continue` is
//   V1ListMeta's `_continue`, renamed here for the lists.
// - failures are client-node's `ApiException` with the same `code` and `body` (the response's
//   text; none for 401), so apiStatus and apiMessage read them alike.

import {
  ApiException,
  HttpMethod,
  PatchStrategy,
  RequestContext,
  type ConfigurationOptions,
  type CoreV1Api,
  type KubeConfig,
} from '@kubernetes/client-node';
import { patchTypeOf } from './api.ts';

/** The CoreV1Api calls the functions make: what `LeanCore` implements and any CoreV1Api also is. */
export type Core = Pick<
  CoreV1Api,
  | 'readNode'
  | 'listNode'
  | 'patchNode'
  | 'patchNodeStatus'
  | 'deleteNode'
  | 'readNamespacedService'
  | 'listServiceForAllNamespaces'
  | 'patchNamespacedService'
  | 'patchNamespacedServiceStatus'
  | 'createNamespacedEvent'
>;

type Params<M extends keyof Core> = Parameters<Core[M]>[0];
type Result<M extends keyof Core> = Awaited<ReturnType<Core[M]>>;

// The parameters that are not query parameters; every other one is, under its own name (but
// `_continue`, client-node's name for `continue`).
const notQuery = new Set(['name', 'namespace', 'body']);

/** A request as the lean client sends it. */
interface Call {
  readonly method: HttpMethod;
  readonly path: string;
  readonly params: object;
  readonly options: ConfigurationOptions | undefined;
  /** A PATCH: the content type comes from `options` (mergePatch, strategicMergePatch), else JSON patch as client-node's default. */
  readonly patch?: boolean;
  /** A list: its `metadata.continue` becomes V1ListMeta's `_continue`. */
  readonly list?: boolean;
}

/** The undici dispatcher client-node's KubeConfig chose for a request (undefined: none of its own). */
type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

/** core/v1 over client-node's KubeConfig and connection pool, with plain JSON in and out. */
export class LeanCore implements Core {
  readonly #config: KubeConfig;
  readonly #server: string;

  constructor(config: KubeConfig) {
    const cluster = config.getCurrentCluster();
    if (cluster === null) throw new Error('No active cluster!');
    this.#config = config;
    this.#server = cluster.server.replace(/\/+$/, '');
  }

  readNode(param: Params<'readNode'>, options?: ConfigurationOptions): Promise<Result<'readNode'>> {
    return this.#call({ method: HttpMethod.GET, path: `/api/v1/nodes/${part(param.name)}`, params: param, options });
  }

  listNode(param: Params<'listNode'> = {}, options?: ConfigurationOptions): Promise<Result<'listNode'>> {
    return this.#call({ method: HttpMethod.GET, path: '/api/v1/nodes', params: param, options, list: true });
  }

  patchNode(param: Params<'patchNode'>, options?: ConfigurationOptions): Promise<Result<'patchNode'>> {
    const path = `/api/v1/nodes/${part(param.name)}`;
    return this.#call({ method: HttpMethod.PATCH, path, params: param, options, patch: true });
  }

  patchNodeStatus(
    param: Params<'patchNodeStatus'>,
    options?: ConfigurationOptions,
  ): Promise<Result<'patchNodeStatus'>> {
    const path = `/api/v1/nodes/${part(param.name)}/status`;
    return this.#call({ method: HttpMethod.PATCH, path, params: param, options, patch: true });
  }

  deleteNode(param: Params<'deleteNode'>, options?: ConfigurationOptions): Promise<Result<'deleteNode'>> {
    return this.#call({ method: HttpMethod.DELETE, path: `/api/v1/nodes/${part(param.name)}`, params: param, options });
  }

  readNamespacedService(
    param: Params<'readNamespacedService'>,
    options?: ConfigurationOptions,
  ): Promise<Result<'readNamespacedService'>> {
    const path = `/api/v1/namespaces/${part(param.namespace)}/services/${part(param.name)}`;
    return this.#call({ method: HttpMethod.GET, path, params: param, options });
  }

  listServiceForAllNamespaces(
    param: Params<'listServiceForAllNamespaces'> = {},
    options?: ConfigurationOptions,
  ): Promise<Result<'listServiceForAllNamespaces'>> {
    return this.#call({ method: HttpMethod.GET, path: '/api/v1/services', params: param, options, list: true });
  }

  patchNamespacedService(
    param: Params<'patchNamespacedService'>,
    options?: ConfigurationOptions,
  ): Promise<Result<'patchNamespacedService'>> {
    const path = `/api/v1/namespaces/${part(param.namespace)}/services/${part(param.name)}`;
    return this.#call({ method: HttpMethod.PATCH, path, params: param, options, patch: true });
  }

  patchNamespacedServiceStatus(
    param: Params<'patchNamespacedServiceStatus'>,
    options?: ConfigurationOptions,
  ): Promise<Result<'patchNamespacedServiceStatus'>> {
    const path = `/api/v1/namespaces/${part(param.namespace)}/services/${part(param.name)}/status`;
    return this.#call({ method: HttpMethod.PATCH, path, params: param, options, patch: true });
  }

  createNamespacedEvent(
    param: Params<'createNamespacedEvent'>,
    options?: ConfigurationOptions,
  ): Promise<Result<'createNamespacedEvent'>> {
    const path = `/api/v1/namespaces/${part(param.namespace)}/events`;
    return this.#call({ method: HttpMethod.POST, path, params: param, options });
  }

  async #call<T>(call: Call): Promise<T> {
    const context = new RequestContext(`${this.#server}${call.path}${query(call.params)}`, call.method);
    context.setHeaderParam('Accept', 'application/json');
    context.setHeaderParam('User-Agent', 'cirrus');
    const body = (call.params as { body?: unknown }).body;
    const contentType = contentTypeOf(call);
    if (body !== undefined) {
      context.setHeaderParam('Content-Type', contentType);
      context.setBody(JSON.stringify(body));
    }
    await this.#config.applySecurityAuthentication(context);
    const response = await send(context);
    if (response.status < 200 || response.status > 299) throw failure(response);
    return answer(call, response.text) as T;
  }
}

// The body's content type: a PATCH's from mergePatch or strategicMergePatch, else JSON patch as
// client-node's default; JSON otherwise. Other request options (a signal, a middleware, a server
// of the caller's) would be dropped, so they are refused.
function contentTypeOf(call: Call): string {
  const patchType = patchTypeOf(call.options);
  if (call.options !== undefined && (patchType === undefined || call.patch !== true)) {
    throw new Error(`LeanCore ${call.method} ${call.path}: request options other than a patch type are not supported`);
  }
  if (call.patch !== true) return 'application/json';
  return patchType ?? PatchStrategy.JsonPatch;
}

function answer(call: Call, text: string): unknown {
  const parsed = JSON.parse(text) as { metadata?: Record<string, unknown> };
  if (call.list === true && parsed.metadata !== undefined && 'continue' in parsed.metadata) {
    const { continue: token, ...metadata } = parsed.metadata;
    parsed.metadata = { ...metadata, _continue: token };
  }
  return parsed;
}

// As client-node's generated code fails: 401 carries no body, any other status its text.
function failure(response: Response): ApiException<string | undefined> {
  if (response.status === 401) return new ApiException(401, 'Unauthorized', undefined, response.headers);
  return new ApiException(response.status, 'Unknown API Status Code!', response.text, response.headers);
}

interface Response {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly text: string;
}

// Over the dispatcher client-node chose (its connection pool for these TLS settings), with undici's
// own request API rather than its fetch; without one (no TLS setting of the KubeConfig's own),
// Node's fetch on its global pool, as client-node's fetch would use undici's.
async function send(context: RequestContext): Promise<Response> {
  const url = new URL(context.getUrl());
  const method = context.getHttpMethod();
  const headers = context.getHeaders();
  const body = context.getBody() as string | undefined;
  const dispatcher: Dispatcher | undefined = context.getDispatcher();
  if (dispatcher === undefined) {
    const response = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
    const names: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      names[name] = value;
    });
    return { status: response.status, headers: names, text: await response.text() };
  }
  const response = await dispatcher.request({
    origin: url.origin,
    path: `${url.pathname}${url.search}`,
    method,
    headers,
    ...(body === undefined ? {} : { body }),
  });
  const names: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers)) {
    if (value !== undefined) names[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return { status: response.statusCode, headers: names, text: await response.body.text() };
}

function part(value: string): string {
  return encodeURIComponent(value);
}

function query(params: object): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (notQuery.has(key) || value === undefined) continue;
    search.set(key === '_continue' ? 'continue' : key, String(value));
  }
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}
