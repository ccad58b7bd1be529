// Label, taint and annotation names the cloud controllers read and write (k8s.io/api and
// k8s.io/cloud-provider/api). Names are IDs: never change one.

/** Set by a kubelet started with --cloud-provider=external; removed once the node is initialized. */
export const taintUninitialized = 'node.cloudprovider.kubernetes.io/uninitialized';
/** Set while a NotReady node's instance is shut down (effect NoSchedule, no value). */
export const taintShutdown = 'node.cloudprovider.kubernetes.io/shutdown';
/** The node IP(s) given to the kubelet with --node-ip. */
export const annotationProvidedNodeIp = 'alpha.kubernetes.io/provided-node-ip';

export const labelInstanceType = 'node.kubernetes.io/instance-type';
export const labelInstanceTypeBeta = 'beta.kubernetes.io/instance-type';
export const labelZone = 'topology.kubernetes.io/zone';
export const labelZoneBeta = 'failure-domain.beta.kubernetes.io/zone';
export const labelRegion = 'topology.kubernetes.io/region';
export const labelRegionBeta = 'failure-domain.beta.kubernetes.io/region';

/** Label domains a provider's additional labels may never use. */
export const reservedLabelDomain = /(^|\.)(kubernetes|k8s)\.io\//;
