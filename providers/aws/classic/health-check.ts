// A Classic ELB's health check as cloud-provider-aws chooses it (pkg/providers/v1/aws.go,
// EnsureLoadBalancer; aws_loadbalancer.go, ensureLoadBalancerHealthCheck and getExpectedHealthCheck):
// HTTP /healthz on the health-check NodePort for `externalTrafficPolicy: Local`; otherwise TCP (SSL
// when the backend protocol is https or ssl) on the first listener's NodePort, or kube-proxy's
// shared probe in the `Shared` mode; then the healthcheck-* annotations; thresholds 2 and 6,
// timeout 5 s, interval 10 s unless annotated.

import type { V1Service } from '@kubernetes/client-node';
import type { AwsConfig } from '../config.ts';
import { ANNOTATION_PREFIX } from '../annotations.ts';
import { ServiceSettingError } from '../errors.ts';
import { isPort, wholeNumber } from '../nlb-plan.ts';

const a = (name: string): string => `${ANNOTATION_PREFIX}${name}`;

export interface ClassicHealthCheck {
  /** `<PROTOCOL>:<port>[<path>]`, as ConfigureHealthCheck takes it. */
  readonly target: string;
  readonly intervalSeconds: number;
  readonly timeoutSeconds: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
}

interface Probe {
  readonly protocol: string;
  readonly port: number;
  readonly path: string;
}

export function healthCheckFor(
  config: AwsConfig,
  service: V1Service,
  listeners: readonly { readonly nodePort: number }[],
): ClassicHealthCheck {
  const annotations = service.metadata?.annotations ?? {};
  const probe = annotated(defaultProbe(config, service, listeners[0]?.nodePort ?? 0), annotations);
  const number = (key: string, min: number, max: number): number | undefined =>
    wholeNumber(annotations[a(key)], a(key), min, max);
  const check = {
    target: `${probe.protocol}:${probe.port}${probe.path}`,
    intervalSeconds: number('healthcheck-interval', 5, 300) ?? 10,
    timeoutSeconds: number('healthcheck-timeout', 2, 60) ?? 5,
    healthyThreshold: number('healthcheck-healthy-threshold', 2, 10) ?? 2,
    unhealthyThreshold: number('healthcheck-unhealthy-threshold', 2, 10) ?? 6,
  };
  if (check.timeoutSeconds >= check.intervalSeconds)
    throw new ServiceSettingError(
      a('healthcheck-timeout'),
      `${check.timeoutSeconds} s must be less than the interval (${check.intervalSeconds} s)`,
    );
  return check;
}

function defaultProbe(config: AwsConfig, service: V1Service, trafficPort: number): Probe {
  const annotations = service.metadata?.annotations ?? {};
  const local = localProbe(service, trafficPort);
  if (local !== undefined) return local;
  if (config.healthProbe.mode === 'Shared')
    return { protocol: 'HTTP', port: config.healthProbe.port, path: config.healthProbe.path };
  const backend = (annotations[a('backend-protocol')] ?? '').toLowerCase();
  return { protocol: backend === 'https' || backend === 'ssl' ? 'SSL' : 'TCP', port: trafficPort, path: '' };
}

/** kube-proxy's health check of an `externalTrafficPolicy: Local` Service, if it has one. */
function localProbe(service: V1Service, trafficPort: number): Probe | undefined {
  const localPort = service.spec?.externalTrafficPolicy === 'Local' ? (service.spec.healthCheckNodePort ?? 0) : 0;
  if (localPort <= 0) return undefined;
  const port = service.metadata?.annotations?.[a('healthcheck-port')] === 'traffic-port' ? trafficPort : localPort;
  return { protocol: 'HTTP', port, path: '/healthz' };
}

/** The healthcheck-protocol, -port and -path annotations over the default probe. */
function annotated(probe: Probe, annotations: Readonly<Record<string, string>>): Probe {
  const protocol = protocolOf(probe, annotations[a('healthcheck-protocol')]);
  const port = portOf(probe, annotations[a('healthcheck-port')]);
  const pathValue = annotations[a('healthcheck-path')];
  if (protocol !== 'HTTP' && protocol !== 'HTTPS') {
    if (pathValue !== undefined)
      throw new ServiceSettingError(a('healthcheck-path'), `a ${protocol} health check has no path`);
    return { protocol, port, path: '' };
  }
  if (pathValue !== undefined && !pathValue.startsWith('/'))
    throw new ServiceSettingError(a('healthcheck-path'), `"${pathValue}" must start with /`);
  return { protocol, port, path: pathValue || (probe.path === '' ? '/' : probe.path) };
}

function protocolOf(probe: Probe, value: string | undefined): string {
  const protocol = value === undefined ? probe.protocol : value.toUpperCase();
  if (!['TCP', 'SSL', 'HTTP', 'HTTPS'].includes(protocol))
    throw new ServiceSettingError(a('healthcheck-protocol'), `"${value ?? ''}" is not tcp, ssl, http or https`);
  return protocol;
}

function portOf(probe: Probe, value: string | undefined): number {
  if (value === undefined || value === 'traffic-port') return probe.port;
  if (!isPort(value)) throw new ServiceSettingError(a('healthcheck-port'), `"${value}" is not a port or traffic-port`);
  return Number(value);
}
