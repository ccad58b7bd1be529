// `cirrus cluster`: the local control plane in the foreground.

import type { Config } from '../config.ts';
import type { Io } from './io.ts';

/** Starts the control plane, prints `KUBECONFIG=<path>`, and stops it when `io.signal` aborts. */
export async function runCluster(config: Config<'clusterName' | 'dataDir'>, io: Io): Promise<number> {
  const { AssetsUnavailableError, ControlPlaneInterrupted, resolveAssets } =
    await import('../../tools/control-plane/index.ts');
  const progress = (line: string): void => {
    io.stderr.write(`${line}\n`);
  };
  let assets;
  try {
    assets = await resolveAssets({ build: true, signal: io.signal, progress });
  } catch (error) {
    if (!(error instanceof AssetsUnavailableError)) throw error;
    io.stderr.write(`cirrus cluster: ${error.message}\n`);
    return 1;
  }
  if (io.signal.aborted) return 0;
  const { prepareControlPlane, startInterruptibly } = await import('./start-cluster.ts');
  let controlPlane;
  try {
    controlPlane = await startInterruptibly(assets, config, io);
  } catch (error) {
    if (error instanceof ControlPlaneInterrupted) return 0;
    throw error;
  }
  const { info } = controlPlane;
  // Ready for `cirrus serve service-lb` and `cirrus start --kubeconfig` as `cirrus start`'s own is.
  const { loadKubeConfig } = await import('../../shared/kube/client.ts');
  await prepareControlPlane(loadKubeConfig(info.adminKubeconfig));
  io.stdout.write(`KUBECONFIG=${info.adminKubeconfig}\n`);
  progress(
    `kube-apiserver ${info.kubernetesVersion} (etcd ${info.etcdVersion}) serving at ${info.server}, ` +
      `ready in ${(info.startMs / 1000).toFixed(1)} s; Ctrl-C stops it`,
  );
  const stopped = new Promise<undefined>((resolve) => {
    if (io.signal.aborted) resolve(undefined);
    io.signal.addEventListener(
      'abort',
      () => {
        resolve(undefined);
      },
      { once: true },
    );
  });
  const failure = await Promise.race([stopped, controlPlane.failed]);
  await controlPlane.stop();
  if (failure === undefined) {
    progress('control plane stopped');
    return 0;
  }
  io.stderr.write(`cirrus cluster: ${failure}\n`);
  return 1;
}
