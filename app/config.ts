// All of cirrus's configuration: the one place that reads flags and `CIRRUS_*` environment
// variables, against the option table (options.ts) and its zod schemas. Precedence: flag, then
// environment, then the command's own default, then the table's. Commands pick the options they
// take; any other flag is a usage error.

import { existsSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { hint } from './suggest.ts';
import { options, type OptionSpec } from './options.ts';

export { options, type OptionSpec } from './options.ts';

/** The name of an option. */
export type OptionName = keyof typeof options;

/** The validated configuration for the options `K`. */
export type Config<K extends OptionName = OptionName> = { readonly [P in K]: z.output<(typeof options)[P]['schema']> };

/** Bad configuration or command line: the message names the flag (and variable) and the problem. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** `clusterName` → `cluster-name`. */
export function flagName(name: OptionName): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** `clusterName` → `CIRRUS_CLUSTER_NAME` (or the platform's variable where one is fixed, `port` → `PORT`). */
export function envName(name: OptionName): string {
  const spec: OptionSpec = options[name];
  return spec.env ?? `CIRRUS_${flagName(name).replaceAll('-', '_').toUpperCase()}`;
}

/** The option table entry for `name`. */
export function optionSpec(name: OptionName): OptionSpec {
  return options[name];
}

/** What a command takes: its options, which of them must be set, and its positional arguments. */
export interface CommandOptions<K extends OptionName> {
  readonly options: readonly K[];
  readonly required?: readonly K[];
  /** The command's own defaults, as a flag would give them, in place of the option table's (`start` listens on loopback). */
  readonly defaults?: Partial<Record<K, string>>;
  /** Names of positional arguments, in order; those after `minPositionals` are optional. */
  readonly positionals?: readonly string[];
  readonly minPositionals?: number;
}

/** A parsed command line: the validated configuration and the positional arguments. */
export interface CommandLine<K extends OptionName> {
  readonly config: Config<K>;
  readonly positionals: readonly string[];
}

/**
 * Parses `args` (the arguments after the command name) and `env` for `command`, validates the
 * result with the options' schemas and returns it frozen. Throws ConfigError naming the first
 * problem's flag, where its value came from, and what is wrong.
 */
export function parseCommandLine<K extends OptionName>(
  command: CommandOptions<K>,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): CommandLine<K> {
  const { flags, positionals } = parseFlags(command, args);
  const raw: Record<string, unknown> = {};
  const sources = new Map<string, string>();
  const base = userDirectory(env);
  for (const name of command.options) {
    const found = lookUp(name, flags, env) ?? commandDefault(command, name);
    if (found === undefined) continue;
    raw[name] = resolvePath(name, found.value, base);
    sources.set(name, found.source);
  }
  for (const name of command.required ?? []) {
    if (raw[name] === undefined) throw new ConfigError(`--${flagName(name)} is required (or set ${envName(name)})`);
  }
  const shape = Object.fromEntries(command.options.map((name) => [name, options[name].schema]));
  const result = z.strictObject(shape).safeParse(raw);
  if (!result.success) throw configError(result.error, sources);
  return { config: Object.freeze(result.data) as Config<K>, positionals };
}

/** parseCommandLine() for a command without positional arguments: the configuration alone. */
export function parseConfig<K extends OptionName>(
  command: CommandOptions<K>,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Config<K> {
  return parseCommandLine(command, args, env).config;
}

/**
 * The directory relative paths are meant from: where the user ran `npm run cirrus` (npm runs the
 * script in the package's folder and keeps the user's in INIT_CWD), else the working directory.
 * INIT_CWD counts only while npm runs cirrus as a script of the package whose folder is the
 * working directory (`npm_package_json` there): a cirrus a script starts elsewhere, which inherits
 * the variable, reads paths from its own working directory.
 */
export function userDirectory(env: NodeJS.ProcessEnv, cwd: string = process.cwd()): string {
  const initial = env['INIT_CWD'];
  const manifest = env['npm_package_json'];
  const runByNpmHere = manifest !== undefined && isAbsolute(manifest) && dirname(manifest) === cwd;
  return runByNpmHere && initial !== undefined && isAbsolute(initial) && initial !== cwd ? initial : cwd;
}

// A path option's value made absolute against `base`, so that every message names the file read. A
// module (--provider-module) is a path only when it reads as one or names a file there; else a package.
function resolvePath(name: OptionName, value: unknown, base: string): unknown {
  const kind = optionSpec(name).path;
  if (kind === undefined || typeof value !== 'string' || value.trim() === '' || isAbsolute(value)) return value;
  if (kind === 'module' && !/^\.\.?([/\\]|$)/.test(value) && !existsSync(resolve(base, value))) return value;
  if (kind === 'files' && /^[a-z0-9-]+=/.test(value))
    return value
      .split(',')
      .map((pair) => {
        const at = pair.indexOf('=');
        const path = pair.slice(at + 1);
        return at < 0 || path === '' || isAbsolute(path) ? pair : `${pair.slice(0, at)}=${resolve(base, path)}`;
      })
      .join(',');
  return resolve(base, value);
}

function configError(error: z.ZodError, sources: Map<string, string>): ConfigError {
  const issue = error.issues[0];
  const name = String(issue?.path[0] ?? '');
  return new ConfigError(`${sources.get(name) ?? `--${name}`}: ${issue?.message ?? 'invalid'}`);
}

function commandDefault<K extends OptionName>(
  command: CommandOptions<K>,
  name: K,
): { value: unknown; source: string } | undefined {
  const value = command.defaults?.[name];
  return value === undefined ? undefined : { value, source: `--${flagName(name)} (its default)` };
}

// The value of one option and where it came from: its flag, else its environment variable.
function lookUp(
  name: OptionName,
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): { value: unknown; source: string } | undefined {
  if (flags[name] !== undefined) return { value: flags[name], source: `--${flagName(name)}` };
  const fromEnv = env[envName(name)];
  if (fromEnv === undefined) return undefined;
  const source = `--${flagName(name)} (from ${envName(name)})`;
  if (options[name].kind === 'string') return { value: fromEnv, source };
  if (options[name].kind === 'list')
    return {
      value: fromEnv
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== ''),
      source,
    };
  if (/^(true|1)$/i.test(fromEnv)) return { value: true, source };
  if (/^(false|0)$/i.test(fromEnv)) return { value: false, source };
  throw new ConfigError(`${source}: '${fromEnv}' is not a boolean (true, false, 1 or 0)`);
}

function parseFlags<K extends OptionName>(
  command: CommandOptions<K>,
  args: readonly string[],
): { flags: Record<string, string | boolean | string[] | undefined>; positionals: string[] } {
  const names = command.options;
  const config = Object.fromEntries(
    names.map((name) => {
      const { kind, short } = optionSpec(name);
      const type = kind === 'list' ? { type: 'string' as const, multiple: true } : { type: kind };
      return [flagName(name), short === undefined ? type : { ...type, short }];
    }),
  );
  const allowed = command.positionals ?? [];
  let parsed;
  try {
    const goStyle = args.map((arg) => booleanAssignment(arg, names));
    parsed = parseArgs({
      args: goStyle,
      options: config,
      strict: true,
      allowPositionals: allowed.length > 0,
      allowNegative: true,
    });
  } catch (error) {
    const message = (error as Error).message.replace(/\. To specify a positional argument.*$/s, '');
    // `Unknown option '--cloud-provder'`: the flags of this command it is closest to.
    const unknown = /^Unknown option '--([^'=]+)'/.exec(message)?.[1];
    const flags = names.map((name) => `--${flagName(name)}`);
    throw new ConfigError(`${message}${unknown === undefined ? '' : hint(`--${unknown}`, flags)}`, { cause: error });
  }
  const positionals = parsed.positionals;
  if (positionals.length > allowed.length)
    throw new ConfigError(`Unexpected argument '${positionals[allowed.length] ?? ''}'`);
  const missing = allowed[positionals.length];
  if (positionals.length < (command.minPositionals ?? allowed.length) && missing !== undefined) {
    throw new ConfigError(`missing argument <${missing}>`);
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  return { flags: Object.fromEntries(names.map((name) => [name, values[flagName(name)]])), positionals };
}

// Go's flag package takes `--flag=false` for a boolean; parseArgs spells it `--no-flag`.
function booleanAssignment(arg: string, names: readonly OptionName[]): string {
  const match = /^--([a-z-]+)=(true|false)$/.exec(arg);
  if (!match) return arg;
  const name = names.find((n) => flagName(n) === match[1]);
  if (name === undefined || options[name].kind !== 'boolean') return arg;
  return match[2] === 'true' ? `--${match[1]}` : `--no-${match[1]}`;
}
