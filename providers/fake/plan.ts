// The fake's planLoadBalancer: what its ensureLoadBalancer would do, decided from its record of
// load balancers and never changing it. A load balancer it does not have is created; one whose
// ingress the Service's status does not show is adopted; otherwise its node set is compared. When
// the fake's ensure is set to fail (`errors`), the plan is a refusal with that error's message.

import type { V1LoadBalancerStatus, V1Service } from '@kubernetes/client-node';
import type { LoadBalancerPlan, PlanChange } from '../../shared/cloud/provider.ts';
import type { FakeLoadBalancer } from './types.ts';

export interface FakePlanInput {
  readonly name: string;
  readonly service: V1Service;
  /** The node names the ensure would be given. */
  readonly nodes: readonly string[];
  readonly existing: FakeLoadBalancer | undefined;
  /** The error the fake's ensure is set to throw. */
  readonly refusal: Error | undefined;
}

export function fakePlan(input: FakePlanInput): LoadBalancerPlan {
  const { name, service, nodes, existing, refusal } = input;
  if (refusal !== undefined) return { action: 'refuse', name, changes: [], reason: refusal.message };
  if (existing === undefined)
    return {
      action: 'create',
      name,
      changes: [{ setting: 'load balancer', change: `create ${name}` }, ...targets([], nodes)],
    };
  const changes = targets(existing.nodes, nodes);
  if (!sameIngress(existing.status, service.status?.loadBalancer)) return { action: 'adopt', name, changes };
  return { action: changes.length === 0 ? 'unchanged' : 'update', name, changes };
}

function targets(current: readonly string[], wanted: readonly string[]): PlanChange[] {
  const added = wanted.filter((n) => !current.includes(n));
  const removed = current.filter((n) => !wanted.includes(n));
  return [
    ...(added.length === 0 ? [] : [{ setting: 'targets', change: `add ${added.join(', ')}` }]),
    ...(removed.length === 0 ? [] : [{ setting: 'targets', change: `remove ${removed.join(', ')}` }]),
  ];
}

function sameIngress(a: V1LoadBalancerStatus, b: V1LoadBalancerStatus | undefined): boolean {
  const key = (s: V1LoadBalancerStatus | undefined): string =>
    (s?.ingress ?? [])
      .map((i) => i.ip ?? i.hostname ?? '')
      .sort()
      .join(',');
  return key(a) === key(b);
}
