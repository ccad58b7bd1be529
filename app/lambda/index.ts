// cirrus on AWS Lambda: one reconcile function per Lambda, behind a function URL. The handler
// turns the function URL's (or an API Gateway HTTP API's) event into a request to the same app
// `cirrus serve` listens with (@fastify/aws-lambda injects it; nothing listens), so the routes,
// the CloudEvents contract and the signature check are the ones every other platform runs.
//
// Configuration is the environment's CIRRUS_* variables, as in a container. The kubeconfig,
// cloud-config and signing secret come from Secrets Manager (CIRRUS_*_SECRET_ID, ./secrets.ts) or
// from files in the package. A function URL is reachable from anywhere, so a function refuses to
// start without a signing secret, and every route but /healthz and /readyz (the reconcile routes,
// /metrics) needs the signature: only the relay, which holds it, gets past the 401.
//
// A function URL (AuthType NONE) answers the internet, and the app is built at a sandbox's first
// event: a request without a signature header on any route but the probes is refused 401 here,
// before the app is awaited, so that a stranger's request never makes a cold sandbox read its
// secrets and build the app (docs/threat-model.md, ADR 0008). What the header says is checked by
// the app, as everywhere.
//
// The app sees the request target the caller sent: the function URL's rawPath and rawQueryString,
// as they came, are what the signature is checked against (not a query rebuilt from its parsed
// parameters, though the signature's canonical query would survive that too).

import awsLambdaFastify from '@fastify/aws-lambda';
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2, Context } from 'aws-lambda';
import type { FastifyInstance } from 'fastify';
import { ConfigError, envName, parseConfig, type CommandOptions, type Config } from '../config.ts';
import type { FunctionEntry } from '../../shared/catalogue.ts';
import { errorReply, UnauthorizedError } from '../../shared/host/index.ts';
import { signatureHeader } from '../../shared/wire/signing.ts';
import { isListenOption, serveOptions } from '../cli/option-groups.ts';
import { shareLibraryWithProviderModules } from '../cli/provider-module.ts';
import { buildFunctionApp, functionNamed, type FunctionOptions } from '../cli/serve.ts';
import { createLogger, logDestination } from '../log.ts';
import { extensionSecretStore, materializeSecrets } from './secrets.ts';

/** The options a function takes on Lambda: those of `cirrus serve` but the listening address, and the secret IDs. */
export type LambdaOptions = FunctionOptions | 'kubeconfigSecretId' | 'cloudConfigSecretId' | 'signingSecretId';

// The file options that can come from Secrets Manager instead (./secrets.ts), and their ID's option.
const secretIdOf: Partial<Record<LambdaOptions, LambdaOptions>> = {
  cloudConfig: 'cloudConfigSecretId',
  kubeconfig: 'kubeconfigSecretId',
  signingSecretFile: 'signingSecretId',
};

/** What a function reads from its environment on Lambda: `cirrus serve`'s options but where to listen, each file's secret ID beside it. */
export const lambdaCommand: CommandOptions<LambdaOptions> = {
  options: serveOptions.flatMap((option): LambdaOptions[] => {
    if (isListenOption(option)) return [];
    const secretId = secretIdOf[option];
    return secretId === undefined ? [option] : [option, secretId];
  }),
  required: ['cloudProvider'],
};

/** A function URL or HTTP API (payload 2.0) event, or a REST API (1.0) one: what @fastify/aws-lambda reads. */
export type HttpEvent = APIGatewayProxyEventV2 | APIGatewayProxyEvent;

/** What the handler answers: the HTTP response for the function URL. */
export interface HttpResult {
  readonly statusCode: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly isBase64Encoded?: boolean;
}

/** A Lambda handler for one function; `functionName` says which. */
export interface LambdaHandler {
  (event: HttpEvent, context: Context): Promise<HttpResult>;
  readonly functionName: string;
  /**
   * Builds the app now and resolves once it is built, or once building failed: a failure is
   * reported by the first event, which tries again.
   */
  ready(): Promise<void>;
}

/** Where a handler gets its configuration: the process's, unless a test gives its own. */
export interface LambdaHandlerOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Aborted when the sandbox shuts down; default: on SIGTERM (Lambda sends it when an extension is attached). */
  readonly signal?: AbortSignal;
}

type Proxy = (event: HttpEvent, context: Context) => Promise<HttpResult>;

/**
 * The handler of function `name` (canonical name or alias). The app is built once per sandbox,
 * at the first event or at ready(); a failure to build (bad configuration, an unreadable secret)
 * is thrown to Lambda, which answers the caller 502 so that the relay retries, and the next event
 * tries again. Throws ConfigError at once for an unknown function name.
 */
export function lambdaHandler(name: string, options: LambdaHandlerOptions = {}): LambdaHandler {
  const entry = functionNamed(name);
  const canonical = entry.name;
  let proxy: Promise<Proxy> | undefined;
  const start = (): Promise<Proxy> => {
    proxy ??= startFunction(entry, options).catch((error: unknown) => {
      proxy = undefined;
      throw error;
    });
    return proxy;
  };
  const handler = async (event: HttpEvent, context: Context): Promise<HttpResult> =>
    unsignedRefusal(event) ?? (await start())(event, context);
  // A failure is reported by the first event, which tries again.
  const ready = (): Promise<void> =>
    start().then(
      () => undefined,
      () => undefined,
    );
  return Object.assign(handler, { functionName: canonical, ready });
}

/**
 * The handler of a one-function artifact (scripts/build.ts, `dist/functions/<name>/lambda.js`,
 * which awaits it at its top level): in a Lambda sandbox (which sets _HANDLER) it resolves once the
 * app is built, so that the build is the init phase's, not the first event's (ADR 0033). A
 * configuration that can never start (a bad variable, no signing secret, the fake provider) fails
 * the init phase with its message; a build that fails otherwise (a secret not readable yet) leaves
 * init successful: the first event reports it, and tries again.
 */
export async function sandboxHandler(name: string, env: NodeJS.ProcessEnv = process.env): Promise<LambdaHandler> {
  const handler = lambdaHandler(name, { env });
  if (env['_HANDLER'] !== undefined) {
    refuseFake(requireSecrets(parseConfig(lambdaCommand, [], env)));
    await handler.ready();
  }
  return handler;
}

async function startFunction(entry: FunctionEntry, options: LambdaHandlerOptions): Promise<Proxy> {
  const { name } = entry;
  const env = options.env ?? process.env;
  const parsed = parseConfig(lambdaCommand, [], env);
  const log = createLogger({ name, level: parsed.logLevel, destination: await logDestination(parsed.logFormat) });
  try {
    const config = await materializeSecrets(requireSecrets(parsed), extensionSecretStore(env));
    if (config.providerModule !== undefined) shareLibraryWithProviderModules();
    // Lambda freezes a sandbox between events: the event-loop delay measured across a freeze is
    // not load, and a sandbox takes one event at a time anyway (its memory is the function's
    // MemorySize, and reserved concurrency caps the sandboxes). No load shedding here.
    const { app, providerName } = await buildFunctionApp(entry, config, {
      signal: options.signal ?? sigterm(),
      log,
      pressure: false,
      publicEndpoint: true,
    });
    log.info({ provider: providerName }, `${name} ready on AWS Lambda`);
    // decorateRequest: the app is ready, it takes no more decorators (and the routes do not need
    // the event). The cast: the adapter is typed for Fastify's default logger type, and only
    // calls inject().
    const proxy = awsLambdaFastify<HttpEvent>(app as unknown as FastifyInstance, { decorateRequest: false });
    // One /healthz through the adapter and the app before the first event: the first request of a
    // process compiles their request path (about 10 ms), which belongs to the init phase too.
    await proxy(primingEvent, {} as Context);
    return (event, context) => proxy(withRawTarget(event), context);
  } catch (error) {
    log.error({ err: error }, `${name} could not start`);
    throw error;
  }
}

// The fake provider's cloud lives in the process's memory and starts empty: each sandbox would
// have its own empty cloud, and every Node would get "instance not found". (Tests and the bench
// run handlers in process with it: lambdaHandler takes it.)
function refuseFake(config: Config<LambdaOptions>): void {
  if (config.cloudProvider === 'fake') {
    throw new ConfigError(
      `${envName('cloudProvider')}=fake cannot run on AWS Lambda: the fake provider's cloud lives in one process's memory and starts empty, so each sandbox would have a cloud of its own with no instance in it. Use static (an inventory in the cloud-config), aws or http`,
    );
  }
}

// A function URL (payload 2.0) GET /healthz, answered in the init phase (startFunction).
const primingEvent: APIGatewayProxyEventV2 = {
  version: '2.0',
  routeKey: '$default',
  rawPath: '/healthz',
  rawQueryString: '',
  headers: {},
  isBase64Encoded: false,
  requestContext: {
    accountId: 'anonymous',
    apiId: 'init',
    domainName: 'localhost',
    domainPrefix: 'init',
    http: { method: 'GET', path: '/healthz', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'cirrus-init' },
    requestId: 'init',
    routeKey: '$default',
    stage: '$default',
    time: '',
    timeEpoch: 0,
  },
};

// A function URL answers anyone: without a secret to verify, a function would reconcile for anyone.
function requireSecrets(config: Config<LambdaOptions>): Config<LambdaOptions> {
  if (config.signingSecretId === undefined && config.signingSecretFile === undefined) {
    throw new ConfigError(
      `${envName('signingSecretId')} (or ${envName('signingSecretFile')}) is required on AWS Lambda: a function URL is public, the signature is what keeps strangers out`,
    );
  }
  if (config.kubeconfigSecretId === undefined && config.kubeconfig === undefined) {
    throw new ConfigError(
      `${envName('kubeconfigSecretId')} (or ${envName('kubeconfig')}) is required on AWS Lambda: it has no in-cluster ServiceAccount`,
    );
  }
  return config;
}

// The routes a public endpoint answers without a signature (shared/host/auth.ts).
const openPaths = new Set(['/healthz', '/readyz']);

/**
 * The app's own 401 to a request on a route that needs a signature and carries no signature
 * header; undefined for any other request, which the app answers. Needs nothing built.
 */
export function unsignedRefusal(event: HttpEvent): HttpResult | undefined {
  const path = 'rawPath' in event ? event.rawPath : event.path;
  if (openPaths.has(path)) return undefined;
  // Payload 2.0 names headers in lower case; a REST API (1.0) event as the caller wrote them.
  const headers: Record<string, string | undefined> = event.headers;
  if (Object.entries(headers).some(([name, value]) => name.toLowerCase() === signatureHeader && value))
    return undefined;
  const missing = new UnauthorizedError(`missing ${signatureHeader} header`, 'CIRRUS_ERR_SIGNATURE_MISSING');
  const { status, body } = errorReply(missing);
  return {
    statusCode: status,
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify(body),
  };
}

/**
 * A function URL (payload 2.0) event whose path carries its raw query: @fastify/aws-lambda would
 * otherwise rebuild the query from `queryStringParameters`, where repeated names are joined by
 * commas and every value is decoded. The app then parses and verifies the query the caller sent.
 */
export function withRawTarget(event: HttpEvent): HttpEvent {
  if (!('rawPath' in event) || event.rawQueryString === '') return event;
  const withQuery = { ...event, rawPath: `${event.rawPath}?${event.rawQueryString}` };
  delete withQuery.queryStringParameters;
  return withQuery;
}

let shutdown: AbortController | undefined;

// One listener for the sandbox, however many times a handler tries to start. Lambda sends SIGTERM
// at shutdown (when an extension is attached) and kills the runtime 500 ms later; a listener
// replaces Node's default exit, so it aborts what the app runs and then exits itself. No event is
// in flight at a shutdown: Lambda sends it between invocations.
function sigterm(): AbortSignal {
  if (shutdown === undefined) {
    const controller = new AbortController();
    process.once('SIGTERM', () => {
      controller.abort();
      setImmediate(() => process.exit(0));
    });
    shutdown = controller;
  }
  return shutdown.signal;
}
