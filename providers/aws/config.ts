// The aws provider's cloud-config: cloud-provider-aws's INI (gcfg) file, read the way upstream
// reads it, so a cluster moving from cloud-provider-aws keeps its file. cirrus does not run on an
// instance, so there is no instance-metadata self-lookup: region, VPC and cluster ID must be in
// the file. A key cirrus does not know is a start-up error that names it; a key upstream knows but
// cirrus does not act on is refused when acting on it matters (RoleARN, SourceARN) and
// reported as ignored when it does not. Three keys are cirrus's own: DefaultLoadBalancerType and
// the AWS calls' ConnectTimeoutSeconds and RequestTimeoutSeconds (upstream's gcfg reader skips
// keys it does not know, so the file stays readable by cloud-provider-aws).

import { CloudConfigError } from '../../shared/cloud/errors.ts';
import { parseGcfg, type Section } from './gcfg.ts';
import { readOverrides, type ServiceOverride } from './overrides.ts';

export type { ServiceOverride } from './overrides.ts';

export type IpFamily = 'ipv4' | 'ipv6';

export interface AwsConfig {
  readonly region: string;
  readonly vpc: string;
  readonly subnetId: string | undefined;
  readonly routeTableId: string | undefined;
  readonly clusterId: string;
  /** The cluster ID came from the legacy KubernetesClusterTag: resources are also tagged `KubernetesCluster=<id>`. */
  readonly legacyClusterTag: boolean;
  /** Upstream's switch: true leaves the nodes' security groups to the operator (no ingress rule is managed). */
  readonly disableSecurityGroupIngress: boolean;
  readonly nodeIpFamilies: readonly IpFamily[];
  readonly healthProbe: { readonly mode: 'ServiceNodePort' | 'Shared'; readonly port: number; readonly path: string };
  readonly serviceOverrides: readonly ServiceOverride[];
  /** Upstream's ElbSecurityGroup: the one group every Classic ELB gets instead of a group of its own. */
  readonly elbSecurityGroup: string | undefined;
  /** Upstream's NLBSecurityGroupMode = Managed: a new NLB gets a security group of its own (./nlb-security-group.ts). */
  readonly nlbSecurityGroupManaged?: boolean;
  /** What a Service without the aws-load-balancer-type annotation gets when it has no load balancer yet. */
  readonly defaultLoadBalancerType: 'classic' | 'nlb';
  /** How long a new connection to an AWS endpoint may take (ConnectTimeoutSeconds), per attempt. */
  readonly connectTimeoutMs: number;
  /** How long one attempt of an AWS call may take, connection included (RequestTimeoutSeconds). */
  readonly requestTimeoutMs: number;
  /** Keys read but without effect in cirrus, with why: logged once at start. */
  readonly ignored: readonly string[];
}

/** Every `[Global]` key upstream's CloudConfig has, lower-cased, with the name to show. */
const globalKeys = new Map(
  [
    'Zone',
    'Region',
    'VPC',
    'SubnetID',
    'RouteTableID',
    'RoleARN',
    'SourceARN',
    'KubernetesClusterTag',
    'KubernetesClusterID',
    'DisableSecurityGroupIngress',
    'ElbSecurityGroup',
    'NodeIPFamilies',
    'ClusterServiceLoadBalancerHealthProbeMode',
    'ClusterServiceSharedLoadBalancerHealthProbePort',
    'ClusterServiceSharedLoadBalancerHealthProbePath',
    'SupportedTopologyInstanceTypePattern',
    'NLBSecurityGroupMode',
    'DefaultLoadBalancerType',
    'ConnectTimeoutSeconds',
    'RequestTimeoutSeconds',
  ].map((k) => [k.toLowerCase(), k]),
);

/** One `[Global]` key's value (undefined when absent or empty); a key given twice is an error. */
type Reader = (key: string) => string | undefined;

/** Reads and checks the cloud-config; every problem is a CloudConfigError naming the key. */
export function parseAwsConfig(text: string | undefined, file: string | undefined): AwsConfig {
  if (text === undefined) {
    throw new CloudConfigError(
      file,
      '',
      'the aws provider needs --cloud-config (a [Global] section with Region, VPC and KubernetesClusterID)',
    );
  }
  const sections = parseGcfg(text, file);
  const global = sections.get('global') ?? new Map<string, string[]>();
  const serviceOverrides = readOverrides(sections, file);
  checkGlobalKeys(global, file);
  const one = globalReader(global, file);
  const region = readRegion(one, file);
  const vpc = readVpc(one, file);
  const subnetId = readId(one, 'SubnetID', 'subnet', file);
  const routeTableId = readId(one, 'RouteTableID', 'rtb', file);
  const { clusterId, legacyClusterTag } = readClusterId(one, file);
  refuseUnsupported(one, file);
  const ignored = readIgnored(one, file);
  return {
    region,
    vpc,
    subnetId,
    routeTableId,
    clusterId,
    legacyClusterTag,
    disableSecurityGroupIngress: readDisableIngress(one, file),
    nodeIpFamilies: readNodeIpFamilies(global, file),
    healthProbe: readHealthProbe(one, file),
    serviceOverrides,
    elbSecurityGroup: readId(one, 'ElbSecurityGroup', 'sg', file),
    nlbSecurityGroupManaged: readNlbSecurityGroupMode(one, file),
    defaultLoadBalancerType: readDefaultType(one, file),
    ...readTimeouts(one, file),
    ignored,
  };
}

function checkGlobalKeys(global: Section, file: string | undefined): void {
  for (const key of global.keys()) {
    if (!globalKeys.has(key)) {
      throw new CloudConfigError(
        file,
        `Global.${key}`,
        `unknown key; the [Global] keys are ${[...globalKeys.values()].join(', ')}`,
      );
    }
  }
}

function globalReader(global: Section, file: string | undefined): Reader {
  return (key) => {
    const values = global.get(key.toLowerCase());
    if (values === undefined) return undefined;
    if (values.length > 1)
      throw new CloudConfigError(file, `Global.${key}`, `given ${values.length} times; give it once`);
    return values[0] === '' ? undefined : values[0];
  };
}

/** Region, or the region of Zone (they must agree when both are given). */
function readRegion(one: Reader, file: string | undefined): string {
  const region = regionOfZone(one('Zone'), one('Region'), file) ?? one('Region');
  if (region === undefined) {
    throw new CloudConfigError(
      file,
      'Global.Region',
      'required: cirrus does not run on an instance, so the region cannot come from instance metadata',
    );
  }
  if (!/^[a-z]{2}(-[a-z]+)+-\d+$/.test(region))
    throw new CloudConfigError(file, 'Global.Region', `"${region}" is not a region name (e.g. us-east-1)`);
  return region;
}

function regionOfZone(
  zone: string | undefined,
  region: string | undefined,
  file: string | undefined,
): string | undefined {
  if (zone === undefined) return undefined;
  const derived = /^([a-zA-Z]+-)+\d+/.exec(zone)?.[0];
  if (derived === undefined)
    throw new CloudConfigError(file, 'Global.Zone', `"${zone}" is not an availability zone name (e.g. us-east-1a)`);
  if (region !== undefined && region !== derived) {
    throw new CloudConfigError(file, 'Global.Zone', `zone "${zone}" is in ${derived}, but Region is ${region}`);
  }
  return derived;
}

function readVpc(one: Reader, file: string | undefined): string {
  const vpc = one('VPC');
  if (vpc === undefined)
    throw new CloudConfigError(
      file,
      'Global.VPC',
      'required: the VPC whose subnets, route table and instances the cluster uses',
    );
  checkId(vpc, 'vpc', 'Global.VPC', file);
  return vpc;
}

/** An optional `<prefix>-…` ID key. */
function readId(one: Reader, key: string, prefix: string, file: string | undefined): string | undefined {
  const value = one(key);
  if (value !== undefined) checkId(value, prefix, `Global.${key}`, file);
  return value;
}

/** KubernetesClusterID, or the legacy KubernetesClusterTag (then resources also get the legacy tag). */
function readClusterId(one: Reader, file: string | undefined): { clusterId: string; legacyClusterTag: boolean } {
  const clusterTag = one('KubernetesClusterTag');
  const clusterIdKey = one('KubernetesClusterID');
  if (clusterTag !== undefined && clusterIdKey !== undefined && clusterTag !== clusterIdKey) {
    throw new CloudConfigError(
      file,
      'Global.KubernetesClusterID',
      `"${clusterIdKey}" differs from KubernetesClusterTag "${clusterTag}"; give one`,
    );
  }
  const clusterId = clusterIdKey ?? clusterTag;
  if (clusterId === undefined) {
    throw new CloudConfigError(
      file,
      'Global.KubernetesClusterID',
      'required: the cluster ID in the kubernetes.io/cluster/<id> tags',
    );
  }
  if (!/^[A-Za-z0-9][-A-Za-z0-9_.]{0,126}$/.test(clusterId)) {
    throw new CloudConfigError(
      file,
      'Global.KubernetesClusterID',
      `"${clusterId}" is not a usable tag key part (letters, digits, -, _, .)`,
    );
  }
  return { clusterId, legacyClusterTag: clusterIdKey === undefined };
}

/** Keys upstream knows whose effect matters and that cirrus does not offer. */
function refuseUnsupported(one: Reader, file: string | undefined): void {
  if (one('RoleARN') !== undefined || one('SourceARN') !== undefined) {
    throw new CloudConfigError(
      file,
      one('RoleARN') !== undefined ? 'Global.RoleARN' : 'Global.SourceARN',
      "not supported by cirrus: give cirrus the role's credentials through the SDK's chain (IRSA's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, a profile with role_arn, or the execution role)",
    );
  }
}

/** NLBSecurityGroupMode: absent, or `Managed` (case-sensitive, as upstream's IsNLBSecurityGroupModeManaged). */
function readNlbSecurityGroupMode(one: Reader, file: string | undefined): boolean {
  const mode = one('NLBSecurityGroupMode');
  if (mode === undefined) return false;
  if (mode !== 'Managed')
    throw new CloudConfigError(file, 'Global.NLBSecurityGroupMode', `"${mode}" is not the one mode, Managed`);
  return true;
}

/** DisableSecurityGroupIngress: false (upstream's default) lets the provider manage the node ingress rules. */
function readDisableIngress(one: Reader, file: string | undefined): boolean {
  return bool(one('DisableSecurityGroupIngress'), 'Global.DisableSecurityGroupIngress', file) ?? false;
}

/** DefaultLoadBalancerType: `classic` (upstream's default, when absent) or `nlb`. */
function readDefaultType(one: Reader, file: string | undefined): AwsConfig['defaultLoadBalancerType'] {
  const value = (one('DefaultLoadBalancerType') ?? 'classic').toLowerCase();
  if (value !== 'classic' && value !== 'nlb')
    throw new CloudConfigError(file, 'Global.DefaultLoadBalancerType', `"${value}" is not classic or nlb`);
  return value;
}

/** The defaults of ConnectTimeoutSeconds and RequestTimeoutSeconds. */
export const DEFAULT_CONNECT_TIMEOUT_SECONDS = 5;
export const DEFAULT_REQUEST_TIMEOUT_SECONDS = 30;

/**
 * ConnectTimeoutSeconds and RequestTimeoutSeconds: seconds (fractions allowed), above 0 and at most
 * 3600; the connection's no longer than the request's, which includes it.
 */
function readTimeouts(one: Reader, file: string | undefined): Pick<AwsConfig, 'connectTimeoutMs' | 'requestTimeoutMs'> {
  const connect = seconds(one, 'ConnectTimeoutSeconds', DEFAULT_CONNECT_TIMEOUT_SECONDS, file);
  const request = seconds(one, 'RequestTimeoutSeconds', DEFAULT_REQUEST_TIMEOUT_SECONDS, file);
  if (connect > request)
    throw new CloudConfigError(
      file,
      'Global.ConnectTimeoutSeconds',
      `${connect} is longer than RequestTimeoutSeconds (${request}), which includes the connection`,
    );
  return { connectTimeoutMs: Math.round(connect * 1000), requestTimeoutMs: Math.round(request * 1000) };
}

function seconds(one: Reader, key: string, fallback: number, file: string | undefined): number {
  const text = one(key);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || value <= 0 || value > 3600)
    throw new CloudConfigError(file, `Global.${key}`, `"${text}" is not a number of seconds above 0 and at most 3600`);
  return value;
}

/** Keys read but without effect in cirrus, with why (still checked, so a typo is caught now). */
function readIgnored(one: Reader, file: string | undefined): string[] {
  const ignored: string[] = [];
  const topology = one('SupportedTopologyInstanceTypePattern');
  if (topology !== undefined) {
    try {
      new RegExp(topology);
    } catch (error) {
      throw new CloudConfigError(
        file,
        'Global.SupportedTopologyInstanceTypePattern',
        `not a regular expression: ${(error as Error).message}`,
      );
    }
    ignored.push('SupportedTopologyInstanceTypePattern (cirrus adds no network-topology labels)');
  }
  return ignored;
}

/** NodeIPFamilies: repeatable and comma-separated; ipv4 when absent. */
function readNodeIpFamilies(global: Section, file: string | undefined): IpFamily[] {
  const families = (global.get('nodeipfamilies') ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
  const checked: IpFamily[] = [];
  for (const family of families) {
    if (family !== 'ipv4' && family !== 'ipv6')
      throw new CloudConfigError(file, 'Global.NodeIPFamilies', `"${family}" is not ipv4 or ipv6`);
    checked.push(family);
  }
  if (new Set(checked).size !== checked.length)
    throw new CloudConfigError(file, 'Global.NodeIPFamilies', 'names a family twice');
  return checked.length === 0 ? ['ipv4'] : checked;
}

function readHealthProbe(one: Reader, file: string | undefined): AwsConfig['healthProbe'] {
  const mode = one('ClusterServiceLoadBalancerHealthProbeMode') ?? 'ServiceNodePort';
  if (mode !== 'ServiceNodePort' && mode !== 'Shared') {
    throw new CloudConfigError(
      file,
      'Global.ClusterServiceLoadBalancerHealthProbeMode',
      `"${mode}" is not ServiceNodePort or Shared`,
    );
  }
  return { mode, port: readHealthProbePort(one, file), path: readHealthProbePath(one, file) };
}

function readHealthProbePort(one: Reader, file: string | undefined): number {
  const portText = one('ClusterServiceSharedLoadBalancerHealthProbePort');
  const port = portText === undefined ? 10256 : Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new CloudConfigError(
      file,
      'Global.ClusterServiceSharedLoadBalancerHealthProbePort',
      `"${portText}" is not a port (1-65535)`,
    );
  }
  return port;
}

function readHealthProbePath(one: Reader, file: string | undefined): string {
  const path = one('ClusterServiceSharedLoadBalancerHealthProbePath') ?? '/healthz';
  if (!path.startsWith('/'))
    throw new CloudConfigError(
      file,
      'Global.ClusterServiceSharedLoadBalancerHealthProbePath',
      `"${path}" must start with /`,
    );
  return path;
}

function checkId(value: string, prefix: string, field: string, file: string | undefined): void {
  if (!new RegExp(`^${prefix}-[0-9a-f]{8,17}$`).test(value)) {
    throw new CloudConfigError(file, field, `"${value}" is not a ${prefix}- ID`);
  }
}

function bool(value: string | undefined, field: string, file: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  const v = value.toLowerCase();
  if (['true', 'yes', 'on', '1'].includes(v)) return true;
  if (['false', 'no', 'off', '0'].includes(v)) return false;
  throw new CloudConfigError(file, field, `"${value}" is not a boolean (true or false)`);
}
