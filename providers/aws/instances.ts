// InstancesV2 for EC2. A Node's instance is found from its provider ID (`aws:///<zone>/<id>` and
// the legacy forms), else from a resource-based name (`i-0abc….compute.internal`), else by its
// private DNS name among the cluster's instances. Lookups by ID that arrive together (a node
// lifecycle pass asks for many nodes at once) are merged into one DescribeInstances.

import {
  DescribeAvailabilityZonesCommand,
  DescribeInstancesCommand,
  type Instance,
  type InstanceNetworkInterface,
} from '@aws-sdk/client-ec2';
import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import type { InstanceMetadata, InstancesV2 } from '../../shared/cloud/provider.ts';
import { abortable, errorCode, type AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import { hasClusterTag } from './tags.ts';

/** The label upstream sets to the zone's ID (`use1-az6`), which names the same zone in every account. */
export const ZONE_ID_LABEL = 'topology.k8s.aws/zone-id';
/** How long lookups by ID wait for company before one DescribeInstances answers them all. */
const BATCH_WINDOW_MS = 5;
/** AWS takes up to 1000 IDs per DescribeInstances; upstream batches 500. */
const MAX_BATCH = 500;
/** How long an answer about an instance is reused, and how many are kept. */
const RECENT_MS = 1_000;
const MAX_RECENT = 10_000;
/** States in which an instance by private DNS name counts (terminated ones are gone). */
const LIVE_STATES = ['pending', 'running', 'shutting-down', 'stopping', 'stopped'];

/** The instance ID in a provider ID, in any form upstream accepts; throws for anything else (not InstanceNotFoundError). */
export function instanceIdFromProviderId(providerId: string): string {
  const url = providerId.startsWith('aws://') ? providerId : `aws:///${providerId}`;
  const parts = url
    .slice('aws://'.length)
    .split('/')
    .filter((p) => p !== '');
  const id = parts.at(-1);
  if (id === undefined || !/^i-[0-9a-zA-Z]+$/.test(id) || parts.length > 2) {
    throw new Error(
      `provider ID "${providerId}" is not an EC2 instance's (expected aws:///<zone>/i-<id>, aws:////i-<id> or i-<id>)`,
    );
  }
  return id;
}

/** What a Node's instance is looked up by. */
type NodeKey = { readonly instanceId: string } | { readonly privateDnsName: string };

export function nodeKey(node: V1Node): NodeKey {
  const providerId = node.spec?.providerID;
  if (providerId !== undefined && providerId !== '') return { instanceId: instanceIdFromProviderId(providerId) };
  const name = node.metadata?.name ?? '';
  if (name === '') throw new Error('the Node has no name and no spec.providerID');
  // split always yields at least one part: the name up to its first dot.
  const [resourceId = name] = name.split('.');
  if (name.startsWith('i-')) return { instanceId: resourceId };
  return { privateDnsName: name };
}

export class AwsInstances implements InstancesV2 {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;
  readonly #batcher: DescribeBatcher;
  #zoneIds: Promise<Map<string, string>> | undefined;
  readonly #byName = new Recent<Instance | undefined>();

  constructor(api: AwsApi, config: AwsConfig) {
    this.#api = api;
    this.#config = config;
    this.#batcher = new DescribeBatcher(api);
  }

  async instanceExists(node: V1Node, signal?: AbortSignal): Promise<boolean> {
    const instance = await this.find(node, signal);
    return instance !== undefined && instance.State?.Name !== 'terminated';
  }

  async instanceShutdown(node: V1Node, signal?: AbortSignal): Promise<boolean> {
    return (await this.find(node, signal))?.State?.Name === 'stopped';
  }

  async instanceMetadata(node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata> {
    const instance = await this.find(node, signal);
    if (instance === undefined || instance.State?.Name === 'terminated') {
      throw new InstanceNotFoundError(
        `no EC2 instance for Node ${node.metadata?.name ?? ''} (${describeKey(nodeKey(node))})`,
      );
    }
    const zone = instance.Placement?.AvailabilityZone ?? '';
    return {
      providerId: providerIdOf(node, zone, instance),
      instanceType: instance.InstanceType ?? '',
      nodeAddresses: nodeAddresses(instance, this.#config.nodeIpFamilies),
      zone,
      region: this.#config.region,
      additionalLabels: await this.#labels(node, zone, signal),
    };
  }

  /** The zone ID label, unless the Node has it already (or the zone is unknown). */
  async #labels(node: V1Node, zone: string, signal: AbortSignal | undefined): Promise<Record<string, string>> {
    const labels: Record<string, string> = {};
    if (zone === '' || node.metadata?.labels?.[ZONE_ID_LABEL] !== undefined) return labels;
    const zoneId = (await this.#zoneIdsOf(signal)).get(zone);
    if (zoneId !== undefined) labels[ZONE_ID_LABEL] = zoneId;
    return labels;
  }

  /** The Node's instance (terminated ones included when found by ID), or undefined. */
  async find(node: V1Node, signal?: AbortSignal): Promise<Instance | undefined> {
    const key = nodeKey(node);
    if ('instanceId' in key) return this.#batcher.get(key.instanceId, signal);
    return this.byPrivateDnsName(key.privateDnsName, signal);
  }

  /** The cluster's live instance named `name`; an error when more than one claims it. */
  async byPrivateDnsName(name: string, signal?: AbortSignal): Promise<Instance | undefined> {
    const recent = this.#byName.get(name);
    if (recent !== undefined) return recent.value;
    const out = await this.#api.ec2.send(
      new DescribeInstancesCommand({
        Filters: [
          { Name: 'private-dns-name', Values: [name] },
          { Name: 'instance-state-name', Values: LIVE_STATES },
        ],
      }),
      abortable(signal),
    );
    const found = (out.Reservations ?? [])
      .flatMap((r) => r.Instances ?? [])
      .filter((i) => hasClusterTag(i.Tags, this.#config.clusterId));
    if (found.length > 1) {
      throw new Error(
        `${found.length} instances of cluster ${this.#config.clusterId} have the private DNS name ${name}: ${found.map((i) => i.InstanceId).join(', ')}`,
      );
    }
    this.#byName.set(name, found[0]);
    return found[0];
  }

  #zoneIdsOf(signal: AbortSignal | undefined): Promise<Map<string, string>> {
    this.#zoneIds ??= this.#api.ec2
      .send(new DescribeAvailabilityZonesCommand({}), abortable(signal))
      .then((out) => new Map((out.AvailabilityZones ?? []).map((z) => [z.ZoneName ?? '', z.ZoneId ?? ''])));
    this.#zoneIds.catch(() => (this.#zoneIds = undefined));
    return this.#zoneIds;
  }
}

/** The Node's own provider ID (kept in whatever form it has), or one made from the instance. */
function providerIdOf(node: V1Node, zone: string, instance: Instance): string {
  const own = node.spec?.providerID;
  return own !== undefined && own !== '' ? own : `aws:///${zone}/${instance.InstanceId ?? ''}`;
}

function describeKey(key: NodeKey): string {
  return 'instanceId' in key ? `instance ${key.instanceId}` : `private DNS name ${key.privateDnsName}`;
}

/** The Node addresses of an instance, one block per family in `families`' order, as upstream orders them. */
export function nodeAddresses(instance: Instance, families: readonly ('ipv4' | 'ipv6')[]): V1NodeAddress[] {
  const enis = (instance.NetworkInterfaces ?? [])
    .filter((e) => e.Status === 'in-use')
    .sort((a, b) => (a.Attachment?.DeviceIndex ?? Infinity) - (b.Attachment?.DeviceIndex ?? Infinity));
  const out: V1NodeAddress[] = [];
  const add = (type: string, address: string | undefined): void => {
    if (address !== undefined && address !== '') out.push({ type, address });
  };
  for (const family of families) {
    if (family === 'ipv4') addIpv4Addresses(instance, enis, add);
    else for (const eni of enis) add('InternalIP', eni.Ipv6Addresses?.[0]?.Ipv6Address);
  }
  return out;
}

/** The private addresses of each interface (its primary first), then the public address and the DNS names. */
function addIpv4Addresses(
  instance: Instance,
  enis: readonly InstanceNetworkInterface[],
  add: (type: string, address: string | undefined) => void,
): void {
  for (const eni of enis) {
    const ips = [...(eni.PrivateIpAddresses ?? [])].sort(
      (a, b) => Number(b.Primary ?? false) - Number(a.Primary ?? false),
    );
    for (const ip of ips) add('InternalIP', ip.PrivateIpAddress);
  }
  if (enis.length === 0) add('InternalIP', instance.PrivateIpAddress);
  add('ExternalIP', instance.PublicIpAddress);
  add('InternalDNS', instance.PrivateDnsName);
  add('Hostname', instance.PrivateDnsName);
  add('ExternalDNS', instance.PublicDnsName);
}

interface Waiter {
  readonly id: string;
  resolve(instance: Instance | undefined): void;
  reject(error: unknown): void;
}

/**
 * Merges DescribeInstances by ID that arrive within a few milliseconds into one call. One unknown
 * ID fails a whole call (InvalidInstanceID.NotFound), so then each ID is asked alone; an ID missing
 * from a successful answer has no instance.
 */
export class DescribeBatcher {
  readonly #api: AwsApi;
  #pending: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #recent = new Recent<Instance | undefined>();

  constructor(api: AwsApi) {
    this.#api = api;
  }

  get(id: string, signal?: AbortSignal): Promise<Instance | undefined> {
    signal?.throwIfAborted();
    const recent = this.#recent.get(id);
    if (recent !== undefined) return Promise.resolve(recent.value);
    return new Promise((resolve, reject) => {
      signal?.addEventListener(
        'abort',
        () => {
          reject(signal.reason as Error);
        },
        { once: true },
      );
      this.#pending.push({ id, resolve, reject });
      if (this.#pending.length >= MAX_BATCH) this.#flush();
      else
        this.#timer ??= setTimeout(() => {
          this.#flush();
        }, BATCH_WINDOW_MS);
    });
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#pending;
    this.#pending = [];
    if (batch.length > 0) void this.#answer(batch);
  }

  async #answer(batch: readonly Waiter[]): Promise<void> {
    const ids = [...new Set(batch.map((w) => w.id))];
    try {
      const found = await this.#describe(ids);
      for (const w of batch) w.resolve(found.get(w.id));
    } catch (error) {
      if (errorCode(error) !== 'InvalidInstanceID.NotFound' || ids.length === 1) {
        if (errorCode(error) === 'InvalidInstanceID.NotFound') for (const w of batch) w.resolve(undefined);
        else for (const w of batch) w.reject(error);
        return;
      }
      await Promise.all(
        ids.map(async (id) => {
          const waiters = batch.filter((w) => w.id === id);
          try {
            const one = await this.#describe([id]);
            for (const w of waiters) w.resolve(one.get(id));
          } catch (e) {
            if (errorCode(e) === 'InvalidInstanceID.NotFound') for (const w of waiters) w.resolve(undefined);
            else for (const w of waiters) w.reject(e);
          }
        }),
      );
    }
  }

  /** One DescribeInstances; every ID's answer (found or not) is remembered for a moment. */
  async #describe(ids: readonly string[]): Promise<Map<string, Instance>> {
    let out;
    try {
      out = await this.#api.ec2.send(new DescribeInstancesCommand({ InstanceIds: [...ids] }));
    } catch (error) {
      if (ids.length === 1 && errorCode(error) === 'InvalidInstanceID.NotFound')
        this.#recent.set(ids[0] ?? '', undefined);
      throw error;
    }
    const found = new Map<string, Instance>();
    for (const instance of (out.Reservations ?? []).flatMap((r) => r.Instances ?? [])) {
      if (instance.InstanceId !== undefined) found.set(instance.InstanceId, instance);
    }
    for (const id of ids) this.#recent.set(id, found.get(id));
    return found;
  }
}

/**
 * Answers remembered for RECENT_MS: the calls one reconcile makes about one instance (node-lifecycle
 * asks instanceShutdown, then instanceExists) cost one DescribeInstances. Not a cache to rely on:
 * a fresh process, or an answer older than that, asks AWS again.
 */
class Recent<T> {
  readonly #answers = new Map<string, { readonly at: number; readonly value: T }>();

  get(key: string): { readonly value: T } | undefined {
    const hit = this.#answers.get(key);
    if (hit === undefined) return undefined;
    if (performance.now() - hit.at <= RECENT_MS) return hit;
    this.#answers.delete(key);
    return undefined;
  }

  set(key: string, value: T): void {
    if (this.#answers.size >= MAX_RECENT) this.#answers.clear();
    this.#answers.set(key, { at: performance.now(), value });
  }
}
