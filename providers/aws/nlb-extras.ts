// What a Service asks of a Network Load Balancer beyond listeners and targets, read from its
// annotations the way cloud-provider-aws reads them (pkg/providers/v1/aws_loadbalancer.go,
// ensureLoadBalancerv2, reconcileLBAttributes, buildTargetGroupAttributes; aws_validations.go,
// validateServiceAnnotationTargetGroupAttributes): target group attributes, access logs, and the
// Elastic IPs or private addresses of its subnet mappings. Pure: no AWS calls. A value upstream
// would refuse (or send AWS to refuse, after creating the load balancer) is refused here, before
// anything is made.

import { isIPv4 } from 'node:net';
import type { LoadBalancer as Nlb, SubnetMapping } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1ServicePort } from '@kubernetes/client-node';
import { ANNOTATION_PREFIX } from './annotations.ts';
import { ServiceSettingError, UnsupportedSettingError } from './errors.ts';

const a = (name: string): string => `${ANNOTATION_PREFIX}${name}`;
export const TARGET_GROUP_ATTRIBUTES = a('target-group-attributes');
export const EIP_ALLOCATIONS = a('eip-allocations');
export const PRIVATE_IPV4_ADDRESSES = a('private-ipv4-addresses');
export const ACCESS_LOG_ENABLED = a('access-log-enabled');
export const ACCESS_LOG_BUCKET = a('access-log-s3-bucket-name');
export const ACCESS_LOG_PREFIX = a('access-log-s3-bucket-prefix');

/** The target group attributes upstream takes; any other key is refused, as upstream refuses it. */
const KNOWN_TARGET_GROUP_ATTRIBUTES = ['preserve_client_ip.enabled', 'proxy_protocol_v2.enabled'];

export interface AccessLogs {
  readonly enabled: boolean;
  readonly bucket: string;
  readonly prefix: string;
}

export interface NlbExtras {
  /** The annotation's attributes; undefined: no annotation, the target groups keep what they have (as upstream). */
  readonly targetGroupAttributes: Readonly<Record<string, string>> | undefined;
  readonly accessLogs: AccessLogs;
  /** One Elastic IP allocation per subnet, in the subnets' order; undefined: AWS assigns addresses. */
  readonly allocationIds: readonly string[] | undefined;
  /** One private IPv4 address per subnet, in the subnets' order; undefined: AWS assigns them. */
  readonly privateAddresses: readonly string[] | undefined;
  /** Annotations given that do nothing with the others as they are, each with why: each gets a Warning. */
  readonly unapplied: readonly { readonly annotation: string; readonly why: string }[];
}

export function extrasFor(
  annotations: Readonly<Record<string, string>>,
  ports: readonly V1ServicePort[],
  internal: boolean,
): NlbExtras {
  const accessLogs = accessLogsOf(annotations);
  return {
    targetGroupAttributes: targetGroupAttributesOf(annotations[TARGET_GROUP_ATTRIBUTES], ports),
    accessLogs,
    allocationIds: addressesOf(annotations, EIP_ALLOCATIONS, internal),
    privateAddresses: addressesOf(annotations, PRIVATE_IPV4_ADDRESSES, internal),
    unapplied: accessLogs.enabled
      ? []
      : [ACCESS_LOG_BUCKET, ACCESS_LOG_PREFIX]
          .filter((key) => annotations[key] !== undefined)
          .map((annotation) => ({
            annotation,
            why: `has no effect while ${ACCESS_LOG_ENABLED} is not true (as cloud-provider-aws)`,
          })),
  };
}

/** `k=v,…` as upstream reads it (a key without `=` has an empty value; the last of a key wins), then validated as upstream validates it. */
function targetGroupAttributesOf(
  value: string | undefined,
  ports: readonly V1ServicePort[],
): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  const attributes: Record<string, string> = {};
  for (const item of value.split(',')) {
    const [key = '', ...rest] = item.trim().split('=');
    if (key !== '') attributes[key] = rest.join('=');
  }
  for (const [key, v] of Object.entries(attributes)) checkTargetGroupAttribute(key, v, ports);
  return attributes;
}

function checkTargetGroupAttribute(key: string, value: string, ports: readonly V1ServicePort[]): void {
  if (!KNOWN_TARGET_GROUP_ATTRIBUTES.includes(key))
    throw new UnsupportedSettingError(
      TARGET_GROUP_ATTRIBUTES,
      `"${key}" is not a target group attribute cloud-provider-aws or cirrus sets (${KNOWN_TARGET_GROUP_ATTRIBUTES.join(', ')})`,
    );
  if (value !== 'true' && value !== 'false')
    throw new ServiceSettingError(TARGET_GROUP_ATTRIBUTES, `${key}: "${value}" is not true or false`);
  // AWS cannot turn client IP preservation off for UDP.
  if (key === 'preserve_client_ip.enabled' && value === 'false' && ports.some((p) => p.protocol === 'UDP'))
    throw new ServiceSettingError(TARGET_GROUP_ATTRIBUTES, 'client IP preservation cannot be disabled for UDP ports');
}

/** Go's strconv.ParseBool, which upstream reads access-log-enabled with. */
function parseBool(value: string, annotation: string): boolean {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  throw new ServiceSettingError(annotation, `"${value}" is not true or false`);
}

function accessLogsOf(annotations: Readonly<Record<string, string>>): AccessLogs {
  const enabled =
    (annotations[ACCESS_LOG_ENABLED] ?? '') !== '' &&
    parseBool(annotations[ACCESS_LOG_ENABLED] ?? '', ACCESS_LOG_ENABLED);
  const bucket = annotations[ACCESS_LOG_BUCKET] ?? '';
  // AWS refuses access logs without a bucket (upstream sends the request and fails after creating the load balancer).
  if (enabled && bucket === '')
    throw new ServiceSettingError(ACCESS_LOG_ENABLED, `access logs need a bucket: set ${ACCESS_LOG_BUCKET}`);
  return { enabled, bucket, prefix: annotations[ACCESS_LOG_PREFIX] ?? '' };
}

/** The Elastic IPs (internet-facing only) or private addresses (internal only) of the subnet mappings. */
function addressesOf(
  annotations: Readonly<Record<string, string>>,
  annotation: string,
  internal: boolean,
): string[] | undefined {
  const value = annotations[annotation];
  if (value === undefined) return undefined;
  const items = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new ServiceSettingError(annotation, 'empty');
  if (annotation === EIP_ALLOCATIONS && internal)
    throw new ServiceSettingError(
      annotation,
      'Elastic IPs are for an internet-facing load balancer; this one is internal',
    );
  if (annotation === PRIVATE_IPV4_ADDRESSES) {
    if (!internal)
      throw new ServiceSettingError(
        annotation,
        'private IPv4 addresses are for an internal load balancer; this one is internet-facing',
      );
    const bad = items.find((ip) => !isIPv4(ip));
    if (bad !== undefined) throw new ServiceSettingError(annotation, `"${bad}" is not an IPv4 address`);
  }
  return items;
}

/** A new load balancer's subnet mappings: one allocation or address per subnet, in order, as upstream pairs them. */
export function subnetMappings(subnets: readonly string[], extras: NlbExtras): SubnetMapping[] {
  for (const [annotation, items] of [
    [EIP_ALLOCATIONS, extras.allocationIds],
    [PRIVATE_IPV4_ADDRESSES, extras.privateAddresses],
  ] as const) {
    if (items !== undefined && items.length !== subnets.length)
      throw new ServiceSettingError(
        annotation,
        `${items.length} given for ${subnets.length} subnet(s) (${subnets.join(', ')}): one per subnet`,
      );
  }
  return subnets.map((SubnetId, i) => ({
    SubnetId,
    ...(extras.allocationIds === undefined ? {} : { AllocationId: extras.allocationIds[i] }),
    ...(extras.privateAddresses === undefined ? {} : { PrivateIPv4Address: extras.privateAddresses[i] }),
  }));
}

/**
 * Why an existing load balancer cannot take the addresses the Service asks for, or undefined. An
 * NLB's subnet mappings are fixed at creation: upstream ignores a change; cirrus refuses it, and
 * does not re-create the load balancer (its DNS name and addresses would change). An annotation
 * that is absent asks for nothing: the load balancer keeps what it has.
 */
export function addressChange(nlb: Nlb, extras: NlbExtras): ServiceSettingError | undefined {
  const addresses = (nlb.AvailabilityZones ?? []).flatMap((z) => z.LoadBalancerAddresses ?? []);
  const asked: [string, readonly string[] | undefined, (string | undefined)[]][] = [
    [EIP_ALLOCATIONS, extras.allocationIds, addresses.map((x) => x.AllocationId)],
    [PRIVATE_IPV4_ADDRESSES, extras.privateAddresses, addresses.map((x) => x.PrivateIPv4Address)],
  ];
  for (const [annotation, wanted, found] of asked) {
    if (wanted === undefined) continue;
    const has = found.filter((x): x is string => x !== undefined).sort();
    if (sameSet(wanted, has)) continue;
    return new ServiceSettingError(
      annotation,
      `load balancer ${nlb.LoadBalancerName ?? ''} has ${has.length === 0 ? 'none' : has.join(', ')}: a Network Load Balancer's addresses cannot be changed in place, and cirrus does not re-create it (its DNS name would change); set the annotation back, or delete and re-create the Service`,
    );
  }
  return undefined;
}

function sameSet(a: readonly string[], sortedB: readonly string[]): boolean {
  const sortedA = [...new Set(a)].sort();
  return sortedA.length === sortedB.length && sortedA.every((x, i) => x === sortedB[i]);
}
