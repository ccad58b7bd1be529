// cirrus as a library (the npm package cirrus-ccm), for providers written outside this repository:
// register a provider and run the stock command line from your own main, or ship a module for
// --provider-module (which then imports the very cirrus that loads it: ./cli/provider-module.ts).
//
//   import { registerCloudProvider, runFromProcess } from 'cirrus-ccm';
//   registerCloudProvider('acme', (context) => new AcmeCloud(context.config));
//   await runFromProcess();

export type {
  CloudProvider,
  Clusters,
  InstanceMetadata,
  Instances,
  InstancesV2,
  LoadBalancer,
  Route,
  Routes,
  Zone,
  Zones,
} from '../shared/cloud/provider.ts';
export { defaultLoadBalancerName } from '../shared/cloud/provider.ts';
// The Kubernetes objects the contract's methods take and return, so a provider needs no
// @kubernetes/client-node of its own for their types.
export type { V1LoadBalancerStatus, V1Node, V1NodeAddress, V1Service } from '@kubernetes/client-node';
export {
  CloudConfigError,
  findCause,
  ImplementedElsewhereError,
  InstanceNotFoundError,
  NotImplementedError,
  RetryError,
} from '../shared/cloud/errors.ts';
export {
  initCloudProvider,
  isCloudProvider,
  registerCloudProvider,
  registeredCloudProviders,
  type CloudProviderFactory,
  type InitOptions,
  type ProviderContext,
} from '../shared/cloud/registry.ts';
export { main, type Io } from './cli/main.ts';
export { runFromProcess } from './cli/process.ts';
