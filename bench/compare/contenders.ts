// The four CCMs of the comparison and how each runs: the stock Go cloud-controller-manager at its
// defaults, tuned, and at cirrus's width, and `cirrus start`; each in a process of its own (so its
// CPU and memory can be read from /proc), with the benchmark cloud answering alike in both, and
// stopped before the next one starts.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultDelivery } from '../../relay/index.ts';
import { defaultMaxConcurrentRequests } from '../../shared/host/index.ts';
import { freePort, startProcess, type ManagedProcess } from '../../tools/control-plane/processes.ts';
import { clusterCidr } from '../../test/harness/cirrus.ts';
import { benchProviderName, type BenchCloudConfig } from './provider.ts';

export const contenderNames = ['go-defaults', 'go-tuned', 'go-width', 'cirrus'] as const;
export type ContenderName = (typeof contenderNames)[number];

/**
 * How many reconciles `cirrus start` keeps in flight: its relay delivers at most
 * defaultDelivery.concurrency events at once and its host admits at most --max-concurrent-requests;
 * one reconcile per object at a time, with no other limit on node-init and service-lb.
 */
export const cirrusWidth = Math.min(defaultDelivery.concurrency, defaultMaxConcurrentRequests);

export interface Contender {
  readonly name: ContenderName;
  readonly label: string;
  /** Flags beyond those every run of its kind gets. */
  readonly flags: readonly string[];
}

export const contenders: Record<ContenderName, Contender> = {
  'go-defaults': { name: 'go-defaults', label: 'Go, defaults', flags: [] },
  'go-tuned': {
    name: 'go-tuned',
    label: 'Go, tuned',
    flags: ['--concurrent-node-syncs=10', '--concurrent-service-syncs=10', '--kube-api-qps=200'],
  },
  'go-width': {
    name: 'go-width',
    label: `Go, ${cirrusWidth} workers`,
    // A negative QPS turns client-go's rate limiter off.
    flags: [`--concurrent-node-syncs=${cirrusWidth}`, `--concurrent-service-syncs=${cirrusWidth}`, '--kube-api-qps=-1'],
  },
  cirrus: { name: 'cirrus', label: 'cirrus start', flags: [] },
};

/** What the cloud reports (GET /calls on either cloud). */
export interface CloudCalls {
  readonly calls: Record<string, number>;
  readonly maxInFlight: Record<string, number>;
  /** Each updateLoadBalancer: "namespace/name", the node names, and when it returned (Unix ms). */
  readonly updates: { service: string; nodes: string[]; at: number }[];
}

export interface RunningCcm {
  readonly contender: Contender;
  readonly pid: number;
  readonly logFile: string;
  /** Throws when the process has exited: called while waiting, so that a crash fails at once. */
  assertAlive(): void;
  cloudCalls(updatesFrom?: number): Promise<CloudCalls>;
  stop(): Promise<void>;
}

export interface StartSettings {
  readonly kubeconfig: string;
  readonly goBinary: string;
  readonly logDir: string;
  /** Names this process's log and cloud-config files. */
  readonly tag: string;
  readonly latencyMs: number;
  readonly lbLatencyMs: number;
}

const cli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));
const providerModule = fileURLToPath(new URL('provider.ts', import.meta.url));

/** Starts the contender against the cluster; each CCM at its default log level, logging to a file. */
export async function startCcm(contender: Contender, settings: StartSettings): Promise<RunningCcm> {
  const statsPort = await freePort();
  const logFile = join(settings.logDir, `${settings.tag}.log`);
  let child: ManagedProcess;
  if (contender.name === 'cirrus') {
    const cloudConfig = join(settings.logDir, `${settings.tag}.cloud-config.json`);
    const config: BenchCloudConfig = { latencyMs: settings.latencyMs, lbLatencyMs: settings.lbLatencyMs, statsPort };
    await writeFile(cloudConfig, JSON.stringify(config));
    const args = [cli, 'start', '--cloud-provider', benchProviderName, '--provider-module', providerModule];
    args.push('--cloud-config', cloudConfig, '--kubeconfig', settings.kubeconfig, '--leader-elect=false');
    args.push('--cluster-cidr', clusterCidr, '--bind-address', '127.0.0.1', '--port', String(await freePort()));
    child = await startProcess('cirrus start', process.execPath, [...args, ...contender.flags], logFile);
  } else {
    const args = [`--cloud-provider=bench`, `--kubeconfig=${settings.kubeconfig}`, '--leader-elect=false'];
    args.push('--use-service-account-credentials=false', '--secure-port=0', '--webhook-secure-port=0');
    args.push(`--cluster-cidr=${clusterCidr}`, '--configure-cloud-routes=true');
    args.push(`--bench-latency=${settings.latencyMs}ms`, `--bench-lb-latency=${settings.lbLatencyMs}ms`);
    args.push(`--bench-stats-address=127.0.0.1:${statsPort}`);
    child = await startProcess('cloud-controller-manager', settings.goBinary, [...args, ...contender.flags], logFile);
  }
  return {
    contender,
    pid: child.pid,
    logFile,
    assertAlive: () => {
      if (child.hasExited()) throw new Error(`${contender.label} exited; its log: ${logFile}`);
    },
    cloudCalls: async (updatesFrom = 0) => {
      const reply = await fetch(`http://127.0.0.1:${statsPort}/calls?updatesFrom=${updatesFrom}`);
      if (!reply.ok) throw new Error(`the benchmark cloud of ${contender.label} answered ${reply.status}`);
      return (await reply.json()) as CloudCalls;
    },
    stop: () => child.stop(10_000),
  };
}
