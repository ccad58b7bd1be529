import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ConfigError,
  envName,
  flagName,
  options,
  parseCommandLine,
  parseConfig,
  type OptionName,
} from '../../app/config.ts';
import { catalogue } from '../../functions/catalogue.ts';

describe('option names', () => {
  const cases: { option: OptionName; flag: string; env: string }[] = [
    { option: 'cloudProvider', flag: 'cloud-provider', env: 'CIRRUS_CLOUD_PROVIDER' },
    { option: 'cloudConfig', flag: 'cloud-config', env: 'CIRRUS_CLOUD_CONFIG' },
    { option: 'defaultProvider', flag: 'default-provider', env: 'CIRRUS_DEFAULT_PROVIDER' },
    { option: 'serveProviders', flag: 'serve-providers', env: 'CIRRUS_SERVE_PROVIDERS' },
    { option: 'clusterName', flag: 'cluster-name', env: 'CIRRUS_CLUSTER_NAME' },
    { option: 'kubeconfig', flag: 'kubeconfig', env: 'CIRRUS_KUBECONFIG' },
    { option: 'dataDir', flag: 'data-dir', env: 'CIRRUS_DATA_DIR' },
    { option: 'useExistingCluster', flag: 'use-existing-cluster', env: 'CIRRUS_USE_EXISTING_CLUSTER' },
    { option: 'providerModule', flag: 'provider-module', env: 'CIRRUS_PROVIDER_MODULE' },
    { option: 'bindAddress', flag: 'bind-address', env: 'CIRRUS_BIND_ADDRESS' },
    { option: 'port', flag: 'port', env: 'PORT' },
    { option: 'concurrentNodeSyncs', flag: 'concurrent-node-syncs', env: 'CIRRUS_CONCURRENT_NODE_SYNCS' },
    { option: 'concurrentServiceSyncs', flag: 'concurrent-service-syncs', env: 'CIRRUS_CONCURRENT_SERVICE_SYNCS' },
    { option: 'loadBalancerClass', flag: 'load-balancer-class', env: 'CIRRUS_LOAD_BALANCER_CLASS' },
    { option: 'configureCloudRoutes', flag: 'configure-cloud-routes', env: 'CIRRUS_CONFIGURE_CLOUD_ROUTES' },
    { option: 'clusterCidr', flag: 'cluster-cidr', env: 'CIRRUS_CLUSTER_CIDR' },
    {
      option: 'concurrentRouteOperations',
      flag: 'concurrent-route-operations',
      env: 'CIRRUS_CONCURRENT_ROUTE_OPERATIONS',
    },
    { option: 'controllers', flag: 'controllers', env: 'CIRRUS_CONTROLLERS' },
    { option: 'to', flag: 'to', env: 'CIRRUS_TO' },
    { option: 'routingConfig', flag: 'routing-config', env: 'CIRRUS_ROUTING_CONFIG' },
    { option: 'nodeMonitorPeriod', flag: 'node-monitor-period', env: 'CIRRUS_NODE_MONITOR_PERIOD' },
    {
      option: 'routeReconciliationPeriod',
      flag: 'route-reconciliation-period',
      env: 'CIRRUS_ROUTE_RECONCILIATION_PERIOD',
    },
    {
      option: 'nodeStatusUpdateFrequency',
      flag: 'node-status-update-frequency',
      env: 'CIRRUS_NODE_STATUS_UPDATE_FREQUENCY',
    },
    { option: 'serviceSyncPeriod', flag: 'service-sync-period', env: 'CIRRUS_SERVICE_SYNC_PERIOD' },
    { option: 'concurrentDeliveries', flag: 'concurrent-deliveries', env: 'CIRRUS_CONCURRENT_DELIVERIES' },
    { option: 'cloudCallRate', flag: 'cloud-call-rate', env: 'CIRRUS_CLOUD_CALL_RATE' },
    { option: 'cloudCallBurst', flag: 'cloud-call-burst', env: 'CIRRUS_CLOUD_CALL_BURST' },
    { option: 'maxConcurrentRequests', flag: 'max-concurrent-requests', env: 'CIRRUS_MAX_CONCURRENT_REQUESTS' },
    { option: 'leaderElect', flag: 'leader-elect', env: 'CIRRUS_LEADER_ELECT' },
    {
      option: 'leaderElectLeaseDuration',
      flag: 'leader-elect-lease-duration',
      env: 'CIRRUS_LEADER_ELECT_LEASE_DURATION',
    },
    {
      option: 'leaderElectRenewDeadline',
      flag: 'leader-elect-renew-deadline',
      env: 'CIRRUS_LEADER_ELECT_RENEW_DEADLINE',
    },
    { option: 'leaderElectRetryPeriod', flag: 'leader-elect-retry-period', env: 'CIRRUS_LEADER_ELECT_RETRY_PERIOD' },
    { option: 'leaderElectResourceName', flag: 'leader-elect-resource-name', env: 'CIRRUS_LEADER_ELECT_RESOURCE_NAME' },
    {
      option: 'leaderElectResourceNamespace',
      flag: 'leader-elect-resource-namespace',
      env: 'CIRRUS_LEADER_ELECT_RESOURCE_NAMESPACE',
    },
    { option: 'relayCursor', flag: 'relay-cursor', env: 'CIRRUS_RELAY_CURSOR' },
    { option: 'signingSecretFile', flag: 'signing-secret-file', env: 'CIRRUS_SIGNING_SECRET_FILE' },
    { option: 'kubeconfigSecretId', flag: 'kubeconfig-secret-id', env: 'CIRRUS_KUBECONFIG_SECRET_ID' },
    { option: 'cloudConfigSecretId', flag: 'cloud-config-secret-id', env: 'CIRRUS_CLOUD_CONFIG_SECRET_ID' },
    { option: 'signingSecretId', flag: 'signing-secret-id', env: 'CIRRUS_SIGNING_SECRET_ID' },
    { option: 'logLevel', flag: 'log-level', env: 'CIRRUS_LOG_LEVEL' },
    { option: 'url', flag: 'url', env: 'CIRRUS_URL' },
    { option: 'all', flag: 'all', env: 'CIRRUS_ALL' },
    { option: 'dryRun', flag: 'dry-run', env: 'CIRRUS_DRY_RUN' },
    { option: 'output', flag: 'output', env: 'CIRRUS_OUTPUT' },
    { option: 'fixture', flag: 'fixture', env: 'CIRRUS_FIXTURE' },
    { option: 'junit', flag: 'junit', env: 'CIRRUS_JUNIT' },
    { option: 'logFormat', flag: 'log-format', env: 'CIRRUS_LOG_FORMAT' },
  ];
  for (const { option, flag, env } of cases) {
    it(`${option} is --${flag} and ${env}`, () => {
      assert.equal(flagName(option), flag);
      assert.equal(envName(option), env);
    });
  }

  it('covers every option in the table above', () => {
    assert.deepEqual(Object.keys(options).sort(), cases.map((c) => c.option).sort());
  });

  it('never collides with the variables Kubernetes injects for a Service named cirrus', () => {
    const serviceLinks = /^CIRRUS_(PORT|SERVICE_HOST|SERVICE_PORT|PORT_.*|SERVICE_PORT_.*)$/;
    for (const option of Object.keys(options) as OptionName[]) assert.doesNotMatch(envName(option), serviceLinks);
  });
});

describe('parseConfig', () => {
  const command = { options: ['cloudProvider', 'clusterName', 'kubeconfig'] as const };

  it('applies the Go defaults when nothing is set', () => {
    assert.deepEqual(parseConfig(command, [], {}), { clusterName: 'kubernetes' });
  });

  it('reads flags in both --flag value and --flag=value form', () => {
    const config = parseConfig(command, ['--cloud-provider', 'fake', '--cluster-name=prod-eu.1'], {});
    assert.equal(config.cloudProvider, 'fake');
    assert.equal(config.clusterName, 'prod-eu.1');
  });

  it('reads CIRRUS_* variables, and a flag wins over its variable', () => {
    const env = { CIRRUS_CLOUD_PROVIDER: 'static', CIRRUS_CLUSTER_NAME: 'from-env' };
    const config = parseConfig(command, ['--cluster-name', 'from-flag'], env);
    assert.equal(config.cloudProvider, 'static');
    assert.equal(config.clusterName, 'from-flag');
  });

  it('returns a frozen object', () => {
    assert.ok(Object.isFrozen(parseConfig(command, [], {})));
  });

  const invalid: { name: string; args: string[]; env?: Record<string, string>; message: RegExp }[] = [
    { name: 'a bad flag value', args: ['--cluster-name', 'no/slash'], message: /^--cluster-name: must be 1 to 63/ },
    {
      name: 'a bad value from the environment',
      args: [],
      env: { CIRRUS_CLUSTER_NAME: '-x' },
      message: /^--cluster-name \(from CIRRUS_CLUSTER_NAME\): must be/,
    },
    { name: 'an empty value', args: ['--cloud-provider', ' '], message: /^--cloud-provider: must not be empty$/ },
    { name: 'an unknown flag', args: ['--cloud-providr', 'x'], message: /Unknown option '--cloud-providr'/ },
    { name: "another command's flag", args: ['--data-dir', '/tmp'], message: /Unknown option '--data-dir'/ },
    { name: 'a positional argument', args: ['extra'], message: /Unexpected argument 'extra'/ },
    { name: 'a flag without its value', args: ['--kubeconfig'], message: /--kubeconfig <value>' argument missing/ },
  ];
  for (const { name, args, env, message } of invalid) {
    it(`rejects ${name} with a ConfigError naming the flag`, () => {
      assert.throws(
        () => parseConfig(command, args, env ?? {}),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.match(error.message, message);
          return true;
        },
      );
    });
  }

  it('names a required option that is missing, with its variable', () => {
    assert.throws(() => parseConfig({ ...command, required: ['cloudProvider'] }, [], {}), {
      name: 'ConfigError',
      message: '--cloud-provider is required (or set CIRRUS_CLOUD_PROVIDER)',
    });
  });

  it('accepts a required option set only through the environment', () => {
    const config = parseConfig({ ...command, required: ['cloudProvider'] }, [], { CIRRUS_CLOUD_PROVIDER: 'fake' });
    assert.equal(config.cloudProvider, 'fake');
  });
});

describe('typed options', () => {
  const command = { options: ['port', 'concurrentNodeSyncs', 'dryRun', 'bindAddress', 'url'] as const };

  it('has the defaults of a served function', () => {
    assert.deepEqual(parseConfig(command, [], {}), {
      port: 8080,
      concurrentNodeSyncs: 10,
      dryRun: false,
      bindAddress: '0.0.0.0',
      // --url has no default: reconcile looks for a running cirrus start first (app/cli/reconcile.ts).
    });
  });

  it("takes a command's own default over the table's, and a variable or flag over it", () => {
    const start = { options: ['bindAddress'] as const, defaults: { bindAddress: '127.0.0.1' } };
    assert.equal(parseConfig(start, [], {}).bindAddress, '127.0.0.1');
    assert.equal(parseConfig(start, [], { CIRRUS_BIND_ADDRESS: '0.0.0.0' }).bindAddress, '0.0.0.0');
    assert.equal(parseConfig(start, ['--bind-address', '::'], {}).bindAddress, '::');
    assert.throws(() => parseConfig({ ...start, defaults: { bindAddress: 'lo' } }, [], {}), {
      message: '--bind-address (its default): must be an IP address',
    });
  });

  it("takes the port from Knative's PORT, and a flag over it", () => {
    assert.equal(parseConfig(command, [], { PORT: '9000' }).port, 9000);
    assert.equal(parseConfig(command, ['--port', '9001'], { PORT: '9000' }).port, 9001);
  });

  it('reads a boolean flag without a value, and true/false/1/0 from its variable', () => {
    assert.equal(parseConfig(command, ['--dry-run'], {}).dryRun, true);
    assert.equal(parseConfig(command, [], { CIRRUS_DRY_RUN: '1' }).dryRun, true);
    assert.equal(parseConfig(command, [], { CIRRUS_DRY_RUN: 'FALSE' }).dryRun, false);
  });

  const invalid: { args: string[]; env?: Record<string, string>; message: string }[] = [
    { args: ['--port', '80a'], message: '--port: must be a whole number' },
    { args: [], env: { PORT: '70000' }, message: '--port (from PORT): Too big: expected number to be <=65535' },
    {
      args: ['--concurrent-node-syncs', '0'],
      message: '--concurrent-node-syncs: Too small: expected number to be >=1',
    },
    {
      args: [],
      env: { CIRRUS_DRY_RUN: 'yes' },
      message: "--dry-run (from CIRRUS_DRY_RUN): 'yes' is not a boolean (true, false, 1 or 0)",
    },
    { args: ['--bind-address', 'localhost'], message: '--bind-address: must be an IP address' },
    { args: ['--url', 'ftp://x'], message: '--url: must be an http(s) URL' },
  ];
  for (const { args, env, message } of invalid) {
    it(`refuses ${args.join(' ') || JSON.stringify(env)}`, () => {
      assert.throws(() => parseConfig(command, args, env ?? {}), { name: 'ConfigError', message });
    });
  }
});

describe('positional arguments', () => {
  const command = { options: ['url'] as const, positionals: ['function', 'name'], minPositionals: 1 };

  it('returns them in order, the optional one may be left out', () => {
    assert.deepEqual(parseCommandLine(command, ['node-init', 'w1'], {}).positionals, ['node-init', 'w1']);
    assert.deepEqual(parseCommandLine(command, ['node-init'], {}).positionals, ['node-init']);
  });

  it('names a missing required one, and refuses one too many', () => {
    assert.throws(() => parseCommandLine(command, [], {}), {
      name: 'ConfigError',
      message: 'missing argument <function>',
    });
    assert.throws(() => parseCommandLine(command, ['a', 'b', 'c'], {}), {
      name: 'ConfigError',
      message: "Unexpected argument 'c'",
    });
  });
});

describe('--load-balancer-class', () => {
  const command = { options: ['loadBalancerClass'] as const };

  it('is unset by default, and takes a label-style name from the flag or its variable', () => {
    assert.equal(parseConfig(command, [], {}).loadBalancerClass, undefined);
    assert.equal(
      parseConfig(command, ['--load-balancer-class', 'example.com/vip'], {}).loadBalancerClass,
      'example.com/vip',
    );
    assert.equal(parseConfig(command, [], { CIRRUS_LOAD_BALANCER_CLASS: 'vip' }).loadBalancerClass, 'vip');
  });

  it('refuses a name the API server would not take, saying what it must be', () => {
    assert.throws(
      () => parseConfig(command, ['--load-balancer-class', 'Not A Class'], {}),
      /^ConfigError: --load-balancer-class: must be a label-style name/,
    );
  });
});

describe('route options', () => {
  const command = { options: ['configureCloudRoutes', 'clusterCidr'] as const };

  it('splits and trims --cluster-cidr, and defaults to none', () => {
    assert.deepEqual(parseConfig(command, ['--cluster-cidr', ' 10.244.0.0/16, fd00:10:244::/56 '], {}).clusterCidr, [
      '10.244.0.0/16',
      'fd00:10:244::/56',
    ]);
    assert.deepEqual(parseConfig(command, [], {}).clusterCidr, []);
  });

  it('takes Go-style --configure-cloud-routes=false, --no-configure-cloud-routes, and defaults to true', () => {
    assert.equal(parseConfig(command, [], {}).configureCloudRoutes, true);
    assert.equal(parseConfig(command, ['--configure-cloud-routes=false'], {}).configureCloudRoutes, false);
    assert.equal(parseConfig(command, ['--no-configure-cloud-routes'], {}).configureCloudRoutes, false);
    assert.equal(
      parseConfig(command, ['--configure-cloud-routes=true'], { CIRRUS_CONFIGURE_CLOUD_ROUTES: 'false' })
        .configureCloudRoutes,
      true,
    );
  });
});

describe('relay options', () => {
  const command = {
    options: [
      'to',
      'nodeMonitorPeriod',
      'routeReconciliationPeriod',
      'nodeStatusUpdateFrequency',
      'serviceSyncPeriod',
    ] as const,
  };

  it("leaves the periods unset, to the functions' own defaults: the Go ones, in milliseconds", () => {
    assert.deepEqual(parseConfig(command, [], {}), { to: [] });
    const defaults = Object.fromEntries(catalogue.map((entry) => [entry.period.option, entry.period.defaultMs]));
    assert.deepEqual(defaults, {
      nodeMonitorPeriod: 5_000,
      routeReconciliationPeriod: 10_000,
      nodeStatusUpdateFrequency: 300_000,
      serviceSyncPeriod: 0,
    });
  });

  it('reads Go durations', () => {
    assert.equal(parseConfig(command, ['--node-monitor-period', '1m30s'], {}).nodeMonitorPeriod, 90_000);
    assert.equal(parseConfig(command, ['--node-monitor-period', '500ms'], {}).nodeMonitorPeriod, 500);
    assert.equal(parseConfig(command, ['--node-monitor-period', '0'], {}).nodeMonitorPeriod, 0);
    assert.throws(() => parseConfig(command, ['--route-reconciliation-period', '10'], {}), {
      message: "--route-reconciliation-period: '10' is not a duration like 5s, 1m30s or 500ms",
    });
  });

  it('repeats --to, or splits its variable at commas', () => {
    assert.deepEqual(parseConfig(command, ['--to', 'node-init=http://a', '--to', 'routes=http://b'], {}).to, [
      'node-init=http://a',
      'routes=http://b',
    ]);
    assert.deepEqual(parseConfig(command, [], { CIRRUS_TO: 'node-init=http://a, routes=http://b' }).to, [
      'node-init=http://a',
      'routes=http://b',
    ]);
  });
});

describe('cloud call budget options', () => {
  const command = { options: ['cloudCallRate', 'cloudCallBurst'] as const };

  it('is off unless set; takes whole and decimal rates, from a flag or its variable', () => {
    assert.deepEqual(parseConfig(command, [], {}), {});
    assert.deepEqual(parseConfig(command, ['--cloud-call-rate', '10', '--cloud-call-burst=20'], {}), {
      cloudCallRate: 10,
      cloudCallBurst: 20,
    });
    assert.equal(parseConfig(command, [], { CIRRUS_CLOUD_CALL_RATE: '2.5' }).cloudCallRate, 2.5);
    assert.equal(parseConfig(command, [], { CIRRUS_CLOUD_CALL_BURST: '3' }).cloudCallBurst, 3);
  });

  for (const [args, env, message] of [
    [['--cloud-call-rate', '0'], {}, '--cloud-call-rate: must be more than 0 (leave it unset for no budget)'],
    [['--cloud-call-rate', 'fast'], {}, '--cloud-call-rate: must be a number of calls per second, such as 10 or 2.5'],
    [
      [],
      { CIRRUS_CLOUD_CALL_RATE: '-1' },
      '--cloud-call-rate (from CIRRUS_CLOUD_CALL_RATE): must be a number of calls per second, such as 10 or 2.5',
    ],
    [['--cloud-call-burst', '0'], {}, '--cloud-call-burst: Too small: expected number to be >=1'],
    [['--cloud-call-burst', '1.5'], {}, '--cloud-call-burst: must be a whole number'],
  ] as const) {
    it(`refuses ${args.join(' ') || JSON.stringify(env)}, naming the flag`, () => {
      assert.throws(() => parseConfig(command, args, env), { name: 'ConfigError', message });
    });
  }
});
