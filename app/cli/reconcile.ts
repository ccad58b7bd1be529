// `cirrus reconcile <function> <name>|--all [--dry-run] [--url]`: a manual reconcile through a
// served function's POST /reconcile, printing its report: as JSON, or on a dry run readably, one
// block per object with the provider's plan first (a load balancer's create, adopt, update,
// unchanged or refuse) and then each write the reconcile would make.

import { ConfigError, type CommandLine } from '../config.ts';
import { findFunction, type FunctionEntry } from '../../shared/catalogue.ts';
import { signatureHeader, signRequest } from '../../shared/wire/signing.ts';
import type { Change, ObjectReport, Report } from '../../shared/host/function.ts';
import type { LoadBalancerPlan } from '../../shared/cloud/provider.ts';
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
    io.stdout.write(line.config.dryRun ? readable(text) : `${text}\n`);
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

/** A dry run's report, readably; the text as it came when it is not a report. */
export function readable(text: string): string {
  let report: Report;
  try {
    report = JSON.parse(text) as Report;
  } catch {
    return `${text}\n`;
  }
  if (!Array.isArray(report.objects)) return `${text}\n`;
  const blocks = report.objects.map(objectText);
  return `${report.function} dry run: nothing was changed\n${blocks.join('')}`;
}

function objectText(object: ObjectReport): string {
  const plan = object.changes.find((c) => c.action === 'plan')?.detail;
  const lines = [`${object.key}: ${object.result}${planHeading(plan)}`];
  if (typeof plan === 'object' && plan !== null) lines.push(...planLines(plan as LoadBalancerPlan));
  for (const change of object.changes) if (change.action !== 'plan') lines.push(`  would ${changeText(change)}`);
  if (object.error !== undefined) lines.push(`  error: ${object.error}`);
  if (object.note !== undefined) lines.push(`  note: ${object.note}`);
  return `${lines.join('\n')}\n`;
}

/** ` (load balancer <name>)`, ` — refused: <why>`, or the mark of a provider without a plan. */
function planHeading(plan: unknown): string {
  if (typeof plan === 'string') return ` (${plan})`;
  if (typeof plan !== 'object' || plan === null) return '';
  const { name, reason } = plan as LoadBalancerPlan;
  return reason === undefined ? ` (load balancer ${name})` : ` (load balancer ${name}): ${reason}`;
}

function planLines(plan: LoadBalancerPlan): string[] {
  const width = Math.max(0, ...plan.changes.map((c) => c.setting.length));
  return [
    ...plan.changes.map((c) => `  ${c.setting.padEnd(width)}  ${c.change}`),
    ...(plan.warnings ?? []).map((w) => `  warning: ${w}`),
  ];
}

/** `record event Warning/Reason: message`, `call the cloud: ensureLoadBalancer`, `patch Node/x {…}`. */
function changeText(change: Change): string {
  if (change.action === 'event') return `record event ${eventText(change.detail as EventDetail | undefined)}`;
  if (change.action === 'cloud')
    return `call the cloud: ${(change.detail as { method?: string } | undefined)?.method ?? ''}`;
  return `${change.action} ${change.target} ${JSON.stringify(change.detail)}`;
}

interface EventDetail {
  readonly type?: string;
  readonly reason?: string;
  readonly message?: string;
}

function eventText(detail: EventDetail | undefined): string {
  return `${detail?.type ?? ''}/${detail?.reason ?? ''}: ${detail?.message ?? ''}`;
}
