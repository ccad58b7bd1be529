// Objects shaped like a real cluster's, as raw JSON, for the tests and the benchmark of what the
// relay keeps in memory (bench/scenarios/relay-memory.ts): a Node as a kubelet reports it (labels
// of a cloud node, addresses, five conditions, capacity, nodeInfo, and an images list as long as the
// kubelet's default cap of 50, `--node-status-max-images`), and a Service of type LoadBalancer with
// the annotations and status a cloud load balancer gives it.

import type { KubeObject } from '../../shared/kube/object.ts';

const zones = ['us-east-1a', 'us-east-1b', 'us-east-1c'] as const;

/** How many images a realistic Node lists (the kubelet's default cap). */
export const realisticImages = 50;

function hex(seed: number, length: number): string {
  let out = '';
  let value = seed * 2654435761;
  while (out.length < length) {
    value = (Math.imul(value, 1103515245) + 12345) >>> 0;
    out += value.toString(16).padStart(8, '0');
  }
  return out.slice(0, length);
}

/** The i-th Node of `group`: `<group>-<i>`, as a kubelet on a cloud instance reports it. */
export function realisticNode(group: string, i: number): KubeObject {
  const name = `${group}-${i}`;
  const zone = zones[i % zones.length] ?? 'us-east-1a';
  const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  const time = '2026-11-26T20:00:00Z';
  const condition = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    lastHeartbeatTime: time,
    lastTransitionTime: time,
    reason,
    message,
  });
  const resources = {
    cpu: '4',
    memory: '16069588Ki',
    pods: '110',
    'ephemeral-storage': '83873772Ki',
    'hugepages-1Gi': '0',
    'hugepages-2Mi': '0',
    'attachable-volumes-aws-ebs': '25',
  };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/os': 'linux',
        'kubernetes.io/hostname': name,
        'node.kubernetes.io/instance-type': 'm5.xlarge',
        'topology.kubernetes.io/region': 'us-east-1',
        'topology.kubernetes.io/zone': zone,
        'eks.amazonaws.com/nodegroup': `${group}-workers`,
        'relay-memory.cirrus/group': group,
      },
      annotations: {
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        'alpha.kubernetes.io/provided-node-ip': ip,
        'csi.volume.kubernetes.io/nodeid': JSON.stringify({ 'ebs.csi.aws.com': `i-${hex(i, 17)}` }),
      },
    },
    spec: {
      podCIDR: `10.${100 + ((i >> 8) & 127)}.${i & 255}.0/24`,
      podCIDRs: [`10.${100 + ((i >> 8) & 127)}.${i & 255}.0/24`],
      providerID: `aws:///${zone}/i-${hex(i, 17)}`,
    },
    status: {
      capacity: resources,
      allocatable: { ...resources, cpu: '3920m', memory: '15052756Ki', 'ephemeral-storage': '76224326324' },
      conditions: [
        condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
        condition('NetworkUnavailable', 'False', 'RouteCreated', 'RouteController created a route'),
      ],
      addresses: [
        { type: 'InternalIP', address: ip },
        { type: 'ExternalIP', address: `54.${(i >> 8) & 255}.${i & 255}.7` },
        { type: 'Hostname', address: `ip-${ip.replaceAll('.', '-')}.ec2.internal` },
        { type: 'InternalDNS', address: `ip-${ip.replaceAll('.', '-')}.ec2.internal` },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: hex(i + 1, 32),
        systemUUID: `ec2${hex(i + 2, 5)}-${hex(i + 3, 4)}-${hex(i + 4, 4)}-${hex(i + 5, 4)}-${hex(i + 6, 12)}`,
        bootID: `${hex(i + 7, 8)}-${hex(i + 8, 4)}-${hex(i + 9, 4)}-${hex(i + 10, 4)}-${hex(i + 11, 12)}`,
        kernelVersion: '6.1.112-124.190.amzn2023.x86_64',
        osImage: 'Amazon Linux 2023.6.20241031',
        containerRuntimeVersion: 'containerd://1.7.22',
        kubeletVersion: 'v1.36.0',
        kubeProxyVersion: 'v1.36.0',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
      images: Array.from({ length: realisticImages }, (_, k) => {
        const repository = `registry.example.com/team-${k % 7}/service-${k}`;
        return {
          names: [`${repository}@sha256:${hex(k * 31 + 1, 64)}`, `${repository}:v1.${k}.${i % 5}`],
          sizeBytes: 10_000_000 + k * 1_234_567,
        };
      }),
    },
  };
}

/** The i-th Service of `group` in `namespace`: a LoadBalancer Service as a cloud provider leaves it. */
export function realisticService(namespace: string, group: string, i: number): KubeObject {
  const name = `${group}-${i}`;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace,
      labels: { 'app.kubernetes.io/name': name, 'app.kubernetes.io/part-of': group },
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb',
        'service.beta.kubernetes.io/aws-load-balancer-scheme': 'internet-facing',
        'service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled': 'true',
      },
      finalizers: ['service.kubernetes.io/load-balancer-cleanup'],
    },
    spec: {
      type: 'LoadBalancer',
      selector: { 'app.kubernetes.io/name': name },
      ports: [
        { name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 },
        { name: 'https', protocol: 'TCP', port: 443, targetPort: 8443 },
      ],
      externalTrafficPolicy: 'Cluster',
      sessionAffinity: 'None',
    },
    status: {
      loadBalancer: {
        ingress: [{ hostname: `a${hex(i, 32)}-${hex(i + 1, 16)}.elb.us-east-1.amazonaws.com` }],
      },
    },
  };
}
