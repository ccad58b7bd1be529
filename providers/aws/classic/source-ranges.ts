// The client ranges a load balancer admits, as k8s.io/cloud-provider's
// service/helpers.GetLoadBalancerSourceRanges reads them: `spec.loadBalancerSourceRanges`, else the
// `service.beta.kubernetes.io/load-balancer-source-ranges` annotation (comma-separated), else
// everyone (0.0.0.0/0). Each range is normalised to its network address, as upstream's parse does.

import type { V1Service } from '@kubernetes/client-node';

export const SOURCE_RANGES_ANNOTATION = 'service.beta.kubernetes.io/load-balancer-source-ranges';

/** The Service's client ranges as normalised IPv4 CIDRs, sorted and without duplicates. */
export function sourceRangesOf(service: V1Service): string[] {
  const fromSpec = (service.spec?.loadBalancerSourceRanges ?? []).map((r) => r.trim()).filter((r) => r !== '');
  const annotation = service.metadata?.annotations?.[SOURCE_RANGES_ANNOTATION] ?? '';
  const fromAnnotation = annotation
    .split(',')
    .map((r) => r.trim())
    .filter((r) => r !== '');
  const [field, ranges] =
    fromSpec.length > 0 ? ['spec.loadBalancerSourceRanges', fromSpec] : [SOURCE_RANGES_ANNOTATION, fromAnnotation];
  if (ranges.length === 0) return ['0.0.0.0/0'];
  return [...new Set(ranges.map((r) => normalisedCidr(r, field)))].sort();
}

/** `10.1.2.3/16` → `10.1.0.0/16`; an error naming `field` for anything but an IPv4 CIDR. */
function normalisedCidr(range: string, field: string): string {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(range);
  const octets = match?.slice(1, 5).map(Number) ?? [];
  const bits = Number(match?.[5]);
  if (match === null || octets.some((o) => o > 255) || bits > 32) {
    const why = range.includes(':') ? ' (IPv6 ranges are not supported by cirrus yet)' : '';
    throw new Error(`${field}: "${range}" is not an IPv4 CIDR${why}`);
  }
  const address = octets.reduce((n, o) => n * 256 + o, 0);
  const size = 2 ** (32 - bits);
  const network = Math.floor(address / size) * size;
  const parts = [24, 16, 8, 0].map((shift) => Math.floor(network / 2 ** shift) % 256);
  return `${parts.join('.')}/${bits}`;
}
