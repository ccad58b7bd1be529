// A node's instance through InstancesV2 or, without it, the legacy Instances (and Zones)
// interfaces, in the order and with the fallbacks of the Go node controller (k8s.io/cloud-provider
// controllers/node/node_controller.go, getInstanceMetadata and updateNodeAddress) and node
// lifecycle controller (controllers/nodelifecycle/node_lifecycle_controller.go, MonitorNodes).
// Contract errors are matched with findCause, so a provider may wrap them.

import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { findCause, InstanceNotFoundError, NotImplementedError } from './errors.ts';
import type { CloudProvider, InstanceMetadata, Instances, Zone } from './provider.ts';

/** The legacy Instances interface; throws `cloud provider does not support instances` without it. */
export function requireInstances(cloud: CloudProvider): Instances {
  const legacy = cloud.instances();
  if (!legacy) throw new Error('cloud provider does not support instances');
  return legacy;
}

/**
 * `<provider>://<instance id>` for the instance named `nodeName`, through the legacy interface
 * (Go's GetInstanceProviderID without its error wrapping): the provider's errors are thrown as they are.
 */
export async function providerIdByName(
  cloud: CloudProvider,
  instances: Instances,
  nodeName: string,
  signal?: AbortSignal,
): Promise<string> {
  return `${cloud.providerName()}://${await instances.instanceId(nodeName, signal)}`;
}

/**
 * The node's instance metadata; undefined when an InstancesV2 provider has nothing yet.
 * Throws when the provider fails, or when no provider ID can be had for the node.
 */
export async function instanceMetadata(
  cloud: CloudProvider,
  node: V1Node,
  signal?: AbortSignal,
): Promise<InstanceMetadata | undefined> {
  const v2 = cloud.instancesV2();
  if (v2) {
    const metadata = await v2.instanceMetadata(node, signal);
    if (metadata === undefined || metadata.providerId !== '') return metadata;
    const providerId = node.spec?.providerID;
    if (!providerId)
      throw new Error(`cloud provider does not set node provider ID for node ${node.metadata?.name ?? ''}`);
    return { ...metadata, providerId };
  }
  return legacyMetadata(cloud, requireInstances(cloud), node, signal);
}

async function legacyMetadata(
  cloud: CloudProvider,
  instances: Instances,
  node: V1Node,
  signal?: AbortSignal,
): Promise<InstanceMetadata> {
  const name = node.metadata?.name ?? '';
  const providerId = node.spec?.providerID || (await initialProviderId(cloud, instances, name, signal));
  const nodeAddresses = await legacyAddresses(instances, providerId, name, signal);
  const instanceType = await instances
    .instanceTypeByProviderId(providerId, signal)
    .catch(() => instances.instanceType(name, signal));
  const zone = await legacyZone(cloud, providerId, name, signal);
  return {
    providerId,
    instanceType,
    nodeAddresses,
    zone: zone.failureDomain,
    region: zone.region,
    additionalLabels: {},
  };
}

// The node controller's provider ID by name: a provider that does not implement InstanceID leaves
// it empty; InstanceNotFound is thrown as it is; any other error is wrapped.
async function initialProviderId(
  cloud: CloudProvider,
  instances: Instances,
  name: string,
  signal?: AbortSignal,
): Promise<string> {
  try {
    return await providerIdByName(cloud, instances, name, signal);
  } catch (error) {
    if (findCause(error, NotImplementedError)) return '';
    if (findCause(error, InstanceNotFoundError)) throw error;
    throw new Error(`failed to get instance ID from cloud provider: ${(error as Error).message}`, { cause: error });
  }
}

// Zone by provider ID, falling back to the node name; empty without Zones.
async function legacyZone(cloud: CloudProvider, providerId: string, name: string, signal?: AbortSignal): Promise<Zone> {
  const zones = cloud.zones();
  if (!zones) return { failureDomain: '', region: '' };
  try {
    const { failureDomain, region } = await zones
      .getZoneByProviderId(providerId, signal)
      .catch(() => zones.getZoneByNodeName(name, signal));
    return { failureDomain, region };
  } catch (error) {
    throw new Error(`failed to get zone from cloud provider: ${(error as Error).message}`, { cause: error });
  }
}

// Addresses by provider ID, falling back to the node name.
async function legacyAddresses(
  instances: Instances,
  providerId: string,
  name: string,
  signal?: AbortSignal,
): Promise<V1NodeAddress[]> {
  try {
    return await instances.nodeAddressesByProviderId(providerId, signal);
  } catch (byId) {
    try {
      return await instances.nodeAddresses(name, signal);
    } catch (byName) {
      throw new Error(
        `error fetching node by provider ID: ${(byId as Error).message}, and error by node name: ${(byName as Error).message}`,
        { cause: byName },
      );
    }
  }
}

/**
 * The node's addresses for the periodic status pass, with one cloud call when it succeeds:
 * InstancesV2 metadata (undefined when there is none yet), or the legacy addresses by the node's
 * provider ID with the name as fallback; undefined without either interface.
 */
export async function nodeAddresses(
  cloud: CloudProvider,
  node: V1Node,
  signal?: AbortSignal,
): Promise<V1NodeAddress[] | undefined> {
  const v2 = cloud.instancesV2();
  if (v2) return (await v2.instanceMetadata(node, signal))?.nodeAddresses.map((a) => ({ ...a }));
  const legacy = cloud.instances();
  if (!legacy) return undefined;
  return legacyAddresses(legacy, node.spec?.providerID ?? '', node.metadata?.name ?? '', signal);
}

/**
 * Whether the node's instance exists (true for a stopped one), as the lifecycle controller asks:
 * InstancesV2, or the legacy interface by provider ID, where InstanceNotFound from the lookup by
 * name means it does not.
 */
export async function instanceExists(cloud: CloudProvider, node: V1Node, signal?: AbortSignal): Promise<boolean> {
  const v2 = cloud.instancesV2();
  if (v2) return v2.instanceExists(node, signal);
  const legacy = requireInstances(cloud);
  const providerId = await lifecycleProviderId(cloud, legacy, node, signal);
  if (providerId === undefined) return false;
  return legacy.instanceExistsByProviderId(providerId, signal);
}

/**
 * Whether the node's instance is shut down, as the lifecycle controller asks; false when the
 * provider does not implement the check, or (legacy) when the lookup by name finds no instance.
 */
export async function instanceShutdown(cloud: CloudProvider, node: V1Node, signal?: AbortSignal): Promise<boolean> {
  try {
    const v2 = cloud.instancesV2();
    if (v2) return await v2.instanceShutdown(node, signal);
    const legacy = requireInstances(cloud);
    const providerId = await lifecycleProviderId(cloud, legacy, node, signal);
    return providerId !== undefined && (await legacy.instanceShutdownByProviderId(providerId, signal));
  } catch (error) {
    if (findCause(error, NotImplementedError)) return false;
    throw error;
  }
}

// The node's provider ID, or from the cloud by name; undefined when the cloud has no such instance.
async function lifecycleProviderId(
  cloud: CloudProvider,
  legacy: Instances,
  node: V1Node,
  signal?: AbortSignal,
): Promise<string | undefined> {
  if (node.spec?.providerID) return node.spec.providerID;
  try {
    return await providerIdByName(cloud, legacy, node.metadata?.name ?? '', signal);
  } catch (error) {
    if (findCause(error, InstanceNotFoundError)) return undefined;
    throw error;
  }
}
