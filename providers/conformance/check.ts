// What a check is, and the small vocabulary checks are written in: a check passes by returning,
// fails by throwing (a ConformanceFailure says what was wrong; any other error is reported as the
// provider's), and is skipped, with the reason, by returning skip(…).

import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { findCause, NotImplementedError, RetryError } from '../../shared/cloud/errors.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import type { Fixture } from './fixture.ts';

/** What every check gets. */
export interface CheckContext {
  /** The provider under test, observed: every error a call throws is recorded in `errors`. */
  readonly provider: CloudProvider;
  readonly fixture: Fixture;
  readonly clusterName: string;
  /** Errors thrown by provider calls so far, with the call that threw them. */
  readonly errors: readonly ObservedError[];
  /** Aborted when the whole run is cancelled (Ctrl-C). */
  readonly signal: AbortSignal;
  /** A name for an object of this run: `cirrus-conformance-<run id>-<suffix>`. */
  name(suffix: string): string;
}

/** An error a provider call threw. */
export interface ObservedError {
  readonly call: string;
  readonly error: unknown;
}

/** A check's verdict when it did not run: why. */
export interface Skip {
  readonly skipped: string;
}

/** One check of the contract. */
export interface Check {
  /** Stable identifier, `<group>.<name>`: in output, JUnit and the docs' table. */
  readonly id: string;
  /** The contract rule it enforces, as a sentence: printed with every result and every failure. */
  readonly rule: string;
  /** Where the rule is written: shared/cloud/provider.ts and the behaviour reference. */
  readonly source: string;
  run(context: CheckContext): Promise<Skip | undefined>;
}

/** The provider broke the rule: `message` says how. */
export class ConformanceFailure extends Error {
  override readonly name = 'ConformanceFailure';
}

/** The verdict for a check that cannot run: the provider cannot be asked, or the fixture lacks what it needs. */
export function skip(reason: string): Skip {
  return { skipped: reason };
}

/** Throws a ConformanceFailure with `message` unless `condition` holds. */
export function expect(condition: boolean, message: string): asserts condition {
  if (!condition) throw new ConformanceFailure(message);
}

/** Fails with `message` and the two values when they are not deeply equal. */
export function expectEqual(actual: unknown, expected: unknown, message: string): void {
  expect(isDeepStrictEqual(actual, expected), `${message}: got ${show(actual)}, want ${show(expected)}`);
}

/** A short JSON rendering of a value for a failure message. */
export function show(value: unknown): string {
  if (value === undefined) return 'undefined';
  const text = JSON.stringify(value);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** An error's class name and message, for a failure message. */
export function describeError(error: unknown): string {
  if (error instanceof TypeError && /read[- ]only|not extensible|frozen/i.test(error.message))
    return `${error.name}: ${error.message} (it wrote to a Node or Service it was given, which the contract makes read-only)`;
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return `a thrown ${typeof error} (${show(error)})`;
}

/** Runs `call`; resolves with its error, or fails with `message` when it resolves instead. */
export async function rejection(call: () => Promise<unknown>, message: string): Promise<unknown> {
  let value: unknown;
  try {
    value = await call();
  } catch (error) {
    return error;
  }
  throw new ConformanceFailure(`${message}, but it answered ${show(value)}`);
}

/** Runs `call` and fails naming `what` when it throws: the provider's error, with the call that threw. */
export async function succeeds<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ConformanceFailure) throw error;
    const hint = findCause(error, NotImplementedError)
      ? '; a capability the provider does not support answers undefined from its accessor instead'
      : '';
    throw new ConformanceFailure(`${what} threw ${describeError(error)}${hint}`, { cause: error });
  }
}

/** How often a call that throws RetryError is tried again, as a controller would. */
const RETRIES = 3;
/** The longest RetryError delay the kit waits for. */
const MAX_RETRY_WAIT_MS = 10_000;

/**
 * succeeds(), but a RetryError is honoured as the controllers honour it: the call is made again
 * after its delay (at most 10 s), up to 3 times.
 */
export async function succeedsWithRetries<T>(what: string, call: () => Promise<T>, signal: AbortSignal): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (error) {
      const retry = findCause(error, RetryError);
      if (retry === undefined || attempt > RETRIES) return succeeds(what, () => Promise.reject(error as Error));
      await sleep(Math.min(retry.retryAfterMs, MAX_RETRY_WAIT_MS), undefined, { signal });
    }
  }
}

/** Returns a deep-frozen copy of `value`: what the kit passes in, so a provider that writes to it throws. */
export function frozen<T>(value: T): T {
  return deepFreeze(structuredClone(value));
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
