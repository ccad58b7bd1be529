// The `cirrus` command line: `cirrus <command> [flags]`. Each command names the options it takes
// (app/config.ts) and loads its implementation only when it runs, so `cirrus --help` and a
// bad flag answer at once.

import { registerHooks } from 'node:module';
import {
  ConfigError,
  envName,
  flagName,
  optionSpec,
  parseCommandLine,
  type CommandLine,
  type CommandOptions,
  type Config,
  type OptionName,
} from '../config.ts';
import { knownNames, type FunctionOption } from '../../shared/catalogue.ts';
import { isCloudProvider, registeredCloudProviders } from '../../shared/cloud/registry.ts';
import { formatDuration } from '../../shared/duration.ts';
import { didYouMean, hint } from '../suggest.ts';
import type { CommandShape as CompletedCommand } from './completion.ts';
import type { Io } from './io.ts';
import { catalogue } from '../root.ts';

export type { Io } from './io.ts';

interface Command<K extends OptionName> extends CommandOptions<K> {
  readonly summary: string;
  readonly description: string;
  /** What an option does in this command, where the option table's text would be wrong or vague here. */
  readonly help?: Partial<Record<K, string>>;
  /** The default help names where the command decides it at run time (start's provider). */
  readonly shownDefaults?: Partial<Record<K, string>>;
  /** The values each positional argument takes, for help and shell completion. */
  readonly positionalValues?: readonly (readonly string[])[];
  run(line: CommandLine<K>, io: Io): Promise<number>;
}

function command<K extends OptionName>(definition: Command<K>): Command<K> {
  return definition;
}

// What builds the provider and reaches the cluster: serve, conformance and start take them alike.
const providerOptions = [
  'cloudProvider',
  'cloudConfig',
  'defaultProvider',
  'providerModule',
  'clusterName',
  'kubeconfig',
] as const;

// What the functions' implementations read (shared/catalogue.ts FunctionSettings): serve and start.
const functionOptions = [
  'concurrentNodeSyncs',
  'concurrentServiceSyncs',
  'loadBalancerClass',
  'configureCloudRoutes',
  'clusterCidr',
  'concurrentRouteOperations',
] as const satisfies readonly FunctionOption[];

// Where a function listens: serve and start; the Lambda entry, where nothing listens, leaves them out.
const listenOptions = ['bindAddress', 'port', 'maxConcurrentRequests'] as const;

// How a command that logs logs: every such command takes both.
const logOptions = ['logLevel', 'logFormat'] as const;

// Where start's and the relay's probes listen: what --bind-address and --port are there.
const probeHelp = {
  bindAddress: 'The address /healthz, /readyz and /metrics listen on.',
  port: 'The port /healthz, /readyz and /metrics listen on.',
} as const;

// version and completion list the providers registered: a --provider-module's too.
const moduleHelp =
  'A module (file path or package name) that registers an out-of-tree provider with registerCloudProvider(), to list it too.';

// What the signing secret is to each command.
const signingHelp = {
  serve:
    'A file holding the secret the relay signs its requests with (X-Cirrus-Signature); with it, serve refuses ' +
    'unsigned requests with 401. Without it, nothing is checked (the log warns).',
  relay:
    "A file holding the secret the relay signs each delivery with (X-Cirrus-Signature): the functions' --signing-secret-file.",
  start:
    "A file holding the secret the relay signs its deliveries to the functions with. Default: a random secret of this process, written (mode 0600) beside the functions' URL for cirrus reconcile.",
  reconcile:
    'A file holding the secret to sign the request with, for a function that refuses unsigned requests (401). ' +
    'Default: the secret of the cirrus start whose functions are called, when one is; else none.',
} as const;

// The periods of the periodic triggers that start and relay both send.
const periodOptions = ['nodeMonitorPeriod', 'routeReconciliationPeriod', 'nodeStatusUpdateFrequency'] as const;

// The cloud call budget, leader election and the known-keys cursor: start and relay.
const relayOptions = [
  'cloudCallRate',
  'cloudCallBurst',
  'leaderElect',
  'leaderElectLeaseDuration',
  'leaderElectRenewDeadline',
  'leaderElectRetryPeriod',
  'leaderElectResourceName',
  'leaderElectResourceNamespace',
  'relayCursor',
] as const;

/**
 * What `cirrus serve` takes; the Lambda entry (app/lambda) takes the same but where to listen, with
 * a Secrets Manager ID beside each file.
 */
export const serveOptions = [
  ...providerOptions,
  ...listenOptions,
  ...functionOptions,
  'signingSecretFile',
  ...logOptions,
] as const satisfies readonly OptionName[];

/** Whether `option` says where a function listens (`cirrus serve` has them; a Lambda does not). */
export function isListenOption(option: OptionName): option is (typeof listenOptions)[number] {
  return (listenOptions as readonly OptionName[]).includes(option);
}

const commands = {
  cluster: command({
    summary: 'Run a local kube-apiserver and etcd (the test control plane) until Ctrl-C.',
    description:
      'Starts a real etcd and kube-apiserver on 127.0.0.1 (building them with Go on first use, or taking\n' +
      'them from KUBEBUILDER_ASSETS), prints KUBECONFIG=<path> for an admin kubeconfig, and stops both\n' +
      'on Ctrl-C or SIGTERM.',
    options: ['clusterName', 'dataDir'],
    help: { clusterName: 'The name of the cluster and of the context in the kubeconfig written.' },
    run: async ({ config }, io) => (await import('./cluster.ts')).runCluster(config, io),
  }),
  serve: command({
    summary: 'Serve one function over HTTP (what a container or Knative Service runs).',
    description:
      `Serves <function> (${functionList()}) on --bind-address:--port: CloudEvents on POST /,\n` +
      'manual reconciles on POST /reconcile, and /healthz, /readyz, /metrics. Stops gracefully on SIGTERM.',
    options: serveOptions,
    required: ['cloudProvider'],
    positionals: ['function'],
    positionalValues: [knownNames(catalogue)],
    help: { signingSecretFile: signingHelp.serve },
    run: async (line, io) => (await import('./serve.ts')).runServe(line, io),
  }),
  reconcile: command({
    summary: 'Ask a function (of cirrus start, or served) to reconcile one object, or all of them.',
    description:
      'POSTs to <url>/reconcile and prints the report, a line per object (its key, the result, each change made,\n' +
      'or with --dry-run each change it would make); -o json prints the report as it came.\n' +
      `<function> is ${functionList()}, or ${catalogue.flatMap((e) => e.reconcileAliases.map((a) => `${a} for ${e.name}`)).join(', ')}; name the object (a namespaced\n` +
      'one as <namespace>/<name>), or pass --all. A function whose objects are the whole cluster reconciles all of it.\n' +
      "Without --url it calls the cirrus start running on this machine (which records its functions' URL and\n" +
      'signing secret for this), else a cirrus serve at http://127.0.0.1:8080. A function that checks signatures\n' +
      "(start's always do) answers 401 to a request without --signing-secret-file or start's secret.",
    options: ['url', 'all', 'dryRun', 'output', 'signingSecretFile'],
    positionals: ['function', 'name'],
    minPositionals: 1,
    positionalValues: [[...knownNames(catalogue), ...catalogue.flatMap((e) => e.reconcileAliases)]],
    help: { signingSecretFile: signingHelp.reconcile },
    run: async (line, io) => (await import('./reconcile.ts')).runReconcile(line, io),
  }),
  conformance: command({
    summary: 'Check a provider against the contract; no cluster needed.',
    description:
      'Builds the provider as serve would, passes it the Nodes and Services it makes from --fixture (the\n' +
      "provider's known, shut-down and gone instances; the Nodes and pod CIDRs for load balancers and routes),\n" +
      'and prints one line per check of the contract (PASS, FAIL or SKIP, and the rule), then a summary.\n' +
      'Exits 1 when a check fails. Load balancers and routes it makes are deleted again. docs/conformance.md.',
    options: [...providerOptions, 'fixture', 'junit', ...logOptions],
    required: ['cloudProvider'],
    help: {
      kubeconfig:
        "A kubeconfig, for a provider that keeps state in the cluster (static's load balancer allocations); without it, no cluster is reached.",
      logLevel: "The least severe of the provider's log lines written to stderr (stdout is the report).",
    },
    run: async (line, io) => (await import('./conformance.ts')).runConformanceCommand(line, io),
  }),
  start: command({
    summary: 'Run the whole CCM in one process: every function on one port, fed by the relay.',
    description:
      `Serves the functions --controllers selects (${functionList()}; default all that the provider supports) under\n` +
      '/<function> on a listener of their own on 127.0.0.1 (its URL is printed, and recorded for cirrus reconcile), and\n' +
      'runs the relay delivering to them, signed. --bind-address:--port serve /healthz, /readyz and /metrics.\n' +
      'The cluster is --kubeconfig, KUBECONFIG or the pod ServiceAccount; with none, the local control plane is\n' +
      'started (printing KUBECONFIG=<path>). The provider defaults to static with examples/static/inventory.yaml:\n' +
      'that demo runs only against a local control plane it starts, unless --use-existing-cluster. The cluster\n' +
      'acted on (server, context) is printed before anything runs.',
    defaults: { bindAddress: '127.0.0.1' },
    options: [
      ...providerOptions,
      'useExistingCluster',
      'controllers',
      ...listenOptions,
      ...functionOptions,
      ...periodOptions,
      ...relayOptions,
      'signingSecretFile',
      'dataDir',
      ...logOptions,
    ],
    help: {
      ...probeHelp,
      signingSecretFile: signingHelp.start,
      maxConcurrentRequests:
        "Reconcile requests the functions' listener serves at once; more are answered 503 with Retry-After before their body is read (0: no limit).",
    },
    shownDefaults: {
      cloudProvider: 'static, with the example inventory (the demo)',
      cloudConfig: 'examples/static/inventory.yaml with --cloud-provider static',
    },
    run: async (line, io) => (await import('./start.ts')).runStart(line, io),
  }),
  relay: command({
    summary: 'Watch Nodes and Services and deliver their changes to the functions as CloudEvents.',
    description:
      "Lists and watches Nodes and Services and POSTs each change, in Knative ApiServerSource's format, to\n" +
      'the functions that need it (--to <function>=<url>, a --routing-config file, or K_SINK for all), with\n' +
      'periodic reconcile.all triggers; retries until accepted, never drops. Replicas elect one deliverer\n' +
      `with a Lease. Probes and metrics on --bind-address:--port. The functions: ${functionList()}.`,
    options: [
      'kubeconfig',
      'to',
      'routingConfig',
      ...periodOptions,
      'serviceSyncPeriod',
      'concurrentDeliveries',
      ...relayOptions,
      'signingSecretFile',
      'bindAddress',
      'port',
      ...logOptions,
    ],
    help: { ...probeHelp, signingSecretFile: signingHelp.relay },
    run: async (line, io) => (await import('./relay.ts')).runRelay(line, io),
  }),
  version: command({
    summary: "Print cirrus's version, the Kubernetes release it targets, Node.js's and the providers registered.",
    description:
      "Prints cirrus's version, the Kubernetes release it is built and tested against, the Node.js running it,\n" +
      'and the providers registered (the built-in ones, and those --provider-module registers). Also cirrus --version.',
    options: ['providerModule'],
    help: { providerModule: moduleHelp },
    run: async (line, io) => (await import('./version.ts')).runVersion(line, io),
  }),
  completion: command({
    summary: 'Print a shell completion script (bash, zsh or fish).',
    description:
      'Prints a script that completes commands, flags, function names, providers and flag values in <shell>:\n' +
      '  bash: source <(cirrus completion bash)       (or save it in /etc/bash_completion.d/cirrus)\n' +
      '  zsh:  source <(cirrus completion zsh)        (uses bashcompinit)\n' +
      '  fish: cirrus completion fish | source        (or save it in ~/.config/fish/completions/cirrus.fish)\n' +
      "The providers completed are those registered, with --provider-module's.",
    options: ['providerModule'],
    positionals: ['shell'],
    positionalValues: [['bash', 'zsh', 'fish']],
    help: { providerModule: moduleHelp },
    run: async (line, io): Promise<number> =>
      (await import('./completion.ts')).runCompletion(line, io, commandShapes()),
  }),
};

/** A command's name. */
export type CommandName = keyof typeof commands;

/** What shell completion and help read of a command. */
export interface CommandShape extends CompletedCommand {
  readonly name: CommandName;
}

/** Every command, as completion and help read them. */
export function commandShapes(): CommandShape[] {
  return (Object.keys(commands) as CommandName[]).map((name) => {
    const cmd: Command<OptionName> = commands[name];
    return {
      name,
      summary: cmd.summary,
      options: cmd.options,
      positionals: cmd.positionals ?? [],
      positionalValues: cmd.positionalValues ?? [],
      optionHelp: (option) => cmd.help?.[option] ?? optionSpec(option).help,
    };
  });
}

const helpWords = new Set(['help', '--help', '-h']);

/** Exit status for a command line or configuration that cirrus will not run. */
export const usageExitCode = 2;

/** Runs the command line `argv` (without `node` and the script) and resolves with the exit status. */
export async function main(argv: readonly string[], io: Io): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || helpWords.has(first)) return help(rest[0], io);
  if (first === '--version') return run('version', rest, io);
  if (!isCommand(first)) {
    return usageError(
      first.startsWith('-')
        ? `unknown flag '${first}'${hint(first, ['--help', '--version'])}`
        : `unknown command '${first}'${hint(first, Object.keys(commands))}`,
      io,
    );
  }
  if (rest.some((arg) => helpWords.has(arg) && arg !== 'help')) {
    io.stdout.write(commandHelp(first));
    return 0;
  }
  return run(first, rest, io);
}

// A ConfigError is a usage error, whether the parser or the command found it; any other error
// stops the command with its message (start-up failures: unknown provider, bad cloud-config).
async function run(name: CommandName, args: readonly string[], io: Io): Promise<number> {
  const cmd: Command<OptionName> = commands[name];
  try {
    const line = parseCommandLine(cmd, args, io.env);
    checkNames(cmd, line);
    if (line.config.providerModule !== undefined) shareLibraryWithProviderModules();
    else checkProvider(line.config.cloudProvider);
    return await cmd.run(line, io);
  } catch (error) {
    if (error instanceof ConfigError) return usageError(error.message, io, name);
    io.stderr.write(`cirrus ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

// The names a command line gives that must be among known ones: a positional with a fixed set of
// values (a shell), and --controllers. Functions are checked by their commands (functionNamed).
function checkNames(cmd: Command<OptionName>, line: CommandLine<OptionName>): void {
  (cmd.positionals ?? []).forEach((arg, i) => {
    const value = line.positionals[i];
    const known = cmd.positionalValues?.[i];
    if (value === undefined || known === undefined || arg === 'function' || known.includes(value)) return;
    throw new ConfigError(`unknown ${arg} '${value}'${hint(value, known)} (one of ${known.join(', ')})`);
  });
  // Only the commands that take --controllers have it (the type says every command's config has every option).
  const controllers = (line.config as Partial<Config<'controllers'>>).controllers;
  if (controllers === undefined) return;
  const known = catalogue.flatMap((e) => [e.controller.name, e.controller.alias, e.name]);
  for (const entry of controllers) {
    const name = entry.startsWith('-') ? entry.slice(1) : entry;
    if (entry === '*' || known.includes(name)) continue;
    throw new ConfigError(
      `--controllers: "${entry}" is not in the list of known controllers${hint(name, known)} ` +
        `(${catalogue.map((e) => e.controller.name).join(', ')}, or their aliases ` +
        `${catalogue.flatMap((e) => [e.controller.alias, e.name]).join(', ')})`,
    );
  }
}

// An unknown --cloud-provider stops the command before it starts anything, naming the closest
// registered name (a start-up failure, exit 1, as the registry's own refusal). With a
// --provider-module the name may be the module's, so the registry decides once it is imported.
function checkProvider(name: string | undefined): void {
  if (name === undefined || name === '' || name === 'external' || isCloudProvider(name)) return;
  const known = registeredCloudProviders();
  const question = didYouMean(name, known);
  throw new Error(
    `unknown cloud provider "${name}"${question === '' ? '' : ` (${question})`}; registered: ${known.join(', ') || 'none'}`,
  );
}

function isCommand(name: string): name is CommandName {
  return Object.hasOwn(commands, name);
}

function help(topic: string | undefined, io: Io): number {
  if (topic === undefined) {
    io.stdout.write(overview());
    return 0;
  }
  if (!isCommand(topic)) return usageError(`unknown command '${topic}'${hint(topic, Object.keys(commands))}`, io);
  io.stdout.write(commandHelp(topic));
  return 0;
}

function usageError(message: string, io: Io, cmd?: CommandName): number {
  const hint = cmd === undefined ? 'cirrus --help' : `cirrus ${cmd} --help`;
  io.stderr.write(`cirrus${cmd === undefined ? '' : ` ${cmd}`}: ${message}\nRun '${hint}' for usage.\n`);
  return usageExitCode;
}

function overview(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    'cirrus: a Kubernetes cloud controller manager cut into stateless HTTP functions.',
    '',
    'Usage: cirrus <command> [flags]',
    '',
    'Commands:',
    ...lines,
    '',
    "Run 'cirrus <command> --help' for a command's flags. Every flag can also be set through an",
    'environment variable: --cluster-name is CIRRUS_CLUSTER_NAME. A flag wins over its variable.',
    'Relative paths are read from the directory cirrus was run in (with npm run, the one npm was run in).',
    '',
  ].join('\n');
}

/** The help text of one command: usage, description and each flag with its variable. */
export function commandHelp(name: CommandName): string {
  const cmd: Command<OptionName> = commands[name];
  const flags = cmd.options.map((option) => {
    const spec = optionSpec(option);
    const value = spec.kind === 'boolean' ? '' : ` <${spec.value ?? 'value'}>`;
    const required = cmd.required?.includes(option) ? ' (required)' : '';
    const short = spec.short === undefined ? '' : `-${spec.short}, `;
    const fallback = shownDefault(cmd, option);
    const shown = fallback === undefined ? '' : ` Default: ${fallback}.`;
    const choices = spec.choices === undefined ? '' : ` One of ${spec.choices.join(', ')}.`;
    const help = `${cmd.help?.[option] ?? spec.help}${choices}`;
    return `  ${short}--${flagName(option)}${value}${required}\n      ${help}${shown}\n      Env: ${envName(option)}`;
  });
  const args = (cmd.positionals ?? [])
    .map((arg, i) => (i < (cmd.minPositionals ?? Infinity) ? ` <${arg}>` : ` [<${arg}>]`))
    .join('');
  return [`Usage: cirrus ${name}${args} [flags]`, '', cmd.description, '', 'Flags:', ...flags, ''].join('\n');
}

/**
 * An option's default in `cmd` as one would type it (`12s`, `*`, `127.0.0.1`), or undefined where
 * there is none to show (unset, false, an empty list).
 */
function shownDefault(cmd: Command<OptionName>, option: OptionName): string | undefined {
  const spec = optionSpec(option);
  const own = cmd.shownDefaults?.[option] ?? cmd.defaults?.[option] ?? spec.shownDefault;
  if (own !== undefined) return own;
  // A period option's default is its function's period.
  const entry = catalogue.find((e) => e.period.option === option);
  if (entry !== undefined)
    return `${formatDuration(entry.period.defaultMs)} (${entry.name}${entry.period.defaultMs === 0 ? ': never' : ''})`;
  const parsed = spec.schema.safeParse(undefined);
  return parsed.success ? typedDefault(parsed.data) : undefined;
}

// A schema's default as typed: a list comma-separated; nothing for none, false or an empty list.
function typedDefault(value: unknown): string | undefined {
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.join(',');
  if (typeof value === 'string' || typeof value === 'number' || value === true) return String(value);
  return undefined;
}

// The functions, with the Go controller each stands for.
function functionList(): string {
  return catalogue.map((e) => `${e.name} [${e.controller.name}, ${e.controller.alias}]`).join(', ');
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
