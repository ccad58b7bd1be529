// A real etcd and kube-apiserver on loopback, for cirrus's integration tests and `cirrus cluster`;
// on request also kube-scheduler and kube-controller-manager (with the controllers asked for), for
// tests about where Pods are scheduled.
//
// Both listen on free ports of 127.0.0.1. Authorization is RBAC; authentication is by client
// certificate from the control plane's own CA, so an admin (group system:masters) and any other
// user can be minted on demand, and ServiceAccount tokens work through the TokenRequest API.
// What runs is described by `cluster.json` in the run folder, which other processes (test files)
// read with attachControlPlane().

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlaneAssets } from './assets.ts';
import { asBase64, createCa, createClientCert, createServingCert, type Identity, type KeyPair } from './pki.ts';
import { freePort, startProcess, type ManagedProcess } from './processes.ts';

/** What a running control plane offers to clients; serialized as `cluster.json`. */
export interface ControlPlaneInfo {
  /** The API server's URL, https://127.0.0.1:<port>. */
  readonly server: string;
  /** kube-apiserver's `/version` gitVersion, e.g. v1.36.3. */
  readonly kubernetesVersion: string;
  readonly etcdVersion: string;
  /** The run folder: certificates, kubeconfigs, logs, etcd data. */
  readonly dir: string;
  readonly ca: KeyPair;
  /** A kubeconfig for `cirrus-admin` in group `system:masters`. */
  readonly adminKubeconfig: string;
  readonly logs: {
    readonly etcd: string;
    readonly apiserver: string;
    readonly scheduler?: string;
    readonly controllerManager?: string;
  };
  /** How long start() took, from spawning etcd to the `default` namespace existing. */
  readonly startMs: number;
}

/** Options for ControlPlane.start(). */
export interface StartOptions {
  readonly assets: ControlPlaneAssets;
  /** Run folder; a fresh temporary one by default (removed by stop()). */
  readonly dir?: string;
  /** Name of the cluster and context in written kubeconfigs. */
  readonly clusterName?: string;
  /** Milliseconds to wait for readiness (default 60 s, or KUBEBUILDER_CONTROLPLANE_START_TIMEOUT). */
  readonly timeoutMs?: number;
  /** Components to start beside the API server (their binaries: `assets.components`). */
  readonly components?: ComponentOptions;
}

/**
 * kube-scheduler and kube-controller-manager, each under its own identity (system:kube-scheduler,
 * system:kube-controller-manager, with the roles Kubernetes bootstraps for them), on loopback,
 * without leader election. start() resolves once both answer their health checks.
 */
export interface ComponentOptions {
  readonly scheduler?: boolean;
  /**
   * Start kube-controller-manager with these controllers (its --controllers, e.g.
   * `deployment-controller`); none when absent. Without kubelets, its node lifecycle controller
   * would mark every Node unreachable and taint it after the grace period: name only what a test needs.
   */
  readonly controllers?: readonly string[];
}

const runDirPrefix = 'cirrus-control-plane-';

/** A running etcd + kube-apiserver pair. */
export class ControlPlane {
  readonly info: ControlPlaneInfo;
  readonly #processes: ManagedProcess[];
  readonly #ownsDir: boolean;
  readonly #apiserver: ApiserverRestart;
  // Processes stopped on purpose by restartApiserver(): their exit is no failure.
  readonly #replaced = new Set<ManagedProcess>();
  // Restarts run one after the other: two at once would start two API servers on one port.
  #restarts: Promise<void> = Promise.resolve();
  #stopping = false;

  private constructor(
    info: ControlPlaneInfo,
    processes: ManagedProcess[],
    ownsDir: boolean,
    apiserver: ApiserverRestart,
  ) {
    this.info = info;
    this.#processes = processes;
    this.#ownsDir = ownsDir;
    this.#apiserver = apiserver;
  }

  /**
   * Starts etcd, then kube-apiserver, and resolves once the API server serves the `default` namespace.
   * A port found free can be taken before the process binds it (another process's outgoing
   * connection gets it from the same ephemeral range): a start that fails with "address already in
   * use" is made again, with new ports, up to three times.
   */
  static async start(options: StartOptions): Promise<ControlPlane> {
    for (let attempt = 1; ; attempt += 1) {
      const dir = options.dir ?? (await freshRunDir());
      try {
        return await ControlPlane.#startIn(dir, options);
      } catch (error) {
        // The last failure keeps its folder: the error names its logs.
        if (attempt >= 3 || !(error as Error).message.includes('address already in use')) throw error;
        if (options.dir === undefined) await rm(dir, { recursive: true, force: true });
      }
    }
  }

  static async #startIn(dir: string, options: StartOptions): Promise<ControlPlane> {
    const started = Date.now();
    const ownsDir = options.dir === undefined;
    await mkdir(join(dir, 'logs'), { recursive: true });
    const timeoutMs = options.timeoutMs ?? startTimeoutFromEnv() ?? 60_000;
    const pki = join(dir, 'pki');
    await mkdir(pki, { recursive: true });
    const ca = await createCa(pki);
    const [serving, admin] = await Promise.all([
      createServingCert(ca, pki),
      createClientCert(ca, pki, 'admin', { user: 'cirrus-admin', groups: ['system:masters'] }),
      writeServiceAccountKeys(pki),
    ]);
    const processes: ManagedProcess[] = [];
    try {
      const etcd = await startEtcd(options.assets.etcd, dir, processes);
      const setup: ApiserverSetup = {
        binary: options.assets.kubeApiserver,
        dir,
        etcdUrl: etcd.url,
        certs: { ca, serving },
        port: await freePort(),
      };
      const apiserver = await startApiserver(setup, processes);
      const deadline = started + timeoutMs;
      const etcdVersion = await waitForEtcd(etcd.url, processes, deadline);
      const client = { ca: ca.cert, cert: admin.cert, key: admin.key };
      await waitForApiserver(apiserver, client, processes, deadline);
      const version = JSON.parse((await getHttps(apiserver, '/version', client)).body) as { gitVersion: string };
      const components =
        options.components === undefined
          ? {}
          : await startComponents(
              options.components,
              { assets: options.assets, dir, server: apiserver, ca },
              processes,
              deadline,
            );
      const adminKubeconfig = join(dir, 'admin.kubeconfig');
      const info: ControlPlaneInfo = {
        server: apiserver,
        kubernetesVersion: version.gitVersion,
        etcdVersion,
        dir,
        ca,
        adminKubeconfig,
        logs: { etcd: processes[0]?.logFile ?? '', apiserver: processes[1]?.logFile ?? '', ...components },
        startMs: Date.now() - started,
      };
      await writeKubeconfig(info, admin, adminKubeconfig, options.clusterName);
      await writeFile(join(dir, 'cluster.json'), JSON.stringify(info, null, 2));
      return new ControlPlane(info, processes, ownsDir, { setup, client, timeoutMs });
    } catch (error) {
      await Promise.all(processes.map((p) => p.stop(2_000)));
      throw new Error(`${(error as Error).message}\n${await logTails(processes)}`, { cause: error });
    }
  }

  /**
   * Settles when kube-apiserver or etcd exits other than through stop(), with a message naming
   * the process and its log; never settles for a control plane that stop() ends.
   */
  get failed(): Promise<string> {
    return Promise.race(
      this.#processes.map(async (p) => {
        const code = await p.exited;
        if (this.#stopping || this.#replaced.has(p)) return new Promise<string>(() => {});
        return `${p.name} exited (${code === null ? 'killed by a signal' : `code ${code}`}); its log: ${p.logFile}`;
      }),
    );
  }

  /** Path of the `cluster.json` describing this control plane. */
  get infoFile(): string {
    return join(this.info.dir, 'cluster.json');
  }

  /**
   * Stops kube-apiserver (SIGTERM, as a rolling restart would) and starts it again on the same
   * port with the same flags; resolves once it is ready again. etcd keeps running, so the data
   * survives, but the new API server's watch cache starts from etcd's current revision: a watch
   * resumed from an older resourceVersion gets 410 Gone. Clients see refused connections while it
   * is down. kube-apiserver drains open watches for about 10 s before it exits; `graceMs` (default
   * 10 s) is how long it may take before it is killed (SIGKILL), as in a crash.
   */
  restartApiserver(options: { graceMs?: number } = {}): Promise<void> {
    const restart = this.#restarts.then(() => this.#restartApiserver(options));
    this.#restarts = restart.catch(() => undefined);
    return restart;
  }

  /** True when kube-apiserver has exited other than through stop() or restartApiserver(): it crashed. */
  get apiserverCrashed(): boolean {
    const apiserver = this.#processes.find((p) => p.name === 'kube-apiserver');
    return !this.#stopping && apiserver !== undefined && !this.#replaced.has(apiserver) && apiserver.hasExited();
  }

  async #restartApiserver(options: { graceMs?: number }): Promise<void> {
    const index = this.#processes.findIndex((p) => p.name === 'kube-apiserver');
    const old = this.#processes[index];
    if (old === undefined) throw new Error('no kube-apiserver to restart');
    this.#replaced.add(old);
    await old.stop(options.graceMs);
    const started: ManagedProcess[] = [];
    await startApiserver(this.#apiserver.setup, started);
    this.#processes.splice(index, 1, ...started);
    await waitForApiserver(
      this.info.server,
      this.#apiserver.client,
      this.#processes,
      Date.now() + this.#apiserver.timeoutMs,
    );
  }

  /** Process ids of kube-apiserver and etcd (for tests and diagnostics). */
  get pids(): number[] {
    return this.#processes.map((p) => p.pid);
  }

  /**
   * Stops kube-controller-manager and kube-scheduler (when started), kube-apiserver, then etcd. A temporary run folder is removed; its logs are first copied
   * to `keepLogsIn` when given.
   */
  async stop(options: { keepLogsIn?: string } = {}): Promise<void> {
    this.#stopping = true;
    for (const process of [...this.#processes].reverse()) await process.stop();
    if (options.keepLogsIn !== undefined) {
      await rm(options.keepLogsIn, { recursive: true, force: true });
      await cp(join(this.info.dir, 'logs'), options.keepLogsIn, { recursive: true });
    }
    if (this.#ownsDir) await rm(this.info.dir, { recursive: true, force: true });
  }
}

/** Reads the `cluster.json` of a control plane started by another process. */
export async function attachControlPlane(infoFile: string): Promise<ControlPlaneInfo> {
  return JSON.parse(await readFile(infoFile, 'utf8')) as ControlPlaneInfo;
}

/**
 * Writes a kubeconfig in which `identity` authenticates by a client certificate from the control
 * plane's CA, and returns its path. The identity has no rights beyond what RBAC grants it.
 */
export async function kubeconfigFor(info: ControlPlaneInfo, identity: Identity): Promise<string> {
  const fileName = `user-${identity.user.replaceAll(':', '_')}-${randomBytes(4).toString('hex')}`;
  const pair = await createClientCert(info.ca, join(info.dir, 'pki'), fileName, identity);
  const path = join(info.dir, `${fileName}.kubeconfig`);
  await writeKubeconfig(info, pair, path);
  return path;
}

/** Writes a kubeconfig that authenticates with a bearer token (a ServiceAccount token, say). */
export async function kubeconfigWithToken(info: ControlPlaneInfo, name: string, token: string): Promise<string> {
  const path = join(info.dir, `token-${name.replaceAll(':', '_')}-${randomBytes(4).toString('hex')}.kubeconfig`);
  const ca = (await readFile(info.ca.cert)).toString('base64');
  await writeFile(path, JSON.stringify(kubeconfigDocument(info.server, ca, name, { token })), { mode: 0o600 });
  return path;
}

async function writeKubeconfig(
  info: Pick<ControlPlaneInfo, 'server' | 'ca'>,
  pair: KeyPair,
  path: string,
  cluster = 'cirrus',
): Promise<void> {
  const ca = (await readFile(info.ca.cert)).toString('base64');
  const { cert, key } = await asBase64(pair);
  const user = { 'client-certificate-data': cert, 'client-key-data': key };
  await writeFile(path, JSON.stringify(kubeconfigDocument(info.server, ca, cluster, user)), { mode: 0o600 });
}

// A kubeconfig is YAML, and JSON is YAML: kubectl and @kubernetes/client-node both read this.
function kubeconfigDocument(server: string, caData: string, name: string, user: Record<string, string>): object {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': caData } }],
    users: [{ name, user }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  };
}

async function freshRunDir(): Promise<string> {
  await removeAbandonedRunDirs();
  return mkdtemp(join(tmpdir(), `${runDirPrefix}${process.pid}-`));
}

// A run folder whose owner died without stop() (SIGKILL) is left behind; the next start removes it.
async function removeAbandonedRunDirs(): Promise<void> {
  const entries = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const entry of entries) {
    const pid = Number(entry.slice(runDirPrefix.length).split('-')[0]);
    if (!entry.startsWith(runDirPrefix) || !Number.isInteger(pid) || isAlive(pid)) continue;
    await rm(join(tmpdir(), entry), { recursive: true, force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function startTimeoutFromEnv(): number | undefined {
  const value = process.env['KUBEBUILDER_CONTROLPLANE_START_TIMEOUT'];
  if (!value) return undefined;
  const match = /^(\d+)(ms|s|m)$/.exec(value);
  if (!match) throw new Error(`KUBEBUILDER_CONTROLPLANE_START_TIMEOUT: '${value}' is not a duration like 90s`);
  return Number(match[1]) * { ms: 1, s: 1_000, m: 60_000 }[match[2] as 'ms' | 's' | 'm'];
}

async function writeServiceAccountKeys(dir: string): Promise<void> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  await writeFile(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  await writeFile(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
}

async function startEtcd(binary: string, dir: string, processes: ManagedProcess[]): Promise<{ url: string }> {
  const [client, peer] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${client}`;
  const peerUrl = `http://127.0.0.1:${peer}`;
  processes.push(
    await startProcess(
      'etcd',
      binary,
      [
        '--name=cirrus',
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=${url}`,
        `--advertise-client-urls=${url}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=cirrus=${peerUrl}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ],
      join(dir, 'logs', 'etcd.log'),
    ),
  );
  return { url };
}

interface ApiserverSetup {
  readonly binary: string;
  readonly dir: string;
  readonly etcdUrl: string;
  readonly certs: { ca: KeyPair; serving: KeyPair };
  /** Chosen once, so that a restart listens where clients already point. */
  readonly port: number;
}

// What restartApiserver() needs to start the same API server again and wait for it.
interface ApiserverRestart {
  readonly setup: ApiserverSetup;
  readonly client: { ca: string; cert: string; key: string };
  readonly timeoutMs: number;
}

async function waitForApiserver(
  server: string,
  client: ApiserverRestart['client'],
  processes: ManagedProcess[],
  deadline: number,
): Promise<void> {
  await waitUntil(
    deadline,
    processes,
    'kube-apiserver /readyz',
    async () => (await getHttps(server, '/readyz', client)).status === 200,
  );
  await waitUntil(
    deadline,
    processes,
    'the default namespace',
    async () => (await getHttps(server, '/api/v1/namespaces/default', client)).status === 200,
  );
}

async function startApiserver(
  { binary, dir, etcdUrl, certs, port }: ApiserverSetup,
  processes: ManagedProcess[],
): Promise<string> {
  const pki = join(dir, 'pki');
  processes.push(
    await startProcess(
      'kube-apiserver',
      binary,
      [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${port}`,
        `--tls-cert-file=${certs.serving.cert}`,
        `--tls-private-key-file=${certs.serving.key}`,
        `--client-ca-file=${certs.ca.cert}`,
        '--authorization-mode=RBAC',
        // No kube-controller-manager runs, so nothing would create the default ServiceAccounts.
        '--disable-admission-plugins=ServiceAccount',
        '--endpoint-reconciler-type=none',
        // Room for the benchmarks' thousand LoadBalancer Services.
        '--service-cluster-ip-range=10.0.0.0/16',
        `--service-account-issuer=https://127.0.0.1:${port}`,
        `--service-account-key-file=${join(pki, 'sa.pub')}`,
        `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
        '--allow-privileged=true',
        '--enable-priority-and-fairness=false',
        '--profiling=false',
        `--cert-dir=${join(dir, 'certs')}`,
      ],
      join(dir, 'logs', 'kube-apiserver.log'),
    ),
  );
  return `https://127.0.0.1:${port}`;
}

interface ComponentSetup {
  readonly assets: ControlPlaneAssets;
  readonly dir: string;
  readonly server: string;
  readonly ca: KeyPair;
}

// Starts the components asked for, each with a kubeconfig of its own identity, and waits until
// each answers its health check (the scheduler's /readyz includes its informers' sync).
async function startComponents(
  options: ComponentOptions,
  setup: ComponentSetup,
  processes: ManagedProcess[],
  deadline: number,
): Promise<{ scheduler?: string; controllerManager?: string }> {
  const binaries = setup.assets.components;
  if (binaries === undefined)
    throw new Error(
      'kube-scheduler/kube-controller-manager asked for, but the assets have none (resolveAssets({ components: true }))',
    );
  const logs: { scheduler?: string; controllerManager?: string } = {};
  const started: { name: string; url: string }[] = [];
  // Starts one component; its health endpoint is waited for below, with the others'.
  const start = async (
    name: string,
    binary: string,
    { args, url }: { args: string[]; url: string },
    health: string,
  ): Promise<string> => {
    const process = await startProcess(name, binary, args, logFile(setup, name));
    processes.push(process);
    started.push({ name: `${name} ${health}`, url: `${url}${health}` });
    return process.logFile;
  };
  if (options.scheduler === true) {
    const component = await componentArgs(setup, 'kube-scheduler', 'system:kube-scheduler');
    logs.scheduler = await start('kube-scheduler', binaries.kubeScheduler, component, '/readyz');
  }
  if (options.controllers !== undefined) {
    if (options.controllers.length === 0) throw new Error('kube-controller-manager: name at least one controller');
    const component = await componentArgs(setup, 'kube-controller-manager', 'system:kube-controller-manager');
    component.args.push(
      `--controllers=${options.controllers.join(',')}`,
      // Each controller as its own ServiceAccount (system:controller:<name>), as kubeadm runs it:
      // the roles Kubernetes bootstraps are written for that.
      '--use-service-account-credentials=true',
    );
    logs.controllerManager = await start(
      'kube-controller-manager',
      binaries.kubeControllerManager,
      component,
      '/healthz',
    );
  }
  for (const { name, url } of started)
    await waitUntil(deadline, processes, name, async () => (await getInsecure(url)).status === 200);
  return logs;
}

function logFile(setup: ComponentSetup, name: string): string {
  return join(setup.dir, 'logs', `${name}.log`);
}

// The flags both components share: a kubeconfig of their own identity, loopback serving on a
// free port (a self-signed certificate in the run folder), no leader election (one instance).
async function componentArgs(
  setup: ComponentSetup,
  name: string,
  user: string,
): Promise<{ args: string[]; url: string }> {
  const pair = await createClientCert(setup.ca, join(setup.dir, 'pki'), name, { user });
  const kubeconfig = join(setup.dir, `${name}.kubeconfig`);
  await writeKubeconfig({ server: setup.server, ca: setup.ca }, pair, kubeconfig);
  const port = await freePort();
  return {
    args: [
      `--kubeconfig=${kubeconfig}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${join(setup.dir, 'certs', name)}`,
      '--leader-elect=false',
    ],
    url: `https://127.0.0.1:${port}`,
  };
}

async function waitForEtcd(url: string, processes: ManagedProcess[], deadline: number): Promise<string> {
  await waitUntil(deadline, processes, 'etcd /readyz', async () => (await getHttp(`${url}/readyz`)).status === 200);
  const version = JSON.parse((await getHttp(`${url}/version`)).body) as { etcdserver: string };
  return `v${version.etcdserver}`;
}

// Polls `check` every 100 ms until it holds; fails at once when one of the processes has exited.
async function waitUntil(
  deadline: number,
  processes: ManagedProcess[],
  what: string,
  check: () => Promise<boolean>,
): Promise<void> {
  for (;;) {
    const dead = processes.find((p) => p.hasExited());
    if (dead) throw new Error(`${dead.name} exited while waiting for ${what}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Response {
  status: number;
  body: string;
}

// A component's health endpoint: served with a self-signed certificate, open without credentials.
function getInsecure(url: string): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { rejectUnauthorized: false, timeout: 2_000 }, (res) => {
      collect(res, resolve, reject);
    });
    req
      .on('error', reject)
      .on('timeout', () => req.destroy(new Error('timeout')))
      .end();
  });
}

function getHttp(url: string): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { timeout: 2_000 }, (res) => {
      collect(res, resolve, reject);
    });
    req
      .on('error', reject)
      .on('timeout', () => req.destroy(new Error('timeout')))
      .end();
  });
}

async function getHttps(
  server: string,
  path: string,
  tls: { ca: string; cert: string; key: string },
): Promise<Response> {
  const [ca, cert, key] = await Promise.all([readFile(tls.ca), readFile(tls.cert), readFile(tls.key)]);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${server}${path}`, { ca, cert, key, timeout: 2_000 }, (res) => {
      collect(res, resolve, reject);
    });
    req
      .on('error', reject)
      .on('timeout', () => req.destroy(new Error('timeout')))
      .end();
  });
}

function collect(
  res: import('node:http').IncomingMessage,
  resolve: (r: Response) => void,
  reject: (e: Error) => void,
): void {
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (chunk: string) => (body += chunk));
  res.on('end', () => {
    resolve({ status: res.statusCode ?? 0, body });
  });
  res.on('error', reject);
}

async function logTails(processes: ManagedProcess[]): Promise<string> {
  const parts = await Promise.all(
    processes.map(async (p) => {
      const text = await readFile(p.logFile, 'utf8').catch(() => '');
      return `--- last lines of ${p.logFile} ---\n${text.split('\n').slice(-25).join('\n')}`;
    }),
  );
  return parts.join('\n');
}
