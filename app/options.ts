// The table of every option cirrus knows: its kind, help, schema and default (config.ts reads them).
//
// An option named `clusterName` is the flag `--cluster-name` and the variable `CIRRUS_CLUSTER_NAME`.
// Where the Go cloud-controller-manager has a flag of the same meaning, the name and default are
// its own. A command may give an option a default of its own (CommandOptions.defaults).
//
// Do not name an option so that its variable collides with Kubernetes' service links: a Service
// called `cirrus` injects CIRRUS_PORT, CIRRUS_SERVICE_HOST, CIRRUS_SERVICE_PORT and CIRRUS_PORT_*.

import { isIP } from 'node:net';
import { z } from 'zod';
import {
  choiceOption,
  className,
  durationOption,
  integer,
  nonEmpty,
  option,
  optionalDuration,
  pathOption,
  providerClass,
  type OptionSpec,
} from './option-spec.ts';

export type { OptionSpec } from './option-spec.ts';

/** Every option cirrus knows. */
export const options = {
  cloudProvider: option(
    'string',
    'The provider for cloud services: the name it was registered under. Several, comma-separated, for a hybrid ' +
      'cluster (docs/hybrid.md): each Node and Service is served by the provider that owns it.',
    nonEmpty
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(,[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
        error: 'must be a provider name, or several separated by commas (static,aws)',
      })
      .optional(),
    'name[,name]',
  ),
  cloudConfig: option(
    'string',
    "The path to the cloud provider's configuration file; with several providers, each provider's as " +
      'name=path, comma-separated (static=inventory.yaml,aws=aws.conf).',
    nonEmpty.optional(),
    { value: 'path', path: 'files' },
  ),
  defaultProvider: option(
    'string',
    'With several providers: the one that owns Nodes with neither a provider ID nor the label ' +
      'node.cirrus-ccm.dev/cloud-provider, and Services without a spec.loadBalancerClass. Default: none (such Nodes ' +
      'are left alone, such Services to another controller).',
    z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { error: 'must be a provider name' })
      .optional(),
    'name',
  ),
  serveProviders: option(
    'string',
    '(serve) With several providers: the ones this instance acts for, comma-separated (a split deployment runs an ' +
      "instance per function and provider); only they are built. The others' Nodes and Services it leaves alone. " +
      'Default: all of --cloud-provider.',
    z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(,[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
        error: 'must be a provider name, or several separated by commas',
      })
      .optional(),
    'name[,name]',
  ),
  clusterName: option(
    'string',
    'The name of the cluster: a prefix of cloud resource names, and the cluster and context name in written kubeconfigs.',
    z
      .string()
      .regex(
        /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/,
        'must be 1 to 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit',
      )
      .default('kubernetes'),
    'name',
  ),
  kubeconfig: pathOption(
    'Path to a kubeconfig file with the API server location and credentials.',
    nonEmpty.optional(),
  ),
  useExistingCluster: option(
    'boolean',
    'Run against the cluster --kubeconfig, KUBECONFIG or the pod ServiceAccount names. Without it, whatever the ' +
      'provider, start runs only on a local control plane it starts (an explicit --kubeconfig, or a pod, is refused): ' +
      "with the example inventory or an empty cloud it would delete that cluster's Nodes as not in the cloud.",
    z.boolean().default(false),
  ),
  dataDir: pathOption(
    "Folder for the local control plane's certificates, kubeconfig, logs and etcd data; kept between runs. " +
      'Default: a temporary folder, removed on exit.',
    nonEmpty.optional(),
    'dir',
  ),
  providerModule: option(
    'string',
    'A module (file path or package name) to import before start-up; it registers an out-of-tree provider with registerCloudProvider().',
    nonEmpty.optional(),
    { value: 'module', path: 'module' },
  ),
  bindAddress: option(
    'string',
    'The address to listen on.',
    z
      .string()
      .refine((v) => isIP(v) !== 0, 'must be an IP address')
      .default('0.0.0.0'),
    'ip',
  ),
  port: {
    ...option('string', 'The port to listen on (Knative sets PORT).', integer(0, 65535).default(8080), 'port'),
    env: 'PORT',
  },
  // The default is the host's defaultMaxConcurrentRequests (shared/host/shedding.ts), which says why.
  maxConcurrentRequests: option(
    'string',
    'Reconcile requests served at once; more are answered 503 with Retry-After before their body is read (0: no limit). ' +
      "Behind Knative, set it to the Service's containerConcurrency.",
    integer(0, 10_000).default(512),
    'n',
  ),
  concurrentNodeSyncs: option(
    'string',
    'Nodes reconciled at once by a periodic pass over all nodes (the Go CCM handles 1 at a time).',
    integer(1, 1000).default(10),
    'n',
  ),
  concurrentServiceSyncs: option(
    'string',
    'Services reconciled at once by a pass over all load-balanced Services (the Go CCM handles 1 at a time).',
    integer(1, 1000).default(10),
    'n',
  ),
  loadBalancerClass: option(
    'string',
    '(service-lb) Serve only LoadBalancer Services whose spec.loadBalancerClass is this name, so that cirrus runs beside ' +
      "another load balancer controller (a cloud's CCM serving Services without a class). Default: only Services without a class. " +
      "With several providers: each provider's class as name=class, comma-separated (the default provider serves Services without one).",
    z
      .string()
      .regex(
        new RegExp(`^(${className}|${providerClass}(,${providerClass})*)$`),
        'must be a label-style name, e.g. example.com/internal-vip (the API server takes no other), or provider=class pairs',
      )
      .optional(),
    'name',
  ),
  configureCloudRoutes: option(
    'boolean',
    'Whether the routes function programs pod routes in the cloud (--configure-cloud-routes=false turns it off).',
    z.boolean().default(true),
  ),
  clusterCidr: option(
    'string',
    'The CIDR(s) of pods in the cluster, comma-separated (one per IP family); routes outside them are left alone.',
    z
      .string()
      .transform((v) =>
        v
          .split(',')
          .map((c) => c.trim())
          .filter((c) => c !== ''),
      )
      .default([]),
    'cidrs',
  ),
  concurrentRouteOperations: option(
    'string',
    'Route creations and deletions in flight at once.',
    integer(1, 1000).default(10),
    'n',
  ),
  controllers: option(
    'list',
    'Controllers to run, comma-separated or repeated: the Go CCM\'s controller names (listed above) or their aliases, "-name" to disable, "*" for all.',
    // Comma-separated in a flag too, as the Go CCM's --controllers=*,-route.
    z
      .array(z.string())
      .transform((list) =>
        list
          .flatMap((v) => v.split(','))
          .map((v) => v.trim())
          .filter((v) => v !== ''),
      )
      .default(['*']),
    'names',
  ),
  to: option(
    'list',
    'A destination of the relay, <function>=<url> (a function listed above, or all); repeatable.',
    z.array(z.string()).default([]),
    'function=url',
  ),
  routingConfig: pathOption(
    "The relay's routing file (YAML or JSON): destinations and periods; --to overrides it.",
    nonEmpty.optional(),
  ),
  // The periods of the functions' periodic work (a pass, or rechecks from the relay's copy); each
  // default is the function's own (functions/catalogue.ts).
  nodeMonitorPeriod: option(
    'string',
    'How often the relay rechecks, from its copy, each node that is not Ready or has the shutdown taint (0: never).',
    optionalDuration(),
    'duration',
  ),
  routeReconciliationPeriod: option(
    'string',
    'How often the relay triggers the routes pass (0: never).',
    optionalDuration(),
    'duration',
  ),
  nodeStatusUpdateFrequency: option(
    'string',
    "How often the relay rechecks every node, from its copy, for node initialization's address refresh, spread over the period (0: never).",
    optionalDuration(),
    'duration',
  ),
  serviceSyncPeriod: option(
    'string',
    'How often the relay triggers the load balancer pass over all Services (0: never).',
    optionalDuration(),
    'duration',
  ),
  concurrentDeliveries: option(
    'string',
    'Deliveries the relay has in flight at most.',
    integer(1, 10_000).default(512),
    'n',
  ),
  cloudCallRate: option(
    'string',
    'The cloud call budget: cloud calls a second across every function instance, paced by the relay, which charges each ' +
      "delivery the calls its function's reconcile of one object may make and lends each pass over all objects a share " +
      '(ADR 0015; e.g. 10 or 2.5). Default: no budget.',
    z
      .string()
      .regex(/^\d+(\.\d+)?$/, 'must be a number of calls per second, such as 10 or 2.5')
      .transform(Number)
      .pipe(z.number().gt(0, 'must be more than 0 (leave it unset for no budget)').max(100_000))
      .optional(),
    'per-second',
  ),
  cloudCallBurst: option(
    'string',
    'How many calls of the cloud call budget may go at once after a quiet spell. Default: the rate, rounded up.',
    integer(1, 100_000).optional(),
    'n',
  ),
  leaderElect: option(
    'boolean',
    'Elect one delivering relay among replicas with a Lease (--leader-elect=false for a single replica).',
    z.boolean().default(true),
  ),
  leaderElectLeaseDuration: durationOption(
    "How long a Lease holds without renewal (client-go's default is 15s; 12s makes a take-over after a crash at most 15s).",
    '12s',
  ),
  leaderElectRenewDeadline: durationOption('How long the leader tries to renew before it steps down.', '8s'),
  leaderElectRetryPeriod: durationOption('How often candidates try to acquire or renew the Lease.', '2s'),
  leaderElectResourceName: option('string', "The relay's Lease name.", nonEmpty.default('cirrus-relay'), 'name'),
  leaderElectResourceNamespace: option(
    'string',
    "The relay's Lease namespace.",
    nonEmpty.default('kube-system'),
    'namespace',
  ),
  relayCursor: option(
    'boolean',
    "Record the objects the relay knows (the known-keys cursor, ADR 0014) in ConfigMaps beside the relay's Lease, " +
      '`<lease name>-known-nodes` and `-known-services` (and their parts `-1` to `-3`), so that the relay that ' +
      'delivers next — a new leader, or this one restarted — delivers the deletes made meanwhile; with or without ' +
      'leader election (--relay-cursor=false: off, and those deletes are lost).',
    z.boolean().default(true),
  ),
  // Each command says what the secret does there (app/cli/commands.ts).
  signingSecretFile: pathOption(
    'A file holding the secret that signs requests to the functions (X-Cirrus-Signature).',
    nonEmpty.optional(),
  ),
  kubeconfigSecretId: option(
    'string',
    '(AWS Lambda) The Secrets Manager secret (name or ARN) holding the kubeconfig; read at cold start instead of --kubeconfig.',
    nonEmpty.optional(),
    'secret',
  ),
  cloudConfigSecretId: option(
    'string',
    "(AWS Lambda) The Secrets Manager secret (name or ARN) holding the provider's cloud-config; read at cold start instead of --cloud-config.",
    nonEmpty.optional(),
    'secret',
  ),
  signingSecretId: option(
    'string',
    '(AWS Lambda) The Secrets Manager secret (name or ARN) holding the signing secret; read at cold start instead of --signing-secret-file.',
    nonEmpty.optional(),
    'secret',
  ),
  logLevel: choiceOption(
    'The least severe log lines written.',
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    'info',
    'level',
  ),
  logFormat: choiceOption(
    'Log format: json (one JSON object a line, for log collectors), pretty (one readable line an event, ' +
      'coloured where the terminal supports it), or auto: pretty when the log goes to a terminal, else json.',
    ['auto', 'json', 'pretty'],
    'auto',
    'format',
  ),
  url: option(
    'string',
    "The function to call: its URL (`cirrus serve`'s address, or `cirrus start`'s <functions URL>/<function>).",
    z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    { value: 'url', shownDefault: 'the cirrus start running on this machine, else http://127.0.0.1:8080' },
  ),
  output: {
    ...choiceOption(
      "How to print the report: text (a line per object: its key, the result, each change) or json (the function's report as it came, for scripts).",
      ['text', 'json'],
      'text',
      'format',
    ),
    short: 'o',
  },
  all: option('boolean', 'Reconcile every object the function owns.', z.boolean().default(false)),
  dryRun: option('boolean', 'Report the changes without making them.', z.boolean().default(false)),
  fixture: option(
    'string',
    "The conformance fixture (YAML or JSON): the provider's known, shut-down and gone instances, and the Nodes and pod CIDRs to use for load balancers and routes (docs/conformance.md). Without it, the checks that need one are skipped. With several providers, each provider's as name=path, comma-separated.",
    nonEmpty.optional(),
    { value: 'path', path: 'files' },
  ),
  junit: pathOption('Also write the results as JUnit XML to this file, for CI systems.', nonEmpty.optional()),
} as const satisfies Record<string, OptionSpec>;
