// Instance metadata for a node, through InstancesV2 or, without it, the legacy Instances and
// Zones interfaces — in the order and with the fallbacks of the Go node controller.

import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { findCause, InstanceNotFoundError, NotImplementedError } from '../../shared/cloud/errors.ts';
import type { CloudProvider, InstanceMetadata, Instances } from '../../shared/cloud/provider.ts';

/**
 * The node's instance metadata; undefined when an InstancesV2 provider has nothing yet.
 * Throws when the provider fails, or when no provider ID can be had for the node.
 */
export async function instanceMetadata(cloud: CloudProvider, node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata | undefined> {
  const v2 = cloud.instancesV2();
  if (v2) {
    const metadata = await v2.instanceMetadata(node, signal);
    if (metadata === undefined || metadata.providerId !== '') return metadata;
    const providerId = node.spec?.providerID;
    if (!providerId) throw new Error(`cloud provider does not set node provider ID for node ${node.metadata?.name ?? ''}`);
    return { ...metadata, providerId };
  }
  const legacy = cloud.instances();
  if (!legacy) throw new Error('cloud provider does not support instances');
  return legacyMetadata(cloud, legacy, node, signal);
}

async function legacyMetadata(cloud: CloudProvider, instances: Instances, node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata> {
  const name = node.metadata?.name ?? '';
  const providerId = node.spec?.providerID || (await legacyProviderId(cloud, instances, name, signal));
  const nodeAddresses = await legacyAddresses(instances, providerId, name, signal);
  const instanceType = await instances.instanceTypeByProviderId(providerId, signal)
    .catch(() => instances.instanceType(name, signal));
  const zone = { failureDomain: '', region: '' };
  const zones = cloud.zones();
  if (zones) {
    try {
      Object.assign(zone, await zones.getZoneByProviderId(providerId, signal).catch(() => zones.getZoneByNodeName(name, signal)));
    } catch (error) {
      throw new Error(`failed to get zone from cloud provider: ${(error as Error).message}`, { cause: error });
    }
  }
  return { providerId, instanceType, nodeAddresses, zone: zone.failureDomain, region: zone.region, additionalLabels: {} };
}

// `<provider>://<instance id>`; a provider that does not implement InstanceID leaves it empty.
async function legacyProviderId(cloud: CloudProvider, instances: Instances, name: string, signal?: AbortSignal): Promise<string> {
  try {
    return `${cloud.providerName()}://${await instances.instanceId(name, signal)}`;
  } catch (error) {
    if (findCause(error, NotImplementedError)) return '';
    if (findCause(error, InstanceNotFoundError)) throw error;
    throw new Error(`failed to get instance ID from cloud provider: ${(error as Error).message}`, { cause: error });
  }
}

/** Addresses by provider ID, falling back to the node name. */
export async function legacyAddresses(instances: Instances, providerId: string, name: string, signal?: AbortSignal): Promise<V1NodeAddress[]> {
  try {
    return await instances.nodeAddressesByProviderId(providerId, signal);
  } catch (byId) {
    try {
      return await instances.nodeAddresses(name, signal);
    } catch (byName) {
      throw new Error(`error fetching node by provider ID: ${(byId as Error).message}, and error by node name: ${(byName as Error).message}`, { cause: byName });
    }
  }
}
