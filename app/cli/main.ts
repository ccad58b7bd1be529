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
  type OptionName,
} from '../config.ts';
import type { FunctionOption } from '../../shared/catalogue.ts';
import { formatDuration } from '../../shared/duration.ts';
import type { Io } from './io.ts';
import { catalogue } from '../root.ts';

export type { Io } from './io.ts';

interface Command<K extends OptionName> extends CommandOptions<K> {
  readonly summary: string;
  readonly description: string;
  run(line: CommandLine<K>, io: Io): Promise<number>;
}

function command<K extends OptionName>(definition: Command<K>): Command<K> {
  return definition;
}

// What builds the provider and reaches the cluster: serve, conformance and start take them alike.
const providerOptions = ['cloudProvider', 'cloudConfig', 'providerModule', 'clusterName', 'kubeconfig'] as const;

// What the functions' implementations read (shared/catalogue.ts FunctionSettings): serve and start.
const functionOptions = [
  'concurrentNodeSyncs',
  'concurrentServiceSyncs',
  'configureCloudRoutes',
  'clusterCidr',
  'concurrentRouteOperations',
] as const satisfies readonly FunctionOption[];

// Where a function listens: serve and start; the Lambda entry, where nothing listens, leaves them out.
const listenOptions = ['bindAddress', 'port', 'maxConcurrentRequests'] as const;

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
  'logLevel',
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
    run: async (line, io) => (await import('./serve.ts')).runServe(line, io),
  }),
  reconcile: command({
    summary: 'Ask a served function to reconcile one object, or all of them.',
    description:
      'POSTs to <url>/reconcile and prints the report: what was changed, or with --dry-run what would be.\n' +
      `<function> is ${functionList()}, or ${catalogue.flatMap((e) => e.reconcileAliases.map((a) => `${a} for ${e.name}`)).join(', ')}; name the object (a namespaced\n` +
      'one as <namespace>/<name>), or pass --all. A function whose objects are the whole cluster reconciles all of it.',
    options: ['url', 'all', 'dryRun', 'signingSecretFile'],
    positionals: ['function', 'name'],
    minPositionals: 1,
    run: async (line, io) => (await import('./reconcile.ts')).runReconcile(line, io),
  }),
  conformance: command({
    summary: 'Check a provider against the contract; no cluster needed.',
    description:
      'Builds the provider as serve would, passes it the Nodes and Services it makes from --fixture (the\n' +
      "provider's known, shut-down and gone instances; the Nodes and pod CIDRs for load balancers and routes),\n" +
      'and prints one line per check of the contract (PASS, FAIL or SKIP, and the rule), then a summary.\n' +
      'Exits 1 when a check fails. Load balancers and routes it makes are deleted again. docs/conformance.md.',
    options: [...providerOptions, 'fixture', 'junit', 'logLevel'],
    required: ['cloudProvider'],
    run: async (line, io) => (await import('./conformance.ts')).runConformanceCommand(line, io),
  }),
  start: command({
    summary: 'Run the whole CCM in one process: every function on one port, fed by the relay.',
    description:
      `Serves the functions --controllers selects (${functionList()}; default all that the provider supports) under\n` +
      '/<function> on --bind-address:--port (loopback by default), and runs the relay delivering to them, signed.\n' +
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
      'logLevel',
      'logFormat',
    ],
    run: async (line, io) => (await import('./start.ts')).runStart(line, io),
  }),
  relay: command({
    summary: 'Watch Nodes and Services and deliver their changes to the functions as CloudEvents.',
    description:
      "Lists and watches Nodes and Services and POSTs each change, in Knative ApiServerSource's format, to\n" +
      'the functions that need it (--to <function>=<url>, a --routing-config file, or K_SINK for all), with\n' +
      'periodic reconcile.all triggers; retries until accepted, never drops. Replicas elect one deliverer\n' +
      'with a Lease. Probes and metrics on --bind-address:--port.',
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
      'logLevel',
      'logFormat',
    ],
    run: async (line, io) => (await import('./relay.ts')).runRelay(line, io),
  }),
};

type CommandName = keyof typeof commands;

const helpWords = new Set(['help', '--help', '-h']);

/** Exit status for a command line or configuration that cirrus will not run. */
export const usageExitCode = 2;

/** Runs the command line `argv` (without `node` and the script) and resolves with the exit status. */
export async function main(argv: readonly string[], io: Io): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || helpWords.has(first)) return help(rest[0], io);
  if (first === '--version') {
    io.stdout.write(`cirrus ${await packageVersion()}\n`);
    return 0;
  }
  if (!isCommand(first)) {
    return usageError(first.startsWith('-') ? `unknown flag '${first}'` : `unknown command '${first}'`, io);
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
    if (line.config.providerModule !== undefined) shareLibraryWithProviderModules();
    return await cmd.run(line, io);
  } catch (error) {
    if (error instanceof ConfigError) return usageError(error.message, io, name);
    io.stderr.write(`cirrus ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

function isCommand(name: string): name is CommandName {
  return Object.hasOwn(commands, name);
}

function help(topic: string | undefined, io: Io): number {
  if (topic === undefined) {
    io.stdout.write(overview());
    return 0;
  }
  if (!isCommand(topic)) return usageError(`unknown command '${topic}'`, io);
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
    const fallback = spec.schema.safeParse(cmd.defaults?.[option]);
    const shown =
      fallback.success && fallback.data !== undefined
        ? ` Default: ${JSON.stringify(fallback.data)}.`
        : periodDefault(option);
    return `  --${flagName(option)}${value}${required}\n      ${spec.help}${shown}\n      Env: ${envName(option)}`;
  });
  const args = (cmd.positionals ?? [])
    .map((arg, i) => (i < (cmd.minPositionals ?? Infinity) ? ` <${arg}>` : ` [<${arg}>]`))
    .join('');
  return [`Usage: cirrus ${name}${args} [flags]`, '', cmd.description, '', 'Flags:', ...flags, ''].join('\n');
}

// A period option's default is its function's period.
function periodDefault(option: OptionName): string {
  const entry = catalogue.find((e) => e.period.option === option);
  return entry === undefined ? '' : ` Default: ${formatDuration(entry.period.defaultMs)} (${entry.name}).`;
}

// The functions, with the Go controller each stands for.
function functionList(): string {
  return catalogue.map((e) => `${e.name} [${e.controller.name}, ${e.controller.alias}]`).join(', ');
}

// Imported, not read from a path: a build inlines it, wherever its files end up.
async function packageVersion(): Promise<string> {
  const { default: pkg } = await import('../../package.json', { with: { type: 'json' } });
  return pkg.version;
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
