// Bringing an existing Classic ELB to a plan, one aspect at a time, each compared first so that an
// unchanged Service costs no mutating call (upstream re-creates the PROXY protocol policy and
// re-adds the extra tags on every pass; cirrus does neither). Listeners are compared as upstream
// compares them (pkg/providers/v1/aws_loadbalancer.go, elbListenersAreEqual): protocols
// (case-insensitive), ports and certificate.

import {
  AddTagsCommand,
  AttachLoadBalancerToSubnetsCommand,
  ConfigureHealthCheckCommand,
  CreateLoadBalancerListenersCommand,
  CreateLoadBalancerPolicyCommand,
  DeleteLoadBalancerListenersCommand,
  DeregisterInstancesFromLoadBalancerCommand,
  DescribeLoadBalancerAttributesCommand,
  DetachLoadBalancerFromSubnetsCommand,
  ModifyLoadBalancerAttributesCommand,
  RegisterInstancesWithLoadBalancerCommand,
  SetLoadBalancerPoliciesForBackendServerCommand,
  SetLoadBalancerPoliciesOfListenerCommand,
  type ElasticLoadBalancingClient,
  type Listener,
  type LoadBalancerAttributes,
  type LoadBalancerDescription,
  type Tag,
} from '@aws-sdk/client-elastic-load-balancing';
import { abortable } from '../api.ts';
import {
  PROXY_PROTOCOL_POLICY,
  sslPolicyName,
  type ClassicAttributes,
  type ClassicListener,
  type ClassicPlan,
} from './plan.ts';

/** What each step needs: the client, the load balancer's name and the reconcile's signal. */
export interface Target {
  readonly elb: ElasticLoadBalancingClient;
  readonly name: string;
  readonly signal: AbortSignal | undefined;
}

export function listenerOf(l: ClassicListener): Listener {
  return {
    Protocol: l.protocol,
    LoadBalancerPort: l.port,
    InstanceProtocol: l.instanceProtocol,
    InstancePort: l.nodePort,
    ...(l.certificate === undefined ? {} : { SSLCertificateId: l.certificate }),
  };
}

function sameListener(actual: Listener | undefined, wanted: ClassicListener): boolean {
  const same = (x: string | undefined, y: string | undefined): boolean =>
    (x ?? '').toLowerCase() === (y ?? '').toLowerCase();
  return (
    actual !== undefined &&
    actual.LoadBalancerPort === wanted.port &&
    actual.InstancePort === wanted.nodePort &&
    same(actual.Protocol, wanted.protocol) &&
    same(actual.InstanceProtocol, wanted.instanceProtocol) &&
    same(actual.SSLCertificateId, wanted.certificate)
  );
}

/** Deletes listeners the plan does not have as they are, then creates the missing ones. */
export async function syncListeners(t: Target, lb: LoadBalancerDescription, plan: ClassicPlan): Promise<void> {
  const actual = (lb.ListenerDescriptions ?? []).map((d) => d.Listener);
  const stale = actual.filter((l) => !plan.listeners.some((w) => sameListener(l, w)));
  const missing = plan.listeners.filter((w) => !actual.some((l) => sameListener(l, w)));
  if (stale.length > 0) {
    await t.elb.send(
      new DeleteLoadBalancerListenersCommand({
        LoadBalancerName: t.name,
        LoadBalancerPorts: stale.map((l) => l?.LoadBalancerPort ?? 0),
      }),
      abortable(t.signal),
    );
  }
  if (missing.length > 0) {
    await t.elb.send(
      new CreateLoadBalancerListenersCommand({ LoadBalancerName: t.name, Listeners: missing.map(listenerOf) }),
      abortable(t.signal),
    );
  }
}

/**
 * The PROXY protocol policy on every backend port when the plan wants it, on none otherwise; the
 * SSL negotiation policy on every SSL and HTTPS listener when one is named. Policies cirrus did
 * not set on a backend port are kept.
 */
export async function syncPolicies(t: Target, lb: LoadBalancerDescription, plan: ClassicPlan): Promise<void> {
  await syncProxyProtocol(t, lb, plan);
  if (plan.sslPolicy !== undefined) await syncSslPolicy(t, lb, plan, plan.sslPolicy);
}

async function syncProxyProtocol(t: Target, lb: LoadBalancerDescription, plan: ClassicPlan): Promise<void> {
  const existing = lb.Policies?.OtherPolicies ?? [];
  if (plan.proxyProtocol && !existing.includes(PROXY_PROTOCOL_POLICY))
    await createPolicy(t, PROXY_PROTOCOL_POLICY, 'ProxyProtocolPolicyType', ['ProxyProtocol', 'true']);
  await syncBackendPolicies(t, lb, plan);
}

/** PROXY protocol on each backend port of the plan when wanted, off elsewhere; other policies kept. */
async function syncBackendPolicies(t: Target, lb: LoadBalancerDescription, plan: ClassicPlan): Promise<void> {
  const backends = new Map((lb.BackendServerDescriptions ?? []).map((b) => [b.InstancePort ?? 0, b.PolicyNames ?? []]));
  const ports = new Set([...plan.listeners.map((l) => l.nodePort), ...backends.keys()]);
  for (const port of ports) {
    const current = backends.get(port) ?? [];
    const want = plan.proxyProtocol && plan.listeners.some((l) => l.nodePort === port);
    if (current.includes(PROXY_PROTOCOL_POLICY) === want) continue;
    const others = current.filter((p) => p !== PROXY_PROTOCOL_POLICY);
    await t.elb.send(
      new SetLoadBalancerPoliciesForBackendServerCommand({
        LoadBalancerName: t.name,
        InstancePort: port,
        PolicyNames: want ? [...others, PROXY_PROTOCOL_POLICY] : others,
      }),
      abortable(t.signal),
    );
  }
}

async function syncSslPolicy(
  t: Target,
  lb: LoadBalancerDescription,
  plan: ClassicPlan,
  reference: string,
): Promise<void> {
  const policy = sslPolicyName(reference);
  if (!(lb.Policies?.OtherPolicies ?? []).includes(policy))
    await createPolicy(t, policy, 'SSLNegotiationPolicyType', ['Reference-Security-Policy', reference]);
  for (const listener of plan.listeners.filter((l) => l.protocol === 'SSL' || l.protocol === 'HTTPS')) {
    const current = lb.ListenerDescriptions?.find((d) => sameListener(d.Listener, listener))?.PolicyNames ?? [];
    if (current.includes(policy)) continue;
    await t.elb.send(
      new SetLoadBalancerPoliciesOfListenerCommand({
        LoadBalancerName: t.name,
        LoadBalancerPort: listener.port,
        PolicyNames: [policy],
      }),
      abortable(t.signal),
    );
  }
}

async function createPolicy(t: Target, name: string, type: string, [key, value]: [string, string]): Promise<void> {
  await t.elb.send(
    new CreateLoadBalancerPolicyCommand({
      LoadBalancerName: t.name,
      PolicyName: name,
      PolicyTypeName: type,
      PolicyAttributes: [{ AttributeName: key, AttributeValue: value }],
    }),
    abortable(t.signal),
  );
}

export async function syncHealthCheck(t: Target, lb: LoadBalancerDescription, plan: ClassicPlan): Promise<void> {
  const hc = plan.healthCheck;
  const current = lb.HealthCheck;
  if (
    current?.Target === hc.target &&
    current.Interval === hc.intervalSeconds &&
    current.Timeout === hc.timeoutSeconds &&
    current.HealthyThreshold === hc.healthyThreshold &&
    current.UnhealthyThreshold === hc.unhealthyThreshold
  )
    return;
  await t.elb.send(
    new ConfigureHealthCheckCommand({
      LoadBalancerName: t.name,
      HealthCheck: {
        Target: hc.target,
        Interval: hc.intervalSeconds,
        Timeout: hc.timeoutSeconds,
        HealthyThreshold: hc.healthyThreshold,
        UnhealthyThreshold: hc.unhealthyThreshold,
      },
    }),
    abortable(t.signal),
  );
}

/** Upstream's defaults for a new load balancer, which AWS also starts from. */
export const defaultAttributes: LoadBalancerAttributes = {
  CrossZoneLoadBalancing: { Enabled: false },
  ConnectionSettings: { IdleTimeout: 60 },
  ConnectionDraining: { Enabled: false },
  AccessLog: { Enabled: false },
};

/** Modifies the attributes when one the plan sets differs; `current` undefined: ask AWS. */
export async function syncAttributes(
  t: Target,
  wanted: ClassicAttributes,
  current?: LoadBalancerAttributes,
): Promise<void> {
  const actual =
    current ??
    (await t.elb.send(new DescribeLoadBalancerAttributesCommand({ LoadBalancerName: t.name }), abortable(t.signal)))
      .LoadBalancerAttributes ??
    {};
  if (attributesMatch(actual, wanted)) return;
  const { draining, accessLog } = wanted;
  await t.elb.send(
    new ModifyLoadBalancerAttributesCommand({
      LoadBalancerName: t.name,
      LoadBalancerAttributes: {
        CrossZoneLoadBalancing: { Enabled: wanted.crossZone },
        ConnectionSettings: { IdleTimeout: wanted.idleTimeout },
        ConnectionDraining: {
          Enabled: draining.enabled,
          ...(draining.timeout === undefined ? {} : { Timeout: draining.timeout }),
        },
        AccessLog: {
          Enabled: accessLog.enabled,
          ...(accessLog.emitInterval === undefined ? {} : { EmitInterval: accessLog.emitInterval }),
          ...(accessLog.bucket === undefined ? {} : { S3BucketName: accessLog.bucket }),
          ...(accessLog.prefix === undefined ? {} : { S3BucketPrefix: accessLog.prefix }),
        },
      },
    }),
    abortable(t.signal),
  );
}

/** Whether what the plan sets is so; what it leaves to AWS (a draining timeout, a log's interval) is not compared. */
function attributesMatch(actual: LoadBalancerAttributes, wanted: ClassicAttributes): boolean {
  return (
    (actual.CrossZoneLoadBalancing?.Enabled ?? false) === wanted.crossZone &&
    (actual.ConnectionSettings?.IdleTimeout ?? 60) === wanted.idleTimeout &&
    drainingMatches(actual.ConnectionDraining, wanted.draining) &&
    accessLogMatches(actual.AccessLog, wanted.accessLog)
  );
}

function drainingMatches(
  draining: LoadBalancerAttributes['ConnectionDraining'],
  wanted: ClassicAttributes['draining'],
): boolean {
  return (draining?.Enabled ?? false) === wanted.enabled && optional(wanted.timeout, draining?.Timeout);
}

function accessLogMatches(log: LoadBalancerAttributes['AccessLog'], wanted: ClassicAttributes['accessLog']): boolean {
  return (
    (log?.Enabled ?? false) === wanted.enabled &&
    optional(wanted.emitInterval, log?.EmitInterval) &&
    optional(wanted.bucket, log?.S3BucketName) &&
    optional(wanted.prefix, log?.S3BucketPrefix)
  );
}

/** A value the plan leaves to AWS (undefined) matches anything. */
function optional<T>(want: T | undefined, have: T | undefined): boolean {
  return want === undefined || want === have;
}

/** Adds the extra tags that are missing or differ (as upstream, a tag no longer asked for stays). */
export async function syncTags(t: Target, current: readonly Tag[], plan: ClassicPlan): Promise<void> {
  const have = new Map(current.map((tag) => [tag.Key, tag.Value ?? '']));
  const missing = Object.entries(plan.extraTags).filter(([key, value]) => have.get(key) !== value);
  if (missing.length === 0) return;
  await t.elb.send(
    new AddTagsCommand({ LoadBalancerNames: [t.name], Tags: missing.map(([Key, Value]) => ({ Key, Value })) }),
    abortable(t.signal),
  );
}

/** Detaches the subnets not wanted, then attaches the missing ones. */
export async function syncSubnets(t: Target, lb: LoadBalancerDescription, wanted: readonly string[]): Promise<void> {
  const actual = lb.Subnets ?? [];
  const stale = actual.filter((s) => !wanted.includes(s));
  const missing = wanted.filter((s) => !actual.includes(s));
  if (stale.length > 0) {
    await t.elb.send(
      new DetachLoadBalancerFromSubnetsCommand({ LoadBalancerName: t.name, Subnets: stale }),
      abortable(t.signal),
    );
  }
  if (missing.length > 0) {
    await t.elb.send(
      new AttachLoadBalancerToSubnetsCommand({ LoadBalancerName: t.name, Subnets: missing }),
      abortable(t.signal),
    );
  }
}

/** Registers the wanted instances that are not, deregisters those that should not be. */
export async function syncInstances(t: Target, current: readonly string[], wanted: readonly string[]): Promise<void> {
  const stale = current.filter((id) => !wanted.includes(id));
  const missing = [...new Set(wanted)].filter((id) => !current.includes(id));
  if (missing.length > 0) {
    await t.elb.send(
      new RegisterInstancesWithLoadBalancerCommand({
        LoadBalancerName: t.name,
        Instances: missing.map((InstanceId) => ({ InstanceId })),
      }),
      abortable(t.signal),
    );
  }
  if (stale.length > 0) {
    await t.elb.send(
      new DeregisterInstancesFromLoadBalancerCommand({
        LoadBalancerName: t.name,
        Instances: stale.map((InstanceId) => ({ InstanceId })),
      }),
      abortable(t.signal),
    );
  }
}
