// cirrus as a library, for providers written outside this repository: register a provider and
// run the stock command line from your own main, or ship a module for --provider-module.
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
} from './cloud/provider.ts';
export { defaultLoadBalancerName } from './cloud/provider.ts';
export {
  CloudConfigError,
  findCause,
  ImplementedElsewhereError,
  InstanceNotFoundError,
  NotImplementedError,
  RetryError,
} from './cloud/errors.ts';
export {
  initCloudProvider,
  isCloudProvider,
  registerCloudProvider,
  registeredCloudProviders,
  type CloudProviderFactory,
  type InitOptions,
  type ProviderContext,
} from './cloud/registry.ts';
export { main, type Io } from './cli/main.ts';
export { runFromProcess } from './cli/process.ts';
