// planLoadBalancer for the aws provider: the ensure itself, run against clients that send only
// read calls. Every other call (Create*, Modify*, Register*, Authorize*, …) is recorded as a change
// of the plan and answered locally, never sent, so that the plan is decided by the very code that
// ensures (the kind chosen in ./load-balancer.ts, the comparisons of ./nlb.ts and
// ./classic/reconcile.ts, the rules of ./security-groups.ts) and cannot drift from it. A call whose
// operation cannot be named is treated as a write: the plan errs on the side of not touching AWS.
//
// A create answers what the code after it reads (an ARN, a DNS name, a group ID) with placeholders
// of the form `planned:<name>`; nothing after a planned create reads that resource back from AWS.

import type { V1LoadBalancerStatus, V1Service } from '@kubernetes/client-node';
import { findCause, ImplementedElsewhereError } from '../../shared/cloud/errors.ts';
import { defaultLoadBalancerName, type LoadBalancerPlan, type PlanChange } from '../../shared/cloud/provider.ts';
import type { AwsApi } from './api.ts';
import { ForeignResourceError, ServiceSettingError } from './errors.ts';
import type { ServiceWarnings } from './events.ts';

/** The placeholder a planned create answers with in place of an ID AWS would give. */
const planned = (name: string): string => `planned:${name}`;

/** An ensure to plan: run with the given clients and warnings. */
export type Ensure = (api: AwsApi, warnings: ServiceWarnings) => Promise<V1LoadBalancerStatus>;

/** Runs `ensure` against read-only clients over `api`; what it would write is the plan. */
export async function planEnsure(api: AwsApi, service: V1Service, ensure: Ensure): Promise<LoadBalancerPlan> {
  const recorder = new WriteRecorder(api);
  const warnings: string[] = [];
  const collect: ServiceWarnings = {
    warn: (_service, reason, message) => {
      warnings.push(`${reason}: ${message}`);
      return Promise.resolve();
    },
  };
  const name = defaultLoadBalancerName(service);
  const extra = (): { warnings?: string[] } => (warnings.length === 0 ? {} : { warnings });
  try {
    const status = await ensure(recorder.api, collect);
    return { action: actionOf(recorder, service, status), name, changes: recorder.changes, ...extra() };
  } catch (error) {
    if (findCause(error, ImplementedElsewhereError) !== undefined) throw error;
    const refused = findCause(error, ServiceSettingError) ?? findCause(error, ForeignResourceError);
    if (refused === undefined) throw error;
    return { action: 'refuse', name, changes: recorder.changes, reason: refused.message, ...extra() };
  }
}

/** create when a load balancer would be made; adopt when the Service's status does not name the one found. */
function actionOf(
  recorder: WriteRecorder,
  service: V1Service,
  status: V1LoadBalancerStatus,
): LoadBalancerPlan['action'] {
  if (recorder.operations.includes('CreateLoadBalancer')) return 'create';
  if (!sameIngress(service.status?.loadBalancer, status)) return 'adopt';
  return recorder.changes.length === 0 ? 'unchanged' : 'update';
}

function sameIngress(a: V1LoadBalancerStatus | undefined, b: V1LoadBalancerStatus): boolean {
  const key = (s: V1LoadBalancerStatus | undefined): string =>
    (s?.ingress ?? [])
      .map((i) => i.hostname ?? i.ip ?? '')
      .sort()
      .join(',');
  return key(a) === key(b);
}

/** A client's `send`, as the provider calls it. */
interface Sender {
  send(command: unknown, options?: unknown): Promise<unknown>;
}

/** Read calls by their operation's prefix: everything else writes. */
const READS = /^(Describe|Get|List)/;

/** Clients over `api` that send reads and record writes. */
class WriteRecorder {
  readonly changes: PlanChange[] = [];
  readonly operations: string[] = [];
  readonly api: AwsApi;

  constructor(api: AwsApi) {
    this.api = {
      ec2: this.#wrap(api.ec2),
      elbv2: this.#wrap(api.elbv2),
      elb: this.#wrap(api.elb),
    };
  }

  #wrap<C extends object>(client: C): C {
    const real = client as unknown as Sender;
    const send = (command: unknown, options?: unknown): Promise<unknown> => {
      const operation = operationOf(command);
      if (operation !== undefined && READS.test(operation)) return real.send(command, options);
      return Promise.resolve(this.#record(operation ?? 'an unnamed call', inputOf(command)));
    };
    return new Proxy(client, {
      get: (target, property, receiver) => (property === 'send' ? send : Reflect.get(target, property, receiver)),
    });
  }

  /** Records the write and answers what the ensure reads of its answer. */
  #record(operation: string, input: Record<string, unknown>): unknown {
    this.operations.push(operation);
    this.changes.push(describeWrite(operation, input));
    return plannedAnswer(operation, input);
  }
}

/**
 * The operation's name, as the service model spells it (a command's schema carries it, and it
 * survives minification); the class name without `Command` otherwise.
 */
function operationOf(command: unknown): string | undefined {
  const schema = (command as { schema?: unknown }).schema;
  if (Array.isArray(schema) && typeof schema[2] === 'string') return schema[2];
  const name = (command as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name.endsWith('Command') ? name.slice(0, -'Command'.length) : undefined;
}

function inputOf(command: unknown): Record<string, unknown> {
  const input = (command as { input?: unknown }).input;
  return typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
}

/** What a planned create answers: the identifiers the code after it reads. */
function plannedAnswer(operation: string, input: Record<string, unknown>): unknown {
  const text = (key: string): string => {
    const value = input[key];
    return typeof value === 'string' ? value : '';
  };
  switch (operation) {
    case 'CreateLoadBalancer': {
      const name = text('Name') || text('LoadBalancerName');
      const subnets = (input['SubnetMappings'] as { SubnetId?: string }[] | undefined) ?? [];
      const nlb = { LoadBalancerName: name, LoadBalancerArn: planned(name), DNSName: planned(name) };
      return {
        DNSName: planned(name),
        LoadBalancers: [{ ...nlb, AvailabilityZones: subnets.map((s) => ({ SubnetId: s.SubnetId })) }],
      };
    }
    case 'CreateTargetGroup':
      return { TargetGroups: [{ ...input, TargetGroupName: text('Name'), TargetGroupArn: planned(text('Name')) }] };
    case 'CreateSecurityGroup':
      // A group ID, as rules tell a group from a range by its prefix (./ingress.ts, permissionOf).
      return { GroupId: `sg-${planned(text('GroupName'))}` };
    default:
      return {};
  }
}

/** Which setting each write changes. */
const SETTINGS: Readonly<Record<string, string>> = {
  CreateLoadBalancer: 'load balancer',
  RegisterTargets: 'targets',
  DeregisterTargets: 'targets',
  RegisterInstancesWithLoadBalancer: 'targets',
  DeregisterInstancesFromLoadBalancer: 'targets',
  CreateListener: 'listeners',
  ModifyListener: 'listeners',
  DeleteListener: 'listeners',
  CreateLoadBalancerListeners: 'listeners',
  DeleteLoadBalancerListeners: 'listeners',
  CreateTargetGroup: 'target groups',
  DeleteTargetGroup: 'target groups',
  ModifyTargetGroup: 'health check',
  ConfigureHealthCheck: 'health check',
  ModifyLoadBalancerAttributes: 'attributes',
  AuthorizeSecurityGroupIngress: 'security group rules',
  RevokeSecurityGroupIngress: 'security group rules',
  CreateSecurityGroup: 'security groups',
  ApplySecurityGroupsToLoadBalancer: 'security groups',
  CreateLoadBalancerPolicy: 'policies',
  SetLoadBalancerPoliciesForBackendServer: 'policies',
  SetLoadBalancerPoliciesOfListener: 'policies',
  AddTags: 'tags',
  AttachLoadBalancerToSubnets: 'subnets',
  DetachLoadBalancerFromSubnets: 'subnets',
};

/** A write, readably: `<Operation> <what it names>`. */
function describeWrite(operation: string, input: Record<string, unknown>): PlanChange {
  const setting = SETTINGS[operation] ?? operation;
  return { setting, change: `${operation} ${summary(input)}`.trim() };
}

/** The input without its tags (they are the ownership marks, the same on every create), compactly. */
function summary(input: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(input)) {
    if (key === 'Tags' || key === 'TagSpecifications' || value === undefined) continue;
    parts.push(`${key}=${compact(value)}`);
  }
  return parts.join(' ');
}

/** Targets and instances by ID, rules as `proto from-to source`, anything else as JSON. */
function compact(value: unknown): string {
  if (!Array.isArray(value)) return typeof value === 'string' ? value : JSON.stringify(value);
  return `[${value.map((item) => compactItem(item as Item)).join(', ')}]`;
}

/** What a list item of a write's input may be: a target, an instance, a rule. */
interface Item {
  readonly Id?: string;
  readonly Port?: number;
  readonly InstanceId?: string;
  readonly IpProtocol?: string;
  readonly FromPort?: number;
  readonly ToPort?: number;
  readonly IpRanges?: readonly { readonly CidrIp?: string }[];
  readonly Ipv6Ranges?: readonly { readonly CidrIpv6?: string }[];
  readonly UserIdGroupPairs?: readonly { readonly GroupId?: string }[];
  readonly PrefixListIds?: readonly { readonly PrefixListId?: string }[];
  readonly SubnetId?: string;
  readonly Protocol?: string;
  readonly LoadBalancerPort?: number;
  readonly InstanceProtocol?: string;
  readonly InstancePort?: number;
}

function compactItem(item: Item): string {
  if (typeof item !== 'object') return String(item);
  if (typeof item.Id === 'string') return item.Port === undefined ? item.Id : `${item.Id}:${String(item.Port)}`;
  if (typeof item.InstanceId === 'string') return item.InstanceId;
  if (typeof item.IpProtocol === 'string') return ruleText(item);
  if (typeof item.SubnetId === 'string') return item.SubnetId;
  if (item.LoadBalancerPort !== undefined)
    return `${item.Protocol ?? ''}:${item.LoadBalancerPort}->${item.InstanceProtocol ?? ''}:${String(item.InstancePort)}`;
  return JSON.stringify(item);
}

function ruleText(p: Item): string {
  const ports = p.FromPort === undefined ? 'all' : `${String(p.FromPort)}-${String(p.ToPort)}`;
  const ranges = (p.IpRanges ?? []).map((r) => r.CidrIp ?? '');
  const sources = [
    ...ranges,
    ...(p.Ipv6Ranges ?? []).map((r) => r.CidrIpv6 ?? ''),
    ...(p.UserIdGroupPairs ?? []).map((g) => g.GroupId ?? ''),
    ...(p.PrefixListIds ?? []).map((l) => l.PrefixListId ?? ''),
  ];
  return `${String(p.IpProtocol)} ${ports} from ${sources.join(' ')}`;
}
