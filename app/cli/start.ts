// `cirrus start`: the whole CCM in one process — every selected function, and the relay handing
// them its events in process — against the configured cluster, or, when none is configured, against
// the local control plane that `cirrus cluster` runs. With no provider given it uses `static` and
// the example inventory, so a newcomer can watch a Node get initialized and a Service an address;
// that demo runs only against a control plane it starts itself (start-cluster.ts).

import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import type { DestinationStream, Logger } from 'pino';
import { Registry } from 'prom-client';
import { selectControllers, type FunctionEntry } from '../../shared/catalogue.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { ConfigError, type CommandLine, type Config } from '../config.ts';
import { initProviders, providerPlan, providersFor, type ProviderPlan } from '../providers.ts';
import type { FunctionDefinition } from '../../shared/host/function.ts';
import type { LocalFunctions } from '../../shared/host/local.ts';
import type { Serving } from '../../shared/host/serve.ts';
import type { Readiness } from '../../shared/host/probes.ts';
import { createLogger, logDestination } from '../log.ts';
import type { Io } from './io.ts';
import {
  callBudget,
  leaseSettings,
  periodsOf,
  relayCursor,
  waitingFor,
  type CallBudgetOption,
  type LeaseOption,
} from './relay.ts';
import { catalogue, loadRelay } from '../root.ts';
import { checkPortFree, portProblem } from './port.ts';
import { announceStart } from './running.ts';
import { readSecret } from './secret.ts';
import { importProviderModule, type ServeCommandOptions } from './serve.ts';
import { connectCluster, exampleInventory, planCluster, planSummary } from './start-cluster.ts';
import { LeanCore } from '../../shared/kube/core.ts';
import {
  checkAccess,
  grantedBy,
  checkProvider,
  checkReachable,
  functionAccess,
  relayAccess,
  usesLoadBalancers,
} from './preflight.ts';

/** The options `cirrus start` takes. */
export type StartOptions =
  | Exclude<ServeCommandOptions, 'serveProviders'>
  | 'controllers'
  | 'nodeMonitorPeriod'
  | 'routeReconciliationPeriod'
  | 'nodeStatusUpdateFrequency'
  | CallBudgetOption
  | 'leaderElect'
  | LeaseOption
  | 'relayCursor'
  | 'dataDir'
  | 'useExistingCluster'
  | 'logFormat';

// What has to be stopped on the way out. Started in dependency order (the control plane, the
// functions, the relay) and stopped in reverse: the relay first, while the API server still
// answers, so that it releases its Lease (a standby takes over at once) and stops delivering;
// then the functions; the control plane last. The control plane's processes are in a process
// group of their own, so Ctrl-C in a terminal reaches only this process, which stops them here.
interface Stopper {
  readonly what: string;
  stop(): Promise<void>;
}

/** Runs everything until `io.signal` aborts; exit status 0 after a clean stop. */
export async function runStart(line: CommandLine<StartOptions>, io: Io): Promise<number> {
  const { config } = line;
  const selected = controllersOf(config);
  callBudget(config); // a usage error (a burst without a rate) before anything starts
  const destination = await logDestination(config.logFormat);
  const log = createLogger({ name: 'cirrus', level: config.logLevel, destination });
  const provider = config.cloudProvider ?? 'static';
  const cloudConfig = config.cloudConfig ?? (provider === 'static' ? exampleInventory : undefined);
  const providerPlanOf = providerPlan({ ...config, cloudConfig }, 'static');
  const plan = planCluster(config, cloudConfig, io);
  io.stderr.write(
    `cirrus start: ${selected.map((e) => e.name).join(', ')} and the relay feeding them, in this process; ` +
      `provider ${provider}${cloudConfig === undefined ? '' : ` (${cloudConfig})`}; cluster: ${planSummary(plan)}\n`,
  );
  // A busy --port is found before the control plane starts, not after.
  await checkPortFree(config.bindAddress, config.port);
  const stoppers: Stopper[] = [];
  try {
    const cluster = await connectCluster(plan, config, io, stoppers);
    if (io.signal.aborted) return 0;
    const { kubeConfig } = cluster;
    await checkReachable(kubeConfig, cluster.source);
    if (config.providerModule !== undefined) await importProviderModule(config.providerModule);
    // One registry for the process's /metrics: the provider's series, the functions' and the relay's.
    const registry = new Registry();
    const providers = await initProviders(providerPlanOf, { signal: io.signal, log, kubeConfig, metrics: registry });
    const { definitions, skipped } = await buildFunctions(selected, {
      kubeConfig,
      plan: providerPlanOf,
      providers,
      config,
      log,
    });
    await preflight({
      kubeConfig,
      source: cluster.source,
      providers,
      selected,
      definitions,
      config,
      log,
      signal: io.signal,
    });
    await serveAll(definitions, { kubeConfig, config, io, log, destination, registry }, stoppers, {
      cluster: cluster.description,
      provider: `${provider}${cloudConfig === undefined ? '' : `, cloud-config ${cloudConfig}`}`,
      skipped,
    });
    await new Promise<void>((resolve) => {
      if (io.signal.aborted) resolve();
      io.signal.addEventListener(
        'abort',
        () => {
          resolve();
        },
        { once: true },
      );
    });
    return 0;
  } catch (error) {
    return interrupted(error, io);
  } finally {
    await stopAll(stoppers, io);
  }
}

// Ctrl-C while the local control plane started: acknowledged then, and nothing of it is left; exit 0.
function interrupted(error: unknown, io: Io): number {
  if (io.signal.aborted && (error as Error).name === 'ControlPlaneInterrupted') return 0;
  throw error;
}

async function stopAll(stoppers: Stopper[], io: Io): Promise<void> {
  const started = Date.now();
  const steps: string[] = [];
  for (const stopper of stoppers.reverse()) {
    const step = Date.now();
    await stopper.stop();
    steps.push(`${stopper.what} ${Date.now() - step} ms`);
  }
  if (stoppers.length > 0) io.stderr.write(`cirrus stopped in ${Date.now() - started} ms (${steps.join(', ')})\n`);
}

// Before anything runs: the rights the functions and the relay use, and what the provider needs.
async function preflight(context: {
  kubeConfig: KubeConfig;
  source: string;
  providers: ReadonlyMap<string, CloudProvider>;
  selected: readonly FunctionEntry[];
  definitions: readonly FunctionDefinition[];
  config: Config<StartOptions>;
  log: Logger;
  signal: AbortSignal;
}): Promise<void> {
  const { kubeConfig, config } = context;
  const running = context.selected.filter((e) => context.definitions.some((d) => d.name === e.name));
  await checkAccess(
    kubeConfig,
    context.source,
    [
      ...functionAccess(running),
      relayAccess(
        config.leaderElect ? leaseSettings(config) : false,
        running.flatMap((e) => e.watches),
      ),
    ],
    grantedBy.start,
  );
  for (const cloud of context.providers.values())
    await checkProvider(cloud, {
      kubeConfig,
      loadBalancers: usesLoadBalancers(running),
      mayCreate: true,
      log: context.log,
      signal: context.signal,
    });
}

function controllersOf(config: Config<StartOptions>): FunctionEntry[] {
  try {
    return selectControllers(catalogue, config.controllers);
  } catch (error) {
    throw new ConfigError(`--controllers: ${(error as Error).message}`);
  }
}

interface Context {
  readonly kubeConfig: KubeConfig;
  readonly plan: ProviderPlan;
  readonly providers: ReadonlyMap<string, CloudProvider>;
  readonly config: Config<StartOptions>;
  readonly log: Logger;
}

// The selected functions the provider and configuration allow; the others are skipped with a
// warning, as the Go CCM skips a controller whose cloud capability is missing.
async function buildFunctions(
  selected: readonly FunctionEntry[],
  context: Context,
): Promise<{ definitions: FunctionDefinition[]; skipped: string[] }> {
  const core = new LeanCore(context.kubeConfig);
  const { config } = context;
  const definitions: FunctionDefinition[] = [];
  const skipped: string[] = [];
  for (const entry of selected) {
    const chosen = providersFor(entry, context.plan, context.providers, config);
    if (chosen.skip !== undefined) {
      context.log.warn({ function: entry.name }, `${entry.name} not started: ${chosen.skip}`);
      skipped.push(`${entry.name} (${chosen.skip})`);
      continue;
    }
    definitions.push(await entry.load({ core, cloud: chosen.cloud, config, fleet: chosen.fleet }));
  }
  if (definitions.length === 0) throw new Error('no function can run: see the warnings above');
  return { definitions, skipped };
}

/** What the summary printed once everything runs says besides the functions. */
interface Summary {
  readonly cluster: string;
  readonly provider: string;
  readonly skipped: readonly string[];
}

interface ServeContext {
  kubeConfig: KubeConfig;
  config: Config<StartOptions>;
  io: Io;
  log: Logger;
  destination: DestinationStream | undefined;
  registry: Registry;
}

// The relay hands its deliveries to the functions in this process (ADR 0021: no HTTP, no JSON,
// no signature between them). The functions also have a listener of their own on the loopback
// address, for manual reconciles (`cirrus reconcile`), signed with a secret of this process (or
// --signing-secret-file's): nothing beyond this host can reach the functions, and nothing without
// the secret holds a place among their requests in flight, so the relay's deliveries never wait
// behind a stranger's. The configured address and port (--bind-address, --port: in deploy/standalone,
// 10258 on the host's network) serve only /healthz, /readyz and /metrics, as the Go CCM's port does.
async function serveAll(
  definitions: FunctionDefinition[],
  context: ServeContext,
  stoppers: Stopper[],
  summary: Summary,
): Promise<void> {
  const { kubeConfig, config, io, log, destination, registry } = context;
  const secret = (await readSecret(config.signingSecretFile)) ?? randomBytes(32).toString('hex');
  // /readyz: not ready until the relay runs, then as the relay's status says (a leader with every
  // watch open, or a standby that reads the Lease): not ready while the API server is gone.
  const readiness: { current: () => Readiness } = {
    current: () => ({ ready: false, body: { status: 'starting' } }),
  };
  const { server, functions, handlers } = await listen(
    definitions,
    { config, log, registry, secret, readiness: () => readiness.current() },
    stoppers,
  );
  const local = `http://127.0.0.1:${functions.port}`;
  // For `cirrus reconcile`: the functions' URL and the secret's file, recorded until start stops.
  const names = definitions.map((d) => d.name);
  const reconcile = await announceStart({
    url: local,
    functions: names,
    secret,
    secretFile: config.signingSecretFile,
    env: io.env,
    cluster: summary.cluster,
    provider: summary.provider,
  });
  stoppers.push(reconcile);
  const relayModule = await loadRelay();
  const routing = relayModule.buildRoutingTable(catalogue, {
    to: definitions.map((d) => `${d.name}=${local}/${d.name}`),
    periods: periodsOf(config),
  });
  const logger = createLogger({ name: 'relay', level: config.logLevel, destination });
  const lease = leaseSettings(config);
  const relay = relayModule.startRelay({
    kubeConfig,
    routing,
    logger,
    secret,
    // Every destination is a function of this process: handed over, not sent (the URLs stay for the logs).
    transport: relayModule.inProcessTransport(handlers),
    leaderElection: config.leaderElect ? lease : false,
    cursor: relayCursor(config),
    cloudCallBudget: callBudget(config),
    // The process's metrics are collected once, by the functions' registry.
    processMetrics: false,
  });
  // One /metrics for the process: the relay's series (queue depth, retries, delivery latency) too.
  for (const { name } of relay.registry.getMetricsAsArray()) {
    const metric = relay.registry.getSingleMetric(name);
    if (metric !== undefined) registry.registerMetric(metric);
  }
  readiness.current = () => relayModule.relayReadiness(relay.status());
  const waiting = setInterval(() => {
    const status = relay.status();
    if (!status.ready && status.role !== 'stopped')
      log.warn({ status: status.role }, `not ready: ${waitingFor(status)}`);
  }, 30_000);
  stoppers.push({
    what: 'relay',
    stop: () => {
      clearInterval(waiting);
      return relay.stop();
    },
  });
  // address: probes and metrics; functions: the functions' own listener, on loopback only.
  log.info({ address: server.address, functions: local, names: definitions.map((d) => d.name) }, 'cirrus serving');
  // Ctrl-C while waiting (for the Lease, say) must still stop.
  const aborted = new Promise<void>((resolve) => {
    io.signal.addEventListener(
      'abort',
      () => {
        resolve();
      },
      { once: true },
    );
  });
  await Promise.race([relay.ready, aborted]);
  if (io.signal.aborted) return;
  const election = config.leaderElect ? `leading on Lease ${lease.namespace}/${lease.name}` : 'no leader election';
  io.stderr.write(
    [
      `  cluster    ${summary.cluster}`,
      `  provider   ${summary.provider}`,
      `  functions  ${definitions.map((d) => d.name).join(', ')} at ${local}/<function> (loopback only)`,
      `  probes     ${server.address}/healthz, /readyz and /metrics`,
      ...(summary.skipped.length === 0 ? [] : [`  skipped    ${summary.skipped.join('; ')}`]),
      `  relay      in this process, ${election}, watching Nodes and Services, handing events to the functions in process`,
      `  reconcile  ${reconcile.hint}`,
      `cirrus running: ${definitions.map((d) => d.name).join(', ')} at ${local}/<function>, fed by the relay; Ctrl-C stops`,
      '',
    ].join('\n'),
  );
}

// Two listeners: the functions on 127.0.0.1 (a port of the system's choosing), the probes and
// /metrics at --bind-address:--port; and the functions' handlers for the relay. Stopped together,
// once the reconciles handed over have ended (the relay, stopped first, aborted them), within the
// listeners' grace period.
async function listen(
  definitions: FunctionDefinition[],
  context: {
    config: Config<StartOptions>;
    log: Logger;
    registry: Registry;
    secret: string;
    readiness: () => Readiness;
  },
  stoppers: Stopper[],
): Promise<{ server: Serving; functions: Serving; handlers: LocalFunctions['handlers'] }> {
  const { config, log, registry } = context;
  const { buildMultiHost, buildProbeApp, defaultGraceMs, serve } = await import('../../shared/host/index.ts');
  const { app, local } = await buildMultiHost(definitions, {
    logger: log,
    auth: { secret: context.secret },
    pressure: { maxConcurrentRequests: config.maxConcurrentRequests },
    registry,
    probes: false,
  });
  const probes = await buildProbeApp({ logger: log, registry, readiness: context.readiness });
  const controller = new AbortController();
  const functions = await serve(app, { host: '127.0.0.1', port: 0, signal: controller.signal });
  const server = await serve(probes, { host: config.bindAddress, port: config.port, signal: controller.signal }).catch(
    async (error: unknown) => {
      controller.abort();
      await functions.closed;
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EADDRINUSE' && code !== 'EACCES') throw error;
      throw new Error(portProblem(config.bindAddress, config.port, error as NodeJS.ErrnoException), { cause: error });
    },
  );
  stoppers.push({
    what: 'functions',
    stop: async () => {
      controller.abort();
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, defaultGraceMs)));
      await Promise.all([functions.closed, server.closed, Promise.race([local.settled(), grace])]);
      clearTimeout(timer);
    },
  });
  return { server, functions, handlers: local.handlers };
}
