// Pacing and counting a reconcile's cloud calls (ADR 0015, ADR 0018). A `reconcile.all` trigger
// from a relay with a cloud call budget carries the share of the budget the relay lent the pass
// (extension `cirrusbudget`); the host runs the pass inside withCallBudget(), and every call the
// pass makes through a provider wrapped by pacedProvider() first takes a token of that share.
// Outside such a pass (an event, a manual reconcile, a trigger without the extension) the wrapper
// calls straight through. Inside countCloudCalls() — every reconcile the host runs — each call
// through the wrapper is counted, and the host reports the count in its reply (`cloudCalls`), from
// which the relay gives back the tokens a delivery was charged and did not use.
//
// The budget and the count travel with the reconcile's async context, not through the functions'
// code: a function is built once with its provider, and every path it calls the cloud from is
// covered alike. A provider not built by initCloudProvider (so not wrapped) is neither paced nor
// counted.

import { AsyncLocalStorage } from 'node:async_hooks';
import { CallBudget, type CallBudgetSettings } from './budget.ts';
import type { CloudProvider } from './provider.ts';

// One counted (and maybe paced) piece of work; `outer` is the one it runs inside, which counts its calls too.
interface Scope {
  readonly pace: { readonly budget: CallBudget; readonly signal: AbortSignal } | undefined;
  readonly outer: Scope | undefined;
  calls: number;
}

const current = new AsyncLocalStorage<Scope>();

/** Runs `work` with its cloud calls through pacedProvider() paced at `settings`; `signal` ends the waits. */
export async function withCallBudget<T>(
  settings: CallBudgetSettings,
  signal: AbortSignal,
  work: () => Promise<T>,
): Promise<T> {
  return (await countCloudCalls(work, { settings, signal })).result;
}

/**
 * Runs `work`, counting the cloud calls it makes through pacedProvider(), and paced at
 * `pace.settings` when given (as withCallBudget); resolves with its result and the count.
 */
export async function countCloudCalls<T>(
  work: () => Promise<T>,
  pace?: { readonly settings: CallBudgetSettings; readonly signal: AbortSignal },
): Promise<{ readonly result: T; readonly calls: number }> {
  const outer = current.getStore();
  const scope: Scope = {
    pace: pace === undefined ? outer?.pace : { budget: new CallBudget(pace.settings), signal: pace.signal },
    outer,
    calls: 0,
  };
  const result = await current.run(scope, work);
  return { result, calls: scope.calls };
}

// The capabilities' methods that do not call the cloud (pure functions).
const notCalls: ReadonlySet<string> = new Set(['getLoadBalancerName']);

/**
 * `cloud`, with every cloud call made inside withCallBudget() waiting for a token first, and
 * every one made inside countCloudCalls() counted. The
 * capabilities are the provider's own objects behind a Proxy (one per object, so that a capability
 * asked for twice is the same object); one that is undefined stays undefined.
 */
export function pacedProvider(cloud: CloudProvider): CloudProvider {
  const wrapped = new WeakMap<object, object>();
  const pace = <T extends object>(capability: T | undefined): T | undefined => {
    if (capability === undefined) return undefined;
    let proxy = wrapped.get(capability);
    if (proxy === undefined) {
      // The Proxy's own target is an empty object, so that Proxy invariants never bind it to a
      // frozen capability's members (a frozen object's method must be returned as it is).
      const target = capability;
      const members = new Map<string | symbol, { member: unknown; paced: unknown }>();
      proxy = new Proxy(
        {},
        { get: (_, property) => pacedMember(target, property, members), has: (_, property) => property in target },
      );
      wrapped.set(capability, proxy);
    }
    return proxy as T;
  };
  return {
    providerName: () => cloud.providerName(),
    hasClusterId: () => cloud.hasClusterId(),
    loadBalancer: () => pace(cloud.loadBalancer()),
    instances: () => pace(cloud.instances()),
    instancesV2: () => pace(cloud.instancesV2()),
    zones: () => pace(cloud.zones()),
    clusters: () => pace(cloud.clusters()),
    routes: () => pace(cloud.routes()),
    // Not a cloud call of a reconcile: once at start-up, unpaced.
    ...(cloud.preflight === undefined ? {} : { preflight: cloud.preflight.bind(cloud) }),
  };
}

// The member `property` of `target`, a method wrapped once per method (`members` remembers the
// wrapper, made again if the provider replaced the method).
function pacedMember(
  target: object,
  property: string | symbol,
  members: Map<string | symbol, { member: unknown; paced: unknown }>,
): unknown {
  const member: unknown = Reflect.get(target, property, target);
  if (typeof member !== 'function' || typeof property !== 'string' || notCalls.has(property)) return member;
  const known = members.get(property);
  if (known?.member === member) return known.paced;
  const paced = pacedCall(target, member as (...args: unknown[]) => unknown);
  members.set(property, { member, paced });
  return paced;
}

function pacedCall(target: object, call: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  return (...args: unknown[]): unknown => {
    const scope = current.getStore();
    const made = (): unknown => {
      for (let counting = scope; counting !== undefined; counting = counting.outer) counting.calls += 1;
      return call.apply(target, args);
    };
    const pace = scope?.pace;
    if (pace === undefined) return made();
    return pace.budget.take(pace.signal).then(() => {
      pace.signal.throwIfAborted();
      return made();
    });
  };
}
