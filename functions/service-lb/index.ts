// The service-lb function: the service controller as an HTTP function. A Service event (or a
// manual reconcile) ensures, updates or deletes that Service's load balancer; the "all" trigger —
// sent periodically and when nodes change — goes over every load-balanced Service and calls the
// cloud only for those whose spec or node set changed; with a provider that can list the load
// balancers it owns, it also deletes those whose Service is gone (./orphans.ts releaseOrphans).

import type { Core } from '../../shared/kube/core.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import { InvalidRequestError } from '../../shared/host/errors.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions, Report } from '../../shared/host/function.ts';
import { invalidLabelName } from '../../shared/kube/names.ts';
import type { ServiceLbDeps } from './run.ts';
import { syncAllServices, syncService } from './sync.ts';
import { KeyedSerializer } from '../../shared/concurrency.ts';
import { ClaimLedger } from '../../shared/kube/claims.ts';
import { NodeLister } from './nodes.ts';

/** What service-lb needs. */
export interface ServiceLbOptions {
  readonly core: Core;
  /** The provider's load balancers (the catalogue refuses a provider without them). */
  readonly loadBalancer: LoadBalancer;
  /** --cluster-name, handed to every load balancer call. */
  readonly clusterName: string;
  /** Services handled at once by a pass over all of them (default 10). */
  readonly concurrency?: number;
  /** Serve only Services of this `spec.loadBalancerClass` (`--load-balancer-class`); undefined: those without one. */
  readonly loadBalancerClass?: string | undefined;
}

/** The service-lb function. */
export function serviceLbFunction(options: ServiceLbOptions): FunctionDefinition {
  const deps: ServiceLbDeps = {
    core: options.core,
    loadBalancer: options.loadBalancer,
    clusterName: options.clusterName,
    concurrency: options.concurrency ?? 10,
    loadBalancerClass: options.loadBalancerClass,
    serializer: new KeyedSerializer(),
    claims: new ClaimLedger(),
    nodes: new NodeLister(options.core),
  };
  const report = (dryRun: boolean, objects: Report['objects']): Report => ({ function: 'service-lb', dryRun, objects });
  return {
    name: 'service-lb',
    kinds: ['Service'],
    reconcileOne: async (key: ObjectKey, run: ReconcileOptions) => {
      if (key.namespace === undefined || key.namespace === '')
        throw new InvalidRequestError(`Service ${key.name}: a namespace is required`);
      const problem = invalidLabelName('namespace', key.namespace) ?? invalidLabelName('service', key.name);
      if (problem !== undefined) throw new InvalidRequestError(problem);
      return report(run.dryRun, [await syncService(deps, key.namespace, key.name, run)]);
    },
    reconcileAll: async (run: ReconcileOptions) => report(run.dryRun, await syncAllServices(deps, run)),
  };
}
