// One control plane for the whole `npm test` run (node --test --test-global-setup). It starts
// before any test file and hands itself to the files, which run in their own processes, through
// environment variables:
//   CIRRUS_TEST_CLUSTER                      the control plane's cluster.json (see test/harness/cluster.ts)
//   CIRRUS_TEST_CLUSTER_SKIP                 why there is none (integration suites then skip)
//   TEST_ASSET_KUBE_APISERVER, TEST_ASSET_ETCD   the binaries, for tests that start their own
// And one AWS emulator (moto's server, tools/aws-emulator/server.ts; installed once per machine):
//   CIRRUS_TEST_AWS_ENDPOINT                 its endpoint, http://127.0.0.1:<port> (see test/harness/aws.ts)
//   CIRRUS_TEST_AWS_SKIP                     why there is none (the aws suites then skip)
// And kubernetes/cloud-provider-aws, the incumbent the migration test runs (tools/cloud-provider-aws/;
// built once per machine after the control plane, as it is: the test itself never builds it), and
// Helm, which the chart test runs (tools/helm/; built the same way, after it), and AWS's Lambda
// Runtime Interface Emulator, which the Lambda package test runs the zips under (tools/rie/; last).
// With CIRRUS_TEST_REQUIRE_CONTROL_PLANE=1 (as in CI) a missing control plane or emulator fails the run.

import { join } from 'node:path';
import {
  AssetsUnavailableError,
  cacheRoot,
  ControlPlane,
  resolveAssets,
  type GoToolBinary,
  type GoToolOptions,
} from '../tools/control-plane/index.ts';
import { EmulatorUnavailableError, motoVersion, startEmulator, type Emulator } from '../tools/aws-emulator/server.ts';
import { warmEmulator } from '../tools/aws-emulator/world.ts';
import { resolveCloudProviderAws } from '../tools/cloud-provider-aws/assets.ts';
import { resolveHelm } from '../tools/helm/assets.ts';
import { resolveRie } from '../tools/rie/assets.ts';

let controlPlane: ControlPlane | undefined;
let emulator: Emulator | undefined;

function say(line: string): void {
  process.stderr.write(`[control plane] ${line}\n`);
}

function sayAws(line: string): void {
  process.stderr.write(`[aws emulator] ${line}\n`);
}

/** Starts the control plane and the AWS emulator side by side, then makes sure of the incumbent, Helm and the RIE. */
export async function globalSetup(): Promise<void> {
  await Promise.all([startControlPlane(), startAwsEmulator()]);
  // One after the other: each is a Go build of minutes when the cache has none.
  await buildTool('cloud-provider-aws', resolveCloudProviderAws);
  await buildTool('helm', resolveHelm);
  await buildTool('aws-lambda-rie', resolveRie);
}

/**
 * Builds a tool some suites run (the migration test's cloud-provider-aws, the chart test's helm)
 * when the cache has none. Where it cannot be built, those suites read the cache again and say
 * what is missing (they skip, or with CIRRUS_TEST_REQUIRE_CONTROL_PLANE=1 fail); the other suites
 * need none of it.
 */
async function buildTool(name: string, resolve: (options: GoToolOptions) => Promise<GoToolBinary>): Promise<void> {
  const say = (line: string): void => {
    process.stderr.write(`[${name}] ${line}\n`);
  };
  try {
    const { version, source } = await resolve({ build: true, progress: say });
    if (source === 'build') say(`built ${version}`);
  } catch (error) {
    say(`not available: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Starts the control plane, or records why the integration suites must skip. */
async function startControlPlane(): Promise<void> {
  const required = process.env['CIRRUS_TEST_REQUIRE_CONTROL_PLANE'] === '1';
  let assets;
  try {
    // Every test's binaries, the scheduler test's kube-scheduler and kube-controller-manager too.
    assets = await resolveAssets({ build: true, components: true, progress: say });
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

/** Starts the AWS emulator (installing it on first use), or records why the aws suites must skip. */
async function startAwsEmulator(): Promise<void> {
  const required = process.env['CIRRUS_TEST_REQUIRE_CONTROL_PLANE'] === '1';
  try {
    emulator = await startEmulator({ progress: sayAws });
    await warmEmulator(emulator.endpoint);
  } catch (error) {
    if (required || !(error instanceof EmulatorUnavailableError)) throw error;
    process.env['CIRRUS_TEST_AWS_SKIP'] = error.message;
    sayAws(`SKIP aws tests: ${error.message}`);
    return;
  }
  process.env['CIRRUS_TEST_AWS_ENDPOINT'] = emulator.endpoint;
  const { install } = emulator;
  const installed = install.installedNow ? `installed in ${(install.ms / 1000).toFixed(1)} s (first use), ` : '';
  sayAws(
    `moto ${motoVersion} at ${emulator.endpoint}, ${installed}started in ${(emulator.startMs / 1000).toFixed(1)} s`,
  );
}

/** Stops the control plane and the emulator and keeps their logs for a failure report. */
export async function globalTeardown(): Promise<void> {
  const logs = join(cacheRoot(), 'last-test-run-logs');
  if (controlPlane !== undefined) {
    await controlPlane.stop({ keepLogsIn: logs });
    say(`stopped; its logs: ${logs}`);
  }
  if (emulator !== undefined) {
    await emulator.stop({ keepLogIn: logs });
    sayAws(`stopped; its log: ${join(logs, 'moto.log')}`);
  }
}
