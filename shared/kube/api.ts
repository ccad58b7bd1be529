// Small helpers around @kubernetes/client-node's API errors and patch content types.

import { ApiException, PatchStrategy, setHeaderOptions, type ConfigurationOptions } from '@kubernetes/client-node';

/** The HTTP status of a failed API call, or undefined for errors that are not API responses. */
export function apiStatus(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

/** The API server's message for a failed call (its Status `message`), else the error's own. */
export function apiMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body: unknown = typeof error.body === 'string' ? safeJson(error.body) : error.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    if (typeof message === 'string') return `${error.code}: ${message}`;
    return `HTTP ${error.code}`;
  }
  return error instanceof Error ? error.message : String(error);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Request options that send a patch with content type `type`: to a CoreV1Api as a header
 * middleware, to LeanCore (shared/kube/core.ts) as `patchType`, which it reads instead.
 */
export interface PatchOptions extends ConfigurationOptions {
  readonly patchType: PatchStrategy;
}

// The options made here: a copy changed by a caller (another middleware added) is not one of them.
const made = new WeakSet<object>();

function patchOptions(type: PatchStrategy): PatchOptions {
  const options = Object.freeze({ ...setHeaderOptions('Content-Type', type), patchType: type });
  made.add(options);
  return options;
}

/** The patch content type of mergePatch or strategicMergePatch; undefined for any other options. */
export function patchTypeOf(options: ConfigurationOptions | undefined): PatchStrategy | undefined {
  return options !== undefined && made.has(options) ? (options as PatchOptions).patchType : undefined;
}

/** Request options that send a body as a JSON merge patch (client-node defaults to JSON patch). */
export const mergePatch: PatchOptions = patchOptions(PatchStrategy.MergePatch);

/**
 * Request options that send a body as a strategic merge patch: lists merge by their key (a
 * finalizer, a condition's `type`) instead of being replaced, so other writers' entries stay.
 */
export const strategicMergePatch: PatchOptions = patchOptions(PatchStrategy.StrategicMergePatch);

/** Retries `attempt` while it fails with 409 Conflict, at most `tries` times, waiting a jittered `baseMs` between. */
export async function retryOnConflict<T>(attempt: () => Promise<T>, tries = 20, baseMs = 50): Promise<T> {
  for (let i = 1; ; i += 1) {
    try {
      return await attempt();
    } catch (error) {
      if (apiStatus(error) !== 409 || i >= tries) throw error;
      await new Promise((resolve) => setTimeout(resolve, baseMs * (1 + Math.random())));
    }
  }
}
