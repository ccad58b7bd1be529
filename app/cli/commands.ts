// The commands of `cirrus <command> [flags]`: what each takes (the option groups of
// ./option-groups.ts, and the option table of app/options.ts), its help text, and its implementation,
// loaded only when it runs so that `cirrus --help` and a bad flag answer at once.

import { knownNames } from '../../shared/catalogue.ts';
import type { CommandLine, CommandOptions, OptionName } from '../config.ts';
import { optionSpec } from '../config.ts';
import type { CommandShape as CompletedCommand } from './completion.ts';
import type { Io } from './io.ts';
import {
  functionOptions,
  listenOptions,
  logOptions,
  periodOptions,
  providerOptions,
  relayOptions,
  serveOptions,
} from './option-groups.ts';
import { catalogue } from '../root.ts';

/** A command: its options, its help, and what runs it. */
export interface Command<K extends OptionName> extends CommandOptions<K> {
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

// What the provider options mean to the relay, which builds no provider: the ownership rules its
// destinations serving some providers are routed by (relay/owners.ts).
const relayProviderHelp = {
  to:
    'A destination, <function>=<url> (a function listed above, or all); repeatable. <function>@<provider>=<url>: ' +
    'one serving only that provider (named <function>-<provider>; a split hybrid deployment, docs/hybrid.md).',
  cloudProvider:
    'In a split hybrid deployment, the providers the functions serve (several, comma-separated, as theirs): the ' +
    'relay reads only the names, to route each Node and Service to the destinations serving its provider.',
  defaultProvider:
    "With several providers: the functions' --default-provider, the owner of Nodes with neither a provider ID nor " +
    'the label node.cirrus-ccm.dev/cloud-provider, and of Services without a class.',
  loadBalancerClass:
    "With several providers: the functions' classes, name=class, comma-separated; a Service goes to the destinations " +
    "serving its class's provider.",
} as const;

function command<K extends OptionName>(definition: Command<K>): Command<K> {
  return definition;
}

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

/** Every command, by name. */
export const commands = {
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
    summary: 'Check a provider against the contract; a cluster (--kubeconfig) only for one that keeps state there.',
    description:
      'Builds the provider as serve would, passes it the Nodes and Services it makes from --fixture (the\n' +
      "provider's known, shut-down and gone instances; the Nodes and pod CIDRs for load balancers and routes),\n" +
      'and prints one line per check of the contract (PASS, FAIL or SKIP, and the rule), then a summary.\n' +
      'Exits 1 when a check fails. Load balancers and routes it makes are deleted again. With several providers\n' +
      "(a hybrid cluster), each one's --cloud-config and --fixture as name=path: each provider in turn, then the\n" +
      "combination's checks (each provider's name is its provider IDs' scheme; no two alike). A provider that\n" +
      'keeps state in the cluster needs --kubeconfig: the static provider with load balancer pools records its\n' +
      'allocations in ConfigMaps (cirrus cluster starts a local control plane). docs/conformance.md.',
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
    summary: 'Run the whole CCM in one process: every function, fed by the relay in process.',
    description:
      `Serves the functions --controllers selects (${functionList()}; default all that the provider supports) under\n` +
      '/<function> on a listener of their own on 127.0.0.1 (its URL is printed, and recorded for cirrus reconcile), and\n' +
      'runs the relay handing them its events in process. --bind-address:--port serve /healthz, /readyz, /metrics only.\n' +
      'The cluster is --kubeconfig, KUBECONFIG or the pod ServiceAccount; with none, the local control plane is\n' +
      'started (printing KUBECONFIG=<path>). The provider defaults to static with examples/static/inventory.yaml.\n' +
      'Whatever the provider, start runs only against a local control plane it starts, unless --use-existing-cluster.\n' +
      'The cluster acted on (server, context) is printed before anything runs.',
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
      `with a Lease. Probes and metrics on --bind-address:--port. The functions: ${functionList()}.\n` +
      'Split hybrid deployment (docs/hybrid.md): with the providers of the functions (--cloud-provider a,b,\n' +
      '--default-provider, --load-balancer-class a=class; the relay builds none), a destination serving some\n' +
      'providers (--to <function>@<provider>=<url>, or providers: in the routing file) gets only their Nodes and\n' +
      'Services, and the Nodes nobody owns.',
    options: [
      'kubeconfig',
      'to',
      'routingConfig',
      'cloudProvider',
      'defaultProvider',
      'loadBalancerClass',
      ...periodOptions,
      'serviceSyncPeriod',
      'concurrentDeliveries',
      ...relayOptions,
      'signingSecretFile',
      'bindAddress',
      'port',
      ...logOptions,
    ],
    help: { ...probeHelp, signingSecretFile: signingHelp.relay, ...relayProviderHelp },
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

/** Whether `name` is a command's. */
export function isCommand(name: string): name is CommandName {
  return Object.hasOwn(commands, name);
}

/** The functions, with the Go controller each stands for. */
export function functionList(): string {
  return catalogue.map((e) => `${e.name} [${e.controller.name}, ${e.controller.alias}]`).join(', ');
}
