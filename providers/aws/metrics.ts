// The aws provider's metrics under kubernetes/cloud-provider-aws's names, types, labels and help
// (pkg/providers/v1/aws_metrics.go; where it records them: aws_ec2.go's recordAWSMetric calls,
// retry_handler.go delayAfterRetry, aws_sdk.go AddMiddleware), so that a dashboard built for the Go
// provider reads cirrus's too; beside them cirrus's own `cirrus_aws_api_calls_total` (./api.ts).
//
// - `cloudprovider_aws_api_request_duration_seconds{request}`: a call's seconds, retries included,
//   for a call that succeeded; `cloudprovider_aws_api_request_errors{request}`: calls that failed.
//   `request` is the operation in snake case, as upstream names the six EC2 calls it times
//   (`describe_instance` for DescribeInstances, `describe_security_groups`, …); cirrus times every
//   call, ELB's too, and one page of a paged call is a call.
// - `cloudprovider_aws_api_throttled_requests_total{operation_name}`: calls that were still
//   throttled after the SDK's retries, by operation (`DescribeInstances`). Upstream counts EC2's
//   RequestLimitExceeded; cirrus counts every throttling code (./api.ts throttlingCodes), ELB's
//   `Throttling` included.
// - `cloudprovider_aws_api_response_status_total{service,operation,status_code}`: every attempt
//   AWS answered with a status of 400 or more, by the SDK's service ID (`EC2`, `Elastic Load
//   Balancing v2`), operation and status.

import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * The buckets of the request duration: upstream gives none, so Prometheus's default ones
 * (client_golang's DefBuckets), which component-base uses.
 */
export const awsRequestBuckets: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** What the provider's middleware records (./api.ts watch). */
export interface AwsApiMetrics {
  /** One call, after the SDK's retries: `operation` as the SDK names it (`DescribeInstances`). */
  call(
    operation: string,
    outcome: { readonly seconds: number; readonly failed: boolean; readonly throttled: boolean },
  ): void;
  /** One attempt AWS answered, by the SDK's service ID; only statuses of 400 or more are counted. */
  answer(serviceId: string, operation: string, status: number): void;
}

// component-base prefixes an ALPHA metric's help with its stability level: this is the help
// upstream's /metrics shows.
const alpha = (help: string): string => `[ALPHA] ${help}`;

/** `request`'s value for an operation: snake case, with upstream's own name where it has one. */
export function requestLabel(operation: string): string {
  if (operation === 'DescribeInstances') return 'describe_instance';
  return operation.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** The four series in `registry` (reused when another provider of the process made them already). */
export function awsApiMetrics(registry: Registry): AwsApiMetrics {
  const duration = reuse(
    registry,
    'cloudprovider_aws_api_request_duration_seconds',
    (name) =>
      new Histogram({
        name,
        help: alpha('Latency of AWS API calls'),
        labelNames: ['request'] as const,
        buckets: [...awsRequestBuckets],
        registers: [registry],
      }),
  );
  const errors = reuse(
    registry,
    'cloudprovider_aws_api_request_errors',
    (name) =>
      new Counter({ name, help: alpha('AWS API errors'), labelNames: ['request'] as const, registers: [registry] }),
  );
  const throttles = reuse(
    registry,
    'cloudprovider_aws_api_throttled_requests_total',
    (name) =>
      new Counter({
        name,
        help: alpha('AWS API throttled requests'),
        labelNames: ['operation_name'] as const,
        registers: [registry],
      }),
  );
  const statuses = reuse(
    registry,
    'cloudprovider_aws_api_response_status_total',
    (name) =>
      new Counter({
        name,
        help: alpha('AWS API response status code counts'),
        labelNames: ['service', 'operation', 'status_code'] as const,
        registers: [registry],
      }),
  );
  return {
    call: (operation, { seconds, failed, throttled }) => {
      const request = requestLabel(operation);
      if (failed) errors.inc({ request });
      else duration.observe({ request }, seconds);
      if (throttled) throttles.inc({ operation_name: operation });
    },
    answer: (service, operation, status) => {
      if (status >= 400) statuses.inc({ service, operation, status_code: String(status) });
    },
  };
}

function reuse<M>(registry: Registry, name: string, create: (name: string) => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? create(name);
}
