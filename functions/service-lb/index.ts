// The service-lb function: the service controller as an HTTP function. A Service event (or a
// manual reconcile) ensures, updates or deletes that Service's load balancer; the "all" trigger —
// sent periodically and when nodes change — goes over every load-balanced Service and calls the
// cloud only for those whose spec or node set changed; with a provider that can list the load
// balancers it owns, it also deletes those whose Service is gone (./orphans.ts releaseOrphans).

import type { Core } from '../../shared/kube/core.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import { InvalidRequestError } from '../../shared/host/errors.ts';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { chooseForService, servesServices, serviceClass, type Fleet } from '../../shared/cloud/fleet.ts';
import { OwnershipCheck } from '../../shared/cloud/skips.ts';
import type {
  FunctionDefinition,
  ObjectKey,
  ObjectReport,
  ReconcileOptions,
  Report,
} from '../../shared/host/function.ts';
import { invalidLabelName } from '../../shared/kube/names.ts';
import type { ServiceLbDeps } from './run.ts';
import { syncAllServices, syncService } from './sync.ts';
import { KeyedSerializer } from '../../shared/concurrency.ts';
import { ClaimLedger } from '../../shared/kube/claims.ts';
import { RecentEvents } from '../../shared/kube/events.ts';
import { NodeLister, ownedNodes } from './nodes.ts';
import { ServiceControllerMetrics } from './metrics.ts';

/** What service-lb needs. */
export type ServiceLbOptions = {
  readonly core: Core;
  /** --cluster-name, handed to every load balancer call. */
  readonly clusterName: string;
  /** Services handled at once by a pass over all of them (default 10). */
  readonly concurrency?: number;
} & (
  | {
      /** The provider's load balancers (the catalogue refuses a provider without them). */
      readonly loadBalancer: LoadBalancer;
      /** Serve only Services of this `spec.loadBalancerClass` (`--load-balancer-class`); undefined: those without one. */
      readonly loadBalancerClass?: string | undefined;
    }
  | {
      /**
       * The providers (ADR 0026): each Service's load balancer is made by the provider its class
       * names (the default provider's for Services without one; with one provider, that one), over
       * the Nodes that provider owns — never another provider's or CCM's.
       */
      readonly fleet: Fleet;
      /** With one provider: serve only Services of this `spec.loadBalancerClass` (`--load-balancer-class`). */
      readonly loadBalancerClass?: string | undefined;
    }
);

/** The service-lb function. */
export function serviceLbFunction(options: ServiceLbOptions): FunctionDefinition {
  const shared = {
    core: options.core,
    clusterName: options.clusterName,
    concurrency: options.concurrency ?? 10,
    serializer: new KeyedSerializer(),
    claims: new ClaimLedger(),
    recentEvents: new RecentEvents(),
    metrics: new ServiceControllerMetrics(),
  };
  const lister = new NodeLister(options.core);
  const providers = new Map<string, ServiceLbDeps>();
  const ownership = new OwnershipCheck('service-lb');
  if ('fleet' in options) {
    const { fleet } = options;
    for (const [provider, cloud] of fleet.served) {
      const loadBalancer = cloud.loadBalancer();
      if (loadBalancer === undefined || !servesServices(fleet, provider)) continue;
      const owns = (node: V1Node, log?: Logger): boolean => ownership.owns(fleet, provider, node, log);
      providers.set(provider, {
        ...shared,
        loadBalancer,
        loadBalancerClass: serviceClass(fleet, provider, options.loadBalancerClass),
        nodes: ownedNodes(lister, owns),
      });
    }
    if (providers.size === 0) throw new Error('service-lb: no provider served here has load balancers');
  } else {
    providers.set('', {
      ...shared,
      loadBalancer: options.loadBalancer,
      loadBalancerClass: options.loadBalancerClass,
      nodes: lister,
    });
  }
  const fleet = 'fleet' in options ? options.fleet : undefined;
  // The provider whose load balancer the Service has: by the class the event shows. A request that
  // shows no Service (a manual one) is read by each provider in turn (a Service not of its class
  // is `ignored` there), and the first that acts answers.
  const dispatch = async ({ namespace, name }: ServiceName, run: ReconcileOptions): Promise<ObjectReport> => {
    const shown = (run.claimed ?? run.lastKnown) as V1Service | undefined;
    if (fleet === undefined || shown === undefined) {
      let last: ObjectReport = { key: `Service/${namespace}/${name}`, result: 'ignored', changes: [] };
      for (const deps of providers.values()) {
        last = await syncService(deps, namespace, name, run);
        if (last.result !== 'ignored') break;
      }
      return last;
    }
    const choice = chooseForService(fleet, shown);
    const deps = choice.provider === undefined ? undefined : providers.get(choice.provider);
    if (deps !== undefined) return syncService(deps, namespace, name, run);
    // Another instance's provider's, or (a class no provider here has) another controller's.
    const result = choice.provider === undefined && choice.nobody ? 'ignored' : 'other-provider';
    return { key: `Service/${namespace}/${name}`, result, changes: [] };
  };
  const report = (dryRun: boolean, objects: Report['objects']): Report => ({ function: 'service-lb', dryRun, objects });
  return {
    name: 'service-lb',
    kinds: ['Service'],
    reconcileOne: async (key: ObjectKey, run: ReconcileOptions) =>
      report(run.dryRun, [await dispatch(validKey(key), run)]),
    reconcileAll: async (run: ReconcileOptions) => {
      const pass = async (): Promise<Report> => {
        const objects: ObjectReport[] = [];
        for (const deps of providers.values()) objects.push(...(await syncAllServices(deps, run)));
        return report(run.dryRun, objects);
      };
      return run.dryRun ? pass() : shared.metrics.nodeSync(pass);
    },
    registerMetrics: (registry) => {
      ownership.register(registry);
      shared.metrics.register(registry);
    },
  };
}

interface ServiceName {
  readonly namespace: string;
  readonly name: string;
}

// The Service a request names, or InvalidRequestError saying what is wrong with the name.
function validKey(key: ObjectKey): ServiceName {
  if (key.namespace === undefined || key.namespace === '')
    throw new InvalidRequestError(`Service ${key.name}: a namespace is required`);
  const problem = invalidLabelName('namespace', key.namespace) ?? invalidLabelName('service', key.name);
  if (problem !== undefined) throw new InvalidRequestError(problem);
  return { namespace: key.namespace, name: key.name };
}
