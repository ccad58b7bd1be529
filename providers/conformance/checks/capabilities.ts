// Capabilities: every accessor answers, with a whole implementation or undefined, and the same
// answer every time (functions check at start-up what a provider supports and rely on it).

import type { CloudProvider } from '../../../shared/cloud/provider.ts';
import { describeError, expect, type Check } from '../check.ts';

/** The methods each capability must have, by accessor. */
export const capabilityMethods = {
  loadBalancer: [
    'getLoadBalancer',
    'getLoadBalancerName',
    'ensureLoadBalancer',
    'updateLoadBalancer',
    'ensureLoadBalancerDeleted',
  ],
  instances: [
    'nodeAddresses',
    'nodeAddressesByProviderId',
    'instanceId',
    'instanceType',
    'instanceTypeByProviderId',
    'instanceExistsByProviderId',
    'instanceShutdownByProviderId',
  ],
  instancesV2: ['instanceExists', 'instanceShutdown', 'instanceMetadata'],
  zones: ['getZoneByProviderId', 'getZoneByNodeName'],
  clusters: ['listClusters', 'master'],
  routes: ['listRoutes', 'createRoute', 'deleteRoute'],
} as const satisfies Record<string, readonly string[]>;

/** A capability accessor of CloudProvider. */
export type Capability = keyof typeof capabilityMethods;

/** The accessors, in the contract's order. */
export const capabilities = Object.keys(capabilityMethods) as Capability[];

/** What `provider.<capability>()` answers; a throw is a failure naming the accessor. */
export function capabilityOf(provider: CloudProvider, capability: Capability): unknown {
  try {
    return provider[capability]();
  } catch (error) {
    throw new Error(
      `${capability}() threw ${describeError(error)}; an accessor answers an implementation or undefined`,
      {
        cause: error,
      },
    );
  }
}

const accessors: Check = {
  id: 'capabilities.accessors',
  rule: 'Every capability accessor answers, with an implementation that has all of its methods or with undefined (not supported), and answers the same on every call.',
  source: 'shared/cloud/provider.ts CloudProvider; k8s.io/cloud-provider cloud.go Interface',
  run: ({ provider }) => {
    for (const capability of capabilities) {
      const first = capabilityOf(provider, capability);
      const second = capabilityOf(provider, capability);
      expect(
        first === undefined || (typeof first === 'object' && first !== null),
        `${capability}() answered ${first === null ? 'null' : typeof first}; an unsupported capability is undefined`,
      );
      expect(
        (first === undefined) === (second === undefined),
        `${capability}() answered an implementation once and undefined once; support must not change between calls`,
      );
      if (first === undefined) continue;
      const missing = capabilityMethods[capability].filter(
        (m) => typeof (first as Record<string, unknown>)[m] !== 'function',
      );
      expect(
        missing.length === 0,
        `${capability}() answered an implementation without ${missing.join(', ')}; implement the whole capability or answer undefined`,
      );
    }
    return Promise.resolve(undefined);
  },
};

const identity: Check = {
  id: 'capabilities.identity',
  rule: 'providerName() is the non-empty prefix of the provider IDs the provider hands out (<name>://<id>), and hasClusterId() answers a boolean.',
  source: 'shared/cloud/provider.ts CloudProvider.providerName, hasClusterId; k8s.io/cloud-provider cloud.go Interface',
  run: ({ provider }) => {
    const name = provider.providerName();
    expect(typeof name === 'string' && name !== '', `providerName() answered ${JSON.stringify(name)}`);
    expect(!name.includes('://'), `providerName() answered "${name}", which holds "://"; it is the ID's scheme alone`);
    expect(provider.providerName() === name, 'providerName() answered two different names');
    const tagged: unknown = provider.hasClusterId();
    expect(typeof tagged === 'boolean', `hasClusterId() answered ${typeof tagged}, not a boolean`);
    return Promise.resolve(undefined);
  },
};

/** The capability checks, in order. */
export const capabilityChecks: readonly Check[] = [accessors, identity];
