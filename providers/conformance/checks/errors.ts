// Errors: cancellation is honoured within a bound, and the outcomes the contract defines arrive
// as its own classes (a RetryError with a usable delay). The last two look at every error the
// other checks provoked, so they run last.

import { setTimeout as sleep } from 'node:timers/promises';
import {
  findCause,
  ImplementedElsewhereError,
  InstanceNotFoundError,
  NotImplementedError,
  RetryError,
} from '../../../shared/cloud/errors.ts';
import { describeError, expect, frozen, skip, type Check, type CheckContext, type ObservedError } from '../check.ts';
import { nodeOf, serviceOf } from '../fixture.ts';

/** A read-only call the cancellation check makes, and what must not come of it. */
interface Probe {
  readonly what: string;
  call(signal: AbortSignal): Promise<unknown>;
  /** A wrong outcome of a call that settled after its signal aborted; undefined when fine. */
  wrong(outcome: PromiseSettledResult<unknown>): string | undefined;
}

function probes(context: CheckContext): Probe[] {
  const { provider, fixture, clusterName } = context;
  const found: Probe[] = [];
  const known = fixture.instances.known[0];
  const v2 = provider.instancesV2();
  if (v2 !== undefined && known !== undefined) {
    const node = frozen(nodeOf(known));
    found.push({
      what: `instanceExists(Node ${known.name})`,
      call: (signal) => v2.instanceExists(node, signal),
      wrong: (o) =>
        o.status === 'fulfilled' && o.value !== true
          ? `answered ${String(o.value)} for an existing instance (an aborted call must fail, never answer "gone")`
          : notFound(o),
    });
    found.push({
      what: `instanceMetadata(Node ${known.name})`,
      call: (s) => v2.instanceMetadata(node, s),
      wrong: notFound,
    });
  }
  const lb = provider.loadBalancer();
  if (lb !== undefined) {
    const svc = frozen(serviceOf(fixture, context.name('cancel')));
    found.push({
      what: 'getLoadBalancer()',
      call: (s) => lb.getLoadBalancer(clusterName, svc, s),
      wrong: () => undefined,
    });
  }
  const routes = provider.routes();
  if (routes !== undefined)
    found.push({ what: 'listRoutes()', call: (s) => routes.listRoutes(clusterName, s), wrong: () => undefined });
  return found;
}

function notFound(outcome: PromiseSettledResult<unknown>): string | undefined {
  return outcome.status === 'rejected' && findCause(outcome.reason, InstanceNotFoundError)
    ? `threw ${describeError(outcome.reason)} for an existing instance`
    : undefined;
}

const late = Symbol('late');

// Calls `probe` with a signal that aborts after `delayMs` (before the call when negative), and
// fails unless the call settles within `boundMs` of the abort.
async function cancelled(probe: Probe, delayMs: number, boundMs: number): Promise<void> {
  const controller = new AbortController();
  const reason = new Error('cirrus conformance: cancelled on purpose');
  if (delayMs < 0) controller.abort(reason);
  const settled = Promise.allSettled([probe.call(controller.signal)]).then(([o]) => o);
  if (delayMs >= 0) {
    const early = await Promise.race([settled, sleep(delayMs, late)]);
    if (early !== late) return; // answered before the abort: nothing to cancel
    controller.abort(reason);
  }
  const timer = new AbortController();
  const outcome = await Promise.race([settled, sleep(boundMs, late, { signal: timer.signal })]);
  timer.abort();
  const when =
    delayMs < 0 ? 'with a signal aborted before the call' : `with its signal aborted ${delayMs} ms into the call`;
  expect(outcome !== late, `${probe.what} ${when} had not settled ${boundMs} ms after the abort`);
  const wrong = probe.wrong(outcome);
  expect(wrong === undefined, `${probe.what} ${when} ${wrong ?? ''}`);
}

const cancellation: Check = {
  id: 'errors.cancellation',
  rule: 'A call whose AbortSignal aborts settles within the bound (default 1000 ms after the abort; cancellation.boundMs), and an aborted call never answers "instance gone".',
  source: 'shared/cloud/provider.ts (every call takes signal?: AbortSignal); docs/conformance.md (the bound)',
  run: async (context) => {
    const all = probes(context);
    if (all.length === 0)
      return skip(
        'no read-only call to cancel: the provider supports neither instancesV2() with a known instance, nor loadBalancer(), nor routes()',
      );
    const bound = context.fixture.cancellation.boundMs;
    for (const probe of all) {
      await cancelled(probe, -1, bound);
      await cancelled(probe, 20, bound);
    }
    return undefined;
  },
};

const contractErrors: readonly (abstract new (...args: never[]) => Error)[] = [
  InstanceNotFoundError,
  NotImplementedError,
  ImplementedElsewhereError,
  RetryError,
];
const contractNames = new Set(contractErrors.map((c) => c.name));

function chain(error: unknown): unknown[] {
  const links: unknown[] = [];
  for (let e = error, depth = 0; e !== undefined && depth < 10; e = (e as { cause?: unknown }).cause, depth += 1) {
    links.push(e);
    if (!(e instanceof Error)) break;
  }
  return links;
}

function impostor(observed: ObservedError): string | undefined {
  for (const link of chain(observed.error)) {
    const name = link instanceof Error ? link.name : undefined;
    if (name === undefined || !contractNames.has(name)) continue;
    const type = contractErrors.find((c) => c.name === name);
    if (type !== undefined && findCause(link, type) === undefined)
      return `${observed.call} threw an error named ${name} that is not cirrus's ${name} class (a second copy of cirrus-ccm in the provider's module?): the functions cannot recognise it`;
  }
  return undefined;
}

const typed: Check = {
  id: 'errors.typed',
  rule: "The contract's outcomes are its own error classes (InstanceNotFoundError, NotImplementedError, ImplementedElsewhereError, RetryError from shared/cloud/errors.ts), thrown as they are or as a cause: never a look-alike.",
  source:
    'shared/cloud/errors.ts; k8s.io/cloud-provider cloud.go (InstanceNotFound, NotImplemented, ImplementedElsewhere)',
  run: (context) => {
    for (const observed of context.errors) {
      const problem = impostor(observed);
      expect(problem === undefined, problem ?? '');
    }
    return Promise.resolve(undefined);
  },
};

const retryDelay: Check = {
  id: 'errors.retry-delay',
  rule: 'A RetryError carries its delay: retryAfterMs, a finite number of milliseconds >= 0.',
  source:
    'shared/cloud/errors.ts RetryError; k8s.io/cloud-provider api/retry_error.go, controllers/service/controller.go processNextServiceItem',
  run: (context) => {
    const retries = context.errors
      .map((o) => ({ call: o.call, retry: findCause(o.error, RetryError) }))
      .filter((r) => r.retry !== undefined);
    if (retries.length === 0) return Promise.resolve(skip('no call threw RetryError during the run'));
    for (const { call, retry } of retries) {
      const delay: unknown = retry?.retryAfterMs;
      expect(
        typeof delay === 'number' && Number.isFinite(delay) && delay >= 0,
        `${call} threw a RetryError whose retryAfterMs is ${String(delay)}`,
      );
    }
    return Promise.resolve(undefined);
  },
};

/** The error checks, in order (cancellation first: the others read what all checks provoked). */
export const errorChecks: readonly Check[] = [cancellation, typed, retryDelay];
