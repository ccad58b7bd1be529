// Runs the checks against a provider, one after the other (a check's load balancers and routes
// are gone before the next starts), and collects one result per check.

import { randomBytes } from 'node:crypto';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { ConformanceFailure, describeError, type Check, type CheckContext, type ObservedError } from './check.ts';
import { capabilityChecks } from './checks/capabilities.ts';
import { errorChecks } from './checks/errors.ts';
import { instanceChecks } from './checks/instances.ts';
import { loadBalancerChecks } from './checks/load-balancer.ts';
import { routeChecks } from './checks/routes.ts';
import { fixtureFrom, type Fixture, type FixtureInput } from './fixture.ts';
import { observe as observeProvider } from './observe.ts';

/** Every check, in the order they run. */
export const allChecks: readonly Check[] = [
  ...capabilityChecks,
  ...instanceChecks,
  ...loadBalancerChecks,
  ...routeChecks,
  ...errorChecks,
];

/** The outcome of one check. */
export interface CheckResult {
  readonly id: string;
  readonly rule: string;
  readonly source: string;
  readonly outcome: 'pass' | 'fail' | 'skip';
  /** The provider it checked, when a run checks several (`cirrus conformance --cloud-provider a,b`). */
  readonly provider?: string;
  /** Why it failed (what the provider did) or why it was skipped. */
  readonly message?: string;
  readonly durationMs: number;
}

/** The outcome of a run. */
export interface ConformanceReport {
  readonly provider: string;
  readonly results: readonly CheckResult[];
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  readonly durationMs: number;
}

/** Options of runConformance(). */
export interface ConformanceOptions {
  /** The cluster name passed to load balancer and route calls. Default `kubernetes`. */
  readonly clusterName?: string;
  /** Only the checks whose id is listed, or starts with a listed `<group>.`. Default all. */
  readonly only?: readonly string[];
  /** Aborts the run: the check in progress fails, the rest are skipped. */
  readonly signal?: AbortSignal;
  /** Called after each check, for output as the run goes. */
  readonly onResult?: (result: CheckResult) => void;
}

/**
 * Checks `provider` against the contract, with what `fixture` says about its cloud (a parsed
 * Fixture, or an object in the fixture file's format). Never throws for a provider's misbehaviour:
 * each is a failed result naming the rule. Throws FixtureError for a fixture it cannot use.
 */
export async function runConformance(
  provider: CloudProvider,
  fixture: Fixture | FixtureInput = {},
  options: ConformanceOptions = {},
): Promise<ConformanceReport> {
  const started = performance.now();
  const errors: ObservedError[] = [];
  const runId = randomBytes(3).toString('hex');
  const signal = options.signal ?? new AbortController().signal;
  const context: CheckContext = {
    provider: observeProvider(provider, errors),
    fixture: fixtureFrom(fixture),
    clusterName: options.clusterName ?? 'kubernetes',
    errors,
    signal,
    name: (suffix) => `cirrus-conformance-${runId}-${suffix}`,
  };
  const results: CheckResult[] = [];
  for (const check of selected(options.only)) {
    const result = signal.aborted ? skipped(check, 'the run was cancelled') : await runCheck(check, context);
    results.push(result);
    options.onResult?.(result);
  }
  const count = (outcome: CheckResult['outcome']): number => results.filter((r) => r.outcome === outcome).length;
  return {
    provider: safeName(provider),
    results,
    passed: count('pass'),
    failed: count('fail'),
    skipped: count('skip'),
    durationMs: performance.now() - started,
  };
}

function selected(only: readonly string[] | undefined): readonly Check[] {
  if (only === undefined || only.length === 0) return allChecks;
  const unknown = only.filter((o) => !allChecks.some((c) => c.id === o || c.id.startsWith(`${o}.`)));
  if (unknown.length > 0)
    throw new Error(`no check is named ${unknown.join(', ')}; the checks are ${allChecks.map((c) => c.id).join(', ')}`);
  return allChecks.filter((c) => only.some((o) => c.id === o || c.id.startsWith(`${o}.`)));
}

function skipped(check: Check, message: string): CheckResult {
  return { id: check.id, rule: check.rule, source: check.source, outcome: 'skip', message, durationMs: 0 };
}

async function runCheck(check: Check, context: CheckContext): Promise<CheckResult> {
  const started = performance.now();
  const base = { id: check.id, rule: check.rule, source: check.source };
  const durationMs = (): number => Math.round(performance.now() - started);
  try {
    const verdict = await check.run(context);
    if (verdict !== undefined) return { ...base, outcome: 'skip', message: verdict.skipped, durationMs: durationMs() };
    return { ...base, outcome: 'pass', durationMs: durationMs() };
  } catch (error) {
    const message = error instanceof ConformanceFailure ? error.message : describeError(error);
    return { ...base, outcome: 'fail', message, durationMs: durationMs() };
  }
}

function safeName(provider: CloudProvider): string {
  try {
    return provider.providerName();
  } catch {
    return '(providerName() threw)';
  }
}
