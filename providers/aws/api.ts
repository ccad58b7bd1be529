// The AWS clients the provider uses (EC2, Elastic Load Balancing v2 and Classic, SDK v3), built once per
// process: credentials from the SDK's standard chain (environment, shared files, web identity for
// IRSA, container and instance metadata), endpoints from the SDK's standard variables
// (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2) or upstream's
// [ServiceOverride] sections, retries by the SDK's retry modes (AWS_RETRY_MODE, AWS_MAX_ATTEMPTS).
// Every call goes through send(): it passes the reconcile's AbortSignal, counts the call by
// operation and outcome (and times it, and counts each answer's status, under cloud-provider-aws's
// names: ./metrics.ts), and turns throttling that outlived the SDK's retries into RetryError.
// Each attempt has a connection and a request timeout (ConnectTimeoutSeconds, RequestTimeoutSeconds
// in [Global]; the SDK sets none of its own), so a blackholed endpoint fails the call instead of
// holding it; a call that timed out says which timeout, and how many attempts the SDK made.

import { EC2Client, type EC2ClientConfig } from '@aws-sdk/client-ec2';
import { ElasticLoadBalancingClient } from '@aws-sdk/client-elastic-load-balancing';
import { ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';
import { Counter, type Registry } from 'prom-client';
import { RetryError } from '../../shared/cloud/errors.ts';
import type { AwsConfig, ServiceOverride } from './config.ts';
import type { AwsApiMetrics } from './metrics.ts';

export type ServiceName = 'ec2' | 'elbv2' | 'elb';

/** The SDK's service ID of each client (its runtime config's `serviceId`), as upstream's metrics label them. */
const serviceIds: Readonly<Record<ServiceName, string>> = {
  ec2: 'EC2',
  elbv2: 'Elastic Load Balancing v2',
  elb: 'Elastic Load Balancing',
};

/** How long a reconcile waits after throttling that the SDK's own retries did not absorb. */
export const THROTTLED_RETRY_MS = 20_000;

const throttlingCodes = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'TooManyRequestsException',
  'EC2ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'SlowDown',
  'PriorRequestNotComplete',
]);

/** Called once per send (not per SDK attempt), with the command's name without "Command". */
export type CallObserver = (service: ServiceName, operation: string, outcome: 'ok' | 'error') => void;

export interface AwsApi {
  readonly ec2: EC2Client;
  readonly elbv2: ElasticLoadBalancingV2Client;
  /** Classic ELBs: the same endpoint as ELBv2, so ELBv2's [ServiceOverride] applies to it too. */
  readonly elb: ElasticLoadBalancingClient;
}

export interface AwsApiOptions {
  /** Sees every call (tests, the bench). */
  readonly observe?: CallObserver;
  /** The series under cloud-provider-aws's names (./metrics.ts awsApiMetrics). */
  readonly metrics?: AwsApiMetrics;
  /** The SDK's HTTP handler: answers recorded AWS responses in the tests of what the emulator cannot show. */
  readonly requestHandler?: EC2ClientConfig['requestHandler'];
}

/** An AWS error's wire code (`InvalidInstanceID.NotFound`, `LoadBalancerNotFound`), or undefined. */
export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { Code?: unknown; name?: unknown; $metadata?: unknown };
  if (typeof e.Code === 'string') return e.Code;
  if (e.$metadata !== undefined && typeof e.name === 'string') return e.name.replace(/Exception$/, '');
  return undefined;
}

/**
 * Builds the clients for `config` (region, [ServiceOverride]). Each gets a middleware around the
 * whole call (outside the SDK's retries) that reports it to `observe` and turns throttling the
 * retries did not absorb into RetryError. Pass the reconcile's signal: `send(cmd, { abortSignal })`.
 */
export function createAwsApi(config: AwsConfig, options: AwsApiOptions = {}): AwsApi {
  const override = (service: ServiceName): ServiceOverride | undefined =>
    config.serviceOverrides.find((o) => o.service === service && o.region === config.region);
  // The SDK's Node.js handler with cirrus's timeouts: requestTimeout throws only with throwOnRequestTimeout.
  const requestHandler = options.requestHandler ?? {
    connectionTimeout: config.connectTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    throwOnRequestTimeout: true,
  };
  const clientConfig = (service: ServiceName) => {
    const o = override(service === 'elb' ? 'elbv2' : service);
    return {
      region: o?.signingRegion ?? config.region,
      ...(o === undefined ? {} : { endpoint: o.url }),
      requestHandler,
    };
  };
  const ec2 = new EC2Client(clientConfig('ec2'));
  const elbv2 = new ElasticLoadBalancingV2Client(clientConfig('elbv2'));
  const elb = new ElasticLoadBalancingClient(clientConfig('elb'));
  for (const [client, service] of [
    [ec2, 'ec2'],
    [elbv2, 'elbv2'],
    [elb, 'elb'],
  ] as const)
    watch(client, service, options, config);
  return { ec2, elbv2, elb };
}

function watch(
  client: EC2Client | ElasticLoadBalancingV2Client | ElasticLoadBalancingClient,
  service: ServiceName,
  { observe, metrics }: Pick<AwsApiOptions, 'observe' | 'metrics'>,
  config: Pick<AwsConfig, 'connectTimeoutMs' | 'requestTimeoutMs'>,
): void {
  const stack = client.middlewareStack as EC2Client['middlewareStack'];
  stack.add(
    (next, context) => async (args) => {
      const operation = operationOf(context);
      const started = performance.now();
      const seconds = (): number => (performance.now() - started) / 1000;
      try {
        const output = await next(args);
        observe?.(service, operation, 'ok');
        metrics?.call(operation, { seconds: seconds(), failed: false, throttled: false });
        return output;
      } catch (error) {
        observe?.(service, operation, 'error');
        const code = errorCode(error);
        const throttled = code !== undefined && throttlingCodes.has(code);
        metrics?.call(operation, { seconds: seconds(), failed: true, throttled });
        if (throttled) {
          throw new RetryError(
            `${service}:${operation} was throttled by AWS (${code}) beyond the SDK's retries; trying again in ${THROTTLED_RETRY_MS / 1000} s`,
            THROTTLED_RETRY_MS,
            { cause: error },
          );
        }
        throw timedOut(error, `${service}:${operation}`, config) ?? error;
      }
    },
    { step: 'initialize', name: 'cirrusCallObserver', priority: 'high' },
  );
  if (metrics === undefined) return;
  // Each attempt's answer: in the deserialize step, inside the SDK's retries (finalizeRequest),
  // around the deserializer, as upstream's awsAPIMetricsMiddleware sits in the Go SDK's stack.
  stack.add(
    (next, context) => async (args) => {
      const operation = operationOf(context);
      try {
        const result = await next(args);
        metrics.answer(serviceIds[service], operation, statusOf(result.response));
        return result;
      } catch (error) {
        const status = statusOf((error as { $response?: unknown } | undefined)?.$response);
        metrics.answer(serviceIds[service], operation, status);
        throw error;
      }
    },
    { step: 'deserialize', name: 'cirrusAnswerStatus', priority: 'high' },
  );
}

function operationOf(context: { commandName?: string }): string {
  return (context.commandName ?? 'unknown').replace(/Command$/, '');
}

// An HTTP response's status code; 0 for none (the request never got an answer).
function statusOf(response: unknown): number {
  const status = (response as { statusCode?: unknown } | undefined)?.statusCode;
  return typeof status === 'number' ? status : 0;
}

/**
 * A call whose attempts timed out (the SDK's TimeoutError, after its retries), as an error naming
 * the timeout and its [Global] key; undefined for any other error.
 */
function timedOut(
  error: unknown,
  call: string,
  config: Pick<AwsConfig, 'connectTimeoutMs' | 'requestTimeoutMs'>,
): Error | undefined {
  if (!(error instanceof Error) || error.name !== 'TimeoutError') return undefined;
  const attempts = (error as { $metadata?: { attempts?: number } }).$metadata?.attempts ?? 1;
  const tries = attempts === 1 ? 'its one attempt' : `each of its ${attempts} attempts`;
  const what = /establish a connection/.test(error.message)
    ? `no connection to AWS within ${config.connectTimeoutMs / 1000} s (ConnectTimeoutSeconds in [Global])`
    : /requestTimeout/.test(error.message)
      ? `no answer from AWS within ${config.requestTimeoutMs / 1000} s (RequestTimeoutSeconds in [Global])`
      : `timed out: ${error.message}`;
  return new Error(`${call}: ${what}, on ${tries}`, { cause: error });
}

/** `cirrus_aws_api_calls_total{service,operation,outcome}` in `registry`, as a CallObserver. */
export function callCounter(registry: Registry): CallObserver {
  const existing = registry.getSingleMetric('cirrus_aws_api_calls_total') as
    Counter<'service' | 'operation' | 'outcome'> | undefined;
  const counter =
    existing ??
    new Counter({
      name: 'cirrus_aws_api_calls_total',
      help: 'Calls to AWS APIs by the aws provider (one per call, however many attempts the SDK made), by service, operation and outcome.',
      labelNames: ['service', 'operation', 'outcome'] as const,
      registers: [registry],
    });
  return (service, operation, outcome) => {
    counter.inc({ service, operation, outcome });
  };
}

/**
 * `value`, or an error naming what AWS answered without: the SDK types every field of an answer as
 * optional, and one the provider needs being absent is AWS's (or an emulator's) fault, not the caller's.
 */
export function required<T>(value: T | null | undefined, what: string): T {
  if (value === undefined || value === null) throw new Error(`AWS answered without ${what}`);
  return value;
}

/** The SDK's per-call options for a reconcile's signal (an absent signal must be an absent key). */
export function abortable(signal: AbortSignal | undefined): { abortSignal?: AbortSignal } {
  return signal === undefined ? {} : { abortSignal: signal };
}

/** Runs `call`; an error with AWS code `code` (the resource is already gone) is success. */
export async function ignoring(code: string, call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (error) {
    if (errorCode(error) !== code) throw error;
  }
}
