// An NLB listener's and target group's settings for one port mapping, and whether the ones a load
// balancer has already match it, compared as cloud-provider-aws compares them
// (pkg/providers/v1/aws_loadbalancer.go, ensureLoadBalancerv2 and ensureTargetGroup) so that what it
// made is kept as it is. One difference: upstream modifies a TLS listener on every pass when the
// Service names no SSL policy (AWS gave the listener its default one); cirrus leaves the policy a
// listener has unless the Service names one, which is what upstream's call comes to, as it sends
// none.

import type {
  Certificate,
  Listener,
  ModifyTargetGroupCommandInput,
  ProtocolEnum,
  TargetGroup,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import type { PortMapping } from './nlb-plan.ts';

export interface ListenerSettings {
  readonly Protocol: ProtocolEnum;
  readonly Certificates?: Certificate[];
  readonly SslPolicy?: string;
}

/** The protocol, certificate and policy a listener for `mapping` is created or modified with. */
export function listenerSettings(mapping: PortMapping): ListenerSettings {
  const { tls } = mapping;
  if (tls === undefined) return { Protocol: mapping.listenerProtocol };
  return {
    Protocol: 'TLS',
    Certificates: [{ CertificateArn: tls.certificateArn }],
    ...(tls.sslPolicy === undefined ? {} : { SslPolicy: tls.sslPolicy }),
  };
}

/** Whether `listener` needs a ModifyListener to serve `mapping`: protocol, certificate, or a named policy differs. */
export function listenerDiffers(listener: Listener, mapping: PortMapping): boolean {
  if (listener.Protocol !== mapping.listenerProtocol) return true;
  const { tls } = mapping;
  if (tls === undefined) return false;
  if (listener.Certificates?.[0]?.CertificateArn !== tls.certificateArn) return true;
  return tls.sslPolicy !== undefined && listener.SslPolicy !== tls.sslPolicy;
}

/** Whether a target group serves a mapping: what cannot be modified in place matches. */
export function groupFits(group: TargetGroup, mapping: PortMapping): boolean {
  return (
    group.Port === mapping.nodePort &&
    group.Protocol === mapping.targetProtocol &&
    group.HealthCheckProtocol === mapping.healthCheck.protocol &&
    group.HealthCheckIntervalSeconds === mapping.healthCheck.intervalSeconds
  );
}

/** The ModifyTargetGroup input that brings a fitting group's health check to `mapping`'s; undefined when it is already. */
export function healthCheckChange(group: TargetGroup, mapping: PortMapping): ModifyTargetGroupCommandInput | undefined {
  const hc = mapping.healthCheck;
  const same =
    group.HealthCheckPort === hc.port &&
    group.HealthyThresholdCount === hc.healthyThreshold &&
    group.UnhealthyThresholdCount === hc.unhealthyThreshold &&
    (hc.path === undefined || group.HealthCheckPath === hc.path);
  if (same) return undefined;
  return {
    TargetGroupArn: group.TargetGroupArn,
    HealthCheckPort: hc.port,
    ...(hc.path === undefined ? {} : { HealthCheckPath: hc.path }),
    HealthyThresholdCount: hc.healthyThreshold,
    UnhealthyThresholdCount: hc.unhealthyThreshold,
  };
}
