// All of cirrus's configuration: one table of options, one zod schema built from it, and the one
// place that reads flags and `CIRRUS_*` environment variables.
//
// An option named `clusterName` is the flag `--cluster-name` and the variable `CIRRUS_CLUSTER_NAME`.
// Where the Go cloud-controller-manager has a flag of the same meaning, the name and default are
// its own. Precedence: flag, then environment, then default. Commands pick the options they take;
// any other flag is a usage error.
//
// Do not name an option so that its variable collides with Kubernetes' service links: a Service
// called `cirrus` injects CIRRUS_PORT, CIRRUS_SERVICE_HOST, CIRRUS_SERVICE_PORT and CIRRUS_PORT_*.

import { parseArgs } from 'node:util';
import { z } from 'zod';

interface OptionSpec<S extends z.ZodType = z.ZodType> {
  /** Every option so far takes a value; boolean flags come with the first option that needs one. */
  readonly kind: 'string';
  readonly help: string;
  readonly schema: S;
  /** Shown in help as the value's placeholder. */
  readonly value?: string;
}

function option<S extends z.ZodType>(kind: OptionSpec['kind'], help: string, schema: S, value?: string): OptionSpec<S> {
  return value === undefined ? { kind, help, schema } : { kind, help, schema, value };
}

const nonEmpty = z.string().trim().min(1, 'must not be empty');

/** Every option cirrus knows. */
export const options = {
  cloudProvider: option('string', 'The provider for cloud services: the name it was registered under.', nonEmpty.optional(), 'name'),
  cloudConfig: option('string', "The path to the cloud provider's configuration file.", nonEmpty.optional(), 'path'),
  clusterName: option(
    'string',
    'The name of the cluster: a prefix of cloud resource names, and the cluster and context name in written kubeconfigs.',
    z.string().regex(
      /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/,
      'must be 1 to 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit',
    )
      .default('kubernetes'),
    'name',
  ),
  kubeconfig: option('string', 'Path to a kubeconfig file with the API server location and credentials.', nonEmpty.optional(), 'path'),
  dataDir: option(
    'string',
    "Folder for the local control plane's certificates, kubeconfig, logs and etcd data; kept between runs. " +
      'Default: a temporary folder, removed on exit.',
    nonEmpty.optional(),
    'path',
  ),
} as const satisfies Record<string, OptionSpec>;

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

/** `clusterName` → `CIRRUS_CLUSTER_NAME`. */
export function envName(name: OptionName): string {
  return `CIRRUS_${flagName(name).replaceAll('-', '_').toUpperCase()}`;
}

/** The option table entry for `name`. */
export function optionSpec(name: OptionName): OptionSpec {
  return options[name];
}

/** What a command takes: its options, and which of them must be set. */
export interface CommandOptions<K extends OptionName> {
  readonly options: readonly K[];
  readonly required?: readonly K[];
}

/**
 * Parses `args` (the arguments after the command name) and `env` for `command`, validates the
 * result with the options' schemas and returns it frozen. Throws ConfigError naming the first
 * problem's flag, where its value came from, and what is wrong.
 */
export function parseConfig<K extends OptionName>(command: CommandOptions<K>, args: readonly string[], env: NodeJS.ProcessEnv): Config<K> {
  const flags = parseFlags(command.options, args);
  const raw: Record<string, unknown> = {};
  const sources = new Map<string, string>();
  for (const name of command.options) {
    const found = lookUp(name, flags, env);
    if (found === undefined) continue;
    raw[name] = found.value;
    sources.set(name, found.source);
  }
  for (const name of command.required ?? []) {
    if (raw[name] === undefined) throw new ConfigError(`--${flagName(name)} is required (or set ${envName(name)})`);
  }
  const shape = Object.fromEntries(command.options.map((name) => [name, options[name].schema]));
  const result = z.strictObject(shape).safeParse(raw);
  if (!result.success) throw configError(result.error, sources);
  return Object.freeze(result.data) as Config<K>;
}

function configError(error: z.ZodError, sources: Map<string, string>): ConfigError {
  const issue = error.issues[0];
  const name = String(issue?.path[0] ?? '');
  return new ConfigError(`${sources.get(name) ?? `--${name}`}: ${issue?.message ?? 'invalid'}`);
}

// The value of one option and where it came from: its flag, else its environment variable.
function lookUp(name: OptionName, flags: Record<string, unknown>, env: NodeJS.ProcessEnv): { value: unknown; source: string } | undefined {
  if (flags[name] !== undefined) return { value: flags[name], source: `--${flagName(name)}` };
  const fromEnv = env[envName(name)];
  if (fromEnv === undefined) return undefined;
  return { value: fromEnv, source: `--${flagName(name)} (from ${envName(name)})` };
}

function parseFlags(names: readonly OptionName[], args: readonly string[]): Record<string, string | undefined> {
  const config = Object.fromEntries(names.map((name) => [flagName(name), { type: options[name].kind }]));
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options: config, strict: true, allowPositionals: false });
  } catch (error) {
    throw new ConfigError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''), { cause: error });
  }
  const values = parsed.values as Record<string, string | undefined>;
  return Object.fromEntries(names.map((name) => [name, values[flagName(name)]]));
}
