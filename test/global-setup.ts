// One control plane for the whole `npm test` run (node --test --test-global-setup). It starts
// before any test file and hands itself to the files, which run in their own processes, through
// environment variables:
//   CIRRUS_TEST_CLUSTER                      the control plane's cluster.json (see test/helpers/cluster.ts)
//   CIRRUS_TEST_CLUSTER_SKIP                 why there is none (integration suites then skip)
//   TEST_ASSET_KUBE_APISERVER, TEST_ASSET_ETCD   the binaries, for tests that start their own
// With CIRRUS_TEST_REQUIRE_CONTROL_PLANE=1 (as in CI) a missing control plane fails the run.

import { join } from 'node:path';
import { AssetsUnavailableError, cacheRoot, ControlPlane, resolveAssets } from '../shared/control-plane/index.ts';

let controlPlane: ControlPlane | undefined;

function say(line: string): void {
  process.stderr.write(`[control plane] ${line}\n`);
}

/** Starts the control plane, or records why the integration suites must skip. */
export async function globalSetup(): Promise<void> {
  const required = process.env['CIRRUS_TEST_REQUIRE_CONTROL_PLANE'] === '1';
  let assets;
  try {
    assets = await resolveAssets({ build: true, progress: say });
  } catch (error) {
    if (required || !(error instanceof AssetsUnavailableError)) throw error;
    process.env['CIRRUS_TEST_CLUSTER_SKIP'] = error.message;
    say(`SKIP integration tests: ${error.message}`);
    return;
  }
  process.env['TEST_ASSET_KUBE_APISERVER'] = assets.kubeApiserver;
  process.env['TEST_ASSET_ETCD'] = assets.etcd;
  controlPlane = await ControlPlane.start({ assets });
  process.env['CIRRUS_TEST_CLUSTER'] = controlPlane.infoFile;
  const { info } = controlPlane;
  say(
    `real kube-apiserver ${info.kubernetesVersion} and etcd ${info.etcdVersion} (${assets.source}) ` +
      `at ${info.server}, started in ${(info.startMs / 1000).toFixed(1)} s`,
  );
}

/** Stops the control plane and keeps its logs for a failure report. */
export async function globalTeardown(): Promise<void> {
  if (controlPlane === undefined) return;
  const logs = join(cacheRoot(), 'last-test-run-logs');
  await controlPlane.stop({ keepLogsIn: logs });
  say(`stopped; its logs: ${logs}`);
}
