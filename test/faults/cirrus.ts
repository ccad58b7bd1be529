// cirrus as the fault suite runs it: real processes, so that SIGKILL, SIGSTOP and restarts are
// real. Either `cirrus serve` per function (node-init, service-lb) plus `cirrus relay` replicas
// delivering to them, signed, or one `cirrus start`; all with the chaos cloud (provider.ts), whose
// file outlives every process. Logs go to the run folder, one file per process.

import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startProcess, type ManagedProcess } from '../../tools/control-plane/processes.ts';
import { catalogue } from '../../functions/catalogue.ts';
import type { FunctionEntry } from '../../shared/catalogue.ts';
import { sleep } from '../harness/kube.ts';
import { chaosProviderName, type ChaosCloudConfig } from './provider.ts';

const cli = fileURLToPath(new URL('../../bin/cirrus.js', import.meta.url));
const providerModule = fileURLToPath(new URL('provider.ts', import.meta.url));

/**
 * The functions the suite serves, whose final states it checks: node initialization (the Node
 * function with a refresh pass) and load balancers (the Service function), from the catalogue.
 */
const entries: readonly FunctionEntry[] = [
  pick((e) => e.target.kind === 'Node' && e.period.option === 'nodeStatusUpdateFrequency'),
  pick((e) => e.target.kind === 'Service'),
];
export const functions: readonly string[] = entries.map((e) => e.name);

/** The Node lifecycle function (the Node function whose period is the monitor period), for the rows that serve it. */
export const lifecycleFunction: string = pick(
  (e) => e.target.kind === 'Node' && e.period.option === 'nodeMonitorPeriod',
).name;

function pick(test: (entry: FunctionEntry) => boolean): FunctionEntry {
  const entry = catalogue.find(test);
  if (entry === undefined) throw new Error('the catalogue has no such function');
  return entry;
}

export interface Setup {
  readonly dir: string;
  readonly kubeconfig: string;
  readonly cloudLog: string;
  readonly nodePrefix: string;
  readonly logLevel: string;
  /** Extra flags for every `cirrus serve` / `cirrus start` (a cloud call budget). */
  readonly serveFlags?: readonly string[];
  readonly throttle?: ChaosCloudConfig['throttle'];
  /** Serve without request signing, as behind ApiServerSource (a source cannot sign). */
  readonly unsigned?: boolean;
  /** The chaos cloud's file of Node names whose machines are gone (provider.ts). */
  readonly gone?: string;
}

/** One cirrus process the suite started. */
export class CirrusProcess {
  readonly name: string;
  readonly url: string;
  readonly #start: () => Promise<ManagedProcess>;
  #process: ManagedProcess;

  private constructor(name: string, url: string, start: () => Promise<ManagedProcess>, process: ManagedProcess) {
    this.name = name;
    this.url = url;
    this.#start = start;
    this.#process = process;
  }

  static async start(name: string, url: string, start: () => Promise<ManagedProcess>): Promise<CirrusProcess> {
    return new CirrusProcess(name, url, start, await start());
  }

  get pid(): number {
    return this.#process.pid;
  }

  get alive(): boolean {
    return !this.#process.hasExited();
  }

  get logFile(): string {
    return this.#process.logFile;
  }

  /** SIGKILL: no clean-up, no Lease release. */
  async kill(): Promise<void> {
    if (this.#process.hasExited()) return;
    process.kill(this.#process.pid, 'SIGKILL');
    await this.#process.exited;
  }

  /** SIGSTOP / SIGCONT: the process keeps its sockets but does nothing. */
  pause(paused: boolean): void {
    process.kill(this.#process.pid, paused ? 'SIGSTOP' : 'SIGCONT');
  }

  /** Starts it again with the same flags, on the same port. */
  async restart(): Promise<void> {
    if (!this.#process.hasExited()) await this.kill();
    this.#process = await this.#start();
  }

  async stop(): Promise<void> {
    await this.#process.stop(5_000);
  }

  /** Resolves once GET /readyz answers 200 (rejects when the process exits or after `timeoutMs`). */
  async ready(timeoutMs = 60_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (this.#process.hasExited()) throw new Error(`${this.name} exited; its log: ${this.logFile}`);
      const ok = await fetch(`${this.url}/readyz`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) return;
      if (performance.now() > deadline) throw new Error(`${this.name} not ready after ${timeoutMs / 1000} s`);
      await sleep(100);
    }
  }

  /** Its Prometheus metrics, as `name{labels}` → value. */
  async metrics(): Promise<Map<string, number>> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const out = new Map<string, number>();
    for (const line of text.split('\n')) {
      if (line.startsWith('#') || line.trim() === '') continue;
      const space = line.lastIndexOf(' ');
      out.set(line.slice(0, space), Number(line.slice(space + 1)));
    }
    return out;
  }
}

/** The sum of a metric's series whose labels include every `labels` pair. */
export function metricSum(metrics: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const [series, value] of metrics) {
    if (series !== name && !series.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => series.includes(`${k}="${v}"`))) sum += value;
  }
  return sum;
}

/** `cirrus serve` per function and relays delivering to them. */
export class Deployment {
  readonly setup: Setup;
  readonly secretFile: string;
  readonly functions: CirrusProcess[] = [];
  readonly relays: CirrusProcess[] = [];
  // The functions `cirrus serve` serves, by name, for the relays' --to.
  readonly #served: { readonly name: string; readonly url: string }[] = [];
  #relayCount = 0;

  private constructor(setup: Setup, secretFile: string) {
    this.setup = setup;
    this.secretFile = secretFile;
  }

  static async create(setup: Setup): Promise<Deployment> {
    const secretFile = join(setup.dir, 'signing-secret');
    await writeFile(secretFile, randomBytes(32).toString('hex'), { mode: 0o600 });
    const config: ChaosCloudConfig = {
      log: setup.cloudLog,
      nodePrefix: setup.nodePrefix,
      ...(setup.throttle === undefined ? {} : { throttle: setup.throttle }),
      ...(setup.gone === undefined ? {} : { gone: setup.gone }),
    };
    await writeFile(cloudConfigPath(setup), JSON.stringify(config));
    return new Deployment(setup, secretFile);
  }

  /** Starts `cirrus serve <fn>` for each function (default: node-init and service-lb) and waits until each is ready. */
  async serveFunctions(names: readonly string[] = functions): Promise<void> {
    for (const fn of names) {
      const port = await freePort();
      const args = [cli, 'serve', fn, ...this.#providerArgs(), '--kubeconfig', this.setup.kubeconfig];
      args.push('--bind-address', '127.0.0.1', '--port', String(port));
      if (this.setup.unsigned !== true) args.push('--signing-secret-file', this.secretFile);
      args.push('--log-level', this.setup.logLevel, ...(this.setup.serveFlags ?? []));
      const log = join(this.setup.dir, `serve-${fn}.log`);
      const proc = await CirrusProcess.start(`cirrus serve ${fn}`, `http://127.0.0.1:${port}`, () =>
        startProcess(`cirrus serve ${fn}`, process.execPath, args, log),
      );
      this.functions.push(proc);
      this.#served.push({ name: fn, url: proc.url });
    }
    await Promise.all(this.functions.map((f) => f.ready()));
  }

  /** Starts a relay replica delivering to the served functions (does not wait for it). */
  async startRelay(flags: readonly string[] = []): Promise<CirrusProcess> {
    const index = this.#relayCount++;
    const port = await freePort();
    const args = [cli, 'relay', '--kubeconfig', this.setup.kubeconfig, '--signing-secret-file', this.secretFile];
    // To the served functions; with none served, only where `flags` say (a recording sink).
    for (const served of this.#served) args.push('--to', `${served.name}=${served.url}/`);
    args.push('--bind-address', '127.0.0.1', '--port', String(port), '--log-level', this.setup.logLevel);
    args.push(...flags);
    const log = join(this.setup.dir, `relay-${index}.log`);
    const relay = await CirrusProcess.start(`cirrus relay #${index}`, `http://127.0.0.1:${port}`, () =>
      startProcess(`cirrus relay #${index}`, process.execPath, args, log),
    );
    this.relays.push(relay);
    return relay;
  }

  /** `cirrus start` with the node-init and service-lb controllers (instead of serve + relay). */
  async startAllInOne(flags: readonly string[] = []): Promise<CirrusProcess> {
    const port = await freePort();
    const args = [
      cli,
      'start',
      ...this.#providerArgs(),
      '--kubeconfig',
      this.setup.kubeconfig,
      '--use-existing-cluster',
    ];
    // One --controllers per controller: the flag is repeatable.
    for (const e of entries) args.push('--controllers', e.controller.name);
    args.push('--bind-address', '127.0.0.1', '--port', String(port));
    args.push('--log-level', this.setup.logLevel, ...(this.setup.serveFlags ?? []), ...flags);
    const log = join(this.setup.dir, 'start.log');
    const proc = await CirrusProcess.start('cirrus start', `http://127.0.0.1:${port}`, () =>
      startProcess('cirrus start', process.execPath, args, log),
    );
    this.functions.push(proc);
    return proc;
  }

  /** Stops every process (SIGTERM, then SIGKILL after 5 s). */
  async stop(): Promise<void> {
    await Promise.all(this.relays.map((r) => r.stop()));
    await Promise.all(this.functions.map((f) => f.stop()));
  }

  #providerArgs(): string[] {
    return [
      '--provider-module',
      providerModule,
      '--cloud-provider',
      chaosProviderName,
      '--cloud-config',
      cloudConfigPath(this.setup),
    ];
  }
}

function cloudConfigPath(setup: Setup): string {
  return join(setup.dir, 'cloud-config.json');
}
