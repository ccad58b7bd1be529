// TLS listeners on a Network Load Balancer, read from a Service as cloud-provider-aws reads them
// (pkg/providers/v1/aws.go, EnsureLoadBalancer's NLB port mappings, and getPortSets), so that a
// listener it made is adopted as it is:
//   - `ssl-cert` given: every TCP port named by `ssl-ports` (absent, empty or `*`: every TCP port;
//     else a comma-separated list of port numbers and names, compared untrimmed and case-sensitive,
//     as upstream) gets a TLS listener with that one certificate; UDP ports never do;
//   - `ssl-negotiation-policy`: the TLS listeners' policy; without it none is sent, AWS gives its
//     default on create, and whatever policy a listener has is kept after;
//   - `backend-protocol: ssl` (exactly that value, as upstream): the TLS ports' target groups speak
//     TLS to the nodes; otherwise TCP. A target group's protocol is part of its name (targetGroupName).
// What has no effect (a port `ssl-ports` names that the Service lacks, a policy without a TLS port,
// another backend protocol) is returned by tlsUnapplied for a Warning: upstream ignores it silently.

import type { V1Service, V1ServicePort } from '@kubernetes/client-node';
import { ANNOTATION_PREFIX } from './annotations.ts';
import { ServiceSettingError } from './errors.ts';

const a = (name: string): string => `${ANNOTATION_PREFIX}${name}`;

export type ListenerProtocol = 'TCP' | 'UDP' | 'TLS';

export interface ListenerTls {
  readonly certificateArn: string;
  /** `ssl-negotiation-policy`; undefined: AWS's default on create, and the listener's own after. */
  readonly sslPolicy: string | undefined;
}

/** What one port's listener and target group speak. */
export interface PortProtocols {
  readonly listenerProtocol: ListenerProtocol;
  readonly targetProtocol: ListenerProtocol;
  /** Set exactly when the listener is TLS. */
  readonly tls: ListenerTls | undefined;
}

/** The Service's TLS settings; undefined when it gives no certificate (no port is TLS). */
export interface TlsSettings {
  readonly listener: ListenerTls;
  /** Undefined: every TCP port. */
  readonly ports: { readonly numbers: ReadonlySet<number>; readonly names: ReadonlySet<string> } | undefined;
  readonly backendTls: boolean;
}

/** An ACM or IAM server certificate ARN (any partition): anything else AWS refuses after the load balancer exists. */
const CERTIFICATE_ARN = /^arn:aws[a-z-]*:(acm|iam):[a-z0-9-]*:\d{12}:(certificate|server-certificate)\/\S+$/;

export function tlsSettingsOf(annotations: Readonly<Record<string, string>>): TlsSettings | undefined {
  const certificateArn = annotations[a('ssl-cert')] ?? '';
  if (certificateArn === '') return undefined;
  if (!CERTIFICATE_ARN.test(certificateArn))
    throw new ServiceSettingError(a('ssl-cert'), `"${certificateArn}" is not an ACM or IAM certificate ARN`);
  const policy = annotations[a('ssl-negotiation-policy')] ?? '';
  return {
    listener: { certificateArn, sslPolicy: policy === '' ? undefined : policy },
    ports: sslPortsOf(annotations[a('ssl-ports')]),
    backendTls: annotations[a('backend-protocol')] === 'ssl',
  };
}

/** Upstream's getPortSets: items that parse as whole numbers are port numbers, the others names. */
function sslPortsOf(value: string | undefined): TlsSettings['ports'] {
  if (value === undefined || value === '' || value === '*') return undefined;
  const numbers = new Set<number>();
  const names = new Set<string>();
  for (const item of value.split(',')) {
    if (/^[+-]?\d+$/.test(item)) numbers.add(Number(item));
    else names.add(item);
  }
  return { numbers, names };
}

function isTlsPort(settings: TlsSettings, port: V1ServicePort): boolean {
  if ((port.protocol ?? 'TCP') === 'UDP') return false;
  const { ports } = settings;
  return ports === undefined || ports.numbers.has(port.port) || ports.names.has(port.name ?? '');
}

/** The protocols of `port`'s listener and target group; `protocol` is the Service's (TCP or UDP). */
export function portProtocols(
  settings: TlsSettings | undefined,
  port: V1ServicePort,
  protocol: 'TCP' | 'UDP',
): PortProtocols {
  if (settings === undefined || !isTlsPort(settings, port))
    return { listenerProtocol: protocol, targetProtocol: protocol, tls: undefined };
  return {
    listenerProtocol: 'TLS',
    targetProtocol: settings.backendTls ? 'TLS' : 'TCP',
    tls: settings.listener,
  };
}

export interface Unapplied {
  readonly annotation: string;
  readonly why: string;
}

/** The TLS annotations of an NLB Service that have no effect, each with why (a Warning each); a bad certificate ARN is the plan's error. */
export function tlsUnapplied(service: V1Service): Unapplied[] {
  const annotations = service.metadata?.annotations ?? {};
  const given = (name: string): boolean => annotations[a(name)] !== undefined;
  let settings: TlsSettings | undefined;
  try {
    settings = tlsSettingsOf(annotations);
  } catch {
    return [];
  }
  if (settings === undefined) {
    const idle = ['ssl-ports', 'ssl-negotiation-policy', 'backend-protocol'].filter(given);
    return idle.map((name) => ({
      annotation: a(name),
      why: `has no effect without ${a('ssl-cert')}: the listeners are plain TCP (as cloud-provider-aws)`,
    }));
  }
  const ports = service.spec?.ports ?? [];
  const tlsPorts = ports.filter((p) => isTlsPort(settings, p));
  if (tlsPorts.length === 0) {
    const idle = ['ssl-cert', 'ssl-ports', 'ssl-negotiation-policy', 'backend-protocol'].filter(given);
    return idle.map((name) => ({
      annotation: a(name),
      why: `has no effect: no TCP port of the Service is one of the ssl-ports, so no listener is TLS`,
    }));
  }
  return [...unknownSslPorts(settings, ports), ...idleBackendProtocol(annotations[a('backend-protocol')])];
}

/** The items of `ssl-ports` that name no TCP port of the Service. */
function unknownSslPorts(settings: TlsSettings, ports: readonly V1ServicePort[]): Unapplied[] {
  if (settings.ports === undefined) return [];
  const tcp = ports.filter((p) => (p.protocol ?? 'TCP') !== 'UDP');
  const items = [
    ...[...settings.ports.numbers].filter((n) => !tcp.some((p) => p.port === n)).map(String),
    ...[...settings.ports.names].filter((n) => !tcp.some((p) => (p.name ?? '') === n)),
  ];
  return items.map((item) => ({
    annotation: a('ssl-ports'),
    why: `"${item}" names no TCP port of the Service (port numbers and names are matched exactly); it has no effect`,
  }));
}

function idleBackendProtocol(value: string | undefined): Unapplied[] {
  if (value === undefined || value === 'ssl') return [];
  return [
    {
      annotation: a('backend-protocol'),
      why: `"${value}" has no effect on a Network Load Balancer: only "ssl" (TLS to the nodes on the TLS ports) does, as in cloud-provider-aws`,
    },
  ];
}
