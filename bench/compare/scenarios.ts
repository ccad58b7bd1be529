// The scenarios of issue 21 against one running CCM (Go or cirrus), each in a measured window:
//   1. Nodes created at 20/s with the uninitialized taint: create → taint removed;
//   2. Nodes created at once: the same, and last create → last taint removed;
//   3. LoadBalancer Services created at 50/s, ensure 1 s: create → status.loadBalancer.ingress;
//   4. one of their Nodes excluded: label PATCH → each Service's updateLoadBalancer returned.
// A window's costs: the CCM's CPU time and peak resident set (of each of its processes, and their
// sums), the API server's CPU time, and the API requests the API server counted minus the
// harness's own. Before any of it, sampleCheck() makes the CCM initialize one Node and (unless it
// runs the Node scenarios only) provision one load balancer, and compares what it wrote.

import { deleteNodes, listVersion, nodeObject, uninitializedTaint } from '../../test/harness/context.ts';
import { difference, sleep, type Counts, type Kube, type KubeObject } from '../../test/harness/kube.ts';
import type { CcmProcess, RunningCcm } from './contenders.ts';
import { cpuMs, memoryMb, resetPeak, sampleRss } from './procfs.ts';

export interface Harness {
  readonly kube: Kube;
  readonly apiserverPid: number;
}

export interface Costs {
  /** Summed over the CCM's processes. */
  readonly ccmCpuMs: number;
  readonly apiserverCpuMs: number;
  /** API requests of the CCM (see count()), and the writes among them. */
  readonly requests: { readonly all: number; readonly mutating: number };
  /** The sum of its processes' peaks (each read alone; they need not have peaked at once). */
  readonly peakRssMb: number;
  /** Each process's own, by role (the whole CCM, or the function and the relay). */
  readonly byProcess: Partial<Record<CcmProcess['role'], { readonly cpuMs: number; readonly peakRssMb: number }>>;
  readonly seconds: number;
  readonly apiserverCounts: Counts;
  readonly harnessCounts: Counts;
}

export interface ScenarioRun {
  readonly objects: number;
  readonly latenciesMs: number[];
  /** Objects done per second, from the first create to the last done. */
  readonly perSecond: number;
  /** Last create → last done (Node burst), or exclude → last update (node sync). */
  readonly drainMs: number;
  readonly costs: Costs;
}

const mutatingVerbs = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'DELETECOLLECTION', 'APPLY']);
const excludeLabel = 'node.kubernetes.io/exclude-from-external-load-balancers';
const servicesPath = '/api/v1/namespaces/default/services';
const groupLabel = 'bench.cirrus/group';

/** Scenarios 1 and 2: `count` tainted Nodes, at `ratePerSecond` or all at once. */
export async function initNodes(
  h: Harness,
  ccm: RunningCcm,
  run: { group: string; count: number; ratePerSecond?: number },
): Promise<ScenarioRun> {
  const { kube } = h;
  const created = new Map<string, number>();
  const cleared = new Map<string, number>();
  const wrong: string[] = [];
  const path = `/api/v1/nodes?labelSelector=${encodeURIComponent(`${groupLabel}=${run.group}`)}`;
  const abort = new AbortController();
  const watching = watch(
    kube,
    { path, resourceVersion: await listVersion(kube, '/api/v1/nodes') },
    ({ object }) => {
      const name = object.metadata.name;
      if (cleared.has(name) || taintsOf(object).includes(uninitializedTaint)) return;
      cleared.set(name, performance.now());
      if (object.spec?.['providerID'] !== `fake://${name}`) wrong.push(name);
    },
    abort.signal,
  );
  let start = 0;
  let lastCreate = 0;
  const costs = await measured(h, ccm, async () => {
    start = performance.now();
    const objects = Array.from({ length: run.count }, (_, i) => nodeObject(`${run.group}-${i}`, run.group, true));
    await kube.createAll('/api/v1/nodes', objects, {
      concurrency: run.ratePerSecond === undefined ? 32 : 8,
      ...(run.ratePerSecond === undefined ? {} : { ratePerSecond: run.ratePerSecond }),
      created: (name) => created.set(name, performance.now()),
    });
    lastCreate = performance.now();
    await waitFor(ccm, `${run.count} Nodes initialized`, 60_000 + run.count * 300, () => cleared.size >= run.count);
  });
  abort.abort();
  await watching;
  if (wrong.length > 0) throw new Error(`${ccm.contender.label} set a wrong providerID on ${wrong.join(', ')}`);
  await removeNodes(kube, run.group);
  const lastCleared = Math.max(...cleared.values());
  return {
    objects: run.count,
    latenciesMs: [...cleared].map(([name, at]) => at - (created.get(name) ?? at)),
    perSecond: run.count / ((lastCleared - start) / 1000),
    drainMs: lastCleared - lastCreate,
    costs,
  };
}

/** Scenarios 3 and 4: `count` LoadBalancer Services over three Nodes, then one Node excluded. */
export async function loadBalancers(
  h: Harness,
  ccm: RunningCcm,
  count: number,
): Promise<{ ensure: ScenarioRun; sync: ScenarioRun }> {
  const { kube } = h;
  const backends = ['cmp-lb-node-0', 'cmp-lb-node-1', 'cmp-lb-node-2'];
  await kube.createAll(
    '/api/v1/nodes',
    backends.map((n) => nodeObject(n, 'cmp-lb', true)),
    { concurrency: 3 },
  );
  for (const name of backends) await initialized(kube, ccm, name);
  await sleep(2_000);
  const ensure = await ensureAll(h, ccm, count);
  const sync = await nodeSync(h, ccm, count, backends[0] ?? '');
  return { ensure, sync };
}

async function ensureAll(h: Harness, ccm: RunningCcm, count: number): Promise<ScenarioRun> {
  const { kube } = h;
  const created = new Map<string, number>();
  const served = new Map<string, number>();
  const wrong: string[] = [];
  const abort = new AbortController();
  const watching = watch(
    kube,
    {
      path: `${servicesPath}?labelSelector=${encodeURIComponent(`${groupLabel}=cmp-lb`)}`,
      resourceVersion: await listVersion(kube, servicesPath),
    },
    ({ object }) => {
      const name = object.metadata.name;
      const ingress = ingressOf(object)[0];
      if (served.has(name) || ingress === undefined) return;
      served.set(name, performance.now());
      if (!ingress.ip?.startsWith('198.18.') || ingress.ipMode !== 'VIP')
        wrong.push(`${name} ${JSON.stringify(ingress)}`);
    },
    abort.signal,
  );
  let start = 0;
  const costs = await measured(h, ccm, async () => {
    start = performance.now();
    const services = Array.from({ length: count }, (_, i) => serviceObject(`cmp-lb-${i}`));
    await kube.createAll(servicesPath, services, {
      concurrency: 8,
      ratePerSecond: 50,
      created: (name) => created.set(name, performance.now()),
    });
    await waitFor(ccm, `${count} load balancers`, 60_000 + count * 1_500, () => served.size >= count);
  });
  abort.abort();
  await watching;
  if (wrong.length > 0) throw new Error(`${ccm.contender.label} set unexpected ingress: ${wrong.join('; ')}`);
  const lastServed = Math.max(...served.values());
  return {
    objects: count,
    latenciesMs: [...served].map(([name, at]) => at - (created.get(name) ?? at)),
    perSecond: count / ((lastServed - start) / 1000),
    drainMs: lastServed - start,
    costs,
  };
}

// From the label PATCH returning to each Service's updateLoadBalancer returning without the Node,
// as the cloud logged it (Unix ms, the same clock in every process of this machine).
async function nodeSync(h: Harness, ccm: RunningCcm, count: number, excluded: string): Promise<ScenarioRun> {
  const from = (await ccm.cloudCalls(Infinity)).updatesTotal;
  const updated = new Map<string, number>();
  let start = 0;
  const costs = await measured(h, ccm, async () => {
    const patch = { metadata: { labels: { [excludeLabel]: 'true' } } };
    await h.kube.call('PATCH', `/api/v1/nodes/${excluded}`, patch, 'application/merge-patch+json');
    start = Date.now();
    let seen = from;
    await waitFor(ccm, `${count} load balancer updates`, 60_000 + count * 1_500, async () => {
      const { updates } = await ccm.cloudCalls(seen);
      seen += updates.length;
      for (const u of updates)
        if (!u.nodes.includes(excluded) && !updated.has(u.service)) updated.set(u.service, u.at - start);
      return updated.size >= count;
    });
  });
  const latenciesMs = [...updated.values()];
  const drainMs = Math.max(...latenciesMs);
  return { objects: count, latenciesMs, perSecond: count / (drainMs / 1000), drainMs, costs };
}

/** The fields every CCM writes, from one Node and one load-balanced Service. */
export interface Sample {
  readonly node: {
    providerID: unknown;
    labels: Record<string, string>;
    addresses: unknown;
    taints: string[];
  };
  /** Undefined for a CCM that runs the Node scenarios only. */
  readonly ingress: unknown;
}

/**
 * Has the CCM initialize one Node and provision one load balancer (which also says it is ready),
 * removes both, and returns what it wrote; throws when that is not what the benchmark cloud answers.
 * A CCM that runs the Node scenarios only gets the Node only.
 */
export async function sampleCheck(
  h: Harness,
  ccm: RunningCcm,
  expected: { providerID: string; addresses: unknown; labels: Record<string, string> },
): Promise<Sample> {
  const { kube } = h;
  const name = 'cmp-sample';
  await kube.call('POST', '/api/v1/nodes', nodeObject(name, 'cmp-sample', true));
  const node = await initialized(kube, ccm, name);
  const service = ccm.contender.nodesOnly ? undefined : await sampleLoadBalancer(kube, ccm, name);
  const labels = Object.fromEntries(
    Object.entries(node.metadata.labels ?? {})
      .filter(([key]) => key !== groupLabel)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
  const sample: Sample = {
    node: {
      providerID: node.spec?.['providerID'],
      labels,
      addresses: node.status?.['addresses'],
      taints: taintsOf(node),
    },
    ingress: service === undefined ? undefined : ingressOf(service),
  };
  if (service !== undefined) {
    await kube.call('DELETE', `${servicesPath}/${name}`);
    await waitFor(
      ccm,
      'the sample Service deleted',
      120_000,
      async () => !(await exists(kube, `${servicesPath}/${name}`)),
    );
  }
  await removeNodes(kube, 'cmp-sample');
  const problems = problemsOf(sample, expected);
  if (problems.length > 0)
    throw new Error(`${ccm.contender.label} wrote what the benchmark cloud did not answer: ${problems.join('; ')}`);
  return sample;
}

// What in the sample differs from what the benchmark cloud answers.
function problemsOf(sample: Sample, expected: Parameters<typeof sampleCheck>[2]): string[] {
  const { labels } = sample.node;
  return [
    sample.node.providerID === expected.providerID ? '' : `providerID ${String(sample.node.providerID)}`,
    JSON.stringify(sample.node.addresses) === JSON.stringify(expected.addresses)
      ? ''
      : `addresses ${JSON.stringify(sample.node.addresses)}`,
    ...Object.entries(expected.labels).map(([k, v]) => (labels[k] === v ? '' : `label ${k}=${labels[k] ?? '(none)'}`)),
    sample.node.taints.includes(uninitializedTaint) ? 'still tainted uninitialized' : '',
  ].filter(Boolean);
}

async function sampleLoadBalancer(kube: Kube, ccm: RunningCcm, name: string): Promise<KubeObject> {
  await kube.call('POST', servicesPath, serviceObject(name, 'cmp-sample'));
  let service: KubeObject | undefined;
  await waitFor(ccm, 'the sample load balancer', 120_000, async () => {
    const current = await kube.call('GET', `${servicesPath}/${name}`);
    if (ingressOf(current).length > 0) service = current;
    return service !== undefined;
  });
  if (service === undefined) throw new Error('the sample load balancer was not provisioned');
  return service;
}

/** After a CCM stopped: deletes the LB scenario's Services (dropping the finalizers nobody will remove now) and Nodes. */
export async function removeLoadBalancers(kube: Kube): Promise<void> {
  const list = await kube.call<{ items: KubeObject[] }>(
    'GET',
    `${servicesPath}?labelSelector=${encodeURIComponent(`${groupLabel}=cmp-lb`)}`,
  );
  const names = list.items.map((s) => s.metadata.name);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let name = names[next++]; name !== undefined; name = names[next++]) {
      const patch = { metadata: { finalizers: null } };
      await kube.call('PATCH', `${servicesPath}/${name}`, patch, 'application/merge-patch+json');
      await kube.call('DELETE', `${servicesPath}/${name}`).catch(ignoreNotFound);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  await removeNodes(kube, 'cmp-lb');
}

/**
 * Kube.watch until `signal` aborts, resumed from the last resourceVersion seen (an event's or a
 * bookmark's) each time the stream ends or breaks, as client-go's reflector does. The API server
 * ends a watch whose reader falls behind: its watch cache hands each watcher events through a
 * channel of 10–100 (kubernetes, staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go,
 * suggestedWatchChannelSize) and closes one that stays full (cache_watcher.go, cacheWatcher.add,
 * counted in apiserver_terminated_watchers_total). On 2 busy cores a burst of Node writes does that
 * to the harness's watch in most scale waves; with a cap on resumes the watch stopped for good and
 * the scenario waited for Nodes long initialized. When the version has expired anyway (an ERROR
 * with code 410), it lists `path` once, hands every listed object on as MODIFIED and every one no
 * longer listed as DELETED, and watches on from the list. It gives up (rejects) after 5 failures
 * in a row (the connection refused or broken, or the API server answering with an error), and
 * never rejects before it is awaited, so a broken watch fails the scenario, not the process.
 * `stats`, when given, counts the resumes and lists.
 */
export function watch(
  kube: Kube,
  { path, resourceVersion, stats }: { path: string; resourceVersion: string; stats?: WatchStats },
  onEvent: (event: { type: string; object: KubeObject }) => void,
  signal: AbortSignal,
): Promise<void> {
  const counted = stats ?? { resumed: 0, relisted: 0 };
  let version = resourceVersion;
  // The last object seen of each key, to hand on as DELETED if a list after an expiry misses it.
  const known = new Map<string, KubeObject>();
  const seen = (event: { type: string; object: KubeObject }): void => {
    version = event.object.metadata.resourceVersion ?? version;
    const key = objectKey(event.object);
    if (event.type === 'DELETED') known.delete(key);
    else known.set(key, event.object);
    onEvent(event);
  };
  // One stream, until it ends: whether the version expired, or what else failed.
  const stream = async (): Promise<{ expired: boolean; failure?: string }> => {
    const ended: { expired: boolean; failure?: string } = { expired: false };
    const event = (e: { type: string; object: KubeObject }): void => {
      if (e.type !== 'ERROR') {
        seen(e);
        return;
      }
      const status = e.object as unknown as { code?: number; message?: string };
      if (status.code === 410) ended.expired = true;
      else ended.failure = `ERROR ${status.code ?? ''} ${status.message ?? ''}`;
    };
    try {
      const last = await kube.watch(path, version, event, signal);
      // A bookmark's version when one came after the last event (an ERROR's is none).
      if (!ended.expired && ended.failure === undefined) version = last;
      return ended;
    } catch (error) {
      return /: 410 /.test(String(error)) ? { expired: true } : { expired: false, failure: String(error) };
    }
  };
  const relist = async (): Promise<string | undefined> => {
    try {
      const list = await kube.call<{ items: KubeObject[]; metadata: { resourceVersion?: string } }>('GET', path);
      const listed = new Set<string>();
      for (const object of list.items) {
        listed.add(objectKey(object));
        seen({ type: 'MODIFIED', object });
      }
      for (const [key, object] of [...known]) if (!listed.has(key)) seen({ type: 'DELETED', object });
      version = list.metadata.resourceVersion ?? version;
      counted.relisted += 1;
      return undefined;
    } catch (error) {
      return String(error);
    }
  };
  const stopped = (): boolean => signal.aborted;
  const run = async (): Promise<void> => {
    for (let failures = 0; !stopped();) {
      const ended = await stream();
      if (stopped()) return;
      const failure = ended.expired ? await relist() : ended.failure;
      failures = failure === undefined ? 0 : failures + 1;
      if (failures === 5) throw new Error(`watch ${path}: 5 failures in a row, the last: ${failure}`);
      counted.resumed += 1;
      await sleep(failures === 0 ? 100 : 200 * 2 ** failures);
    }
  };
  const watching = run();
  watching.catch(() => undefined);
  return watching;
}

/** What a watch() went through. */
export interface WatchStats {
  /** Streams the API server ended (or that broke), each followed by a new watch. */
  resumed: number;
  /** Lists after an expired version (410). */
  relisted: number;
}

// Namespace and name of a watched object.
function objectKey(object: KubeObject): string {
  const namespace = object.metadata['namespace'];
  return `${typeof namespace === 'string' ? namespace : ''}/${object.metadata.name}`;
}

// Runs `body` (which waits for the last object), lets trailing writes land, and reads the costs.
export async function measured(h: Harness, ccm: RunningCcm, body: () => Promise<void>): Promise<Costs> {
  const { kube } = h;
  const before = await kube.requestCounters();
  const sentBefore = { ...kube.sent };
  const watched = ccm.processes.map((p) => ({
    ...p,
    cpuBefore: cpuMs(p.pid),
    peakReset: resetPeak(p.pid),
    sampler: sampleRss(p.pid),
  }));
  const apiserverBefore = cpuMs(h.apiserverPid);
  const started = performance.now();
  await body();
  await settle(kube);
  const apiserverCpuMs = cpuMs(h.apiserverPid) - apiserverBefore;
  const byProcess: Costs['byProcess'] = {};
  for (const p of watched) {
    const cpu = cpuMs(p.pid) - p.cpuBefore;
    const sampled = p.sampler.stop();
    byProcess[p.role] = { cpuMs: cpu, peakRssMb: p.peakReset ? Math.max(memoryMb(p.pid).peak, sampled) : sampled };
  }
  const seconds = (performance.now() - started) / 1000;
  const processes = Object.values(byProcess).filter((p) => p !== undefined);
  const apiserverCounts = difference(await kube.requestCounters(), before);
  const harnessCounts = difference(kube.sent, sentBefore);
  const all = count(apiserverCounts, () => true) - count(harnessCounts, () => true);
  const mutating =
    count(apiserverCounts, (v) => mutatingVerbs.has(v)) - count(harnessCounts, (v) => mutatingVerbs.has(v));
  return {
    ccmCpuMs: processes.reduce((sum, p) => sum + p.cpuMs, 0),
    apiserverCpuMs,
    requests: { all, mutating },
    peakRssMb: processes.reduce((sum, p) => sum + p.peakRssMb, 0),
    byProcess,
    seconds,
    apiserverCounts,
    harnessCounts,
  };
}

// Requests on the resources a CCM works on (Nodes, Services, Events, and their subresources; watches
// included). Other resources' requests on this control plane are the API server's own: its lease
// renewals, the IPAddress objects behind the harness's ClusterIPs, its internal watches. (Its
// ClusterIP repair loop also LISTs Services every few minutes: counted, one request in a long run.)
const ccmResources = new Set(['nodes', 'services', 'events']);

function count(counts: Counts, verb: (verb: string) => boolean): number {
  return Object.entries(counts)
    .filter(([key]) => {
      const [v = '', resource = ''] = key.split(' ');
      return ccmResources.has(resource.split('/')[0] ?? '') && verb(v);
    })
    .reduce((sum, [, n]) => sum + n, 0);
}

// Lets the CCM's trailing writes land (Events, status patches queued behind its client's rate
// limit): returns once a second has passed without a write on its resources, after at most 30 s.
async function settle(kube: Kube): Promise<void> {
  const writes = async (): Promise<number> => count(await kube.requestCounters(), (v) => mutatingVerbs.has(v));
  let last = await writes();
  for (let i = 0; i < 30; i++) {
    await sleep(1_000);
    const now = await writes();
    if (now === last) return;
    last = now;
  }
}

// Checks every 100 ms until `done` holds; fails at once when the CCM has exited.
export async function waitFor(
  ccm: RunningCcm,
  what: string,
  timeoutMs: number,
  done: () => boolean | Promise<boolean>,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    ccm.assertAlive();
    if (await done()) return;
    if (performance.now() > deadline) throw new Error(`${ccm.contender.label}: timed out waiting for ${what}`);
    await sleep(100);
  }
}

// A Node the CCM initialized (taint gone, addresses set), read back.
async function initialized(kube: Kube, ccm: RunningCcm, name: string): Promise<KubeObject> {
  let node: KubeObject | undefined;
  await waitFor(ccm, `Node ${name} initialized`, 120_000, async () => {
    const current = await kube.call('GET', `/api/v1/nodes/${name}`);
    const addresses = (current.status?.['addresses'] ?? []) as unknown[];
    if (!taintsOf(current).includes(uninitializedTaint) && addresses.length > 0) node = current;
    return node !== undefined;
  });
  if (node === undefined) throw new Error(`Node ${name} was not initialized`);
  return node;
}

async function removeNodes(kube: Kube, group: string): Promise<void> {
  await deleteNodes(kube, group);
  const path = `/api/v1/nodes?limit=1&labelSelector=${encodeURIComponent(`${groupLabel}=${group}`)}`;
  for (let i = 0; i < 600; i++) {
    if ((await kube.call<{ items: unknown[] }>('GET', path)).items.length === 0) return;
    await sleep(100);
  }
  throw new Error(`the Nodes of ${group} were not deleted within 60 s`);
}

async function exists(kube: Kube, path: string): Promise<boolean> {
  try {
    await kube.call('GET', path);
    return true;
  } catch (error) {
    if (/: 404 /.test((error as Error).message)) return false;
    throw error;
  }
}

function ignoreNotFound(error: unknown): void {
  if (!/: 404 /.test((error as Error).message)) throw error;
}

function serviceObject(name: string, group = 'cmp-lb'): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, labels: { [groupLabel]: group } },
    spec: { type: 'LoadBalancer', selector: { app: name }, ports: [{ port: 80, targetPort: 8080, protocol: 'TCP' }] },
  };
}

function taintsOf(node: KubeObject): string[] {
  return ((node.spec?.['taints'] ?? []) as { key?: string }[]).map((t) => t.key ?? '');
}

function ingressOf(service: KubeObject): { ip?: string; ipMode?: string }[] {
  const lb = service.status?.['loadBalancer'] as { ingress?: { ip?: string; ipMode?: string }[] } | undefined;
  return lb?.ingress ?? [];
}
