// Service fields that cloud-provider-aws reads past silently, for a Warning Event naming each (as
// ./annotations.ts does for annotations), so that no field is dropped without a word:
//   - a port without a nodePort (`spec.allocateLoadBalancerNodePorts: false`) gets no listener:
//     upstream's EnsureLoadBalancer (pkg/providers/v1/aws.go) skips it, only logging "Ignoring port
//     without NodePort defined"; cirrus skips it too (./nlb-plan.ts, ./classic/plan.ts) and says so.
//     A Service with no nodePort at all is refused by the plan instead.
//   - `spec.ipFamilies` without IPv4: both kinds of load balancer reach the nodes' IPv4 addresses
//     (instance targets, as upstream's), where an IPv6-only Service has no NodePort.
// The other fields are honoured (loadBalancerSourceRanges, externalTrafficPolicy,
// healthCheckNodePort), refused by the plan (loadBalancerIP, sessionAffinity other than None), or
// never reach the provider (loadBalancerClass: service-lb serves only its own class).

import type { V1Service } from '@kubernetes/client-node';

export interface UnappliedField {
  readonly field: string;
  readonly why: string;
}

export function unappliedFields(service: V1Service): UnappliedField[] {
  const spec = service.spec ?? {};
  const ports = spec.ports ?? [];
  const withNodePort = ports.filter((p) => (p.nodePort ?? 0) !== 0);
  const unapplied: UnappliedField[] = [];
  if (withNodePort.length > 0)
    for (const p of ports.filter((q) => (q.nodePort ?? 0) === 0))
      unapplied.push({
        field: `spec.ports[${p.name ?? p.port}]`,
        why: `port ${p.port} has no nodePort (spec.allocateLoadBalancerNodePorts is false), so the load balancer has no listener for it (cloud-provider-aws skips it too)`,
      });
  const families = spec.ipFamilies ?? [];
  if (families.length > 0 && !families.includes('IPv4'))
    unapplied.push({
      field: 'spec.ipFamilies',
      why: `${families.join(', ')}: the load balancer reaches the nodes over IPv4 (as cloud-provider-aws's), where a Service without IPv4 has no NodePort`,
    });
  return unapplied;
}
