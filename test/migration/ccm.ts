// The two CCMs of the migration test as child processes on one cluster and one emulator world:
// kubernetes/cloud-provider-aws's aws-cloud-controller-manager (tools/cloud-provider-aws/) and
// `cirrus start --cloud-provider aws` (bin/cirrus.js). Each writes its output to a log file whose
// tail a failure shows; each dies with the test process (setpriv --pdeathsig).

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { awsChildEnv, type AwsWorld } from '../harness/aws.ts';
import { clusterCidr } from '../harness/cirrus.ts';

/** A CCM run: stop() ends it gracefully (SIGTERM, SIGKILL after 10 s). */
export interface Ccm {
  readonly name: string;
  readonly logFile: string;
  stop(): Promise<void>;
  /** The last lines of its output. */
  tail(lines?: number): Promise<string>;
}

/** Where both CCMs find the cluster and the cloud. */
export interface CcmSetting {
  readonly world: AwsWorld;
  /** The admin kubeconfig file of the cluster. */
  readonly kubeconfig: string;
  /** The cloud.conf both read. */
  readonly cloudConfig: string;
  /** A folder for the logs. */
  readonly dir: string;
}

/** How often each runs its periodic passes: shorter than the defaults, so a test waits less. */
const routePeriod = '2s';

/** Starts cloud-provider-aws with its node, service and route controllers, no leader election, serving nothing. */
export function startCloudProviderAws(binary: string, setting: CcmSetting): Promise<Ccm> {
  const args = [
    '--cloud-provider=aws',
    `--cloud-config=${setting.cloudConfig}`,
    `--kubeconfig=${setting.kubeconfig}`,
    '--controllers=cloud-node,service,route',
    '--leader-elect=false',
    '--use-service-account-credentials=false',
    '--configure-cloud-routes=true',
    '--allocate-node-cidrs=false',
    `--cluster-cidr=${clusterCidr}`,
    `--route-reconciliation-period=${routePeriod}`,
    '--secure-port=0',
    '--v=2',
  ];
  return startLogged('cloud-provider-aws', [binary, ...args], setting);
}

const cli = new URL('../../bin/cirrus.js', import.meta.url).pathname;

/** Starts `cirrus start --cloud-provider aws` on the cluster and resolves once it says it runs. */
export async function startCirrusCommand(setting: CcmSetting): Promise<Ccm> {
  const args = [
    'start',
    '--cloud-provider=aws',
    `--cloud-config=${setting.cloudConfig}`,
    `--kubeconfig=${setting.kubeconfig}`,
    '--use-existing-cluster',
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
    '--port=0',
    `--cluster-cidr=${clusterCidr}`,
    `--route-reconciliation-period=${routePeriod}`,
    '--log-level=info',
  ];
  const ccm = await startLogged('cirrus', [process.execPath, cli, ...args], setting);
  await ccm.running;
  return ccm;
}

interface Started extends Ccm {
  /** Resolves when the log says it runs (cirrus: `cirrus running:`); rejects with the log's tail when it exits first. */
  readonly running: Promise<void>;
}

async function startLogged(name: string, command: readonly string[], setting: CcmSetting): Promise<Started> {
  const logFile = join(setting.dir, `${name}-${Date.now()}.log`);
  const log = await open(logFile, 'a');
  const child = spawn('setpriv', ['--pdeathsig', 'SIGKILL', '--', ...command], {
    env: awsChildEnv(setting.world),
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  const exited = once(child, 'exit') as Promise<[number | null, string | null]>;
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const tail = async (lines = 40): Promise<string> =>
    (await readFile(logFile, 'utf8').catch(() => '')).trimEnd().split('\n').slice(-lines).join('\n');
  const running = waitForLine(logFile, /^cirrus running:|"msg":"cirrus running:/m, () => gone).catch(
    async (error: unknown) => {
      throw new Error(`${name} did not start (${(error as Error).message}); its log ends:\n${await tail()}`);
    },
  );
  // Only cirrus's start is awaited; an unawaited rejection must not end the test process.
  running.catch(() => {});
  return {
    name,
    logFile,
    running,
    tail,
    stop: async () => {
      if (gone) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function waitForLine(file: string, line: RegExp, exited: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (line.test(await readFile(file, 'utf8').catch(() => ''))) return;
    if (exited()) throw new Error('it exited');
    if (Date.now() > deadline) throw new Error('not within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
