// Instances: what the node controllers ask of the cloud. A known instance has complete, stable
// metadata under an ID the provider accepts back; a shut-down instance still exists; a gone one
// is InstanceNotFoundError or false — never a generic error, which would keep a Node tainted
// forever, and never `false` for one that exists, which would get its Node deleted.

import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { findCause, InstanceNotFoundError, NotImplementedError } from '../../../shared/cloud/errors.ts';
import type { InstanceMetadata, Instances, InstancesV2 } from '../../../shared/cloud/provider.ts';
import {
  describeError,
  expect,
  expectEqual,
  frozen,
  rejection,
  show,
  skip,
  succeeds,
  type Check,
  type CheckContext,
  type Skip,
} from '../check.ts';
import { nodeOf, withoutExpectation, type KnownInstance, type NodeSpec } from '../fixture.ts';

const addressTypes = new Set(['Hostname', 'ExternalIP', 'InternalIP', 'ExternalDNS', 'InternalDNS']);
const reservedLabel = /(^|\.)(kubernetes|k8s)\.io\//;

function v2(context: CheckContext): InstancesV2 | Skip {
  return context.provider.instancesV2() ?? skip('the provider does not support instancesV2() (it answers undefined)');
}

function legacy(context: CheckContext): Instances | Skip {
  return context.provider.instances() ?? skip('the provider does not support instances() (it answers undefined)');
}

function isSkip(value: object): value is Skip {
  return 'skipped' in value;
}

function specOf(instance: KnownInstance): NodeSpec {
  return withoutExpectation(instance);
}

function existing(context: CheckContext): KnownInstance[] {
  return [...context.fixture.instances.known, ...context.fixture.instances.shutdown];
}

function gone(context: CheckContext): NodeSpec[] {
  const listed = context.fixture.instances.gone;
  return listed.length > 0 ? listed : [{ name: context.name('gone') }];
}

const noKnown = skip('the fixture names no known instance (instances.known or instances.shutdown)');

/** The Node a check passes for `spec`: frozen, so a provider that writes to it fails. */
function node(spec: NodeSpec): V1Node {
  return frozen(nodeOf(spec));
}

async function metadataOf(api: InstancesV2, spec: NodeSpec): Promise<InstanceMetadata> {
  const metadata = await succeeds(`instanceMetadata(Node ${spec.name})`, () => api.instanceMetadata(node(spec)));
  expect(
    metadata !== undefined,
    `instanceMetadata(Node ${spec.name}) answered undefined ("nothing yet") for an instance the fixture says exists`,
  );
  return metadata;
}

function checkComplete(spec: NodeSpec, metadata: InstanceMetadata): void {
  const who = `instanceMetadata(Node ${spec.name})`;
  expect(typeof metadata.providerId === 'string', `${who}: providerId is ${typeof metadata.providerId}`);
  expect(
    metadata.providerId !== '' || spec.providerID !== undefined,
    `${who}: providerId is empty and the Node has no spec.providerID; the node controller could not initialize it`,
  );
  for (const field of ['instanceType', 'zone', 'region'] as const)
    expect(typeof metadata[field] === 'string', `${who}: ${field} is ${show(metadata[field])}, not a string`);
  expect(Array.isArray(metadata.nodeAddresses), `${who}: nodeAddresses is not a list`);
  expect(metadata.nodeAddresses.length > 0, `${who}: nodeAddresses is empty; a running instance has an address`);
  metadata.nodeAddresses.forEach((a: V1NodeAddress, i) => {
    expect(addressTypes.has(a.type), `${who}: nodeAddresses[${i}].type is ${show(a.type)}`);
    expect(typeof a.address === 'string' && a.address !== '', `${who}: nodeAddresses[${i}].address is empty`);
  });
  const labels: unknown = metadata.additionalLabels;
  expect(typeof labels === 'object' && labels !== null, `${who}: additionalLabels is ${show(labels)}, not a map`);
  for (const [key, value] of Object.entries(metadata.additionalLabels)) {
    expect(typeof value === 'string', `${who}: additionalLabels["${key}"] is ${show(value)}, not a string`);
    expect(
      !reservedLabel.test(key),
      `${who}: additionalLabels["${key}"] is in the kubernetes.io or k8s.io domain, which the node controller discards`,
    );
  }
}

function checkExpected(instance: KnownInstance, metadata: InstanceMetadata): void {
  const want = instance.expect;
  if (want === undefined) return;
  const who = `instanceMetadata(Node ${instance.name})`;
  const pairs: [string, unknown, unknown][] = [
    ['providerId', metadata.providerId, want.providerID],
    ['instanceType', metadata.instanceType, want.instanceType],
    ['zone', metadata.zone, want.zone],
    ['region', metadata.region, want.region],
    ['nodeAddresses', metadata.nodeAddresses, want.addresses],
    ['additionalLabels', metadata.additionalLabels, want.labels],
  ];
  for (const [field, got, expected] of pairs)
    if (expected !== undefined) expectEqual(got, expected, `${who}: ${field} is not what the fixture expects`);
}

const metadataComplete: Check = {
  id: 'instances.metadata',
  rule: 'instanceMetadata() of a known instance (running or shut down) answers complete metadata — a provider ID, addresses, type, zone and region as strings, extra labels outside kubernetes.io/k8s.io — the same on every call.',
  source:
    'shared/cloud/provider.ts InstancesV2.instanceMetadata, InstanceMetadata; k8s.io/cloud-provider cloud.go InstanceMetadata, controllers/node/node_controller.go getInstanceMetadata, getNodeModifiersFromCloudProvider',
  run: async (context) => {
    const api = v2(context);
    if (isSkip(api)) return api;
    const instances = existing(context);
    if (instances.length === 0) return noKnown;
    for (const instance of instances) {
      const first = await metadataOf(api, specOf(instance));
      checkComplete(instance, first);
      checkExpected(instance, first);
      const second = await metadataOf(api, specOf(instance));
      expectEqual(
        second,
        first,
        `instanceMetadata(Node ${instance.name}) is not stable: a second call answered otherwise`,
      );
    }
    return undefined;
  },
};

const providerIdPrefix: Check = {
  id: 'instances.provider-id-prefix',
  rule: 'The provider IDs the provider hands out are <providerName()>://<id>.',
  source:
    'shared/cloud/provider.ts CloudProvider.providerName, InstanceMetadata.providerId; k8s.io/cloud-provider cloud.go Instances, InstancesV2',
  run: async (context) => {
    const api = v2(context);
    if (isSkip(api)) return api;
    const instances = existing(context);
    if (instances.length === 0) return noKnown;
    const prefix = `${context.provider.providerName()}://`;
    for (const instance of instances) {
      const { providerId } = await metadataOf(api, specOf(instance));
      if (providerId === '') continue;
      expect(
        providerId.startsWith(prefix) && providerId.length > prefix.length,
        `instanceMetadata(Node ${instance.name}) answered provider ID "${providerId}", which does not start with "${prefix}" (providerName() is "${context.provider.providerName()}")`,
      );
    }
    return undefined;
  },
};

const exists: Check = {
  id: 'instances.exists',
  rule: 'instanceExists() is true for a known instance, and for a shut-down one (stopped is not gone: false gets the Node deleted).',
  source:
    'shared/cloud/provider.ts InstancesV2.instanceExists; k8s.io/cloud-provider controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes',
  run: async (context) => {
    const api = v2(context);
    if (isSkip(api)) return api;
    const instances = existing(context);
    if (instances.length === 0) return noKnown;
    for (const instance of instances) {
      const answer: unknown = await succeeds(`instanceExists(Node ${instance.name})`, () =>
        api.instanceExists(node(instance)),
      );
      expect(
        answer === true,
        `instanceExists(Node ${instance.name}) answered ${show(answer)} for an existing instance`,
      );
    }
    return undefined;
  },
};

async function shutdownOf(api: InstancesV2, spec: NodeSpec): Promise<boolean | Skip> {
  try {
    return await api.instanceShutdown(node(spec));
  } catch (error) {
    if (findCause(error, NotImplementedError))
      return skip('instanceShutdown() is NotImplementedError (allowed: it counts as "not shut down")');
    return succeeds(`instanceShutdown(Node ${spec.name})`, () => Promise.reject(error as Error));
  }
}

const shutdown: Check = {
  id: 'instances.shutdown',
  rule: 'instanceShutdown() is true for a shut-down instance and false for a running one.',
  source:
    'shared/cloud/provider.ts InstancesV2.instanceShutdown; k8s.io/cloud-provider controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes',
  run: async (context) => {
    const api = v2(context);
    if (isSkip(api)) return api;
    const { known, shutdown: stopped } = context.fixture.instances;
    if (stopped.length === 0) return skip('the fixture names no shut-down instance (instances.shutdown)');
    for (const [instances, want] of [
      [known, false],
      [stopped, true],
    ] as const) {
      for (const instance of instances) {
        const answer = await shutdownOf(api, specOf(instance));
        if (typeof answer === 'object') return answer;
        expect(
          answer === want,
          `instanceShutdown(Node ${instance.name}) answered ${show(answer)}, want ${String(want)}`,
        );
      }
    }
    return undefined;
  },
};

const notFoundMetadata: Check = {
  id: 'instances.not-found-metadata',
  rule: 'instanceMetadata() of an instance that does not exist throws InstanceNotFoundError (or an error caused by one), never a generic error.',
  source:
    'shared/cloud/errors.ts InstanceNotFoundError; shared/cloud/provider.ts InstancesV2; k8s.io/cloud-provider cloud.go InstanceNotFound, Instances',
  run: async (context) => {
    const api = v2(context);
    if (isSkip(api)) return api;
    for (const spec of gone(context)) {
      const error = await rejection(
        () => api.instanceMetadata(node(spec)),
        `instanceMetadata(Node ${spec.name}) of a gone instance should throw InstanceNotFoundError`,
      );
      expect(
        findCause(error, InstanceNotFoundError) !== undefined,
        `instanceMetadata(Node ${spec.name}) of a gone instance threw ${describeError(error)}, not InstanceNotFoundError`,
      );
    }
    return undefined;
  },
};

const notFoundExists: Check = {
  id: 'instances.not-found-exists',
  rule: 'instanceExists() of an instance that does not exist answers false, without throwing.',
  source:
    'shared/cloud/provider.ts InstancesV2.instanceExists; k8s.io/cloud-provider controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes',
  run: async (context) => {
    const api = v2(context);
    if (isSkip(api)) return api;
    for (const spec of gone(context)) {
      const answer: unknown = await succeeds(`instanceExists(Node ${spec.name}) of a gone instance`, () =>
        api.instanceExists(node(spec)),
      );
      expect(
        answer === false,
        `instanceExists(Node ${spec.name}) of a gone instance answered ${show(answer)}, want false`,
      );
    }
    return undefined;
  },
};

const providerIdAccepted: Check = {
  id: 'instances.provider-id-accepted',
  rule: "A provider ID from instanceMetadata(), set as the Node's spec.providerID, is accepted back: the instance exists and has the same metadata.",
  source:
    'shared/cloud/provider.ts InstancesV2 ("look at spec.providerID first"); k8s.io/cloud-provider cloud.go InstancesV2, controllers/node/node_controller.go getInstanceMetadata',
  run: async (context) => {
    const api = v2(context);
    if (isSkip(api)) return api;
    const instances = existing(context);
    if (instances.length === 0) return noKnown;
    for (const instance of instances) {
      const spec = specOf(instance);
      const metadata = await metadataOf(api, spec);
      if (metadata.providerId === '') continue;
      const initialized = { ...spec, providerID: metadata.providerId };
      const who = `Node ${spec.name} with spec.providerID ${metadata.providerId}`;
      const found: unknown = await succeeds(`instanceExists(${who})`, () => api.instanceExists(node(initialized)));
      expect(found === true, `instanceExists(${who}) answered ${show(found)}`);
      const again = await metadataOf(api, initialized);
      expectEqual(again, metadata, `instanceMetadata(${who}) differs from the metadata found by name`);
    }
    return undefined;
  },
};

const legacyKnown: Check = {
  id: 'instances.legacy-known',
  rule: 'Through instances(): instanceId() of a known instance is its ID (<providerName()>://<ID> is its provider ID), instanceExistsByProviderId() is true, also when it is shut down, and nodeAddressesByProviderId() answers its addresses.',
  source: 'shared/cloud/provider.ts Instances; k8s.io/cloud-provider cloud.go Instances',
  run: async (context) => {
    const api = legacy(context);
    if (isSkip(api)) return api;
    const instances = existing(context);
    if (instances.length === 0) return noKnown;
    for (const instance of instances) {
      const id = await succeeds(`instanceId(${instance.name})`, () => api.instanceId(instance.name));
      expect(typeof id === 'string' && id !== '', `instanceId(${instance.name}) answered ${show(id)}`);
      const providerId = instance.providerID ?? `${context.provider.providerName()}://${id}`;
      const found: unknown = await succeeds(`instanceExistsByProviderId(${providerId})`, () =>
        api.instanceExistsByProviderId(providerId),
      );
      expect(found === true, `instanceExistsByProviderId(${providerId}) answered ${show(found)}`);
      const addresses = await succeeds(`nodeAddressesByProviderId(${providerId})`, () =>
        api.nodeAddressesByProviderId(providerId),
      );
      expect(
        Array.isArray(addresses) && addresses.length > 0,
        `nodeAddressesByProviderId(${providerId}) answered ${show(addresses)}`,
      );
    }
    return undefined;
  },
};

const legacyNotFound: Check = {
  id: 'instances.legacy-not-found',
  rule: 'Through instances(): instanceId() of a gone instance throws InstanceNotFoundError, and instanceExistsByProviderId() of an unknown provider ID answers false.',
  source:
    'shared/cloud/provider.ts Instances.instanceId, instanceExistsByProviderId; k8s.io/cloud-provider cloud.go Instances, controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes',
  run: async (context) => {
    const api = legacy(context);
    if (isSkip(api)) return api;
    for (const spec of gone(context)) {
      const error = await rejection(
        () => api.instanceId(spec.name),
        `instanceId(${spec.name}) of a gone instance should throw InstanceNotFoundError`,
      );
      expect(
        findCause(error, InstanceNotFoundError) !== undefined || findCause(error, NotImplementedError) !== undefined,
        `instanceId(${spec.name}) of a gone instance threw ${describeError(error)}, not InstanceNotFoundError`,
      );
      const providerId = spec.providerID ?? `${context.provider.providerName()}://${context.name('gone')}`;
      const found: unknown = await succeeds(`instanceExistsByProviderId(${providerId}) of a gone instance`, () =>
        api.instanceExistsByProviderId(providerId),
      );
      expect(found === false, `instanceExistsByProviderId(${providerId}) of a gone instance answered ${show(found)}`);
    }
    return undefined;
  },
};

/** The instance checks, in order. */
export const instanceChecks: readonly Check[] = [
  metadataComplete,
  providerIdPrefix,
  exists,
  shutdown,
  notFoundMetadata,
  notFoundExists,
  providerIdAccepted,
  legacyKnown,
  legacyNotFound,
];
