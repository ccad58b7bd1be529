// Which cluster `cirrus start` acts on, decided and said before anything acts.
//
// Whatever the provider, start acts on an existing cluster only when told to by
// --use-existing-cluster (CIRRUS_USE_EXISTING_CLUSTER, which the deployments set): the demo's
// example inventory lists two machines, and the fake provider's cloud is empty, so against a real
// cluster node-lifecycle would delete every NotReady Node they do not list and service-lb rewrite
// its load balancers; a real provider's cloud-config can name another cluster's cloud. A cluster
// that merely happens to be configured (an operator's KUBECONFIG) is left alone, and start says so
// and runs on a local control plane; an explicit --kubeconfig without the flag is refused, and so
// is a pod's ServiceAccount (a pod has no local control plane to fall back on).
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { ConfigError, type Config } from '../config.ts';
import { apiStatus } from '../../shared/kube/api.ts';
import { loadKubeConfig } from '../../shared/kube/client.ts';
import type { Io } from './io.ts';
import type { ControlPlane, ControlPlaneAssets } from '../../tools/control-plane/index.ts';

/** The inventory the demo runs with when no --cloud-config is given. */
export const exampleInventory = fileURLToPath(new URL('../../examples/static/inventory.yaml', import.meta.url));

/** The options the choice reads. */
export type ClusterChoiceOptions =
  'kubeconfig' | 'cloudProvider' | 'cloudConfig' | 'useExistingCluster' | 'clusterName' | 'dataDir';

/** What start will run against, decided from the configuration alone (nothing is reached yet). */
export interface ClusterPlan {
  /** An existing cluster, and where its kubeconfig comes from; undefined: the local control plane. */
  readonly existing: string | undefined;
  /** A configured cluster left alone (the demo without --use-existing-cluster), and why, for the user. */
  readonly leftAlone: string | undefined;
}

/** The cluster start acts on: its client and the line that names it. */
export interface ChosenCluster {
  readonly kubeConfig: KubeConfig;
  readonly description: string;
  /** Where its kubeconfig comes from, for messages. */
  readonly source: string;
}

/** Something start stops on the way out. */
export interface Stopper {
  readonly what: string;
  stop(): Promise<void>;
}

/**
 * Whether start runs the demo: no provider given, or the example inventory — the one file, or with
 * several providers (`--cloud-config static=…,aws=…`, docs/hybrid.md) any provider's.
 */
export function runsDemo(config: Config<'cloudProvider'>, cloudConfig: string | undefined): boolean {
  if (config.cloudProvider === undefined) return true;
  if (cloudConfig === undefined) return false;
  const several = config.cloudProvider.includes(',');
  const paths = several ? cloudConfig.split(',').map((pair) => pair.slice(pair.indexOf('=') + 1)) : [cloudConfig];
  return paths.some((path) => path !== '' && samePath(path, exampleInventory));
}

function samePath(a: string, b: string): boolean {
  const real = (path: string): string => {
    try {
      return realpathSync(path);
    } catch {
      return resolve(path);
    }
  };
  return real(a) === real(b);
}

// Where a configured cluster comes from: --kubeconfig, else $KUBECONFIG, else the pod's ServiceAccount.
function configuredCluster(config: Config<'kubeconfig'>, io: Io): string | undefined {
  if (config.kubeconfig !== undefined) return `--kubeconfig ${config.kubeconfig}`;
  if (io.env['KUBECONFIG']) return `KUBECONFIG=${io.env['KUBECONFIG']}`;
  if (io.env['KUBERNETES_SERVICE_HOST']) return "this pod's ServiceAccount";
  return undefined;
}

/**
 * Decides what start runs against: with --use-existing-cluster the configured cluster (a
 * ConfigError when none is), else the local control plane. A configured cluster is never acted on
 * without the flag, whatever the provider: an ambient KUBECONFIG is left alone (said in
 * `leftAlone`), and --kubeconfig or a pod's ServiceAccount is refused with a ConfigError.
 */
export function planCluster(
  config: Config<ClusterChoiceOptions>,
  cloudConfig: string | undefined,
  io: Io,
): ClusterPlan {
  const configured = configuredCluster(config, io);
  if (config.useExistingCluster) {
    if (configured === undefined) {
      throw new ConfigError(
        '--use-existing-cluster: no cluster is configured (--kubeconfig, KUBECONFIG or a pod ServiceAccount)',
      );
    }
    return { existing: configured, leftAlone: undefined };
  }
  if (configured === undefined) return { existing: undefined, leftAlone: undefined };
  const { what, risk, demo } = danger(config, cloudConfig);
  const use = '--use-existing-cluster (CIRRUS_USE_EXISTING_CLUSTER=true) to run it there';
  // Only an operator's KUBECONFIG is ambient enough to leave alone and start a control plane beside.
  const ambient = config.kubeconfig === undefined && Boolean(io.env['KUBECONFIG']);
  if (!ambient) {
    throw new ConfigError(
      `${configured}: ${what} acts on an existing cluster only with --use-existing-cluster; against that cluster ` +
        `${risk}. ${demo ? 'Give --cloud-provider and --cloud-config for it, and add' : 'Add'} ${use}` +
        (config.kubeconfig === undefined ? '' : ', or leave --kubeconfig out to run on a local control plane'),
    );
  }
  return {
    existing: undefined,
    leftAlone:
      `${configured} is not used: ${what} acts on an existing cluster only with --use-existing-cluster, as against ` +
      `that cluster ${risk}; add ${use}`,
  };
}

// What would run against an existing cluster, and what it would do there, for the messages.
function danger(
  config: Config<'cloudProvider'>,
  cloudConfig: string | undefined,
): { what: string; risk: string; demo: boolean } {
  if (runsDemo(config, cloudConfig))
    return {
      what: `the demo (${config.cloudProvider === undefined ? 'no --cloud-provider given' : 'the example inventory'})`,
      risk: 'it would initialize and delete Nodes as if they were the example machines, and hand out its addresses',
      demo: true,
    };
  return {
    what: `cirrus start (provider ${config.cloudProvider ?? 'static'})`,
    risk: "it would initialize, taint and delete that cluster's Nodes and manage its load balancers as its cloud says",
    demo: false,
  };
}

/** The plan in a few words, for start's first line. */
export function planSummary(plan: ClusterPlan): string {
  if (plan.existing !== undefined) return plan.existing;
  return plan.leftAlone === undefined ? 'none configured, so the local control plane' : 'the local control plane';
}

/**
 * Connects to the planned cluster, starting the local control plane when the plan says so (its
 * stop is pushed on `stoppers`), and writes to stderr which cluster it is (server URL, context)
 * before returning: before anything acts on it.
 */
export async function connectCluster(
  plan: ClusterPlan,
  config: Config<ClusterChoiceOptions>,
  io: Io,
  stoppers: Stopper[],
): Promise<ChosenCluster> {
  if (plan.leftAlone !== undefined) io.stderr.write(`cirrus start: ${plan.leftAlone}\n`);
  const chosen =
    plan.existing === undefined
      ? await localCluster(config, io, stoppers)
      : { kubeConfig: loadKubeConfig(config.kubeconfig), source: plan.existing };
  const server = chosen.kubeConfig.getCurrentCluster()?.server ?? '(no server)';
  const context = chosen.kubeConfig.getCurrentContext() || '(no context)';
  io.stderr.write(`cirrus start: acting on cluster ${server}, context ${context} (${chosen.source})\n`);
  return {
    kubeConfig: chosen.kubeConfig,
    description: `${server}, context ${context}: ${chosen.source}`,
    source: plan.existing ?? 'the local control plane',
  };
}

/**
 * Prepares a local control plane as a deployment prepares a cluster: the namespace of cirrus's
 * deployments, where the static provider records load balancer allocations when it runs outside a
 * pod (kept with --data-dir). `cirrus start` and `cirrus cluster` both call it.
 */
export async function prepareControlPlane(kubeConfig: KubeConfig): Promise<void> {
  await kubeConfig
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: 'cirrus-system' } } })
    .catch((error: unknown) => {
      if (apiStatus(error) !== 409) throw error;
    });
}

// The embedded local control plane (its binaries built on first use, with progress lines).
async function localCluster(
  config: Config<ClusterChoiceOptions>,
  io: Io,
  stoppers: Stopper[],
): Promise<{ kubeConfig: KubeConfig; source: string }> {
  const { AssetsUnavailableError, resolveAssets } = await import('../../tools/control-plane/index.ts');
  io.stderr.write('starting the local control plane\n');
  let assets;
  try {
    assets = await resolveAssets({
      build: true,
      signal: io.signal,
      progress: (line) => io.stderr.write(`${line}\n`),
    });
  } catch (error) {
    if (error instanceof AssetsUnavailableError)
      throw new Error(`cannot start the local control plane: ${error.message}`, { cause: error });
    throw error;
  }
  const controlPlane = await startInterruptibly(assets, config, io);
  stoppers.push({ what: 'control plane', stop: () => controlPlane.stop() });
  const { info } = controlPlane;
  io.stdout.write(`KUBECONFIG=${info.adminKubeconfig}\n`);
  io.stderr.write(
    `kube-apiserver ${info.kubernetesVersion} (etcd ${info.etcdVersion}) at ${info.server}, ready in ${(info.startMs / 1000).toFixed(1)} s\n`,
  );
  const kubeConfig = loadKubeConfig(info.adminKubeconfig);
  await prepareControlPlane(kubeConfig);
  return {
    kubeConfig,
    source:
      `the local control plane started for this run (kube-apiserver ${info.kubernetesVersion}, etcd ${info.etcdVersion}), ` +
      `KUBECONFIG=${info.adminKubeconfig}`,
  };
}

/**
 * Starts the control plane; Ctrl-C meanwhile is acknowledged at once and stops what has started
 * (a second Ctrl-C exits at once, and the run folder is still removed). `cirrus cluster` uses it too.
 */
export async function startInterruptibly(
  assets: ControlPlaneAssets,
  config: Config<'clusterName' | 'dataDir'>,
  io: Io,
): Promise<ControlPlane> {
  const { ControlPlane } = await import('../../tools/control-plane/index.ts');
  const acknowledge = (): void => {
    io.stderr.write('interrupted: stopping the control plane that is starting (Ctrl-C again exits at once)\n');
  };
  io.signal.addEventListener('abort', acknowledge, { once: true });
  try {
    return await ControlPlane.start({
      assets,
      clusterName: config.clusterName,
      signal: io.signal,
      ...(config.dataDir === undefined ? {} : { dir: config.dataDir }),
    });
  } finally {
    io.signal.removeEventListener('abort', acknowledge);
  }
}
