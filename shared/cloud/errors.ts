// The outcomes the provider contract defines, as classes. Never branch on an error's message, nor
// with `instanceof` (lint forbids it): a provider may wrap these (`{ cause }`), and findCause() looks
// through causes, as Go's errors.As does.

/** The instance does not exist (not: it is stopped). */
export class InstanceNotFoundError extends Error {
  override readonly name = 'InstanceNotFoundError';
  constructor(message = 'instance not found', options?: ErrorOptions) {
    super(message, options);
  }
}

/** The provider does not implement this call. */
export class NotImplementedError extends Error {
  override readonly name = 'NotImplementedError';
  constructor(message = 'unimplemented', options?: ErrorOptions) {
    super(message, options);
  }
}

/** Another controller implements this (a load balancer of a kind this provider leaves to others). */
export class ImplementedElsewhereError extends Error {
  override readonly name = 'ImplementedElsewhereError';
  constructor(message = 'implemented by alternate to cloud provider', options?: ErrorOptions) {
    super(message, options);
  }
}

/** Try again after `retryAfterMs`, not with the usual backoff. */
export class RetryError extends Error {
  override readonly name = 'RetryError';
  readonly retryAfterMs: number;
  constructor(message: string, retryAfterMs: number, options?: ErrorOptions) {
    super(message, options);
    if (!Number.isFinite(retryAfterMs) || retryAfterMs < 0)
      throw new RangeError(`RetryError: retryAfterMs must be >= 0, got ${retryAfterMs}`);
    this.retryAfterMs = retryAfterMs;
  }
}

/** A cloud-config file the provider cannot use: which file, which field, what is wrong. */
export class CloudConfigError extends Error {
  override readonly name = 'CloudConfigError';
  readonly file: string | undefined;
  readonly field: string;
  readonly problem: string;
  constructor(file: string | undefined, field: string, problem: string) {
    super(`${file ?? 'cloud-config'}: ${field === '' ? '' : `${field}: `}${problem}`);
    this.file = file;
    this.field = field;
    this.problem = problem;
  }
}

/** The first error of class `type` in `error` and its chain of causes. */
export function findCause<T extends Error>(error: unknown, type: abstract new (...args: never[]) => T): T | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 10; current = current.cause, depth += 1) {
    if (current instanceof type) return current;
  }
  return undefined;
}
