// The rows of issue 20's fault table. Each row runs on the suite's control plane with processes
// of its own (cirrus.ts), a cloud file of its own and objects labelled with its row, and returns
// what was lost, what was doubled and how long convergence took; its objects are removed after.

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ControlPlane } from '../../tools/control-plane/index.ts';
import type { Kube } from '../harness/kube.ts';
import { sleep } from '../harness/kube.ts';
import { converge, type Verdict } from './check.ts';
import { Deployment, type CirrusProcess, type Setup } from './cirrus.ts';
import { cleanUp, emptyExpected, seeded, type ChurnSize } from './workload.ts';

/** The sizes of a run: --quick, the defaults, or --full (the issue's). */
export interface Profile {
  readonly name: 'quick' | 'default' | 'full';
  readonly churn: ChurnSize;
  readonly relayKills: number;
  readonly apiserverRestarts: number;
  readonly triple: { readonly nodes: number; readonly services: number };
  readonly writerBurst: number;
  readonly downServices: number;
  readonly leaderKills: number;
  /** How long a row may take to converge after its faults end. */
  readonly convergeMs: number;
}

export const profiles: Record<Profile['name'], Profile> = {
  quick: {
    name: 'quick',
    churn: { nodes: 24, services: 16, ratePerSecond: 60 },
    relayKills: 2,
    apiserverRestarts: 1,
    triple: { nodes: 6, services: 8 },
    writerBurst: 30,
    downServices: 20,
    leaderKills: 1,
    convergeMs: 30_000,
  },
  default: {
    name: 'default',
    churn: { nodes: 150, services: 100, ratePerSecond: 60 },
    relayKills: 10,
    apiserverRestarts: 3,
    triple: { nodes: 20, services: 40 },
    writerBurst: 200,
    downServices: 200,
    leaderKills: 5,
    convergeMs: 90_000,
  },
  full: {
    name: 'full',
    churn: { nodes: 1000, services: 1000, ratePerSecond: 100 },
    relayKills: 10,
    apiserverRestarts: 3,
    triple: { nodes: 100, services: 200 },
    writerBurst: 500,
    downServices: 1000,
    leaderKills: 5,
    convergeMs: 300_000,
  },
};

/** One line of the table. */
export interface RowResult {
  readonly row: number;
  readonly fault: string;
  /** Final states not reached; undefined when the row could not be measured. */
  readonly lost: number | undefined;
  /** Cloud mutations that changed nothing (or, for row 4, the extra mutations and writes). */
  readonly doubled: number | undefined;
  readonly convergenceS: number | undefined;
  readonly goal: string;
  /** undefined: not measurable. */
  readonly ok: boolean | undefined;
  readonly note: string;
  readonly detail?: Record<string, unknown>;
}

/** What every row gets. */
export interface RowContext {
  readonly kube: Kube;
  readonly controlPlane: ControlPlane;
  readonly profile: Profile;
  /** The run folder: one sub-folder per row, with its logs and cloud file. */
  readonly dir: string;
  readonly logLevel: string;
  readonly progress: (line: string) => void;
}

/** A row's own folder and cirrus deployment. */
export async function deploymentFor(
  ctx: RowContext,
  row: string,
  extra: Partial<Pick<Setup, 'serveFlags' | 'throttle' | 'unsigned' | 'gone'>> = {},
): Promise<Deployment> {
  const dir = join(ctx.dir, row);
  await mkdir(dir, { recursive: true });
  return Deployment.create({
    dir,
    kubeconfig: ctx.controlPlane.info.adminKubeconfig,
    cloudLog: join(dir, 'cloud.jsonl'),
    nodePrefix: 'chaos-',
    logLevel: ctx.logLevel,
    ...extra,
  });
}

/** Runs `body` with a deployment, stops it and removes the row's objects, whatever happens. */
export async function withDeployment<T>(
  ctx: RowContext,
  row: string,
  extra: Partial<Pick<Setup, 'serveFlags' | 'throttle' | 'unsigned' | 'gone'>>,
  body: (deployment: Deployment) => Promise<T>,
): Promise<T> {
  const deployment = await deploymentFor(ctx, row, extra);
  try {
    return await body(deployment);
  } finally {
    await deployment.stop();
    await cleanUp(ctx.kube, row);
  }
}

/** The figures of a converged (or not) row. */
export function outcome(
  verdict: Verdict,
  ms: number,
): { lost: number; doubled: number; convergenceS: number; sample: string[] } {
  return {
    lost: verdict.wrong.length,
    doubled: verdict.cloud.redundant,
    convergenceS: ms / 1000,
    sample: verdict.wrong.slice(0, 5),
  };
}

export async function waitReady(processes: readonly CirrusProcess[]): Promise<void> {
  await Promise.all(processes.map((p) => p.ready()));
}

/** Calls `fault` `times` times at seeded random moments within `windowMs`. */
export async function atRandomMoments(
  times: number,
  windowMs: number,
  seed: number,
  fault: (index: number) => Promise<void>,
): Promise<void> {
  const random = seeded(seed);
  const moments = Array.from({ length: times }, () => random() * windowMs).sort((a, b) => a - b);
  const started = performance.now();
  for (const [index, at] of moments.entries()) {
    await sleep(started + at - performance.now());
    await fault(index);
  }
}

export { converge, emptyExpected };

/** The flag of a relay or `cirrus start` that runs without leader election. */
export const noElection = ['--leader-elect=false'];
