// The control plane's processes: etcd, kube-apiserver and, on request, kube-scheduler and
// kube-controller-manager, each started with its flags and waited for until it answers.

import { generateKeyPairSync } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ControlPlaneAssets } from './assets.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import { createClientCert, type KeyPair } from './pki.ts';
import { getHttp, getHttps, getInsecure, waitUntil } from './probe.ts';
import { freePort, startProcess, type ManagedProcess } from './processes.ts';

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

/** The key pair the API server signs and verifies ServiceAccount tokens with, written to `dir`. */
export async function writeServiceAccountKeys(dir: string): Promise<void> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  await writeFile(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  await writeFile(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
}

/** Starts etcd on two free loopback ports (client, peer), its data in the run folder; answers its client URL. */
export async function startEtcd(binary: string, dir: string, processes: ManagedProcess[]): Promise<{ url: string }> {
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

/** What kube-apiserver is started with. */
export interface ApiserverSetup {
  readonly binary: string;
  readonly dir: string;
  readonly etcdUrl: string;
  readonly certs: { ca: KeyPair; serving: KeyPair };
  /** Chosen once, so that a restart listens where clients already point. */
  readonly port: number;
}

// What restartApiserver() needs to start the same API server again and wait for it.
export interface ApiserverRestart {
  readonly setup: ApiserverSetup;
  readonly client: { ca: string; cert: string; key: string };
  readonly timeoutMs: number;
}

/** Waits until kube-apiserver is ready and serves the `default` namespace. */
export async function waitForApiserver(
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

/** Starts kube-apiserver (RBAC, client certificates from the run's CA) and answers its URL. */
export async function startApiserver(
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
export async function startComponents(
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

/** Waits until etcd is ready and answers its version (`v3.6.8`). */
export async function waitForEtcd(url: string, processes: ManagedProcess[], deadline: number): Promise<string> {
  await waitUntil(deadline, processes, 'etcd /readyz', async () => (await getHttp(`${url}/readyz`)).status === 200);
  const version = JSON.parse((await getHttp(`${url}/version`)).body) as { etcdserver: string };
  return `v${version.etcdserver}`;
}
