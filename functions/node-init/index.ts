// The node-init function: the cloud node controller as an HTTP function. A Node event (or a
// manual reconcile) initializes that node or reconciles its labels; the relay's periodic recheck
// of a node (upstream's pass, every 5 minutes) refreshes its addresses (./refresh.ts, ADR 0031);
// a manual "all" lists every node and does both.

import type { Core } from '../../shared/kube/core.ts';
import { Histogram, type Registry } from 'prom-client';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { singleFleet, type Fleet } from '../../shared/cloud/fleet.ts';
import { InvalidRequestError } from '../../shared/host/errors.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions, Report } from '../../shared/host/function.ts';
import { invalidNodeName } from '../../shared/kube/names.ts';
import { refreshNode } from './refresh.ts';
import { syncAllNodes, syncNode, type NodeInitDeps } from './sync.ts';
import { KeyedSerializer } from '../../shared/concurrency.ts';
import { ClaimLedger } from '../../shared/kube/claims.ts';
import { OwnershipCheck } from '../../shared/cloud/skips.ts';

/** Buckets of the node controller's delays: 1 s to about 17 min, as upstream's. */
const syncDelayBuckets: readonly number[] = [1, 4, 16, 64, 256, 1024];

/** What node-init needs: one provider (`cloud`), or the providers of a hybrid cluster (`fleet`). */
export type NodeInitOptions = {
  readonly core: Core;
  /** Nodes handled at once by the periodic pass (default 10). */
  readonly concurrency?: number;
} & ({ readonly cloud: CloudProvider } | { readonly fleet: Fleet });

/** The node-init function, for a provider with InstancesV2 or Instances (the catalogue checks it). */
export function nodeInitFunction(options: NodeInitOptions): FunctionDefinition {
  const deps: { -readonly [K in keyof NodeInitDeps]: NodeInitDeps[K] } = {
    core: options.core,
    fleet: 'fleet' in options ? options.fleet : singleFleet(options.cloud),
    ownership: new OwnershipCheck('node-init'),
    concurrency: options.concurrency ?? 10,
    serializer: new KeyedSerializer(),
    claims: new ClaimLedger(),
  };
  const report = (dryRun: boolean, objects: Report['objects']): Report => ({ function: 'node-init', dryRun, objects });
  return {
    name: 'node-init',
    kinds: ['Node'],
    reconcileOne: async (key: ObjectKey, run: ReconcileOptions) => {
      const problem = invalidNodeName(key.name);
      if (problem !== undefined) throw new InvalidRequestError(problem);
      const sync = run.recheck === true ? refreshNode : syncNode;
      return report(run.dryRun, [await sync(deps, key.name, run)]);
    },
    reconcileAll: async (run: ReconcileOptions) => report(run.dryRun, await syncAllNodes(deps, run)),
    registerMetrics: (registry: Registry) => {
      deps.ownership.register(registry);
      // Upstream's two histograms (k8s.io/cloud-provider controllers/node/metrics.go): names, help
      // (with component-base's stability prefix) and buckets (ExponentialBuckets(1, 4, 6)) as there.
      deps.taintRemovalDelay = new Histogram({
        name: 'node_controller_cloud_provider_taint_removal_delay_seconds',
        help: '[ALPHA] Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.',
        buckets: [...syncDelayBuckets],
        registers: [registry],
      });
      deps.initialSyncDelay = new Histogram({
        name: 'node_controller_initial_node_sync_delay_seconds',
        help: '[ALPHA] Number of seconds after node creation when NodeController finished the initial synchronization of a single node.',
        buckets: [...syncDelayBuckets],
        registers: [registry],
      });
    },
  };
}
