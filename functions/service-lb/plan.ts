// A dry run that is a plan: where the reconcile would ensure a load balancer, a dry run asks the
// provider what that ensure would do (LoadBalancer.planLoadBalancer, read calls only) and reports
// it per Service, so that an operator sees before a take-over which Services would get a new load
// balancer, which would adopt or change the one they have (and how), and which would be refused.
// A provider that offers no plan leaves the report as it was, marked so.

import type { V1Node } from '@kubernetes/client-node';
import { findCause, ImplementedElsewhereError } from '../../shared/cloud/errors.ts';
import type { Run } from './run.ts';

/** What the report says of a provider that offers no plan. */
export const noPlan = 'no plan from the provider';

/**
 * The dry run's result for a Service whose load balancer would be ensured: the plan's action
 * (`create`, `adopt`, `update`, `unchanged`, `refuse`), the plan itself a `plan` change of the
 * report; without a plan from the provider, `fallback` and a `plan` change saying so.
 */
export async function dryRunResult(run: Run, nodes: readonly V1Node[], fallback: string): Promise<string> {
  const { deps, service, options } = run;
  const lb = deps.loadBalancer;
  if (lb.planLoadBalancer === undefined) {
    run.changes.push({ action: 'plan', target: run.key, detail: noPlan });
    return fallback;
  }
  try {
    const plan = await lb.planLoadBalancer(deps.clusterName, service, nodes, options.signal);
    run.changes.push({ action: 'plan', target: run.key, detail: plan });
    return plan.action;
  } catch (error) {
    if (findCause(error, ImplementedElsewhereError) === undefined) throw error;
    return 'implemented-elsewhere';
  }
}
