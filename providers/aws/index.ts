// The `aws` provider: EC2 instances (InstancesV2), Network Load Balancers (LoadBalancer) and VPC
// route table routes (Routes), on the AWS SDK for JavaScript v3. See docs/providers/aws.md.

import type { CloudProvider } from '../../shared/cloud/provider.ts';
import type { ProviderContext } from '../../shared/cloud/registry.ts';
import { callCounter, createAwsApi, type AwsApi, type CallObserver } from './api.ts';
import { parseAwsConfig, type AwsConfig } from './config.ts';
import { awsApiMetrics } from './metrics.ts';
import { serviceWarnings, type ServiceWarnings } from './events.ts';
import { AwsInstances } from './instances.ts';
import { AwsLoadBalancer } from './load-balancer.ts';
import { nodeNames, type NodeNames } from './node-names.ts';
import { AwsRoutes } from './routes.ts';

export { parseAwsConfig, type AwsConfig } from './config.ts';
export { instanceIdFromProviderId } from './instances.ts';

/** Builds the provider from the cloud-config; `observe` (tests) sees every AWS call besides the metric. */
export function createAwsProvider(context: ProviderContext, options: { observe?: CallObserver } = {}): CloudProvider {
  const config = parseAwsConfig(context.config, context.configPath);
  for (const key of config.ignored) context.log.warn({ key }, 'cloud-config key has no effect in cirrus');
  const counted = context.metrics === undefined ? undefined : callCounter(context.metrics);
  const observe: CallObserver | undefined =
    counted === undefined && options.observe === undefined
      ? undefined
      : (service, operation, outcome) => {
          counted?.(service, operation, outcome);
          options.observe?.(service, operation, outcome);
        };
  const api = createAwsApi(config, {
    ...(observe === undefined ? {} : { observe }),
    ...(context.metrics === undefined ? {} : { metrics: awsApiMetrics(context.metrics) }),
  });
  return awsProvider(config, api, {
    warnings: serviceWarnings(context.log, context.kubeConfig),
    nodes: nodeNames(context.kubeConfig),
  });
}

/** What the provider reads and writes in the cluster: Warning Events on Services, and Nodes for routes. */
export interface AwsClusterAccess {
  readonly warnings: ServiceWarnings;
  readonly nodes: NodeNames;
}

/** The provider over given clients; without `cluster`, Warning Events are only logged and Nodes are not read. */
export function awsProvider(
  config: AwsConfig,
  api: AwsApi,
  cluster: AwsClusterAccess = { warnings: serviceWarnings(undefined, undefined), nodes: nodeNames(undefined) },
): CloudProvider {
  const instances = new AwsInstances(api, config);
  const loadBalancer = new AwsLoadBalancer(api, config, instances, cluster.warnings);
  const routes = new AwsRoutes(api, config, instances, cluster.nodes);
  return {
    providerName: () => 'aws',
    hasClusterId: () => true,
    loadBalancer: () => loadBalancer,
    instances: () => undefined,
    instancesV2: () => instances,
    zones: () => undefined,
    clusters: () => undefined,
    routes: () => routes,
  };
}
