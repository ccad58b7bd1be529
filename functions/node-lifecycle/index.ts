// The node-lifecycle function: the cloud node lifecycle controller as an HTTP function. A Node
// event (or a manual reconcile) checks that node; the periodic trigger (upstream every 5 s) checks
// every node.

import type { Core } from '../../shared/kube/core.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { singleFleet, type Fleet } from '../../shared/cloud/fleet.ts';
import { InvalidRequestError } from '../../shared/host/errors.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions, Report } from '../../shared/host/function.ts';
import { invalidNodeName } from '../../shared/kube/names.ts';
import { monitorAllNodes, monitorNode, type NodeLifecycleDeps } from './sync.ts';
import { KeyedSerializer } from '../../shared/concurrency.ts';
import { ClaimLedger } from '../../shared/kube/claims.ts';
import { OwnershipCheck } from '../../shared/cloud/skips.ts';

/** What node-lifecycle needs: one provider (`cloud`), or the providers of a hybrid cluster (`fleet`). */
export type NodeLifecycleOptions = {
  readonly core: Core;
  /** Nodes handled at once by the periodic pass (default 10). */
  readonly concurrency?: number;
} & ({ readonly cloud: CloudProvider } | { readonly fleet: Fleet });

/** The node-lifecycle function, for a provider with InstancesV2 or Instances (the catalogue checks it). */
export function nodeLifecycleFunction(options: NodeLifecycleOptions): FunctionDefinition {
  const deps: NodeLifecycleDeps = {
    core: options.core,
    fleet: 'fleet' in options ? options.fleet : singleFleet(options.cloud),
    ownership: new OwnershipCheck('node-lifecycle'),
    concurrency: options.concurrency ?? 10,
    serializer: new KeyedSerializer(),
    claims: new ClaimLedger(),
  };
  const report = (dryRun: boolean, objects: Report['objects']): Report => ({
    function: 'node-lifecycle',
    dryRun,
    objects,
  });
  return {
    name: 'node-lifecycle',
    kinds: ['Node'],
    reconcileOne: async (key: ObjectKey, run: ReconcileOptions) => {
      const problem = invalidNodeName(key.name);
      if (problem !== undefined) throw new InvalidRequestError(problem);
      return report(run.dryRun, [await monitorNode(deps, key.name, run)]);
    },
    reconcileAll: async (run: ReconcileOptions) => report(run.dryRun, await monitorAllNodes(deps, run)),
    registerMetrics: (registry) => {
      deps.ownership.register(registry);
    },
  };
}
