// The CCMs of the comparison and how each runs: the stock Go cloud-controller-manager at its
// defaults, tuned, and at cirrus's width; `cirrus start` from the TypeScript source (as `npm start`
// runs it) and as shipped (the image's build, shipped.ts); and one function served alone as
// shipped, `cirrus serve node-init` fed over signed HTTP by `cirrus relay` in a second process (the
// Node scenarios only); and the Knative shape, `cirrus relay` feeding one `cirrus serve` per
// function (the scale scenario). Each in processes of its own (so that CPU and memory can be read from
// /proc), with the benchmark cloud answering alike in all, and stopped before the next one starts.

import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultDelivery } from '../../relay/index.ts';
import { defaultMaxConcurrentRequests } from '../../shared/host/index.ts';
import { freePort, startProcess, type ManagedProcess } from '../../tools/control-plane/processes.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { clusterCidr, functionOfController } from '../../test/harness/cirrus.ts';
import { NodeSetReader } from '../../test/harness/node-sets.ts';
import { benchProviderName, type BenchCloudConfig } from './provider.ts';
import type { Shipped } from './shipped.ts';

// The function that initializes Nodes: the one the split contender serves alone.
const nodeInit = functionOfController('cloud-node');

export const contenderNames = [
  'go-defaults',
  'go-tuned',
  'go-width',
  'cirrus-source',
  'cirrus-baseline',
  'cirrus-build',
  'cirrus-split',
  'cirrus-knative',
] as const;
export type ContenderName = (typeof contenderNames)[number];

/** The contender whose ratio to Go at cirrus's width the goals read: what ships. */
export const shippedContender = 'cirrus-build' satisfies ContenderName;

/**
 * How many reconciles `cirrus start` keeps in flight: its relay delivers at most
 * defaultDelivery.concurrency events at once and its host admits at most --max-concurrent-requests;
 * one reconcile per object at a time, with no other limit on node-init and service-lb.
 */
export const cirrusWidth = Math.min(defaultDelivery.concurrency, defaultMaxConcurrentRequests);

export interface Contender {
  readonly name: ContenderName;
  readonly label: string;
  readonly kind: 'go' | 'start' | 'split';
  /** Whether it runs from the build (shipped.ts) rather than the .ts source. */
  readonly built: boolean;
  /** Flags beyond those every run of its kind gets. */
  readonly flags: readonly string[];
  /** Whether it runs the Node scenarios only (it has no load-balancer function). */
  readonly nodesOnly: boolean;
}

const go = (name: ContenderName, label: string, flags: string[]): Contender => ({
  name,
  label,
  kind: 'go',
  built: false,
  flags,
  nodesOnly: false,
});

export const contenders: Record<ContenderName, Contender> = {
  'go-defaults': go('go-defaults', 'Go, defaults', []),
  'go-tuned': go('go-tuned', 'Go, tuned', [
    '--concurrent-node-syncs=10',
    '--concurrent-service-syncs=10',
    '--kube-api-qps=200',
  ]),
  // A negative QPS turns client-go's rate limiter off.
  'go-width': go('go-width', `Go, ${cirrusWidth} workers`, [
    `--concurrent-node-syncs=${cirrusWidth}`,
    `--concurrent-service-syncs=${cirrusWidth}`,
    '--kube-api-qps=-1',
  ]),
  'cirrus-source': {
    name: 'cirrus-source',
    label: 'cirrus start, .ts source',
    kind: 'start',
    built: false,
    flags: [],
    nodesOnly: false,
  },
  'cirrus-build': {
    name: 'cirrus-build',
    label: 'cirrus start, build',
    kind: 'start',
    built: true,
    flags: [],
    nodesOnly: false,
  },
  // `--baseline <commit>`: `cirrus start` as shipped at that commit, the "before" of a change
  // measured in the same run as its "after" (cirrus-build).
  'cirrus-baseline': {
    name: 'cirrus-baseline',
    label: 'cirrus start, build, baseline',
    kind: 'start',
    built: true,
    flags: [],
    nodesOnly: false,
  },
  'cirrus-split': {
    name: 'cirrus-split',
    label: `serve ${nodeInit} + relay, build`,
    kind: 'split',
    built: true,
    flags: [],
    nodesOnly: true,
  },
  // The Knative shape (deploy/knative/): the relay and every function in a process of its own, on
  // loopback, each request signed with one secret.
  'cirrus-knative': {
    name: 'cirrus-knative',
    label: 'relay + serve per function, build',
    kind: 'split',
    built: true,
    flags: [],
    nodesOnly: false,
  },
};

/**
 * What either cloud answers on GET /calls?updatesFrom=N&limit=M&namesFrom=K: each update's node
 * set as a bitset over the cloud's numbered node names (test/harness/node-sets.ts), and the names
 * from the K-th on.
 */
interface CloudPage {
  readonly calls: Record<string, number>;
  readonly maxInFlight: Record<string, number>;
  readonly updates: { service: string; nodes: string; at: number }[];
  readonly updatesTotal: number;
  readonly names: string[];
}

/** What the cloud reports, its node sets turned back into names (by the harness, in its process). */
export interface CloudCalls {
  readonly calls: Record<string, number>;
  readonly maxInFlight: Record<string, number>;
  /** Each updateLoadBalancer: "namespace/name", the node names, and when it returned (Unix ms). */
  readonly updates: { service: string; nodes: string[]; at: number }[];
  /** How many updates there are in all (those before `updatesFrom` included). */
  readonly updatesTotal: number;
}

/**
 * One process of a running CCM: the whole CCM, or (cirrus-split) the function or the relay, or
 * (cirrus-knative) the relay or `serve <function>`.
 */
export interface CcmProcess {
  readonly role: 'ccm' | 'function' | 'relay' | `serve ${string}`;
  readonly pid: number;
}

export interface RunningCcm {
  readonly contender: Contender;
  /** Its processes; the figures of the CCM are their sums. */
  readonly processes: readonly CcmProcess[];
  readonly logFiles: readonly string[];
  /** Throws when a process has exited: called while waiting, so that a crash fails at once. */
  assertAlive(): void;
  /**
   * The cloud's calls, and its updates from the `updatesFrom`-th on (Infinity: none, only their
   * count), at most `limit` of them.
   */
  cloudCalls(updatesFrom?: number, limit?: number): Promise<CloudCalls>;
  /** Makes the cloud's machines of these nodes gone (instanceExists answers false). */
  forget(names: readonly string[]): Promise<void>;
  /** The relay's /metrics: `cirrus start`'s, or the split's relay's; undefined for the Go CCM. */
  readonly metricsUrl: string | undefined;
  /** Each function's /metrics when it is served alone (the splits), by function name. */
  readonly functionMetrics: Readonly<Record<string, string>>;
  stop(): Promise<void>;
}

export interface StartSettings {
  readonly kubeconfig: string;
  readonly goBinary: string;
  /** The build, for the contenders that run it. */
  readonly shipped: Shipped | undefined;
  /** The baseline's build (`--baseline`), for cirrus-baseline. */
  readonly baseline?: Shipped | undefined;
  readonly logDir: string;
  /** Names this process's log and cloud-config files. */
  readonly tag: string;
  readonly latencyMs: number;
  readonly lbLatencyMs: number;
}

const sourceCli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));
const sourceProvider = fileURLToPath(new URL('provider.ts', import.meta.url));

/** Starts the contender against the cluster; each CCM at its default log level, logging to a file. */
export async function startCcm(contender: Contender, settings: StartSettings): Promise<RunningCcm> {
  const statsPort = await freePort();
  const port = await freePort();
  const children: [CcmProcess['role'], ManagedProcess][] = [];
  // The cloud's ports beside statsPort: the Knative shape's functions each run a benchmark cloud of
  // their own (./provider.ts); statsPort is the one whose load-balancer updates are read.
  const urls: Urls = { functions: {}, clouds: [] };
  const stopAll = async (): Promise<void> => {
    // The relay first, so that it delivers nothing to a function that is gone.
    for (const [, child] of [...children].reverse()) await child.stop(10_000);
  };
  try {
    if (contender.kind === 'go') children.push(['ccm', await startGo(contender, settings, statsPort)]);
    else if (contender.kind === 'start')
      children.push(['ccm', await startCirrus(contender, settings, statsPort, port)]);
    else await startSplit(contender, settings, { statsPort, children, urls });
  } catch (error) {
    await stopAll();
    throw error;
  }
  const logFiles = children.map(([, c]) => c.logFile);
  const nodeSets = new NodeSetReader();
  return {
    contender,
    processes: children.map(([role, child]) => ({ role, pid: child.pid })),
    logFiles,
    assertAlive: () => {
      const gone = children.find(([, child]) => child.hasExited());
      if (gone !== undefined)
        throw new Error(`${contender.label}: ${gone[1].name} exited; its log: ${gone[1].logFile}`);
    },
    cloudCalls: async (updatesFrom = 0, limit?: number) => {
      const query = new URLSearchParams({ updatesFrom: String(updatesFrom) });
      if (limit !== undefined) query.set('limit', String(limit));
      query.set('namesFrom', String(nodeSets.names.length));
      const reply = await fetch(`http://127.0.0.1:${statsPort}/calls?${query.toString()}`);
      if (!reply.ok) throw new Error(`the benchmark cloud of ${contender.label} answered ${reply.status}`);
      const page = (await reply.json()) as CloudPage;
      nodeSets.names.push(...page.names);
      const updates = page.updates.map((u) => ({ ...u, nodes: nodeSets.decode(u.nodes) }));
      const { calls, maxInFlight } = await withOtherClouds(page, urls.clouds);
      return { calls, maxInFlight, updates, updatesTotal: page.updatesTotal };
    },
    forget: async (names) => {
      const query = names.map((n) => `name=${encodeURIComponent(n)}`).join('&');
      for (const cloud of [statsPort, ...urls.clouds]) {
        const reply = await fetch(`http://127.0.0.1:${cloud}/forget?${query}`, { method: 'POST' });
        if (!reply.ok) throw new Error(`the benchmark cloud of ${contender.label} answered ${reply.status}`);
      }
    },
    metricsUrl: contender.kind === 'start' ? `http://127.0.0.1:${port}/metrics` : urls.metrics,
    functionMetrics: urls.functions,
    stop: stopAll,
  };
}

interface Urls {
  metrics?: string;
  readonly functions: Record<string, string>;
  readonly clouds: number[];
}

// `page`'s call counts with those of the other clouds added (the most in flight: the largest of any).
async function withOtherClouds(
  page: CloudPage,
  clouds: readonly number[],
): Promise<Pick<CloudPage, 'calls' | 'maxInFlight'>> {
  const calls = { ...page.calls };
  const maxInFlight = { ...page.maxInFlight };
  for (const cloud of clouds) {
    const other = (await (await fetch(`http://127.0.0.1:${cloud}/calls?updatesFrom=Infinity`)).json()) as CloudPage;
    for (const [call, n] of Object.entries(other.calls)) calls[call] = (calls[call] ?? 0) + n;
    for (const [call, n] of Object.entries(other.maxInFlight)) maxInFlight[call] = Math.max(maxInFlight[call] ?? 0, n);
  }
  return { calls, maxInFlight };
}

async function startGo(contender: Contender, settings: StartSettings, statsPort: number): Promise<ManagedProcess> {
  const args = [`--cloud-provider=bench`, `--kubeconfig=${settings.kubeconfig}`, '--leader-elect=false'];
  args.push('--use-service-account-credentials=false', '--secure-port=0', '--webhook-secure-port=0');
  args.push(`--cluster-cidr=${clusterCidr}`, '--configure-cloud-routes=true');
  args.push(`--bench-latency=${settings.latencyMs}ms`, `--bench-lb-latency=${settings.lbLatencyMs}ms`);
  args.push(`--bench-stats-address=127.0.0.1:${statsPort}`);
  const logFile = join(settings.logDir, `${settings.tag}.log`);
  return startProcess('cloud-controller-manager', settings.goBinary, [...args, ...contender.flags], logFile);
}

async function startCirrus(
  contender: Contender,
  settings: StartSettings,
  statsPort: number,
  port: number,
): Promise<ManagedProcess> {
  const args = ['start', ...(await providerArgs(contender, settings, statsPort)), '--use-existing-cluster'];
  args.push('--leader-elect=false');
  args.push('--cluster-cidr', clusterCidr, '--bind-address', '127.0.0.1', '--port', String(port));
  const logFile = join(settings.logDir, `${settings.tag}.log`);
  return runCli(contender, settings, { name: 'cirrus start', args: [...args, ...contender.flags], logFile });
}

// node-init alone (cirrus-split) or every function (cirrus-knative), each as a Knative Service runs
// it (the image's `cirrus serve <function>`), and the relay as its Deployment runs it, delivering to
// them, each request signed with one secret.
async function startSplit(
  contender: Contender,
  settings: StartSettings,
  into: {
    statsPort: number;
    children: [CcmProcess['role'], ManagedProcess][];
    urls: Urls;
  },
): Promise<void> {
  const { children, urls } = into;
  const secretFile = join(settings.logDir, `${settings.tag}.signing-secret`);
  await writeFile(secretFile, randomBytes(32).toString('base64url'), { mode: 0o600 });
  const names = contender.nodesOnly ? [nodeInit] : catalogue.map((entry) => entry.name);
  // service-lb's cloud is the one whose updates are read (or node-init's, served alone).
  const [primary = nodeInit] = names.filter((n) => catalogue.find((e) => e.name === n)?.target.kind === 'Service');
  const started: { name: string; child: ManagedProcess; log: string }[] = [];
  // Each on a port of its own choosing (--port 0), read from its log: a port picked here and bound
  // a cold start later may have been taken by then.
  for (const name of names) {
    const cloud = name === primary || contender.nodesOnly ? into.statsPort : await freePort();
    if (cloud !== into.statsPort) urls.clouds.push(cloud);
    const provider = await providerArgs(contender, settings, cloud, name);
    const serve = ['serve', name, ...provider, '--signing-secret-file', secretFile, '--cluster-cidr', clusterCidr];
    serve.push('--bind-address', '127.0.0.1', '--port', '0', '--log-level', 'info');
    const log = join(settings.logDir, `${settings.tag}.${name}.log`);
    const child = await runCli(contender, settings, { name: `cirrus serve ${name}`, args: serve, logFile: log });
    children.push([contender.nodesOnly ? 'function' : `serve ${name}`, child]);
    started.push({ name, child, log });
  }
  const served = await Promise.all(
    started.map(async (s) => ({ ...s, port: await ready(s.name, () => s.child.hasExited(), s.log) })),
  );
  const relay = ['relay', '--kubeconfig', settings.kubeconfig, '--leader-elect=false'];
  for (const s of served) {
    relay.push('--to', `${s.name}=http://127.0.0.1:${s.port}`);
    urls.functions[s.name] = `http://127.0.0.1:${s.port}/metrics`;
  }
  const relayPort = await freePort();
  relay.push('--signing-secret-file', secretFile, '--bind-address', '127.0.0.1', '--port', String(relayPort));
  const relayLog = join(settings.logDir, `${settings.tag}.relay.log`);
  children.push(['relay', await runCli(contender, settings, { name: 'cirrus relay', args: relay, logFile: relayLog })]);
  urls.metrics = `http://127.0.0.1:${relayPort}/metrics`;
}

async function providerArgs(
  contender: Contender,
  settings: StartSettings,
  statsPort: number,
  fn?: string,
): Promise<string[]> {
  const cloudConfig = join(settings.logDir, `${settings.tag}${fn === undefined ? '' : `.${fn}`}.cloud-config.json`);
  const config: BenchCloudConfig = { latencyMs: settings.latencyMs, lbLatencyMs: settings.lbLatencyMs, statsPort };
  await writeFile(cloudConfig, JSON.stringify(config));
  const module = contender.built ? shippedOf(contender, settings).providerModule : sourceProvider;
  return ['--cloud-provider', benchProviderName, '--provider-module', module, '--cloud-config', cloudConfig].concat(
    '--kubeconfig',
    settings.kubeconfig,
  );
}

// The source's bin/cirrus.js, or the build's cirrus.js with the image's environment (through
// env(1), which execs: the pid stays the one measured).
function runCli(
  contender: Contender,
  settings: StartSettings,
  command: { name: string; args: string[]; logFile: string },
): Promise<ManagedProcess> {
  const { name, args, logFile } = command;
  if (!contender.built) return startProcess(name, process.execPath, [sourceCli, ...args], logFile);
  const shipped = shippedOf(contender, settings);
  const env = Object.entries(shipped.env).map(([key, value]) => `${key}=${value}`);
  return startProcess(name, 'env', [...env, process.execPath, shipped.cli, ...args], logFile);
}

function shippedOf(contender: Contender, settings: StartSettings): Shipped {
  const shipped = contender.name === 'cirrus-baseline' ? settings.baseline : settings.shipped;
  if (shipped === undefined) throw new Error(`${contender.label} runs a build, and none was made`);
  return shipped;
}

// Waits until the function logs where it listens and answers /readyz there (its start-up checks
// passed), so that the relay's first deliveries find it ready; resolves with its port.
async function ready(name: string, exited: () => boolean, logFile: string): Promise<number> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    try {
      const bound = /"msg":"Server listening at http:\/\/127\.0\.0\.1:(\d+)"/.exec(await readFile(logFile, 'utf8'));
      const port = Number(bound?.[1]);
      const reply = await fetch(`http://127.0.0.1:${port}/readyz`);
      await reply.arrayBuffer();
      if (reply.ok) return port;
    } catch {
      // not yet listening
    }
    if (exited()) throw new Error(`cirrus serve ${name} exited; its log: ${logFile}`);
    if (performance.now() > deadline) throw new Error(`cirrus serve ${name} was not ready; its log: ${logFile}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
