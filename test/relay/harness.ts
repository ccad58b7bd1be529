// What the relay tests share: function servers on loopback that record what they receive and
// answer as the test tells them (they stand for the functions), a relay with test timings, a TCP
// proxy that can cut the relay off from the API server, and polling helpers.

import { once } from 'node:events';
import {
  createServer as createHttpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createTcpServer, connect, type Server as TcpServer, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import {
  buildRoutingTable,
  inProcessTransport,
  startRelay,
  type Relay,
  type RelayOptions,
  type RoutingSources,
} from '../../relay/index.ts';
import { silentLogger } from '../harness/builders.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { cloudCallsHeader, type CloudEvent, type LocalHandler } from '../../shared/wire/index.ts';

/** One request a function server received. */
export interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly at: number;
  /** `ce-type` without the `dev.knative.apiserver.resource.` prefix (add, update, delete), or the whole type. */
  readonly type: string;
  /** `ce-name`, or '' */
  readonly name: string;
  /** What the relay queues by: `<kind>/<namespace>/<name>` for an object, `all/<cirrustarget>` for a trigger. */
  readonly key: string;
  /** In process: the signal the relay handed over with the event (aborted when it gives up). */
  readonly signal?: AbortSignal;
  /** The body as JSON, or undefined when empty. */
  readonly data:
    | {
        readonly metadata?: {
          readonly name?: string;
          readonly resourceVersion?: string;
          readonly labels?: Record<string, string>;
        };
      }
    | undefined;
}

/** How a function server answers one request: a reply, or `destroy` to cut the connection. */
export type Answer =
  { readonly status: number; readonly headers?: Record<string, string>; readonly body?: string } | 'destroy';

/** Decides the answer; may wait (the request stays in flight until it resolves). */
export type Responder = (request: Received) => Answer | Promise<Answer>;

const resourcePrefix = 'dev.knative.apiserver.resource.';

/** What stands for a function: it records what it receives and answers as the test tells it. */
abstract class StandIn {
  readonly received: Received[] = [];
  respond: Responder = () => ({ status: 202, body: '{}' });
  #inFlight = 0;
  /** Most requests in flight at once, over all keys. */
  maxInFlight = 0;
  readonly #inFlightByKey = new Map<string, number>();
  /** Most requests in flight at once for one key. */
  maxInFlightPerKey = 0;

  /** Where the relay's routing points for it (`--to <name>=<url>`). */
  abstract get url(): string;

  /** Requests about the object named `name`. */
  about(name: string): Received[] {
    return this.received.filter((r) => r.name === name);
  }

  /** Requests of `ce-type` `type`. */
  ofType(type: string): Received[] {
    return this.received.filter((r) => r.headers['ce-type'] === type);
  }

  protected async answer(received: Received): Promise<Answer> {
    this.received.push(received);
    this.#track(received.key, 1);
    try {
      return await this.respond(received);
    } finally {
      this.#track(received.key, -1);
    }
  }

  #track(key: string, delta: number): void {
    this.#inFlight += delta;
    this.maxInFlight = Math.max(this.maxInFlight, this.#inFlight);
    const count = (this.#inFlightByKey.get(key) ?? 0) + delta;
    this.#inFlightByKey.set(key, count);
    this.maxInFlightPerKey = Math.max(this.maxInFlightPerKey, count);
  }
}

/** A loopback HTTP server standing for a function. */
export class FunctionServer extends StandIn {
  #server: Server | undefined;
  #port = 0;

  /** Listens on a free port of 127.0.0.1, or on the port it had before a stop(). */
  async start(): Promise<this> {
    const server = createHttpServer((request, response) => {
      void this.#handle(request, response);
    });
    server.listen(this.#port, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    this.#port = address.port;
    this.#server = server;
    return this;
  }

  override get url(): string {
    return `http://127.0.0.1:${this.#port}/`;
  }

  /** Stops listening and cuts open connections: the function is down (connection refused). */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) =>
      server.close(() => {
        resolve();
      }),
    );
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const answer = await this.answer(record(request.headers, Buffer.concat(chunks).toString('utf8')));
    if (answer === 'destroy') {
      request.socket.destroy();
      return;
    }
    response
      .writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers })
      .end(answer.body ?? '{}');
  }
}

/**
 * A function of the relay's own process standing in for one: it takes the events the relay hands
 * over in process (relay/transport.ts) and records them as the headers and body a request would
 * have had, so that a test reads both ways alike; its answer is given back as the reply's values.
 */
export class LocalFunction extends StandIn {
  static #next = 0;
  readonly #url = `http://in-process.invalid/${(LocalFunction.#next += 1)}/`;

  constructor() {
    super();
    localFunctions.set(this.#url, this.handler);
  }

  override get url(): string {
    return this.#url;
  }

  readonly handler: LocalHandler = async (event, signal) => {
    const answer = await this.answer({ ...recordEvent(event), signal });
    if (answer === 'destroy') throw new Error('a function in process has no connection to cut');
    const headers = answer.headers ?? {};
    const retryAfter = headers['retry-after'];
    const calls = headers[cloudCallsHeader];
    return {
      status: answer.status,
      body: JSON.parse(answer.body ?? '{}') as unknown,
      ...(retryAfter === undefined ? {} : { retryAfterSeconds: Number(retryAfter) }),
      ...(calls === undefined ? {} : { cloudCalls: Number(calls) }),
    };
  };
}

// The LocalFunctions by their URLs, for relays in process to find them.
const localFunctions = new Map<string, LocalHandler>();

// A handed-over event as the headers and body the same event would have had over HTTP.
function recordEvent(event: CloudEvent): Received {
  const { extensions, data, datacontenttype, ...core } = event;
  const headers: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries({ ...core, ...extensions }))
    if (value !== undefined) headers[`ce-${name}`] = value;
  if (datacontenttype !== undefined) headers['content-type'] = datacontenttype;
  return record(headers, data === undefined ? '' : JSON.stringify(data));
}

function record(headers: IncomingHttpHeaders, body: string): Received {
  const ceType = String(headers['ce-type'] ?? '');
  return {
    headers,
    body,
    at: Date.now(),
    type: ceType.startsWith(resourcePrefix) ? ceType.slice(resourcePrefix.length) : ceType,
    name: String(headers['ce-name'] ?? ''),
    key:
      headers['ce-name'] === undefined
        ? `all/${String(headers['ce-cirrustarget'] ?? '')}`
        : `${String(headers['ce-kind'])}/${String(headers['ce-namespace'] ?? '')}/${String(headers['ce-name'])}`,
    data: body === '' ? undefined : (JSON.parse(body) as Received['data']),
  };
}

/** Starts a function server, stopped after the test. */
export async function functionServer(t: TestContext): Promise<FunctionServer> {
  const server = await new FunctionServer().start();
  t.after(() => server.stop());
  return server;
}

/** The ways a relay reaches its functions, for the tests that run both. */
export const transportNames = ['http', 'in-process'] as const;
export type TransportName = (typeof transportNames)[number];

/** A stand-in for a function, reached the way `transport` says. */
export async function standIn(t: TestContext, transport: TransportName): Promise<FunctionServer | LocalFunction> {
  if (transport === 'http') return functionServer(t);
  const local = new LocalFunction();
  t.after(() => localFunctions.delete(local.url));
  return local;
}

/**
 * The relay options that reach the destinations of `to` (`<name>=<url>`) in process, where a
 * LocalFunction has that URL, or `handlers` names them; over HTTP otherwise.
 */
export function reaching(
  transport: TransportName,
  to: readonly string[],
  handlers: ReadonlyMap<string, LocalHandler> = new Map(),
): Partial<RelayOptions> {
  if (transport === 'http') return {};
  const byName = new Map(handlers);
  for (const entry of to) {
    const [name, url] = [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)];
    const handler = localFunctions.get(url);
    if (handler !== undefined) byName.set(name, handler);
  }
  return { transport: inProcessTransport(byName) };
}

/** Timings that keep the tests fast: retries from 100 ms to 1 s, watch reconnects likewise, no jitter. */
export const fastTimings = {
  retry: { initialMs: 100, maxMs: 1_000, jitter: 0 },
  watch: { backoff: { initialMs: 100, maxMs: 1_000, jitter: 0 } },
  processMetrics: false,
} as const satisfies Partial<RelayOptions>;

/** No periodic triggers, unless a test asks for them. */
export const noPeriods = { 'node-init': 0, 'node-lifecycle': 0, 'service-lb': 0, routes: 0 } as const;

/**
 * Starts a relay with {@link fastTimings} and no leader election unless given, and without the
 * known-keys cursor unless leader election or a cursor is given (the default one, in kube-system,
 * would be shared by the relays of every test on the API server); stopped after the test.
 */
export function testRelay(
  t: TestContext,
  kubeConfig: KubeConfig,
  routing: RoutingSources,
  options: Partial<Omit<RelayOptions, 'routing' | 'kubeConfig'>> = {},
): Relay {
  const relay = startRelay({
    kubeConfig,
    routing: buildRoutingTable(catalogue, { periods: noPeriods, ...routing }),
    logger: silentLogger(),
    leaderElection: false,
    ...(options.leaderElection === undefined && options.cursor === undefined ? { cursor: false } : {}),
    ...fastTimings,
    ...options,
  });
  t.after(() => relay.stop());
  return relay;
}

/** Polls `check` every 25 ms until it returns true; fails with `what` after `timeoutMs`. */
export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

/** The value of a counter or gauge series (0 when absent); labels must match exactly those given. */
export async function metric(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const found = await registry.getSingleMetric(name)?.get();
  let total = 0;
  for (const value of found?.values ?? []) {
    if (Object.entries(labels).every(([key, wanted]) => String(value.labels[key]) === wanted)) total += value.value;
  }
  return total;
}

/** A TCP proxy to `target` (host:port) that can be cut: while cut, connections are reset as they arrive. */
export class CuttableProxy {
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<Socket>();
  #server: TcpServer | undefined;
  #cut = false;
  port = 0;

  constructor(target: URL) {
    this.#target = { host: target.hostname, port: Number(target.port) };
  }

  async start(): Promise<this> {
    const server = createTcpServer((client) => {
      this.#accept(client);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    this.port = address.port;
    this.#server = server;
    return this;
  }

  /** Resets every open connection and every new one until restore(). */
  cut(): void {
    this.#cut = true;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }

  restore(): void {
    this.#cut = false;
  }

  async stop(): Promise<void> {
    this.cut();
    const server = this.#server;
    if (server !== undefined)
      await new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      );
  }

  #accept(client: Socket): void {
    if (this.#cut) {
      client.destroy();
      return;
    }
    const upstream = connect(this.#target.port, this.#target.host);
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      socket.on('close', () => {
        this.#sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  }
}

/** A copy of `kubeConfig` whose API server is reached through the proxy on `port` (same TLS name: 127.0.0.1). */
export function throughProxy(kubeConfig: KubeConfig, port: number): KubeConfig {
  const copy = new KubeConfig();
  const current = kubeConfig.getCurrentCluster();
  if (current === null) throw new Error('no cluster');
  copy.loadFromOptions({
    clusters: kubeConfig
      .getClusters()
      .map((cluster) =>
        cluster.name === current.name ? { ...cluster, server: `https://127.0.0.1:${port}` } : cluster,
      ),
    users: kubeConfig.getUsers(),
    contexts: kubeConfig.getContexts(),
    currentContext: kubeConfig.getCurrentContext(),
  });
  return copy;
}

/** A promise the test opens when it wants: for holding a request in flight. */
export function gate(): { readonly opened: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** `promise`, or a failure naming `what` if it has not settled within `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits for the relay to lead with its watches open; fails after 10 s. */
export async function ready(relay: Relay): Promise<void> {
  await within(relay.ready, 10_000, `relay ${relay.identity} to be ready`);
}
