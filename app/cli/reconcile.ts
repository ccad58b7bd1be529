// `cirrus reconcile <function> <name>|--all [--dry-run] [--url]`: a manual reconcile through a
// served function's POST /reconcile, printing its report.

import { ConfigError, type CommandLine } from '../config.ts';
import { findFunction, type FunctionEntry } from '../../shared/catalogue.ts';
import { signatureHeader, signRequest } from '../../shared/wire/signing.ts';
import type { Io } from './io.ts';
import { catalogue } from '../root.ts';
import { readSecret } from './secret.ts';

/** Calls the function and prints the report; exit status 0 when it answered 2xx. */
export async function runReconcile(
  line: CommandLine<'url' | 'all' | 'dryRun' | 'signingSecretFile'>,
  io: Io,
): Promise<number> {
  const { entry, body } = request(line);
  const canonical = entry.name;
  const secret = await readSecret(line.config.signingSecretFile);
  const url = new URL('reconcile', line.config.url.endsWith('/') ? line.config.url : `${line.config.url}/`);
  url.searchParams.set('dryRun', String(line.config.dryRun));
  let response: Response;
  try {
    const text = JSON.stringify(body);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    // Signed for the URL it goes to: path and query (the dry run) included.
    const target = { method: 'POST', url: `${url.pathname}${url.search}`, headers, body: text };
    if (secret !== undefined) headers[signatureHeader] = signRequest(secret, target);
    response = await fetch(url, { method: 'POST', headers, body: text, signal: io.signal });
  } catch (error) {
    io.stderr.write(`cirrus reconcile: could not reach ${canonical} at ${url.origin}: ${(error as Error).message}\n`);
    return 1;
  }
  const text = await response.text();
  if (response.ok) {
    io.stdout.write(`${text}\n`);
    return 0;
  }
  io.stderr.write(`cirrus reconcile: ${canonical} answered ${response.status}: ${text}\n`);
  return 1;
}

// The function and the body of its /reconcile request; throws ConfigError for a bad command line.
function request(line: CommandLine<'url' | 'all' | 'dryRun' | 'signingSecretFile'>): {
  entry: FunctionEntry;
  body: object;
} {
  const [fn = '', name] = line.positionals;
  const entry = findFunction(catalogue, fn) ?? catalogue.find((e) => e.reconcileAliases.includes(fn));
  if (entry === undefined) throw new ConfigError(`unknown function '${fn}'`);
  // A function whose object is the whole cluster (routes: the route table) always reconciles all of it.
  const all = line.config.all || (entry.target.wholeCluster === true && name === undefined);
  if ((name === undefined) === !all) throw new ConfigError('name one object, or pass --all (not both)');
  return { entry, body: name === undefined ? { all: true } : objectName(entry, name) };
}

// Namespaced objects (Services) are named `<namespace>/<name>`; Nodes are not.
function objectName(entry: FunctionEntry, name: string): { name: string; namespace?: string } {
  if (!entry.target.namespaced) return { name };
  const [namespace, local, ...rest] = name.split('/');
  if (!namespace || !local || rest.length > 0)
    throw new ConfigError(`name a ${entry.target.kind} as <namespace>/<name>, not '${name}'`);
  return { namespace, name: local };
}
