// The suite's objects: Nodes (registered with the uninitialized taint, as a kubelet does) and
// LoadBalancer Services, created, updated and deleted in a seeded random order while a fault runs,
// and what their final state must be (check.ts). Every write is retried until the API server
// takes it (it may be restarting), so the intended final state is always the one written.

import { sleep, type Kube, type KubeObject } from '../harness/kube.ts';
import { uninitializedTaint } from '../harness/context.ts';

export const namespace = 'chaos';
export const rowLabel = 'chaos.cirrus/row';

/** What a row's objects must end as. */
export interface Expected {
  readonly row: string;
  /** Node name → whether it must exist. */
  readonly nodes: Map<string, boolean>;
  /** Service name → its ports when it must exist (`TCP/80`), undefined when it must be gone. */
  readonly services: Map<string, string[] | undefined>;
}

export function emptyExpected(row: string): Expected {
  return { row, nodes: new Map(), services: new Map() };
}

/** A small seeded generator (mulberry32): the same run makes the same choices. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function nodeName(row: string, i: number): string {
  return `chaos-${row}-n${i}`;
}

export function serviceName(row: string, i: number): string {
  return `${row}-s${i}`;
}

export function nodeBody(row: string, name: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { [rowLabel]: row } },
    spec: { taints: [{ key: uninitializedTaint, value: 'true', effect: 'NoSchedule' }] },
  };
}

export function serviceBody(row: string, name: string, port = 80): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, labels: { [rowLabel]: row } },
    spec: { type: 'LoadBalancer', selector: { app: name }, ports: [{ name: 'http', port, protocol: 'TCP' }] },
  };
}

const servicesPath = `/api/v1/namespaces/${namespace}/services`;

/** Writes that fail because the API server is away are retried; 404/409 of an idempotent op are success. */
export async function retried(what: string, op: () => Promise<unknown>, ok: RegExp = /$^/): Promise<void> {
  const deadline = performance.now() + 120_000;
  for (;;) {
    try {
      await op();
      return;
    } catch (error) {
      const message = (error as Error).message;
      if (ok.test(message)) return;
      if (performance.now() > deadline) throw new Error(`${what}: ${message}`, { cause: error });
      await sleep(250);
    }
  }
}

export async function createNode(kube: Kube, expected: Expected, name: string): Promise<void> {
  expected.nodes.set(name, true);
  await retried(`create node ${name}`, () => kube.call('POST', '/api/v1/nodes', nodeBody(expected.row, name)), / 409 /);
}

export async function deleteNode(kube: Kube, expected: Expected, name: string): Promise<void> {
  expected.nodes.set(name, false);
  await retried(`delete node ${name}`, () => kube.call('DELETE', `/api/v1/nodes/${name}`), / 404 /);
}

export async function createService(kube: Kube, expected: Expected, name: string, port = 80): Promise<void> {
  expected.services.set(name, [`TCP/${port}`]);
  await retried(
    `create service ${name}`,
    () => kube.call('POST', servicesPath, serviceBody(expected.row, name, port)),
    / 409 /,
  );
}

export async function setServicePort(kube: Kube, expected: Expected, name: string, port: number): Promise<void> {
  expected.services.set(name, [`TCP/${port}`]);
  await retried(`update service ${name}`, () =>
    kube.call(
      'PATCH',
      `${servicesPath}/${name}`,
      { spec: { ports: [{ name: 'http', port, protocol: 'TCP' }] } },
      'application/merge-patch+json',
    ),
  );
}

export async function deleteService(kube: Kube, expected: Expected, name: string): Promise<void> {
  expected.services.set(name, undefined);
  await retried(`delete service ${name}`, () => kube.call('DELETE', `${servicesPath}/${name}`), / 404 /);
}

/** A label write on a Node: an update that needs no cloud work. */
export async function touchNode(kube: Kube, name: string, generation: number): Promise<void> {
  await retried(
    `update node ${name}`,
    () =>
      kube.call(
        'PATCH',
        `/api/v1/nodes/${name}`,
        { metadata: { labels: { 'chaos.cirrus/generation': String(generation) } } },
        'application/merge-patch+json',
      ),
    / 404 /,
  );
}

export interface ChurnSize {
  readonly nodes: number;
  readonly services: number;
  /** Operations per second across all objects. */
  readonly ratePerSecond: number;
}

/**
 * Creates `nodes` Nodes and `services` Services, updates about half of them and deletes about a
 * quarter, each object's operations in order, all interleaved in a seeded random order, at
 * `ratePerSecond` with up to 16 in flight. Resolves when every operation is done.
 */
export async function churn(kube: Kube, expected: Expected, size: ChurnSize, seed: number): Promise<void> {
  const random = seeded(seed);
  const plans: (() => Promise<void>)[][] = [];
  for (let i = 0; i < size.nodes; i++) {
    const name = nodeName(expected.row, i);
    const ops = [() => createNode(kube, expected, name)];
    if (random() < 0.5) ops.push(() => touchNode(kube, name, 1));
    if (random() < 0.25) ops.push(() => deleteNode(kube, expected, name));
    plans.push(ops);
  }
  for (let i = 0; i < size.services; i++) {
    const name = serviceName(expected.row, i);
    const ops = [() => createService(kube, expected, name)];
    if (random() < 0.5) ops.push(() => setServicePort(kube, expected, name, 81));
    if (random() < 0.25) ops.push(() => deleteService(kube, expected, name));
    plans.push(ops);
  }
  // One slot per operation, shuffled; each slot runs its object's next operation.
  const slots = plans.flatMap((ops, index) => ops.map(() => index));
  for (let i = slots.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [slots[i], slots[j]] = [slots[j] ?? 0, slots[i] ?? 0];
  }
  const chains = plans.map(() => Promise.resolve());
  const nextOp = plans.map(() => 0);
  const started = performance.now();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < slots.length) {
      const n = next++;
      const index = slots[n] ?? 0;
      await sleep(started + (n * 1000) / size.ratePerSecond - performance.now());
      const step = nextOp[index] ?? 0;
      nextOp[index] = step + 1;
      const op = plans[index]?.[step];
      if (op === undefined) continue;
      const run = (chains[index] ?? Promise.resolve()).then(op);
      chains[index] = run;
      await run;
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  await Promise.all(chains);
}

/** Ensures the suite's namespace exists. */
export async function ensureNamespace(kube: Kube): Promise<void> {
  await retried(
    'create namespace',
    () =>
      kube.call('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }),
    / 409 /,
  );
}

/** Removes a row's objects whatever cirrus did: finalizers stripped, then everything deleted. */
export async function cleanUp(kube: Kube, row: string): Promise<void> {
  const selector = `labelSelector=${encodeURIComponent(`${rowLabel}=${row}`)}`;
  const services = await kube.call<{ items: KubeObject[] }>('GET', `${servicesPath}?${selector}`);
  for (const service of services.items) {
    const finalizers = (service.metadata['finalizers'] as string[] | undefined) ?? [];
    if (finalizers.length > 0)
      await retried(
        'strip finalizers',
        () =>
          kube.call(
            'PATCH',
            `${servicesPath}/${service.metadata.name}`,
            { metadata: { finalizers: null } },
            'application/merge-patch+json',
          ),
        / 404 /,
      );
  }
  // Services have no DELETE collection.
  for (const service of services.items)
    await retried('delete service', () => kube.call('DELETE', `${servicesPath}/${service.metadata.name}`), / 404 /);
  await retried('delete nodes', () => kube.call('DELETE', `/api/v1/nodes?${selector}`));
}
