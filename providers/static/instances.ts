// InstancesV2 over the static inventory. Each call takes the inventory snapshot once and reads
// only from it, so a reload in the middle of a call cannot mix two versions of the file.

import type { V1Node } from '@kubernetes/client-node';
import { InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import type { InstanceMetadata, InstancesV2 } from '../../shared/cloud/provider.ts';
import type { Inventory, StaticInstance } from './inventory.ts';

/**
 * The inventory entry for `node`: the one whose providerID equals the Node's `spec.providerID`,
 * else the one whose name equals the Node's name, else undefined. Falling back to the name when
 * a providerID matches nothing keeps a Node whose entry changed its providerID from being taken
 * for a vanished machine (and deleted by the lifecycle controller).
 */
export function findInstance(inventory: Inventory, node: V1Node): StaticInstance | undefined {
  const providerId = node.spec?.providerID;
  const byProviderId =
    providerId === undefined || providerId === '' ? undefined : inventory.byProviderId.get(providerId);
  const name = node.metadata?.name;
  return byProviderId ?? (name === undefined ? undefined : inventory.byName.get(name));
}

/** The static provider's InstancesV2: answers from whatever inventory `current()` returns at the call. */
export class StaticInstances implements InstancesV2 {
  readonly #current: () => Inventory;

  constructor(current: () => Inventory) {
    this.#current = current;
  }

  /** True for a matching entry, running or shut down; false when none matches. */
  instanceExists(node: V1Node, signal?: AbortSignal): Promise<boolean> {
    return answer(signal, () => findInstance(this.#current(), node) !== undefined);
  }

  /** Whether the matching entry's state is `shutdown`; InstanceNotFoundError when none matches. */
  instanceShutdown(node: V1Node, signal?: AbortSignal): Promise<boolean> {
    return answer(signal, () => this.#get(node).state === 'shutdown');
  }

  /** The matching entry's metadata, a fresh copy on every call; InstanceNotFoundError when none matches. */
  instanceMetadata(node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata> {
    return answer(signal, () => metadataOf(this.#get(node)));
  }

  #get(node: V1Node): StaticInstance {
    const instance = findInstance(this.#current(), node);
    if (instance === undefined) throw new InstanceNotFoundError(notFoundMessage(node));
    return instance;
  }
}

// The work is synchronous; a promise built this way turns a throw into a rejection.
function answer<T>(signal: AbortSignal | undefined, compute: () => T): Promise<T> {
  return new Promise((resolve) => {
    signal?.throwIfAborted();
    resolve(compute());
  });
}

function notFoundMessage(node: V1Node): string {
  const providerId = node.spec?.providerID;
  const by = providerId === undefined || providerId === '' ? '' : ` or provider ID "${providerId}"`;
  return `no machine in the static inventory has the name "${node.metadata?.name ?? ''}"${by}`;
}

// Callers get their own arrays and objects: the snapshot is shared by every request.
function metadataOf(instance: StaticInstance): InstanceMetadata {
  return {
    providerId: instance.providerID,
    instanceType: instance.instanceType,
    nodeAddresses: instance.addresses.map(({ type, address }) => ({ type, address })),
    zone: instance.zone,
    region: instance.region,
    additionalLabels: { ...instance.labels },
  };
}
