// What the requests a routes pass serves asked for, gathered while the pass waits to start, and
// how the pass is counted in `route_controller_route_sync_total`.
//
// Upstream's counter (k8s.io/cloud-provider controllers/route/metrics.go, routeSyncCount) has no
// labels; cirrus labels it so that the drift checks can be told from the passes a Node change
// starts (KEP-5237's point: fewer passes that change nothing).

import type { ObjectReport } from '../../shared/host/function.ts';
import type { Demand } from './nodes.ts';

/**
 * Why a pass ran: `periodic`, the relay's drift check (every --route-reconciliation-period);
 * `node_change`, a Node's event; `manual`, a request that is neither (`cirrus reconcile`, a
 * PingSource, an event that names a node without carrying it).
 */
export type Trigger = 'periodic' | 'node_change' | 'manual';

/** How a pass went: it wrote or called the cloud to change something, changed nothing, or failed (in part). */
export type Outcome = 'changed' | 'noop' | 'error';

/** The `outcome` label of a pass that ended with `reports`. */
export function passOutcome(reports: readonly ObjectReport[]): Outcome {
  if (reports.some((report) => report.result === 'failed')) return 'error';
  return reports.some((report) => report.changes.length > 0) ? 'changed' : 'noop';
}

/**
 * The requests waiting for the next pass of one queue: their digests and triggers. A request notes
 * itself in the same turn as it joins the pass (shared/coalesce.ts), and the pass takes what was
 * noted when it starts, so each pass sees exactly the requests it serves.
 */
export class PassDemand {
  #digests = new Set<string>();
  #unvouched = false;
  #triggers = new Set<Trigger>();

  /** A request for the next pass, with the digest it carried (undefined: none). */
  note(trigger: Trigger, digest: string | undefined): void {
    this.#triggers.add(trigger);
    if (digest === undefined) this.#unvouched = true;
    else this.#digests.add(digest);
  }

  /**
   * What the pass starting now serves, and its trigger: `node_change` when a Node's event is among
   * its requests, else `manual` when a manual one is, else `periodic`.
   */
  take(): Demand & { readonly trigger: Trigger } {
    const triggers = this.#triggers;
    const trigger: Trigger = triggers.has('node_change')
      ? 'node_change'
      : triggers.has('manual')
        ? 'manual'
        : 'periodic';
    const taken = { digests: this.#digests, unvouched: this.#unvouched, trigger };
    this.#digests = new Set();
    this.#unvouched = false;
    this.#triggers = new Set();
    return taken;
  }
}
