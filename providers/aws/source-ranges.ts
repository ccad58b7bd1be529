// The client ranges a load balancer admits, read as k8s.io/cloud-provider's
// service/helpers.go GetLoadBalancerSourceRanges reads them (cloud-provider-aws calls it):
// `spec.loadBalancerSourceRanges` when it has any, else the comma-separated annotation
// `service.beta.kubernetes.io/load-balancer-source-ranges`, else everyone (0.0.0.0/0). Each range in
// canonical form (host bits cleared), without duplicates, sorted.

import type { V1Service } from '@kubernetes/client-node';
import { formatCidr, parseCidr } from '../../shared/net/ip.ts';
import { ServiceSettingError, UnsupportedSettingError } from './errors.ts';

export const SOURCE_RANGES_ANNOTATION = 'service.beta.kubernetes.io/load-balancer-source-ranges';
export const EVERYONE = '0.0.0.0/0';

/** The Service's client ranges, and whether the Service gave them (false: the default, everyone). */
export function sourceRangesOf(service: V1Service): { readonly cidrs: string[]; readonly given: boolean } {
  const spec = service.spec?.loadBalancerSourceRanges ?? [];
  if (spec.length > 0) return { cidrs: parseRanges(spec, 'spec.loadBalancerSourceRanges'), given: true };
  const annotation = (service.metadata?.annotations?.[SOURCE_RANGES_ANNOTATION] ?? '').trim();
  if (annotation === '') return { cidrs: [EVERYONE], given: false };
  return { cidrs: parseRanges(annotation.split(','), SOURCE_RANGES_ANNOTATION), given: true };
}

function parseRanges(texts: readonly string[], setting: string): string[] {
  const cidrs = new Set<string>();
  for (const text of texts) {
    const cidr = parseCidr(text.trim());
    if (cidr === undefined)
      throw new ServiceSettingError(setting, `"${text.trim()}" is not a CIDR (for example 10.0.0.0/24)`);
    // Security group rules for either kind are written from IPv4 ranges, as upstream writes them.
    if (cidr.family !== 'IPv4')
      throw new UnsupportedSettingError(
        setting,
        `"${text.trim()}": only IPv4 ranges are enforced by cirrus's security group rules`,
      );
    cidrs.add(formatCidr(cidr));
  }
  return [...cidrs].sort();
}
