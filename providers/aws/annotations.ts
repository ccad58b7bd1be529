// Every `service.beta.kubernetes.io/aws-load-balancer-*` annotation cloud-provider-aws knows (the
// constants of pkg/providers/v1/aws.go, documented in docs/service_controller.md), and what cirrus
// does with each for each kind of load balancer: honoured, refused (the Service's ensure fails with
// a Warning naming it), or not applicable to that kind (upstream ignores it there silently; cirrus
// records a Warning naming it and goes on). An annotation of that prefix that upstream does not know
// gets the same Warning. docs/providers/aws.md's annotation table is this list; a test holds the two
// together.

import { UnsupportedSettingError } from './errors.ts';

export const ANNOTATION_PREFIX = 'service.beta.kubernetes.io/aws-load-balancer-';

export type Kind = 'classic' | 'nlb';

/** What cirrus does with an annotation on one kind. */
export type Treatment =
  | { readonly does: 'honoured' }
  | { readonly does: 'refused'; readonly why: string }
  | { readonly does: 'not-applicable' };

export interface AnnotationRule {
  /** The part after the prefix. */
  readonly name: string;
  readonly classic: Treatment;
  readonly nlb: Treatment;
  /** Refused only for these values (absent: for any value). */
  readonly refusedValues?: readonly string[];
}

const honoured: Treatment = { does: 'honoured' };
const notApplicable: Treatment = { does: 'not-applicable' };
const refused = (why: string): Treatment => ({ does: 'refused', why });

export const ANNOTATIONS: readonly AnnotationRule[] = [
  { name: 'type', classic: honoured, nlb: honoured },
  { name: 'internal', classic: honoured, nlb: honoured },
  { name: 'subnets', classic: honoured, nlb: honoured },
  { name: 'additional-resource-tags', classic: honoured, nlb: honoured },
  { name: 'target-node-labels', classic: honoured, nlb: honoured },
  { name: 'cross-zone-load-balancing-enabled', classic: honoured, nlb: honoured },
  { name: 'healthcheck-protocol', classic: honoured, nlb: honoured },
  { name: 'healthcheck-port', classic: honoured, nlb: honoured },
  { name: 'healthcheck-path', classic: honoured, nlb: honoured },
  { name: 'healthcheck-interval', classic: honoured, nlb: honoured },
  { name: 'healthcheck-timeout', classic: honoured, nlb: honoured },
  { name: 'healthcheck-healthy-threshold', classic: honoured, nlb: honoured },
  { name: 'healthcheck-unhealthy-threshold', classic: honoured, nlb: honoured },
  // On an NLB, what of these has no effect gets a Warning of its own (./nlb-tls.ts, tlsUnapplied).
  { name: 'ssl-cert', classic: honoured, nlb: honoured },
  { name: 'ssl-ports', classic: honoured, nlb: honoured },
  { name: 'ssl-negotiation-policy', classic: honoured, nlb: honoured },
  { name: 'proxy-protocol', classic: honoured, nlb: notApplicable },
  { name: 'backend-protocol', classic: honoured, nlb: honoured },
  { name: 'connection-idle-timeout', classic: honoured, nlb: notApplicable },
  { name: 'connection-draining-enabled', classic: honoured, nlb: notApplicable },
  { name: 'connection-draining-timeout', classic: honoured, nlb: notApplicable },
  { name: 'access-log-emit-interval', classic: honoured, nlb: notApplicable },
  { name: 'access-log-enabled', classic: honoured, nlb: honoured },
  { name: 'access-log-s3-bucket-name', classic: honoured, nlb: honoured },
  { name: 'access-log-s3-bucket-prefix', classic: honoured, nlb: honoured },
  {
    name: 'security-groups',
    classic: refused('replacing the load balancer’s own security group is not offered by cirrus'),
    nlb: refused(
      'not applied to a Network Load Balancer: upstream does not read it for an NLB either (NLBSecurityGroupMode = Managed gives a new NLB a group of its own)',
    ),
  },
  {
    name: 'extra-security-groups',
    classic: refused('extra security groups are not offered by cirrus'),
    nlb: refused('extra security groups are not supported for a Network Load Balancer (upstream refuses them too)'),
  },
  {
    name: 'target-group-attributes',
    classic: refused(
      'target group attributes are for Network Load Balancers (upstream refuses them on a Classic ELB too)',
    ),
    nlb: honoured,
  },
  { name: 'eip-allocations', classic: notApplicable, nlb: honoured },
  { name: 'private-ipv4-addresses', classic: notApplicable, nlb: honoured },
];

const byName = new Map(ANNOTATIONS.map((r) => [`${ANNOTATION_PREFIX}${r.name}`, r]));

/** Throws UnsupportedSettingError for the first annotation `kind` refuses, naming it. */
export function refuseAnnotations(annotations: Readonly<Record<string, string>>, kind: Kind): void {
  for (const [key, value] of Object.entries(annotations)) {
    const treatment = byName.get(key)?.[kind];
    if (treatment?.does !== 'refused') continue;
    const only = byName.get(key)?.refusedValues;
    if (only !== undefined && !only.includes(value)) continue;
    throw new UnsupportedSettingError(key, treatment.why);
  }
}

/** The annotations of the prefix that do nothing on `kind`, each with why: each gets a Warning. */
export function unappliedAnnotations(
  annotations: Readonly<Record<string, string>>,
  kind: Kind,
): { readonly annotation: string; readonly why: string }[] {
  const kindName = kind === 'classic' ? 'a Classic ELB' : 'a Network Load Balancer';
  const other = kind === 'classic' ? 'a Network Load Balancer' : 'a Classic ELB';
  return Object.keys(annotations)
    .filter((key) => key.startsWith(ANNOTATION_PREFIX))
    .flatMap((annotation) => {
      const rule = byName.get(annotation);
      if (rule === undefined)
        return [{ annotation, why: 'not an annotation cloud-provider-aws or cirrus knows; it has no effect' }];
      if (rule[kind].does !== 'not-applicable') return [];
      return [{ annotation, why: `applies to ${other} only; it has no effect on ${kindName}` }];
    });
}
