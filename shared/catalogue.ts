// What a function is, as everything around it sees it: a catalogue entry. The entries themselves
// are listed once, in functions/catalogue.ts; the command line, the relay's routing, the AWS
// Lambda entry and the tests that check deploy/ read them from there, and nothing else lists the
// functions. This module holds the entry's shape and the lookups over a catalogue (names, the Go
// CCM's --controllers), so that shared/ needs no function by name.

import type { Fleet } from './cloud/fleet.ts';
import type { CloudProvider } from './cloud/provider.ts';
import type { FunctionDefinition } from './host/function.ts';
import type { Core } from './kube/core.ts';
import type { ApiAccess } from './kube/access.ts';
import type { KubeObject } from './kube/object.ts';

/** What happened to a watched object. */
export type ChangeType = 'add' | 'update' | 'delete';

/** One watched object's change, as a feed sees it (the relay's changes carry more). */
export interface WatchChange {
  readonly resource: { readonly kind: string };
  readonly type: ChangeType;
  /** The new state; for `delete`, the last known one. */
  readonly object: KubeObject;
  /** The state before this change, when the watcher knew one. */
  readonly previous?: KubeObject | undefined;
}

/**
 * What a function wants from one watch change: `object`, the object's own event (a reconcile of
 * that key); `all`, one coalesced `reconcile.all` of the function; undefined, nothing.
 */
export type FeedDecision = 'object' | 'all' | undefined;

/** Decides, for every watched change, what the function receives. Pure and cheap: it runs for every change. */
export type Feed = (change: WatchChange) => FeedDecision;

/**
 * The settings a function's implementation reads. The application's configuration (app/config.ts)
 * has each under the same name (the flag `--cluster-name`, the variable `CIRRUS_CLUSTER_NAME`), so
 * its parsed options are handed over as they are.
 */
export interface FunctionSettings {
  readonly clusterName: string;
  readonly concurrentNodeSyncs: number;
  readonly concurrentServiceSyncs: number;
  readonly configureCloudRoutes: boolean;
  /** Pod CIDRs, one per IP family. */
  readonly clusterCidr: readonly string[];
  readonly concurrentRouteOperations: number;
  /**
   * The `spec.loadBalancerClass` service-lb serves: only Services of that class; unset, only
   * Services without a class (as the Go service controller).
   */
  readonly loadBalancerClass?: string | undefined;
}

/** The options a function's implementation reads. */
export type FunctionOption = keyof FunctionSettings;

/** The options that set a function's period. */
export type PeriodOption =
  'nodeMonitorPeriod' | 'routeReconciliationPeriod' | 'nodeStatusUpdateFrequency' | 'serviceSyncPeriod';

/** What a function's implementation is built from. */
export interface FunctionDeps {
  /** core/v1: LeanCore in cirrus (shared/kube/core.ts); any CoreV1Api also serves. */
  readonly core: Core;
  readonly cloud: CloudProvider;
  readonly config: FunctionSettings;
  /**
   * A hybrid cluster's providers (shared/cloud/fleet.ts, ADR 0026), those of them this function can
   * serve; `cloud` is then one of them. Undefined for one provider, which is given every object.
   */
  readonly fleet?: Fleet | undefined;
}

/** One function of the catalogue. */
export interface FunctionEntry {
  /** Canonical name: the URL path under `cirrus start`, the metrics label, the relay's destination. */
  readonly name: string;
  /** The Go CCM controller whose work it does (k8s.io/cloud-provider names/controller_names.go): name and short alias. */
  readonly controller: { readonly name: string; readonly alias: string };
  /** Short names `cirrus reconcile` also takes (`cirrus reconcile node …`). */
  readonly reconcileAliases: readonly string[];
  /** What a manual reconcile names: its kind, whether it is namespaced; `wholeCluster` when every request is one pass over all. */
  readonly target: { readonly kind: string; readonly namespaced: boolean; readonly wholeCluster?: boolean };
  /** The kinds whose watches its feed reads. */
  readonly watches: readonly string[];
  /** Which watch changes it receives. */
  readonly feed: Feed;
  /**
   * A change its feed answers `all` for reaches it as one event per known object of this kind that
   * the feed accepts (`Service`: a node-set change, one event per load-balanced Service), so the
   * relay's per-key queue serializes it with each object's own events and the work spreads over
   * instances. Without it, one coalesced `reconcile.all`.
   */
  readonly fanOut?: string;
  /**
   * A digest of the Nodes that matter to it (service-lb: the load balancers' node set). The relay
   * computes it over its watch of Nodes, once per change of the Nodes, and sends it with every
   * event for the function (extension `cirrusnodeset`), so that the function can tell whether a
   * node list it already holds is current without listing the Nodes again.
   */
  readonly nodeSetDigest?: (nodes: Iterable<KubeObject>) => string;
  /**
   * The most cloud calls its reconcile of one object makes with a provider that has InstancesV2
   * (every built-in one): what a delivery of one object's event to it takes from the cloud call
   * budget (ADR 0015). A legacy Instances provider makes more (node-init: up to six).
   */
  readonly cloudCallsPerObject: number;
  /**
   * Its periodic work: the option that sets the period, and the default in ms (0: none). Each
   * period the relay sends a `reconcile.all` — or, with `recheck`, one event per object of that
   * kind the relay knows and the feed accepts (judged on the object as it is, with no previous
   * state), from what the relay keeps: the function then reads no list on a timer, and a cluster
   * where no object needs it costs it nothing at rest (ADR 0029). `rechecks` picks the objects
   * instead of the feed when the period looks at others than the events do (node-init: its events
   * are the uninitialized Nodes, its refresh every Node, ADR 0031). The rechecks are spread over the
   * period, not sent at once.
   */
  readonly period: {
    readonly option: PeriodOption;
    readonly defaultMs: number;
    readonly recheck?: string;
    readonly rechecks?: (object: KubeObject) => boolean;
  };
  /**
   * The API rights its reconciles use (its ClusterRole in deploy/knative/<name>/rbac/): checked at
   * start-up against an existing cluster, so that a missing one stops the command with its name
   * instead of failing every object.
   */
  readonly access: readonly ApiAccess[];
  /** Why it cannot run with this provider and configuration (as the Go CCM skips a controller); undefined when it can. */
  skipReason(cloud: CloudProvider, config: FunctionSettings): string | undefined;
  /** Imports the implementation (only a process that serves the function loads it) and builds it. */
  load(deps: FunctionDeps): Promise<FunctionDefinition>;
}

/** The functions, in the order `cirrus start` runs them. */
export type Catalogue = readonly FunctionEntry[];

/** The entry a name or alias (a Go controller name included) stands for; undefined when none. */
export function findFunction(catalogue: Catalogue, name: string): FunctionEntry | undefined {
  return catalogue.find(
    (entry) => entry.name === name || entry.controller.name === name || entry.controller.alias === name,
  );
}

/** Every name and alias accepted, for messages. */
export function knownNames(catalogue: Catalogue): string[] {
  return catalogue.flatMap((entry) => [entry.name, entry.controller.name, entry.controller.alias]);
}

/**
 * The functions `--controllers` selects, with the Go CCM's rules: `foo` enables, `-foo` disables,
 * the first explicit mention wins, `*` enables every controller not disabled. Names are the Go
 * controller names, their aliases, or function names. Throws an Error naming an unknown name.
 */
export function selectControllers(catalogue: Catalogue, entries: readonly string[]): FunctionEntry[] {
  const decided = new Map<FunctionEntry, boolean>();
  let star = false;
  for (const entry of entries) {
    if (entry === '*') {
      star = true;
      continue;
    }
    const disabled = entry.startsWith('-');
    const name = disabled ? entry.slice(1) : entry;
    const fn = catalogue.find((e) => e.controller.name === name || e.controller.alias === name || e.name === name);
    if (fn === undefined) {
      throw new Error(
        `"${entry}" is not in the list of known controllers (${catalogue.map((e) => e.controller.name).join(', ')}, or their aliases)`,
      );
    }
    if (!decided.has(fn)) decided.set(fn, !disabled);
  }
  return catalogue.filter((fn) => decided.get(fn) ?? star);
}
