// What a LoadBalancer Service asks of a Network Load Balancer, read from its spec and its
// `service.beta.kubernetes.io/aws-load-balancer-*` annotations the way upstream reads them. Pure:
// no AWS calls. A value it cannot use is an error naming the annotation (the service-lb function
// turns it into a Warning Event on the Service); an annotation that asks for a feature cirrus does
// not offer is refused by name rather than silently ignored.

import { createHash } from 'node:crypto';
import type { V1Node, V1Service, V1ServicePort, V1ServiceSpec } from '@kubernetes/client-node';
import { ImplementedElsewhereError } from '../../shared/cloud/errors.ts';
import { ANNOTATION_PREFIX, refuseAnnotations } from './annotations.ts';
import type { AwsConfig } from './config.ts';
import { ServiceSettingError, UnsupportedSettingError } from './errors.ts';
import { instanceIdFromProviderId } from './instances.ts';
import { extrasFor, type NlbExtras } from './nlb-extras.ts';
import { portProtocols, tlsSettingsOf, type ListenerProtocol, type ListenerTls } from './nlb-tls.ts';
import { sourceRangesOf } from './source-ranges.ts';
import { LEGACY_CLUSTER_TAG, SERVICE_NAME_TAG } from './tags.ts';

export { ANNOTATION_PREFIX };
const a = (name: string): string => `${ANNOTATION_PREFIX}${name}`;

export type Protocol = 'TCP' | 'UDP';
export type HealthProtocol = 'TCP' | 'HTTP' | 'HTTPS';

export interface HealthCheck {
  readonly protocol: HealthProtocol;
  /** A port number, or `traffic-port`. */
  readonly port: string;
  readonly path: string | undefined;
  readonly intervalSeconds: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
}

/** One listener and its target group. */
export interface PortMapping {
  readonly port: number;
  readonly nodePort: number;
  /** The Service port's protocol (the nodes' security group rules follow it). */
  readonly protocol: Protocol;
  /** TLS on the TLS ports (./nlb-tls.ts), else the Service port's protocol. */
  readonly listenerProtocol: ListenerProtocol;
  readonly targetProtocol: ListenerProtocol;
  /** Set exactly when the listener is TLS. */
  readonly tls: ListenerTls | undefined;
  readonly healthCheck: HealthCheck;
  /** The target group's name as upstream derives it, so groups cloud-provider-aws made are adopted. */
  readonly targetGroupName: string;
}

export interface NlbPlan {
  readonly name: string;
  readonly serviceName: string;
  readonly internal: boolean;
  readonly crossZone: boolean;
  /** Subnet IDs or Name tags from the annotation; undefined: discover. */
  readonly subnets: readonly string[] | undefined;
  readonly mappings: readonly PortMapping[];
  readonly tags: Readonly<Record<string, string>>;
  /** The instance IDs of the nodes that receive traffic. */
  readonly targets: readonly string[];
  /** The client ranges the nodes' security group admits; `given`: by the Service (else everyone, by default). */
  readonly sourceRanges: { readonly cidrs: readonly string[]; readonly given: boolean };
  /** Target group attributes, access logs, addresses (./nlb-extras.ts). */
  readonly extras: NlbExtras;
}

/** Throws ImplementedElsewhereError when another controller owns this Service's load balancer. */
export function checkImplementedHere(service: V1Service): void {
  const type = service.metadata?.annotations?.[a('type')];
  if (type === 'nlb-ip' || type === 'external') {
    throw new ImplementedElsewhereError(`${a('type')}: "${type}" is implemented by the AWS Load Balancer Controller`);
  }
}

/** Whether the Service's load balancer is another controller's (getLoadBalancer and delete then do nothing). */
export function implementedElsewhere(service: V1Service): boolean {
  const type = service.metadata?.annotations?.[a('type')];
  return type === 'nlb-ip' || type === 'external';
}

export function planFor(config: AwsConfig, name: string, service: V1Service, nodes: readonly V1Node[]): NlbPlan {
  checkImplementedHere(service);
  const annotations = service.metadata?.annotations ?? {};
  const namespace = service.metadata?.namespace ?? '';
  const serviceName = service.metadata?.name ?? '';
  checkAnnotations(annotations);
  const spec = service.spec ?? {};
  checkSpec(spec);
  const mappings = mappingsFor(config, service, { namespace, name: serviceName });
  const crossZone = crossZoneOf(annotations);
  const subnets = annotations[a('subnets')];
  const internal = isInternal(annotations[a('internal')]);
  return {
    name,
    serviceName: `${namespace}/${serviceName}`,
    internal,
    crossZone,
    subnets: subnets === undefined ? undefined : list(subnets, a('subnets')),
    mappings,
    tags: {
      ...additionalTags(annotations[a('additional-resource-tags')]),
      [SERVICE_NAME_TAG]: `${namespace}/${serviceName}`,
    },
    targets: targetsOf(nodes, annotations[a('target-node-labels')]),
    sourceRanges: sourceRangesOf(service),
    extras: extrasFor(annotations, spec.ports ?? [], internal),
  };
}

/** Refuses a load balancer type other than nlb and the annotations a Network Load Balancer made by cirrus does not take (./annotations.ts). */
function checkAnnotations(annotations: Readonly<Record<string, string>>): void {
  const type = annotations[a('type')];
  if (type !== undefined && type !== 'nlb') {
    throw new UnsupportedSettingError(
      a('type'),
      `"${type}" is not supported: "nlb" makes a Network Load Balancer, no annotation a Classic ELB; "nlb-ip" and "external" are left to the AWS Load Balancer Controller`,
    );
  }
  refuseAnnotations(annotations, 'nlb');
}

/** Refuses what a Network Load Balancer cannot do: session affinity, a chosen IP. */
function checkSpec(spec: V1ServiceSpec): void {
  if ((spec.sessionAffinity ?? 'None') !== 'None')
    throw new UnsupportedSettingError(
      'spec.sessionAffinity',
      `${spec.sessionAffinity}: a Network Load Balancer supports only None`,
    );
  if ((spec.loadBalancerIP ?? '') !== '')
    throw new UnsupportedSettingError('spec.loadBalancerIP', 'cannot be chosen for a Network Load Balancer');
}

/** The one protocol of the Service's ports (a Network Load Balancer made by cirrus takes one), TCP or UDP. */
function protocolOf(ports: readonly V1ServicePort[]): Protocol {
  if (ports.length === 0) throw new ServiceSettingError('spec.ports', 'the Service has no ports');
  const protocols = [...new Set(ports.map((p) => p.protocol ?? 'TCP'))];
  if (protocols.length > 1)
    throw new UnsupportedSettingError(
      'spec.ports',
      `the Service mixes protocols (${protocols.join(', ')}); a Network Load Balancer made by cirrus takes one`,
    );
  const [protocol] = protocols;
  if (protocol !== 'TCP' && protocol !== 'UDP')
    throw new UnsupportedSettingError(
      'spec.ports',
      `protocol ${String(protocol)}: a Network Load Balancer takes TCP or UDP`,
    );
  return protocol;
}

/** A listener and target group per port that has a nodePort. */
function mappingsFor(
  config: AwsConfig,
  service: V1Service,
  id: { readonly namespace: string; readonly name: string },
): PortMapping[] {
  const ports = service.spec?.ports ?? [];
  const protocol = protocolOf(ports);
  const healthCheck = healthCheckFor(config, service);
  const tls = tlsSettingsOf(service.metadata?.annotations ?? {});
  const mappings: PortMapping[] = [];
  for (const p of ports) {
    if (p.nodePort === undefined || p.nodePort === 0) continue;
    const { port, nodePort } = p;
    const protocols = portProtocols(tls, p, protocol);
    mappings.push({
      port,
      nodePort,
      protocol,
      ...protocols,
      healthCheck,
      targetGroupName: targetGroupName({
        clusterId: config.clusterId,
        ...id,
        port,
        nodePort,
        protocol: protocols.targetProtocol,
        health: healthCheck,
      }),
    });
  }
  if (mappings.length === 0) throw new ServiceSettingError('spec.ports', 'no port of the Service has a nodePort yet');
  return mappings;
}

export function isInternal(value: string | undefined): boolean {
  return value !== undefined && value !== '' && value !== 'false';
}

function crossZoneOf(annotations: Readonly<Record<string, string>>): boolean {
  const value = annotations[a('cross-zone-load-balancing-enabled')];
  if (value !== undefined && value !== 'true' && value !== 'false') {
    throw new ServiceSettingError(a('cross-zone-load-balancing-enabled'), `"${value}" is not true or false`);
  }
  return value === 'true';
}

/** Upstream's defaults: kube-proxy's health check for Local traffic, the shared probe, or TCP on the traffic port. */
function defaultHealthCheck(config: AwsConfig, service: V1Service): HealthCheck {
  const localPort = service.spec?.externalTrafficPolicy === 'Local' ? (service.spec.healthCheckNodePort ?? 0) : 0;
  if (localPort > 0) {
    return {
      protocol: 'HTTP',
      port: String(localPort),
      path: '/healthz',
      intervalSeconds: 10,
      healthyThreshold: 2,
      unhealthyThreshold: 2,
    };
  }
  if (config.healthProbe.mode === 'Shared') {
    return {
      protocol: 'HTTP',
      port: String(config.healthProbe.port),
      path: config.healthProbe.path,
      intervalSeconds: 10,
      healthyThreshold: 2,
      unhealthyThreshold: 2,
    };
  }
  return {
    protocol: 'TCP',
    port: 'traffic-port',
    path: undefined,
    intervalSeconds: 30,
    healthyThreshold: 3,
    unhealthyThreshold: 3,
  };
}

function healthCheckFor(config: AwsConfig, service: V1Service): HealthCheck {
  const annotations = service.metadata?.annotations ?? {};
  let check = withHealthProtocol(defaultHealthCheck(config, service), annotations[a('healthcheck-protocol')]);
  check = withHealthPort(check, annotations[a('healthcheck-port')]);
  check = withHealthPath(check, annotations[a('healthcheck-path')]);
  const number = (key: string, min: number, max: number): number | undefined =>
    wholeNumber(annotations[a(key)], a(key), min, max);
  // Checked as upstream does, and, as upstream, not sent: AWS chooses an NLB's timeout.
  number('healthcheck-timeout', 2, 120);
  return {
    ...check,
    intervalSeconds: number('healthcheck-interval', 5, 300) ?? check.intervalSeconds,
    healthyThreshold: number('healthcheck-healthy-threshold', 2, 10) ?? check.healthyThreshold,
    unhealthyThreshold: number('healthcheck-unhealthy-threshold', 2, 10) ?? check.unhealthyThreshold,
  };
}

function withHealthProtocol(check: HealthCheck, protocol: string | undefined): HealthCheck {
  if (protocol === undefined) return check;
  const upper = protocol.toUpperCase();
  if (upper !== 'TCP' && upper !== 'HTTP' && upper !== 'HTTPS')
    throw new ServiceSettingError(a('healthcheck-protocol'), `"${protocol}" is not tcp, http or https`);
  return { ...check, protocol: upper, path: upper === 'TCP' ? undefined : (check.path ?? '/') };
}

function withHealthPort(check: HealthCheck, port: string | undefined): HealthCheck {
  if (port === undefined) return check;
  if (port !== 'traffic-port' && !isPort(port))
    throw new ServiceSettingError(a('healthcheck-port'), `"${port}" is not a port or traffic-port`);
  return { ...check, port };
}

function withHealthPath(check: HealthCheck, path: string | undefined): HealthCheck {
  if (path === undefined) return check;
  if (check.protocol === 'TCP') throw new ServiceSettingError(a('healthcheck-path'), 'a TCP health check has no path');
  if (!path.startsWith('/')) throw new ServiceSettingError(a('healthcheck-path'), `"${path}" must start with /`);
  return { ...check, path };
}

/** An annotation's whole number in [min, max], or undefined when it is absent. */
export function wholeNumber(
  value: string | undefined,
  annotation: string,
  min: number,
  max: number,
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < min || n > max)
    throw new ServiceSettingError(annotation, `"${value}" is not a whole number from ${min} to ${max}`);
  return n;
}

/** What a target group's name is derived from: what a target group cannot change. */
export interface TargetGroupKey {
  readonly clusterId: string;
  readonly namespace: string;
  readonly name: string;
  readonly port: number;
  readonly nodePort: number;
  /** The target group's protocol: TLS for a TLS backend, so upstream's name changes with it. */
  readonly protocol: ListenerProtocol;
  readonly health: HealthCheck;
}

/** Upstream's target group name: `k8s-<ns:8>-<name:8>-<sha1:10>` over what a target group cannot change. */
export function targetGroupName(key: TargetGroupKey): string {
  const { clusterId, namespace, name, port, nodePort, protocol, health } = key;
  const hash = createHash('sha1')
    .update(clusterId)
    .update(namespace)
    .update(name)
    .update(String(port))
    .update(String(nodePort))
    .update(protocol)
    .update('instance')
    .update(health.protocol)
    .update(String(health.intervalSeconds))
    .digest('hex');
  const clean = (s: string): string => s.replace(/[^A-Za-z0-9]/g, '').slice(0, 8);
  return `k8s-${clean(namespace)}-${clean(name)}-${hash.slice(0, 10)}`;
}

export function isPort(value: string): boolean {
  return /^\d+$/.test(value) && Number(value) >= 1 && Number(value) <= 65535;
}

export function list(value: string, annotation: string): string[] {
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new ServiceSettingError(annotation, 'empty');
  return items;
}

/** `k1=v1,k2=v2,k3=,k4`, as upstream reads it. */
export function additionalTags(value: string | undefined): Record<string, string> {
  const tags: Record<string, string> = {};
  if (value === undefined) return tags;
  for (const item of value.split(',')) {
    const [key = '', ...rest] = item.split('=');
    const k = key.trim();
    if (k === '') continue;
    // Ownership is read from these (tags.ts): a Service's owner must not be able to give them.
    if (k.startsWith('kubernetes.io/cluster/') || k === SERVICE_NAME_TAG || k === LEGACY_CLUSTER_TAG) {
      throw new ServiceSettingError(a('additional-resource-tags'), `"${k}" is set by cirrus and cannot be given`);
    }
    tags[k] = rest.join('=').trim();
  }
  return tags;
}

/** The instance IDs of the Service's target nodes among `nodes`, whatever else its settings say. */
export function nodeTargets(service: V1Service, nodes: readonly V1Node[]): string[] {
  return targetsOf(nodes, service.metadata?.annotations?.[a('target-node-labels')]);
}

/** The instance IDs of the nodes that match `target-node-labels` (`k=v` must match; `k` or `k=` needs the key). */
export function targetsOf(nodes: readonly V1Node[], selector: string | undefined): string[] {
  const wanted = (selector ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => {
      const [k = '', ...v] = s.split('=');
      return { key: k.trim(), value: v.join('=').trim() };
    });
  const ids = new Set<string>();
  for (const node of nodes) {
    const labels = node.metadata?.labels ?? {};
    if (!wanted.every(({ key, value }) => (value === '' ? key in labels : labels[key] === value))) continue;
    try {
      ids.add(instanceIdFromProviderId(node.spec?.providerID ?? ''));
    } catch {
      // A Node without an EC2 provider ID cannot be a target (upstream skips it too).
    }
  }
  return [...ids].sort();
}
