// An out-of-tree provider in a few lines: `naming` reads a machine's zone and instance type from
// its node name, by a regular expression with named groups given in the cloud-config. Importing
// this module registers it — so it works both with the stock CLI's --provider-module and from a
// main of its own (./main.ts).
//
// cloud-config (YAML or JSON):   pattern: '^(?<zone>[a-z]+-[0-9])-(?<type>[a-z0-9]+)-[0-9]+$'
//                                region: eu-west   # optional

import { load } from 'js-yaml';
import {
  CloudConfigError,
  InstanceNotFoundError,
  registerCloudProvider,
  type CloudProvider,
  type InstancesV2,
  type V1Node,
} from 'cirrus-ccm';

interface NamingConfig {
  pattern: RegExp;
  region: string;
}

function parseConfig(text: string | undefined, file: string | undefined): NamingConfig {
  if (text === undefined) throw new CloudConfigError(file, '', 'the naming provider needs --cloud-config');
  const raw = load(text) as { pattern?: unknown; region?: unknown } | null;
  if (typeof raw?.pattern !== 'string')
    throw new CloudConfigError(file, 'pattern', 'must be a regular expression string');
  let pattern: RegExp;
  try {
    pattern = new RegExp(raw.pattern);
  } catch (error) {
    throw new CloudConfigError(file, 'pattern', (error as Error).message);
  }
  if (raw.region !== undefined && typeof raw.region !== 'string')
    throw new CloudConfigError(file, 'region', 'must be a string');
  return { pattern, region: raw.region ?? '' };
}

/** A provider whose only knowledge of machines is their names. */
export function namingProvider(config: NamingConfig): CloudProvider {
  const match = (node: V1Node): Record<string, string> | undefined =>
    config.pattern.exec(node.metadata?.name ?? '')?.groups;
  const instances: InstancesV2 = {
    instanceExists: async (node) => Promise.resolve(match(node) !== undefined),
    instanceShutdown: async () => Promise.resolve(false),
    instanceMetadata: async (node) => {
      const groups = match(node);
      if (groups === undefined)
        throw new InstanceNotFoundError(
          `node name ${node.metadata?.name ?? ''} does not match ${String(config.pattern)}`,
        );
      return Promise.resolve({
        providerId: `naming://${node.metadata?.name ?? ''}`,
        instanceType: groups['type'] ?? '',
        zone: groups['zone'] ?? '',
        region: config.region,
        // A name says nothing of addresses: the Node's own, as its kubelet reported them.
        nodeAddresses: [...(node.status?.addresses ?? [])],
        additionalLabels: {},
      });
    },
  };
  const none = (): undefined => undefined;
  return {
    providerName: () => 'naming',
    hasClusterId: () => true,
    instancesV2: () => instances,
    instances: none,
    zones: none,
    clusters: none,
    routes: none,
    loadBalancer: none,
  };
}

registerCloudProvider('naming', (context) => namingProvider(parseConfig(context.config, context.configPath)));
