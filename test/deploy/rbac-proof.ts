// The RBAC proof of deploy/'s manifests on the real API server: sufficient and minimal. rbac.test.ts
// runs it on deploy/knative's and deploy/standalone's files, helm.test.ts on the Helm chart's
// objects of the same names (proveRbac's `source`).
//
// For each function (and the relay, and the static provider's ConfigMap), its ServiceAccount,
// roles and bindings from deploy/knative are applied into a namespace of the test's own (names of
// cluster-scoped and `default` objects suffixed, nothing else changed), and its integration
// scenario runs with a token of that ServiceAccount: it must pass. Then, for every permission the
// roles grant (one verb on one resource), the roles are applied without just that permission and
// the scenario must fail, with the API server refusing (403) a request that permission covers: a
// rule the function never uses is a failure. Each change is waited for with
// SelfSubjectAccessReviews, since the authorizer sees RBAC writes a moment later.
//
// The scenarios run the functions as the integration tests in test/functions do (the fake
// provider, or the static one for its ConfigMap; deploy/standalone's one ServiceAccount runs them
// all and the relay, one after the other; deploy/knative/bootstrap's node-init runs node-init's
// and a relay of its own), on a cluster that other test files share: their
// LISTs of Nodes and Services carry a label selector (added by the client), so that a periodic pass
// sees only this test's objects, and the objects are removed after each run.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { nodeInitFunction } from '../../functions/node-init/index.ts';
import { nodeLifecycleFunction } from '../../functions/node-lifecycle/index.ts';
import { buildRoutingTable, startRelay } from '../../relay/index.ts';
import { placeOf } from '../../relay/cursor-format.ts';
import { formatKey } from '../../shared/wire/keys.ts';
import { routesFunction } from '../../functions/routes/index.ts';
import { serviceLbFunction } from '../../functions/service-lb/index.ts';
import { FakeCloud, type FakeInstance } from '../../providers/fake/index.ts';
import { createStaticProvider } from '../../providers/static/index.ts';
import type { Report } from '../../shared/host/function.ts';
import {
  createNode,
  eventsAbout,
  newNode,
  silentLogger,
  uninitialized,
  withLabels,
  withReady,
  type NodeTweak,
} from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { knativeRoot, readObjects, standaloneRoot, type KubeObject } from './kustomize.ts';
import {
  apply,
  awaitAccess,
  describePermission,
  localize,
  permissionsOf,
  RecordingKubeConfig,
  refusedFor,
  remove,
  samePermission,
  withoutPermission,
} from './rbac-harness.ts';
import { catalogue } from '../../functions/catalogue.ts';

const run = { dryRun: false, log: silentLogger(), signal: new AbortController().signal };
const runId = uniqueName('rbac');
const selectorLabel = 'cirrus-rbac-test';

/** What a scenario works with. */
interface Context {
  readonly admin: KubeConfig;
  readonly adminCore: CoreV1Api;
  /** The ServiceAccount's configuration: every client made from it records refusals. */
  readonly account: RecordingKubeConfig;
  readonly core: CoreV1Api;
  readonly namespace: string;
  readonly fixtures: Fixtures;
}

/** A deployable piece, its RBAC files in deploy/knative, and the scenario that needs every permission they grant. */
interface Subject {
  readonly name: string;
  readonly serviceAccount: string;
  /** Where `files` and `checked` are: deploy/knative by default. */
  readonly root?: string;
  /** Applied in order. */
  readonly files: readonly string[];
  /** Whose permissions are each checked for necessity (the others have a subject of their own). */
  readonly checked: readonly string[];
  readonly scenario: (context: Context) => Promise<void>;
}

/** Nodes and Services made for one scenario run, labelled for its selector, removed afterwards. */
class Fixtures {
  readonly #core: CoreV1Api;
  readonly #namespace: string;
  readonly #label: Record<string, string>;
  #nodes: string[] = [];
  #services: string[] = [];

  constructor(core: CoreV1Api, namespace: string) {
    this.#core = core;
    this.#namespace = namespace;
    this.#label = { [selectorLabel]: namespace };
  }

  async node(prefix: string, ...tweaks: NodeTweak[]): Promise<string> {
    const name = uniqueName(prefix);
    this.#nodes.push(name);
    await createNode(this.#core, newNode(name, withLabels(this.#label), ...tweaks));
    return name;
  }

  async service(prefix: string): Promise<string> {
    const name = uniqueName(prefix);
    this.#services.push(name);
    await this.#core.createNamespacedService({
      namespace: this.#namespace,
      body: {
        metadata: { name, labels: this.#label },
        spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
      },
    });
    return name;
  }

  async cleanUp(): Promise<void> {
    const [nodes, services] = [this.#nodes, this.#services];
    [this.#nodes, this.#services] = [[], []];
    await Promise.all([
      ...nodes.map(async (name) => this.#core.deleteNode({ name }).catch(ignoreNotFound)),
      ...services.map(async (name) => {
        // service-lb's cleanup finalizer would keep a deleted Service forever (no controller runs here).
        await this.#core
          .patchNamespacedService({
            name,
            namespace: this.#namespace,
            body: [{ op: 'remove', path: '/metadata/finalizers' }],
          })
          .catch(() => undefined);
        await this.#core.deleteNamespacedService({ name, namespace: this.#namespace }).catch(ignoreNotFound);
      }),
    ]);
  }
}

function ignoreNotFound(error: unknown): void {
  if ((error as { code?: number }).code !== 404) throw error;
}

/** Each listed object has that result and no error (a refused follow-up write is reported as one). */
function expectResults(report: Report, expected: Record<string, string>): void {
  for (const [key, result] of Object.entries(expected)) {
    const object = report.objects.find((o) => o.key === key);
    assert.deepEqual({ result: object?.result, error: object?.error }, { result, error: undefined }, key);
  }
}

async function expectEvent(context: Context, namespace: string, name: string, reason: string): Promise<void> {
  const events = await eventsAbout(context.adminCore, namespace, name);
  assert.ok(
    events.some((e) => e.split('/')[1] === reason),
    `a ${reason} Event about ${name} (found: ${events.join(', ') || 'none'})`,
  );
}

function machine(name: string): FakeInstance {
  return {
    id: name,
    nodeName: name,
    instanceType: 'm1.large',
    zone: 'zone-a',
    region: 'region-1',
    addresses: [{ type: 'InternalIP', address: '10.1.0.5' }],
  };
}

// Ready, so that other test files' node-lifecycle passes leave these Nodes alone.
const ready = withReady('True');

async function nodeInitScenario(c: Context): Promise<void> {
  const cloud = new FakeCloud();
  const [fresh, later] = await Promise.all([
    c.fixtures.node('rbac-init', uninitialized, ready),
    c.fixtures.node('rbac-init-all', uninitialized, ready),
  ]);
  cloud.machines.push(machine(fresh), machine(later));
  const fn = nodeInitFunction({ core: c.core, cloud });
  // A Node event: get the Node, patch it (provider ID, labels, taint), patch its status
  // (addresses), create the Synced Event.
  expectResults(await fn.reconcileOne({ kind: 'Node', name: fresh }, run), { [`Node/${fresh}`]: 'initialized' });
  // The periodic pass: list the Nodes; the other one initialized, the first one's new addresses written.
  cloud.machines[0] = { ...machine(fresh), addresses: [{ type: 'InternalIP', address: '10.1.0.99' }] };
  expectResults(await fn.reconcileAll(run), {
    [`Node/${later}`]: 'initialized',
    [`Node/${fresh}`]: 'addresses-updated',
  });
}

async function nodeLifecycleScenario(c: Context): Promise<void> {
  const cloud = new FakeCloud();
  const [gone, down] = await Promise.all([
    c.fixtures.node('rbac-gone', withReady('False')),
    c.fixtures.node('rbac-down', withReady('False')),
  ]);
  cloud.machines.push({ id: down, nodeName: down, shutdown: true });
  const fn = nodeLifecycleFunction({ core: c.core, cloud });
  // A NotReady Node whose instance is gone: get it, create the DeletingNode Event, delete it.
  expectResults(await fn.reconcileOne({ kind: 'Node', name: gone }, run), { [`Node/${gone}`]: 'deleted' });
  await expectEvent(c, 'default', gone, 'DeletingNode');
  // The periodic pass: list the Nodes; the one whose instance is shut down is tainted (patch).
  expectResults(await fn.reconcileAll(run), { [`Node/${down}`]: 'shutdown-tainted' });
}

async function serviceLbScenario(c: Context): Promise<void> {
  const cloud = new FakeCloud();
  const [, name] = await Promise.all([c.fixtures.node('rbac-lb', ready), c.fixtures.service('web')]);
  const key = `Service/${c.namespace}/${name}`;
  const fn = serviceLbFunction({
    core: c.core,
    loadBalancer: cloud.loadBalancer() ?? assert.fail(),
    clusterName: 'kubernetes',
  });
  // A Service event: get the Service, list the Nodes, create Events, patch the status subresource
  // (the finalizer, then the address and the sync record).
  expectResults(await fn.reconcileOne({ kind: 'Service', namespace: c.namespace, name }, run), { [key]: 'ensured' });
  const service = await c.adminCore.readNamespacedService({ namespace: c.namespace, name });
  assert.deepEqual(
    service.status?.loadBalancer?.ingress?.map((i) => i.ip),
    [cloud.loadBalancerIp],
  );
  await expectEvent(c, c.namespace, name, 'EnsuredLoadBalancer');
  // The pass over all Services: list them (and the Nodes).
  expectResults(await fn.reconcileAll(run), { [key]: 'unchanged' });
}

// The static provider as deployed: an inventory that names no allocations namespace, in a pod of the
// deployment's namespace (the file the kubelet writes names it), with the ConfigMaps of
// static-provider/allocations.yaml as applied (the record of earlier versions and its eight parts,
// empty: fresh ones for each run). The pool's eight addresses lie in eight /24 blocks, one in each
// part (ADR 0028), so that eight Services write every part and each part's rights are tried.
async function staticProviderScenario(c: Context): Promise<void> {
  const configMaps = localize(readObjects(join(knativeRoot, 'static-provider/allocations.yaml')), {
    namespace: c.namespace,
    suffix: '',
  });
  assert.ok(
    configMaps.length === 9 && configMaps.every((object) => object.kind === 'ConfigMap'),
    'static-provider/allocations.yaml holds the record and its eight parts',
  );
  for (const { metadata } of configMaps)
    await c.adminCore.deleteNamespacedConfigMap({ namespace: c.namespace, name: metadata.name }).catch(ignoreNotFound);
  await apply(c.admin, configMaps);
  const blocks = Array.from({ length: 8 }, (_, block) => `10.77.${String(block)}.1`);
  const dir = await mkdtemp(join(tmpdir(), 'cirrus-rbac-'));
  try {
    const namespaceFile = join(dir, 'namespace');
    await writeFile(namespaceFile, c.namespace);
    const inventory = [
      'instances: [{ name: worker-1, addresses: [{ type: InternalIP, address: 10.0.0.11 }] }]',
      'loadBalancers:',
      `  pools: [{ name: default, default: true, addresses: [${blocks.join(', ')}] }]`,
    ].join('\n');
    const cloud = await createStaticProvider(
      { config: inventory, configPath: undefined, signal: run.signal, log: run.log, kubeConfig: c.account },
      { namespaceFile },
    );
    const [, ...services] = await Promise.all([
      c.fixtures.node('rbac-ipam', ready),
      ...blocks.map((_, i) => c.fixtures.service(`ipam-${String(i)}`)),
    ]);
    const fn = serviceLbFunction({
      core: c.core,
      loadBalancer: cloud.loadBalancer() ?? assert.fail(),
      clusterName: 'kubernetes',
    });
    // Each allocation reads the record and patches its address's part (conditionally on what it
    // read); nothing creates a ConfigMap.
    for (const service of services) {
      expectResults(await fn.reconcileOne({ kind: 'Service', namespace: c.namespace, name: service }, run), {
        [`Service/${c.namespace}/${service}`]: 'ensured',
      });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  for (const { metadata } of configMaps.slice(1)) {
    const part = await c.adminCore.readNamespacedConfigMap({ namespace: c.namespace, name: metadata.name });
    assert.equal(Object.keys(part.data ?? {}).length, 1, `one allocation recorded in ${metadata.name}`);
  }
}

async function routesScenario(c: Context): Promise<void> {
  const cloud = new FakeCloud();
  const cidrs = [
    `10.245.${String(Math.floor(Math.random() * 250))}.0/24`,
    `10.246.${String(Math.floor(Math.random() * 250))}.0/24`,
  ];
  const [routed, refused] = await Promise.all(
    cidrs.map(async (cidr) => c.fixtures.node('rbac-route', ready, withPodCidr(cidr))),
  );
  // The cloud refuses one route: its FailedToCreateRoute Event needs events create.
  cloud.routeErrors.set(cidrs[1] ?? '', new Error('route quota exceeded'));
  const fn = routesFunction({
    core: c.core,
    routes: cloud.routes() ?? assert.fail(),
    clusterName: 'kubernetes',
    clusterCidrs: ['10.244.0.0/14'],
  });
  // A pass: list the Nodes, create routes, patch each Node's NetworkUnavailable condition (status).
  const report = await fn.reconcileAll(run);
  expectResults(report, { [`Node/${routed ?? ''}`]: 'routes-created' });
  const failed = report.objects.find((o) => o.key === `Node/${refused ?? ''}`);
  assert.deepEqual(
    failed?.changes.map((change) => change.action),
    ['event', 'patch-status'],
    `the refused route's Event and condition: ${failed?.error ?? ''}`,
  );
  await expectEvent(c, 'default', refused ?? '', 'FailedToCreateRoute');
}

function withPodCidr(cidr: string): NodeTweak {
  return (node) => {
    node.spec = { ...node.spec, podCIDR: cidr, podCIDRs: [cidr] };
  };
}

/** A logger that keeps what it writes, for the refusals the relay's watches log (they bypass API clients). */
function recordingLogger(): { logger: Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (line: string) => {
        records.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  return { logger, records };
}

// A refused LIST or WATCH, from the relay's log, as a request line (`GET /api/v1/nodes?watch`).
function refusalInLog(record: Record<string, unknown>): string | undefined {
  const error = record['err'] as { statusCode?: number; code?: number; message?: string } | undefined;
  if (error?.statusCode !== 403 && error?.code !== 403) return undefined;
  const path = `/api/v1/${String(record['resource'])}`;
  if (record['msg'] === 'LIST failed; retrying') return `GET ${path}`;
  if (record['msg'] === 'watch failed') return `GET ${path}?watch`;
  return record['lease'] === undefined ? `LOG ${String(record['msg'])}: ${error.message ?? ''}` : undefined;
}

/** The relay's scenario for the Lease `lease`, delivering the feeds of `functions`. */
function relayScenario(lease: string, functions: readonly string[]): (c: Context) => Promise<void> {
  return async (c) => runRelayScenario(c, lease, functions);
}

async function runRelayScenario(c: Context, lease: string, functions: readonly string[]): Promise<void> {
  const leases = c.admin.makeApiClient(CoordinationV1Api);
  // No Lease yet, so that the relay creates it.
  await leases.deleteNamespacedLease({ name: lease, namespace: c.namespace }).catch(ignoreNotFound);
  // The known-keys cursor (ADR 0014) of each resource the functions' feeds watch: its ConfigMaps
  // come with the manifests (cursor.yaml), so the relay reads and patches them.
  const cursors = functions.includes('service-lb') ? ['nodes', 'services'] : ['nodes'];
  const sink = createServer((request, response) => {
    request.resume();
    response.writeHead(202).end('{}');
  }).listen(0, '127.0.0.1');
  await once(sink, 'listening');
  const url = `http://127.0.0.1:${String((sink.address() as { port: number }).port)}/`;
  const { logger, records } = recordingLogger();
  const relay = startRelay({
    kubeConfig: c.account,
    // Node-init's feed watches Nodes, service-lb's watches Services; no periodic triggers.
    routing: buildRoutingTable(catalogue, {
      to: functions.map((fn) => `${fn}=${url}`),
      periods: { 'node-init': 0, 'node-lifecycle': 0, 'service-lb': 0, routes: 0 },
    }),
    logger,
    leaderElection: {
      name: lease,
      namespace: c.namespace,
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 200,
    },
    watch: { backoff: { initialMs: 100, maxMs: 1_000, jitter: 0 } },
    processMetrics: false,
  });
  let firstVersion: string | undefined;
  // The relay retries a refused request for ever: a refusal is this scenario's failure.
  const done = async (): Promise<boolean> => {
    const refusals = records.map(refusalInLog).filter((line) => line !== undefined);
    c.account.refused.push(...refusals.filter((line) => !c.account.refused.includes(line)));
    if (c.account.refused.length > 0) throw new Error(`refused: ${c.account.refused.join(', ')}`);
    const status = relay.status();
    if (status.role !== 'leader' || !status.ready) return false;
    // Renewed: the Lease it created was written again (get, then update).
    const read = await leases.readNamespacedLease({ name: lease, namespace: c.namespace });
    firstVersion ??= read.metadata?.resourceVersion;
    return read.spec?.holderIdentity === relay.identity && read.metadata?.resourceVersion !== firstVersion;
  };
  // Then the cursor: patched when objects it must record appear, one in each of its four parts
  // (relay/cursor.ts; a part that does not change is not written, and its rights would go untried).
  const nodeMarkers = markersInEveryPart(uniqueName('rbac-cursor'), (name) => formatKey({ kind: 'Node', name }));
  const serviceMarkers = markersInEveryPart(uniqueName('rbac-cursor'), (name) =>
    formatKey({ kind: 'Service', namespace: c.namespace, name }),
  );
  const markers = { nodes: nodeMarkers, services: serviceMarkers };
  const recorded = async (): Promise<boolean> => {
    await done();
    for (const resource of cursors) {
      const parts = await Promise.all(
        [0, 1, 2, 3].map((i) =>
          c.adminCore
            .readNamespacedConfigMap({
              name: `${lease}-known-${resource}${i === 0 ? '' : `-${String(i)}`}`,
              namespace: c.namespace,
            })
            .catch(() => undefined),
        ),
      );
      const shards = parts.flatMap((configMap) => Object.values(configMap?.data ?? {}));
      const wanted = resource === 'nodes' ? markers.nodes : markers.services;
      if (!wanted.every((marker) => shards.some((shard) => shard.includes(`/${marker}"`)))) return false;
    }
    return true;
  };
  try {
    await until('the relay to lead with its watches open and renew its Lease', done, 8_000);
    for (const name of nodeMarkers) await c.adminCore.createNode({ body: { metadata: { name } } });
    if (cursors.includes('services'))
      for (const name of serviceMarkers)
        await c.adminCore.createNamespacedService({
          namespace: c.namespace,
          // A LoadBalancer: the cursor records only the Services whose delete a function needs.
          body: { metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } },
        });
    await until('the relay to record new objects in every part of its cursor', recorded, 8_000);
  } finally {
    for (const name of nodeMarkers) await c.adminCore.deleteNode({ name }).catch(ignoreNotFound);
    for (const name of serviceMarkers)
      await c.adminCore.deleteNamespacedService({ name, namespace: c.namespace }).catch(ignoreNotFound);
    await relay.stop();
    sink.closeAllConnections();
    sink.close();
  }
}

// Names `<prefix>-<n>` whose keys fall in each of the cursor's four parts, one per part.
function markersInEveryPart(prefix: string, key: (name: string) => string): string[] {
  const byPart = new Map<number, string>();
  for (let n = 0; byPart.size < 4; n++) {
    const name = `${prefix}-${String(n)}`;
    const { part } = placeOf(key(name), 4);
    if (!byPart.has(part)) byPart.set(part, name);
  }
  return [...byPart.values()];
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

const subjects: readonly Subject[] = [
  {
    name: 'node-init',
    serviceAccount: 'cirrus-node-init',
    files: ['node-init/rbac/rbac.yaml'],
    checked: ['node-init/rbac/rbac.yaml'],
    scenario: nodeInitScenario,
  },
  {
    name: 'node-lifecycle',
    serviceAccount: 'cirrus-node-lifecycle',
    files: ['node-lifecycle/rbac/rbac.yaml'],
    checked: ['node-lifecycle/rbac/rbac.yaml'],
    scenario: nodeLifecycleScenario,
  },
  {
    name: 'service-lb',
    serviceAccount: 'cirrus-service-lb',
    files: ['service-lb/rbac/rbac.yaml'],
    checked: ['service-lb/rbac/rbac.yaml'],
    scenario: serviceLbScenario,
  },
  {
    name: 'routes',
    serviceAccount: 'cirrus-routes',
    files: ['routes/rbac/rbac.yaml'],
    checked: ['routes/rbac/rbac.yaml'],
    scenario: routesScenario,
  },
  {
    name: 'relay',
    serviceAccount: 'cirrus-relay',
    files: ['relay/rbac.yaml', 'relay/cursor.yaml'],
    checked: ['relay/rbac.yaml'],
    scenario: relayScenario('cirrus-relay', ['node-init', 'service-lb']),
  },
  {
    name: 'static-provider',
    serviceAccount: 'cirrus-service-lb',
    files: ['service-lb/rbac/rbac.yaml', 'static-provider/rbac.yaml', 'static-provider/allocations.yaml'],
    checked: ['static-provider/rbac.yaml'],
    scenario: staticProviderScenario,
  },
  {
    // node-init with a relay of its own (Nodes only), electing a leader on the Lease cirrus-node-init.
    name: 'node-init-bootstrap',
    serviceAccount: 'cirrus-node-init',
    files: ['node-init/rbac/rbac.yaml', 'bootstrap/rbac.yaml', 'bootstrap/cursor.yaml'],
    checked: ['bootstrap/rbac.yaml'],
    scenario: inTurn(nodeInitScenario, relayScenario('cirrus-node-init', ['node-init'])),
  },
  {
    // `cirrus start`: every function, the static provider's allocations, and the relay on the Lease cirrus.
    name: 'standalone',
    serviceAccount: 'cirrus',
    root: standaloneRoot,
    files: ['ccm/rbac.yaml', 'ccm/cursor.yaml', 'static-provider/rbac.yaml', 'static-provider/allocations.yaml'],
    checked: ['ccm/rbac.yaml', 'static-provider/rbac.yaml'],
    scenario: inTurn(
      nodeInitScenario,
      nodeLifecycleScenario,
      serviceLbScenario,
      routesScenario,
      staticProviderScenario,
      relayScenario('cirrus', ['node-init', 'node-lifecycle', 'service-lb', 'routes']),
    ),
  },
];

/** The scenarios one after the other, each with its objects removed before the next; the first failure fails it. */
function inTurn(...scenarios: ((c: Context) => Promise<void>)[]): (c: Context) => Promise<void> {
  return async (c) => {
    for (const scenario of scenarios) {
      try {
        await scenario(c);
      } finally {
        await c.fixtures.cleanUp();
      }
    }
  };
}

// Each subject in a namespace of its own: its ServiceAccount, its label selector.
function placementOf(subject: Subject): { namespace: string; suffix: string } {
  return { namespace: `${runId}-${subject.name}`, suffix: `${runId.slice(-8)}-${subject.name}` };
}

/**
 * Where a proof takes each object of a subject's files from: the files themselves, or another
 * rendering of them. `root`: the files' base (deploy/knative or deploy/standalone).
 */
export type ObjectSource = (fromFiles: readonly KubeObject[], root: string) => KubeObject[];

function rbacObjects(subject: Subject, files: readonly string[], source: ObjectSource): KubeObject[] {
  return localize(
    source(
      files.flatMap((file) => readObjects(join(subject.root ?? knativeRoot, file))),
      subject.root ?? knativeRoot,
    ),
    placementOf(subject),
  );
}

/**
 * Registers the proof (a describe per subject) under `title`: each subject's scenario passes with
 * its objects, and fails with a 403 without any one permission of those it checks. The objects are
 * the subject's files', or what `source` gives for them (the same names from another rendering).
 */
export function proveRbac(title: string, source: ObjectSource = (objects) => [...objects]): void {
  describe(title, { skip: controlPlaneSkip, concurrency: true }, () => {
    let admin: KubeConfig;
    let adminCore: CoreV1Api;
    const applied: KubeObject[] = [];
    before(async () => {
      ({ admin } = await testCluster());
      adminCore = admin.makeApiClient(CoreV1Api);
    });
    after(async () => {
      await remove(
        admin,
        applied.filter((o) => o.metadata.namespace === undefined || o.metadata.namespace === 'default'),
      );
    });

    for (const subject of subjects) {
      describe(subject.name, { concurrency: 1 }, () => {
        const objects = rbacObjects(subject, subject.files, source);
        const checked = permissionsOf(rbacObjects(subject, subject.checked, source));
        const all = permissionsOf(objects);
        let context: Context;

        before(async () => {
          const { namespace } = placementOf(subject);
          await adminCore.createNamespace({ body: { metadata: { name: namespace } } });
          applied.push(...objects);
          await apply(admin, objects);
          const token = await (await testCluster()).asServiceAccount(namespace, subject.serviceAccount);
          const account = new RecordingKubeConfig(token, `${selectorLabel}=${namespace}`);
          context = {
            admin,
            adminCore,
            account,
            core: account.makeApiClient(CoreV1Api),
            namespace,
            fixtures: new Fixtures(adminCore, namespace),
          };
          await awaitAccess(account, new Map(all.map((p) => [p, true])));
        });

        it(`its scenario passes as ServiceAccount ${subject.serviceAccount} with exactly these roles`, async () => {
          await runScenario(subject, context);
          assert.deepEqual(context.account.refused, [], 'no request refused');
        });

        for (const permission of checked) {
          it(`fails with 403 without ${describePermission(permission)}`, async () => {
            await apply(
              admin,
              objects.map((object) => withoutPermission(object, permission)),
            );
            await awaitAccess(context.account, new Map(all.map((p) => [p, !samePermission(p, permission)])));
            const outcome = await runScenario(subject, context).then(
              () => undefined,
              (error: unknown) => error,
            );
            assert.ok(
              outcome !== undefined,
              `the scenario passed without ${describePermission(permission)}: a permission it never uses`,
            );
            assert.ok(
              context.account.refused.some((line) => refusedFor(line, permission)),
              `the failure is a 403 on ${describePermission(permission)}; refused: [${context.account.refused.join(', ')}]; failure: ${outcome instanceof Error ? outcome.message : JSON.stringify(outcome)}`,
            );
          });
        }
      });
    }
  });
}

// Runs the scenario with a fresh record of refusals, and removes its objects afterwards.
async function runScenario(subject: Subject, context: Context): Promise<void> {
  context.account.refused.length = 0;
  try {
    await subject.scenario(context);
  } finally {
    await context.fixtures.cleanUp();
  }
}
