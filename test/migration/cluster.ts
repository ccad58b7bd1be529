// The cluster the migration test moves between CCMs: its cloud.conf and kubeconfig files, its
// Nodes (each on an instance of the world) and its Services, one of every kind cloud-provider-aws
// makes a load balancer for.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CoreV1Api, KubeConfig, V1Service } from '@kubernetes/client-node';
import type { AwsWorld, WorldInstance } from '../harness/aws.ts';
import { createNode, newNode, setReady, uninitialized } from '../harness/builders.ts';

export const namespace = 'default';
const annotation = (name: string): string => `service.beta.kubernetes.io/aws-load-balancer-${name}`;

/**
 * An ordinary cloud.conf of a cluster running cloud-provider-aws: the network named, so no instance
 * metadata is needed, and the nodes' security group managed (DisableSecurityGroupIngress unset, as
 * by default). Both CCMs read this one file.
 */
export function cloudConf(world: AwsWorld): string {
  const subnet = world.publicSubnets[0]?.id ?? '';
  return [
    '[Global]',
    `Region = ${world.region}`,
    `VPC = ${world.vpcId}`,
    `SubnetID = ${subnet}`,
    `RouteTableID = ${world.routeTableId}`,
    `KubernetesClusterID = ${world.clusterId}`,
    '',
  ].join('\n');
}

/** Writes the kubeconfig and cloud.conf into `dir`; returns their paths. */
export async function writeSettings(
  dir: string,
  admin: KubeConfig,
  world: AwsWorld,
): Promise<{ kubeconfig: string; cloudConfig: string }> {
  const kubeconfig = join(dir, 'kubeconfig');
  const cloudConfig = join(dir, 'cloud.conf');
  await writeFile(kubeconfig, admin.exportConfig(), { mode: 0o600 });
  await writeFile(cloudConfig, cloudConf(world));
  return { kubeconfig, cloudConfig };
}

/** The pod CIDR of the `index`th Node (from 1), inside test/harness/cirrus.ts's clusterCidr. */
export function podCidr(index: number): string {
  return `10.244.${index}.0/24`;
}

/** A Node named as a kubelet on `instance` names it, waiting for its CCM (the uninitialized taint), Ready. */
export async function joinNode(core: CoreV1Api, instance: WorldInstance, index: number): Promise<void> {
  const cidr = podCidr(index);
  await createNode(
    core,
    newNode(instance.privateDnsName, uninitialized, (n) => {
      n.spec = { ...n.spec, podCIDR: cidr, podCIDRs: [cidr] };
    }),
  );
  await setReady(core, instance.privateDnsName, 'True');
}

/**
 * One Service of every kind cloud-provider-aws makes a load balancer for: a Classic ELB (no type
 * annotation) plain and with PROXY protocol; NLBs plain, internal with externalTrafficPolicy Local
 * and health check settings, with loadBalancerSourceRanges, and with a TLS listener.
 */
export function services(certificateArn: string): V1Service[] {
  const http = { name: 'http', port: 80, protocol: 'TCP' };
  const nlb = { [annotation('type')]: 'nlb' };
  return [
    service('classic', {}, { ports: [http] }),
    service('classic-proxy', { [annotation('proxy-protocol')]: '*' }, { ports: [http] }),
    service('nlb', nlb, { ports: [http] }),
    service(
      'nlb-internal-local',
      {
        ...nlb,
        [annotation('internal')]: 'true',
        [annotation('healthcheck-interval')]: '10',
        [annotation('healthcheck-healthy-threshold')]: '3',
        [annotation('healthcheck-unhealthy-threshold')]: '3',
      },
      { ports: [http], externalTrafficPolicy: 'Local' },
    ),
    service('nlb-source-ranges', nlb, { ports: [http], loadBalancerSourceRanges: ['203.0.113.0/24'] }),
    service(
      'nlb-tls',
      { ...nlb, [annotation('ssl-cert')]: certificateArn, [annotation('ssl-ports')]: '443' },
      { ports: [http, { name: 'https', port: 443, protocol: 'TCP' }] },
    ),
  ];
}

function service(name: string, annotations: Record<string, string>, spec: V1Service['spec']): V1Service {
  return { metadata: { name, namespace, annotations }, spec: { type: 'LoadBalancer', ...spec } };
}

/**
 * An ACM certificate for a TLS listener: the emulator issues one on request (it does not check the
 * request's signature, only the credential scope naming the service). The project has no ACM client.
 */
export async function requestCertificate(world: AwsWorld, domain: string): Promise<string> {
  const response = await fetch(world.endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.1',
      'x-amz-target': 'CertificateManager.RequestCertificate',
      authorization: `AWS4-HMAC-SHA256 Credential=testing/20250101/${world.region}/acm/aws4_request, SignedHeaders=host, Signature=0`,
    },
    body: JSON.stringify({ DomainName: domain, ValidationMethod: 'DNS' }),
    signal: AbortSignal.timeout(10_000),
  });
  const answer = (await response.json()) as { CertificateArn?: string };
  if (!response.ok || answer.CertificateArn === undefined)
    throw new Error(`acm RequestCertificate: HTTP ${response.status}: ${JSON.stringify(answer)}`);
  return answer.CertificateArn;
}
