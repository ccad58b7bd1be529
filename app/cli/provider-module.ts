// `--provider-module`: the module of an out-of-tree provider, imported for its side effect (it
// calls registerCloudProvider), with `cirrus-ccm` resolving to this running cirrus. A module of its
// own, so every command that builds a provider (serve, start, conformance) and the Lambda entry
// share it, and an artifact without one of them still has it.

import { existsSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Imports `specifier` — a file path (relative to the working directory) or a package name — for its side effects. */
export async function importProviderModule(specifier: string): Promise<void> {
  const path = resolve(specifier);
  const target =
    specifier.startsWith('.') || specifier.startsWith('/') || existsSync(path) ? pathToFileURL(path).href : specifier;
  try {
    await import(target);
  } catch (error) {
    throw new Error(`--provider-module ${specifier}: ${(error as Error).message}`, { cause: error });
  }
}

// This cirrus's library entry: app/index.ts in a checkout; in a build (scripts/build.ts), index.js
// in the one folder that holds all of an artifact's modules.
const libraryEntry = new URL(import.meta.url.endsWith('.ts') ? '../index.ts' : './index.js', import.meta.url).href;
let shared = false;

/**
 * Makes `import … from 'cirrus-ccm'` in modules loaded from now on (a --provider-module) resolve
 * to this running cirrus, wherever the module lives and whatever its node_modules hold: its
 * registerCloudProvider must reach this process's registry, and the errors it throws must be the
 * classes the functions look for. (Without it, a module in an image of your own or a Lambda
 * package would find no 'cirrus-ccm', or a second copy whose registry nobody reads.)
 * `cirrus-ccm/fake` and every other specifier resolve as usual.
 */
export function shareLibraryWithProviderModules(): void {
  if (shared) return;
  shared = true;
  registerHooks({
    resolve: (specifier, context, nextResolve) =>
      specifier === 'cirrus-ccm' ? { url: libraryEntry, shortCircuit: true } : nextResolve(specifier, context),
  });
}
