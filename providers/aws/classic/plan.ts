// What a LoadBalancer Service asks of a Classic ELB, read from its spec and annotations the way
// cloud-provider-aws reads them (pkg/providers/v1/aws.go, EnsureLoadBalancer and buildListener;
// aws_loadbalancer.go, ensureLoadBalancerHealthCheck and getExpectedHealthCheck). Pure: no AWS
// calls. A value it cannot use is an error naming the annotation or field; an annotation asking
// for what cirrus does not offer on a Classic ELB is refused by name.

import type { V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { ANNOTATION_PREFIX, refuseAnnotations } from '../annotations.ts';
import type { AwsConfig } from '../config.ts';
import { ServiceSettingError, UnsupportedSettingError } from '../errors.ts';
import { additionalTags, isInternal, list, targetsOf, wholeNumber } from '../nlb-plan.ts';
import { sourceRangesOf } from '../source-ranges.ts';
import { SERVICE_NAME_TAG } from '../tags.ts';
import { healthCheckFor, type ClassicHealthCheck } from './health-check.ts';

const a = (name: string): string => `${ANNOTATION_PREFIX}${name}`;

/** Upstream's name of the policy that turns PROXY protocol on for a backend port. */
export const PROXY_PROTOCOL_POLICY = 'k8s-proxyprotocol-enabled';
/** Upstream's name of the policy that carries an SSL negotiation policy: `k8s-SSLNegotiationPolicy-<name>`. */
export const sslPolicyName = (name: string): string => `k8s-SSLNegotiationPolicy-${name}`;

export type ListenerProtocol = 'TCP' | 'SSL' | 'HTTP' | 'HTTPS';

export interface ClassicListener {
  readonly port: number;
  readonly nodePort: number;
  readonly protocol: ListenerProtocol;
  readonly instanceProtocol: ListenerProtocol;
  readonly certificate: string | undefined;
}

export interface ClassicAttributes {
  readonly crossZone: boolean;
  readonly idleTimeout: number;
  readonly draining: { readonly enabled: boolean; readonly timeout: number | undefined };
  readonly accessLog: {
    readonly enabled: boolean;
    readonly emitInterval: number | undefined;
    readonly bucket: string | undefined;
    readonly prefix: string | undefined;
  };
}

export interface ClassicPlan {
  readonly name: string;
  readonly serviceName: string;
  readonly internal: boolean;
  /** Subnet IDs or Name tags from the annotation; undefined: discover at create, keep afterwards. */
  readonly subnets: readonly string[] | undefined;
  readonly listeners: readonly ClassicListener[];
  /** Every port of the Service (TCP), for the load balancer's security group. */
  readonly ports: readonly number[];
  readonly healthCheck: ClassicHealthCheck;
  readonly attributes: ClassicAttributes;
  readonly proxyProtocol: boolean;
  /** The SSL negotiation policy's name (`ssl-negotiation-policy`), for the SSL and HTTPS listeners. */
  readonly sslPolicy: string | undefined;
  /** The client ranges (IPv4, normalised; 0.0.0.0/0 unless `given` by the Service). */
  readonly sourceRanges: { readonly cidrs: readonly string[]; readonly given: boolean };
  /** `additional-resource-tags`, as given. */
  readonly extraTags: Readonly<Record<string, string>>;
  /** The load balancer's tags besides the cluster's: the extra tags and `kubernetes.io/service-name`. */
  readonly tags: Readonly<Record<string, string>>;
  /** The instance IDs of the nodes that receive traffic. */
  readonly targets: readonly string[];
  /** Upstream's name of the load balancer's own security group: `k8s-elb-<name>`. */
  readonly securityGroupName: string;
}

export function classicPlanFor(
  config: AwsConfig,
  name: string,
  service: V1Service,
  nodes: readonly V1Node[],
): ClassicPlan {
  const annotations = service.metadata?.annotations ?? {};
  const serviceName = `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
  refuseAnnotations(annotations, 'classic');
  const ports = checkedPorts(service);
  const listeners = listenersFor(ports, annotations);
  const extraTags = additionalTags(annotations[a('additional-resource-tags')]);
  const subnets = annotations[a('subnets')];
  return {
    name,
    serviceName,
    internal: isInternal(annotations[a('internal')]),
    subnets: subnets === undefined ? undefined : list(subnets, a('subnets')),
    listeners,
    ports: ports.map((p) => p.port),
    healthCheck: healthCheckFor(config, service, listeners),
    attributes: attributesOf(annotations),
    proxyProtocol: proxyProtocolOf(annotations[a('proxy-protocol')]),
    sslPolicy: annotations[a('ssl-negotiation-policy')],
    sourceRanges: sourceRangesOf(service),
    extraTags,
    tags: { ...extraTags, [SERVICE_NAME_TAG]: serviceName },
    targets: targetsOf(nodes, annotations[a('target-node-labels')]),
    securityGroupName: `k8s-elb-${name}`,
  };
}

/** The Service's ports, checked as upstream checks them for a Classic ELB: TCP only, no chosen IP or affinity. */
function checkedPorts(service: V1Service): V1ServicePort[] {
  const spec = service.spec ?? {};
  if ((spec.sessionAffinity ?? 'None') !== 'None')
    throw new UnsupportedSettingError(
      'spec.sessionAffinity',
      `${spec.sessionAffinity}: a Classic ELB made by cirrus supports only None`,
    );
  if ((spec.loadBalancerIP ?? '') !== '')
    throw new UnsupportedSettingError('spec.loadBalancerIP', 'cannot be chosen for a Classic ELB');
  return tcpPorts(spec.ports ?? []);
}

function tcpPorts(ports: V1ServicePort[]): V1ServicePort[] {
  if (ports.length === 0) throw new ServiceSettingError('spec.ports', 'the Service has no ports');
  for (const p of ports) {
    if ((p.protocol ?? 'TCP') !== 'TCP')
      throw new UnsupportedSettingError(
        'spec.ports',
        `port ${p.port}: protocol ${p.protocol ?? ''}: a Classic ELB takes TCP only`,
      );
  }
  return ports;
}

/** One listener per port with a nodePort, as upstream's buildListener makes it. */
function listenersFor(
  ports: readonly V1ServicePort[],
  annotations: Readonly<Record<string, string>>,
): ClassicListener[] {
  const certificate = annotations[a('ssl-cert')] ?? '';
  if (certificate === '' && annotations[a('ssl-ports')] !== undefined)
    throw new ServiceSettingError(a('ssl-ports'), `names SSL ports, but ${a('ssl-cert')} gives no certificate`);
  const tls = {
    certificate,
    backend: backendProtocolOf(annotations[a('backend-protocol')]),
    sslPorts: sslPortsOf(annotations[a('ssl-ports')]),
  };
  const listeners = ports.filter((p) => (p.nodePort ?? 0) !== 0).map((p) => listenerFor(p, tls));
  if (listeners.length === 0) throw new ServiceSettingError('spec.ports', 'no port of the Service has a nodePort yet');
  return listeners;
}

interface Tls {
  readonly certificate: string;
  readonly backend: ListenerProtocol | undefined;
  readonly sslPorts: Set<string> | undefined;
}

function listenerFor(p: V1ServicePort, tls: Tls): ClassicListener {
  const secure = tls.certificate !== '' && isSslPort(tls.sslPorts, p);
  const protocols = secure ? secureProtocols(tls.backend) : plainProtocols(tls.backend);
  return { port: p.port, nodePort: p.nodePort ?? 0, ...protocols, certificate: secure ? tls.certificate : undefined };
}

/** The front and back protocols of a listener with a certificate: SSL to TCP unless the backend protocol says otherwise. */
function secureProtocols(
  backend: ListenerProtocol | undefined,
): Pick<ClassicListener, 'protocol' | 'instanceProtocol'> {
  if (backend === undefined) return { protocol: 'SSL', instanceProtocol: 'TCP' };
  const protocol: ListenerProtocol = backend === 'HTTP' || backend === 'HTTPS' ? 'HTTPS' : 'SSL';
  return { protocol, instanceProtocol: backend };
}

/** A listener without a certificate: HTTP when the backend protocol is http, else TCP. */
function plainProtocols(backend: ListenerProtocol | undefined): Pick<ClassicListener, 'protocol' | 'instanceProtocol'> {
  return backend === 'HTTP'
    ? { protocol: 'HTTP', instanceProtocol: 'HTTP' }
    : { protocol: 'TCP', instanceProtocol: 'TCP' };
}

function backendProtocolOf(value: string | undefined): ListenerProtocol | undefined {
  if (value === undefined) return undefined;
  const upper = value.toUpperCase();
  if (upper !== 'TCP' && upper !== 'SSL' && upper !== 'HTTP' && upper !== 'HTTPS')
    throw new ServiceSettingError(a('backend-protocol'), `"${value}" is not http, https, ssl or tcp`);
  return upper;
}

/** `ssl-ports`: port numbers and names; undefined (or `*`): every port. */
function sslPortsOf(value: string | undefined): Set<string> | undefined {
  if (value === undefined || value.trim() === '' || value.trim() === '*') return undefined;
  return new Set(list(value, a('ssl-ports')).map((s) => s.toLowerCase()));
}

function isSslPort(sslPorts: Set<string> | undefined, port: V1ServicePort): boolean {
  return sslPorts === undefined || sslPorts.has(String(port.port)) || sslPorts.has((port.name ?? '').toLowerCase());
}

function proxyProtocolOf(value: string | undefined): boolean {
  if (value === undefined || value === '') return false;
  if (value !== '*')
    throw new ServiceSettingError(a('proxy-protocol'), `"${value}": the only value upstream supports is "*"`);
  return true;
}

/** Go's strconv.ParseBool, as upstream parses these annotations. */
function goBool(value: string | undefined, annotation: string): boolean | undefined {
  if (value === undefined || value === '') return undefined;
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  throw new ServiceSettingError(annotation, `"${value}" is not true or false`);
}

/** Upstream's attribute defaults (cross-zone off, idle 60 s, no draining, no access log), then the annotations. */
function attributesOf(annotations: Readonly<Record<string, string>>): ClassicAttributes {
  const bool = (key: string): boolean | undefined => goBool(annotations[a(key)], a(key));
  const number = (key: string, min: number, max: number): number | undefined =>
    wholeNumber(annotations[a(key)], a(key), min, max);
  return {
    crossZone: bool('cross-zone-load-balancing-enabled') ?? false,
    idleTimeout: number('connection-idle-timeout', 1, 4000) ?? 60,
    draining: {
      enabled: bool('connection-draining-enabled') ?? false,
      timeout: number('connection-draining-timeout', 1, 3600),
    },
    accessLog: accessLogOf(annotations),
  };
}

function accessLogOf(annotations: Readonly<Record<string, string>>): ClassicAttributes['accessLog'] {
  const bool = (key: string): boolean | undefined => goBool(annotations[a(key)], a(key));
  const number = (key: string, min: number, max: number): number | undefined =>
    wholeNumber(annotations[a(key)], a(key), min, max);
  const accessLog = {
    enabled: bool('access-log-enabled') ?? false,
    emitInterval: number('access-log-emit-interval', 5, 60),
    bucket: annotations[a('access-log-s3-bucket-name')],
    prefix: annotations[a('access-log-s3-bucket-prefix')],
  };
  if (accessLog.emitInterval !== undefined && accessLog.emitInterval !== 5 && accessLog.emitInterval !== 60)
    throw new ServiceSettingError(a('access-log-emit-interval'), `"${accessLog.emitInterval}" is not 5 or 60`);
  if (accessLog.enabled && (accessLog.bucket ?? '') === '')
    throw new ServiceSettingError(a('access-log-enabled'), `access logs need ${a('access-log-s3-bucket-name')}`);
  return accessLog;
}
