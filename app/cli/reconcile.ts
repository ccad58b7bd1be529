// `cirrus reconcile <function> <name>|--all [--dry-run] [--url] [-o json]`: a manual reconcile
// through a function's POST /reconcile — of the `cirrus start` running here (running.ts), or of the
// function at --url — printing its report readably, one block per object with the provider's plan
// first (a load balancer's create, adopt, update, unchanged or refuse) and then each write the
// reconcile made or, on a dry run, would make; or with -o json the report as it came. Whatever it
// prints of a reply (a report's names, messages and errors can carry a Service's annotations) has
// its control characters escaped (escapeControl): no line or terminal escape of the reply's own.

import { ConfigError, type CommandLine } from '../config.ts';
import { findFunction, type FunctionEntry } from '../../shared/catalogue.ts';
import { signatureHeader, signRequest } from '../../shared/wire/signing.ts';
import type { Change, ObjectReport, Report } from '../../shared/host/function.ts';
import type { LoadBalancerPlan } from '../../shared/cloud/provider.ts';
import type { Io } from './io.ts';
import { catalogue } from '../root.ts';
import { escapeControl } from '../log.ts';
import { hint } from '../suggest.ts';
import { describeStart, runningStarts, runtimeDir, type RunningStart } from './running.ts';
import { readSecret } from './secret.ts';

/** The options `cirrus reconcile` takes. */
export type ReconcileOptions = 'url' | 'all' | 'dryRun' | 'output' | 'signingSecretFile';

// Where reconcile calls when neither --url nor a running start says: `cirrus serve`'s default address.
const serveDefault = 'http://127.0.0.1:8080';

/** Calls the function and prints the report; exit status 0 when it answered 2xx. */
export async function runReconcile(line: CommandLine<ReconcileOptions>, io: Io): Promise<number> {
  const { entry, body } = request(line);
  const canonical = entry.name;
  const target = await targetOf(entry, line, io);
  const secret = await readSecret(target.secretFile);
  const url = new URL('reconcile', target.url.endsWith('/') ? target.url : `${target.url}/`);
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
    const cause = (error as Error & { cause?: { message?: string } }).cause?.message;
    io.stderr.write(
      `cirrus reconcile: could not reach ${canonical} at ${url.origin}: ${escapeControl((error as Error).message)}` +
        `${cause === undefined ? '' : ` (${escapeControl(cause)})`}${target.note}\n`,
    );
    return 1;
  }
  const text = await response.text();
  if (response.ok) return answered(text, { entry, line, io });
  io.stderr.write(
    `cirrus reconcile: ${canonical} answered ${response.status}: ${errorText(text)}${why(response.status, secret, target)}\n`,
  );
  return 1;
}

// A 2xx reply: printed, then refused when another function answered (--url naming the wrong one),
// and exit status 1 when the object named does not exist.
function answered(
  text: string,
  { entry, line, io }: { entry: FunctionEntry; line: CommandLine<ReconcileOptions>; io: Io },
): number {
  const report = reportOf(text);
  if (report !== undefined && report.function !== entry.name) {
    io.stderr.write(
      `cirrus reconcile: ${escapeControl(report.function)} answered at --url, not ${entry.name}: ` +
        `${line.positionals[0] ?? ''} reconciles ${entry.target.kind}s with ${entry.name}; give --url <url>/${entry.name}\n`,
    );
    return 1;
  }
  io.stdout.write(line.config.output === 'json' ? `${jsonText(text)}\n` : readable(text));
  const missing = report?.objects.filter((o) => o.result === 'not-found') ?? [];
  if (missing.length === 0 || line.config.all) return 0;
  io.stderr.write(`cirrus reconcile: ${missing.map((o) => escapeControl(o.key)).join(', ')} does not exist\n`);
  return 1;
}

function reportOf(text: string): Report | undefined {
  try {
    const parsed = JSON.parse(text) as Partial<Report> | null;
    return typeof parsed === 'object' && parsed !== null && Array.isArray(parsed.objects)
      ? (parsed as Report)
      : undefined;
  } catch {
    return undefined;
  }
}

// A function's error reply ({"error": …, "problems"?: […], "code": …}) as its message and problems;
// any other text as it came. Escaped either way (escapeControl).
function errorText(text: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return escapeControl(text);
  }
  const { error, problems } = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as {
    error?: unknown;
    problems?: unknown;
  };
  if (typeof error !== 'string') return escapeControl(text);
  const more = Array.isArray(problems) ? problems.filter((p): p is string => typeof p === 'string' && p !== error) : [];
  return escapeControl([error, ...more].join('; '));
}

/** Where the request goes and what signs it. */
interface Target {
  readonly url: string;
  readonly secretFile: string | undefined;
  /** Where the URL came from, for an unreachable one: `` or `; …`. */
  readonly note: string;
}

// --url, else the function of the cirrus start running here, else `cirrus serve`'s default address.
// The secret is --signing-secret-file's, else that of the start whose functions are called.
async function targetOf(entry: FunctionEntry, line: CommandLine<ReconcileOptions>, io: Io): Promise<Target> {
  const { url, signingSecretFile } = line.config;
  const starts = await runningStarts(io.env);
  if (url !== undefined) return urlTarget(entry, url, { starts, signingSecretFile });
  if (starts.length > 1) {
    throw new ConfigError(
      `${starts.length} cirrus start processes run here; pass --url <url>/${entry.name} to say which:\n` +
        starts.map((s) => `  ${describeStart(s)}`).join('\n'),
    );
  }
  const [start] = starts;
  if (start === undefined) {
    return {
      url: serveDefault,
      secretFile: signingSecretFile,
      note: `; no cirrus start runs here (none recorded in ${runtimeDir(io.env)}) and --url was not given, so ${serveDefault} (cirrus serve's default) was tried`,
    };
  }
  notSkipped(start, entry.name);
  return {
    url: `${start.url}/${entry.name}`,
    secretFile: signingSecretFile ?? start.secretFile,
    note: `; the cirrus start that recorded it (pid ${start.pid}) may have stopped`,
  };
}

// --url: refused when it names another function, or one the start serving there does not run.
function urlTarget(
  entry: FunctionEntry,
  url: string,
  { starts, signingSecretFile }: { starts: readonly RunningStart[]; signingSecretFile: string | undefined },
): Target {
  const origin = new URL(url).origin;
  const start = starts.find((s) => new URL(s.url).origin === origin);
  const named = new URL(url).pathname.split('/').findLast((part) => part !== '');
  const other = named === undefined ? undefined : findFunction(catalogue, named);
  if (other !== undefined && other.name === named && other.name !== entry.name)
    throw new ConfigError(
      `--url names ${named}, but ${entry.target.kind}s are reconciled by ${entry.name}: give --url <url>/${entry.name}`,
    );
  if (start !== undefined) notSkipped(start, named);
  return { url, secretFile: signingSecretFile ?? start?.secretFile, note: '' };
}

// A function of the catalogue that `start` does not run (not selected, or skipped for its provider)
// is refused before anything is sent: its listener would only answer that it has no such route.
function notSkipped(start: RunningStart, name: string | undefined): void {
  if (name === undefined || findFunction(catalogue, name)?.name !== name || start.functions.includes(name)) return;
  throw new ConfigError(
    `the cirrus start running here (pid ${start.pid}) does not run ${name}; it runs ${start.functions.join(', ')}`,
  );
}

// What a refusal most likely means, where the status says.
function why(status: number, secret: string | undefined, target: Target): string {
  if (status === 401 && secret === undefined)
    return (
      '\nThe function refuses unsigned requests: pass --signing-secret-file with its secret ' +
      "(a cirrus start's is found by itself when --url is left out or names its functions)"
    );
  if (status === 404 && !/\/[a-z-]+\/?$/.test(new URL(target.url).pathname))
    return "\nIs --url the function's own URL? cirrus start serves each function at <its functions URL>/<function>";
  return '';
}

// The function and the body of its /reconcile request; throws ConfigError for a bad command line.
function request(line: CommandLine<ReconcileOptions>): {
  entry: FunctionEntry;
  body: object;
} {
  const [fn = '', name] = line.positionals;
  const entry = findFunction(catalogue, fn) ?? catalogue.find((e) => e.reconcileAliases.includes(fn));
  if (entry === undefined) {
    // Suggested from the short names: a Go controller's full name would match every `node…`.
    const known = catalogue.flatMap((e) => [e.name, e.controller.alias, ...e.reconcileAliases]);
    const canonical = (n: string): string =>
      (findFunction(catalogue, n) ?? catalogue.find((e) => e.reconcileAliases.includes(n)))?.name ?? n;
    throw new ConfigError(
      `unknown function '${fn}'${hint(fn, known, canonical)} (functions: ${catalogue.map((e) => e.name).join(', ')}; ` +
        `or a Go controller's name or alias; ${catalogue.flatMap((e) => e.reconcileAliases.map((a) => `${a} for ${e.name}`)).join(', ')})`,
    );
  }
  // A function whose object is the whole cluster (routes: the route table) always reconciles all of it.
  const all = line.config.all || (entry.target.wholeCluster === true && name === undefined);
  if ((name === undefined) === !all) throw new ConfigError('name one object, or pass --all (not both)');
  return { entry, body: name === undefined ? { all: true } : objectName(entry, name) };
}

// Namespaced objects (Services) are named `<namespace>/<name>`; Nodes are not.
// The kind goes too, so that a function of another kind (--url naming the wrong one) refuses it.
function objectName(entry: FunctionEntry, name: string): { kind: string; name: string; namespace?: string } {
  const { kind } = entry.target;
  if (!entry.target.namespaced) return { kind, name };
  const [namespace, local, ...rest] = name.split('/');
  if (!namespace || !local || rest.length > 0)
    throw new ConfigError(`name a ${kind} as <namespace>/<name>, not '${name}'`);
  return { kind, namespace, name: local };
}

/**
 * A JSON reply (-o json) as one line with no control character: JSON.stringify escapes C0 in its
 * strings, and escapeControl then DEL and C1 as JSON escapes too, so the text still parses to the
 * same value. Text that is not JSON is escaped whole.
 */
function jsonText(text: string): string {
  try {
    return escapeControl(JSON.stringify(JSON.parse(text)));
  } catch {
    return escapeControl(text);
  }
}

// Every string in a parsed reply with its control characters escaped.
function escapedStrings(value: unknown): unknown {
  if (typeof value === 'string') return escapeControl(value);
  if (Array.isArray(value)) return value.map(escapedStrings);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [escapeControl(key), escapedStrings(field)]));
}

/**
 * A report, readably: a heading, then per object its key and result and each change made (or on a
 * dry run, each it would make); the text as it came when it is not a report. Control characters
 * are escaped in either (escapeControl).
 */
export function readable(text: string): string {
  let parsed: unknown;
  try {
    parsed = escapedStrings(JSON.parse(text));
  } catch {
    return `${escapeControl(text)}\n`;
  }
  if (typeof parsed !== 'object' || parsed === null || !Array.isArray((parsed as Partial<Report>).objects))
    return `${escapeControl(text)}\n`;
  const report = parsed as Report;
  const blocks = report.objects.map((object) => objectText(object, report.dryRun));
  const count = `${report.objects.length} object${report.objects.length === 1 ? '' : 's'}`;
  const heading = report.dryRun
    ? `${report.function} dry run: nothing was changed`
    : `${report.function}: reconciled ${count}`;
  return `${heading}\n${blocks.join('')}`;
}

function objectText(object: ObjectReport, dryRun: boolean): string {
  const plan = object.changes.find((c) => c.action === 'plan')?.detail;
  const lines = [`${object.key}: ${object.result}${planHeading(plan)}`];
  if (typeof plan === 'object' && plan !== null) lines.push(...planLines(plan as LoadBalancerPlan));
  for (const change of object.changes)
    if (change.action !== 'plan') lines.push(`  ${dryRun ? 'would ' : ''}${changeText(change)}`);
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
