// `--provider-module`: the module of an out-of-tree provider, imported for its side effect (it
// calls registerCloudProvider). A module of its own, so every command that builds a provider
// (serve, start, conformance) shares it and an artifact without one of them still has it.

import { existsSync } from 'node:fs';
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
