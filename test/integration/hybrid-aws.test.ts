// A hybrid cluster with the real providers (issue 28, ADR 0026): bare metal (`static`, an inventory
// with a pool of addresses) beside `aws` (the run's AWS emulator, moto, in a world of this file's
// own), run by the real command line — `cirrus start --cloud-provider static,aws --cloud-config
// static=…,aws=… --default-provider aws --load-balancer-class static=…`, in process through
// main(argv, io) as test/integration/reconcile-start.test.ts runs it — against a control plane of
// this file's own. The aws provider reaches the emulator through a call-counting proxy
// (tools/aws-emulator/counter.ts), behind a switch of this file's (blackhole()) that the last two
// tests turn: first to hang (connections accepted and never answered, as a blackholed cloud
// behaves to a client that has a connection: every call waits out RequestTimeoutSeconds), then
// closed, so the aws cloud is unreachable (connection refused), as when a VPC endpoint or the
// network to it goes away.
//
// What is looked at is the outcome on both sides: Nodes, Services and Events in the API server;
// instances, load balancers and routes in the emulator. With ownership ignored (chooseForNode in
// shared/cloud/fleet.ts giving every Node to the first provider, static) every test fails: static,
// asked about the aws Nodes, finds no such machines in its inventory, so they stay tainted and
// node-lifecycle deletes them; the NLB gets no targets and the route table no routes.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DescribeLoadBalancersCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { main } from '../../app/cli/main.ts';
import { providerLabel } from '../../shared/cloud/ownership.ts';
import { startCallCounter, type CallCounter } from '../../tools/aws-emulator/counter.ts';
import {
  awsEmulatorSkip,
  awsTestEnv,
  awsWorld,
  instanceRoutes,
  registeredTargets,
  type AwsWorld,
  type WorldInstance,
} from '../harness/aws.ts';
import {
  createNode,
  newNode,
  ownTaints,
  setReady,
  uninitialized,
  withLabels,
  withProviderId,
} from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { waitFor } from '../relay/harness.ts';

const skip = controlPlaneSkip || awsEmulatorSkip;
const metalClass = 'example.com/metal';
const pool = '192.0.2.0/28';

interface Run {
  readonly done: Promise<number>;
  stderr: string;
  /** Its exit status, once it has exited. */
  exited?: number;
}

describe('a hybrid cluster of static and aws, against the AWS emulator, run by cirrus start', { skip }, () => {
  const own = ownControlPlane();
  const names = {
    metal1: uniqueName('metal'),
    metal2: uniqueName('metal'),
    metalLate: uniqueName('metal-late'),
    metalGone: uniqueName('metal-gone'),
    metalUp: uniqueName('metal-up'),
    metalHang: uniqueName('metal-hang'),
    foreign: uniqueName('foreign'),
  };
  let world: AwsWorld;
  let proxy: CallCounter;
  let aws: Blackhole;
  let inventoryFile: string;
  const removed = new Set<string>();
  const machines = (): string[] => [names.metal1, names.metal2, names.metalLate, names.metalUp, names.metalHang];
  let start: Run;
  const stop = new AbortController();
  // Two aws Nodes: `a` named by its private DNS name (the default provider's), `b` with its provider ID.
  let a: WorldInstance;
  let b: WorldInstance;
  let gone: WorldInstance;

  before(async () => {
    world = await awsWorld('hybrid-aws');
    proxy = await startCallCounter(world.endpoint);
    aws = await blackhole(proxy.endpoint);
    Object.assign(process.env, awsTestEnv({ endpoint: aws.endpoint, region: world.region }));
    [a, b, gone] = [await world.runInstance(), await world.runInstance(), await world.runInstance()];
    const dir = mkdtempSync(join(tmpdir(), 'cirrus-hybrid-aws-'));
    const kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, own.admin.exportConfig());
    writeFileSync(join(dir, 'cloud.conf'), world.cloudConfig());
    inventoryFile = join(dir, 'inventory.yaml');
    writeFileSync(inventoryFile, inventory(machines()));
    start = cirrus(
      [
        'start',
        '--cloud-provider',
        'static,aws',
        '--cloud-config',
        `static=${inventoryFile},aws=${join(dir, 'cloud.conf')}`,
        '--default-provider',
        'aws',
        '--load-balancer-class',
        `static=${metalClass}`,
        '--cluster-cidr',
        '10.244.0.0/16',
        '--kubeconfig',
        kubeconfig,
        '--use-existing-cluster',
        '--leader-elect=false',
        '--node-monitor-period',
        '2s',
        '--route-reconciliation-period',
        '2s',
        '--port',
        '0',
        '--log-level',
        process.env['CIRRUS_TEST_LOG'] ?? 'silent',
      ],
      { XDG_RUNTIME_DIR: dir },
      stop.signal,
    );
    await waitFor(
      'cirrus start running',
      () => {
        if (start.exited !== undefined) throw new Error(`cirrus start exited with ${start.exited}`);
        return start.stderr.includes('cirrus running:');
      },
      30_000,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${start.stderr}`);
    });
  });
  after(async () => {
    stop.abort();
    await (aws as Blackhole | undefined)?.close();
    if ((start as Run | undefined) !== undefined) assert.equal(await start.done, 0, start.stderr);
    await (proxy as CallCounter | undefined)?.close().catch(() => undefined);
    (world as AwsWorld | undefined)?.close();
  });

  const readNode = (name: string): Promise<V1Node | undefined> => own.core.readNode({ name }).catch(() => undefined);
  const initialized = async (name: string): Promise<V1Node | undefined> => {
    const node = await readNode(name);
    return node?.spec?.providerID !== undefined && ownTaints(node).length === 0 ? node : undefined;
  };
  // Sets a Node's Ready condition; its being gone (404) is a finding, not a glitch.
  const ready = async (name: string, status: 'True' | 'False'): Promise<void> => {
    await setReady(own.core, name, status).catch((error: unknown) => {
      throw new Error(`${name} is gone: deleted by a provider? (${(error as Error).message})`, { cause: error });
    });
  };
  const metalNode = (name: string, n: number): V1Node =>
    withCidr(newNode(name, uninitialized, withLabels({ [providerLabel]: 'static' })), n);
  // The routes in this world's route table, as `<pod CIDR>><instance>`.
  const routes = (): Promise<string[]> => instanceRoutes(world);

  it('initializes each Node with its own provider, and leaves a Node nobody owns tainted with one Event', async () => {
    await createNode(own.core, metalNode(names.metal1, 1));
    await createNode(own.core, metalNode(names.metal2, 2));
    await createNode(own.core, withCidr(newNode(a.privateDnsName, uninitialized), 11));
    await createNode(own.core, withCidr(newNode(b.privateDnsName, uninitialized, withProviderId(b.providerId)), 12));
    await createNode(own.core, newNode(names.foreign, uninitialized, withProviderId(`gce://p/z/${names.foreign}`)));
    for (const name of [names.metal1, names.metal2, a.privateDnsName, b.privateDnsName]) await ready(name, 'True');
    const wanted = [
      ...[names.metal1, names.metal2].map((name) => [name, `static://${name}`, 'm1.metal', 'rack-a'] as const),
      ...[a, b].map((i) => [i.privateDnsName, i.providerId, i.instanceType, i.az] as const),
    ];
    await waitFor(
      'every static and aws Node initialized',
      async () => (await Promise.all(wanted.map(([name]) => initialized(name)))).every((n) => n !== undefined),
      30_000,
    );
    for (const [name, providerId, instanceType, zone] of wanted) {
      const node = await own.core.readNode({ name });
      const labels = node.metadata?.labels ?? {};
      assert.deepEqual(
        [node.spec?.providerID, labels['node.kubernetes.io/instance-type'], labels['topology.kubernetes.io/zone']],
        [providerId, instanceType, zone],
        `${name} initialized by the wrong provider`,
      );
    }
    const events = await noCloudProviderEvents(names.foreign, 1);
    assert.equal(events.length, 1);
    assert.match(events[0] ?? '', /gce:\/\/.* is not of a provider served here \(static, aws\)/);
    const foreign = await own.core.readNode({ name: names.foreign });
    assert.equal(foreign.spec?.providerID, `gce://p/z/${names.foreign}`);
    assert.deepEqual(
      ownTaints(foreign).map((t) => t.key),
      ['node.cloudprovider.kubernetes.io/uninitialized'],
    );
  });

  it('makes each Service’s load balancer with its class’s provider: an NLB over the aws Nodes, an address from the pool', async () => {
    const awsService = uniqueName('web');
    const metalService = uniqueName('metal-web');
    await createService(awsService, undefined);
    await createService(metalService, metalClass);
    const ingress = async (name: string) =>
      (await own.core.readNamespacedService({ namespace: 'default', name })).status?.loadBalancer?.ingress?.[0];
    await waitFor(
      'the aws Service’s NLB hostname',
      async () => (await ingress(awsService))?.hostname !== undefined,
      30_000,
    );
    await waitFor('the static Service’s address', async () => (await ingress(metalService))?.ip !== undefined, 30_000);
    assert.match((await ingress(metalService))?.ip ?? '', /^192\.0\.2\.([1-9]|1[0-4])$/);
    assert.equal((await ingress(metalService))?.hostname, undefined);
    // The aws one's NLB targets exactly the aws Nodes' instances; the static one has no NLB.
    const nlb = await nlbOf(awsService);
    assert.equal((await ingress(awsService))?.hostname, nlb?.DNSName);
    await waitFor(
      'the NLB to target the aws instances only',
      async () => {
        const ids = await registeredTargets(world.elbv2, nlb?.LoadBalancerArn);
        return ids.length > 0 && ids.every((t) => t.join() === [a.instanceId, b.instanceId].sort().join());
      },
      30_000,
    );
    assert.equal(await nlbOf(metalService), undefined, 'the static class’s Service got an NLB');
  });

  it('routes only the aws Nodes in the aws route table', async () => {
    const want = [`10.244.11.0/24>${a.instanceId}`, `10.244.12.0/24>${b.instanceId}`];
    await waitFor('a route per aws Node', async () => (await routes()).join() === want.join(), 30_000);
    // Two route passes later, still only those.
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    assert.deepEqual(await routes(), want);
  });

  it('deletes a Node whose machine is gone only with its own provider, and no other', async () => {
    await createNode(own.core, newNode(gone.privateDnsName, withProviderId(gone.providerId)));
    // Not created with createNode, which reads it back: a Node with no Ready condition and no
    // machine is deleted by its provider within milliseconds, so the read may already find nothing.
    await own.core.createNode({
      body: newNode(
        names.metalGone,
        withLabels({ [providerLabel]: 'static' }),
        withProviderId(`static://${names.metalGone}`),
      ),
    });
    for (const name of [gone.privateDnsName, b.privateDnsName, names.metal2, names.foreign]) await ready(name, 'False');
    await world.terminateInstance(gone.instanceId);
    await waitFor(
      'the terminated instance’s Node and the Node of a machine not in the inventory deleted',
      async () =>
        (await readNode(gone.privateDnsName)) === undefined && (await readNode(names.metalGone)) === undefined,
      30_000,
    );
    // Two node-monitor periods later the NotReady Nodes whose machines exist are still there, untainted.
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    await assertKept([b.privateDnsName, names.metal2]);
    assert.ok(await readNode(names.foreign), 'the Node nobody owns was deleted');
    assert.equal((await noCloudProviderEvents(names.foreign, 1)).length, 1);
  });

  // Issue 38: a hanging cloud must delay nothing of another provider's. A static machine removed
  // from the inventory while its Node is NotReady is found gone by that Node's periodic recheck
  // (ADR 0029), one per node-monitor period: timed with aws up, then while every aws call hangs
  // (two NotReady aws Nodes, whose rechecks wait out RequestTimeoutSeconds, 30 s by default).
  // Before ADR 0029 one pass covered every provider's Nodes and the relay skipped the next while
  // one was in flight, so the static Node waited for the aws calls.
  it('deletes a static Node on time while the aws cloud hangs, and touches no aws Node', async (t) => {
    const period = 2_000; // --node-monitor-period
    const bound = 2 * period + 4_000;
    for (const name of [names.metalUp, names.metalHang]) {
      await createNode(
        own.core,
        newNode(name, withLabels({ [providerLabel]: 'static' }), withProviderId(`static://${name}`)),
      );
      await ready(name, 'False');
    }
    await ready(a.privateDnsName, 'False'); // b is NotReady since the deletion test
    await new Promise((resolve) => setTimeout(resolve, 2 * period));
    await assertKept([names.metalUp, names.metalHang, a.privateDnsName, b.privateDnsName]);

    const up = await deletedAfterRemoval(names.metalUp);
    const awsNodes = await Promise.all([a, b].map((i) => own.core.readNode({ name: i.privateDnsName })));
    aws.hang();
    await waitFor('an aws call hanging', () => aws.hanging() > 0, 10_000);
    await new Promise((resolve) => setTimeout(resolve, period)); // each aws Node's recheck in flight
    const hung = aws.hanging();
    const during = await deletedAfterRemoval(names.metalHang);
    t.diagnostic(
      `static Node deleted ${up} ms after its machine left the inventory with aws up, ` +
        `${during} ms while aws hangs (${hung} aws connections hanging; bound ${bound} ms)`,
    );
    assert.ok(during <= bound, `deleted after ${during} ms while aws hangs (${up} ms with aws up), over ${bound} ms`);
    assert.ok(aws.hanging() > 0, 'the aws calls stopped hanging during the measure');
    // No aws Node was written: not deleted, not tainted, not even patched.
    await assertKept([a.privateDnsName, b.privateDnsName]);
    for (const node of awsNodes) {
      const now = await own.core.readNode({ name: node.metadata?.name ?? '' });
      assert.equal(now.metadata?.resourceVersion, node.metadata?.resourceVersion, `${node.metadata?.name} was written`);
    }
  });

  it('keeps serving the static Nodes and Services while the aws cloud is unreachable, and touches no aws Node', async () => {
    const before = await routes();
    await aws.close(); // the aws endpoint now refuses connections (the hanging ones are reset)
    await createNode(own.core, metalNode(names.metalLate, 3));
    await ready(names.metalLate, 'True');
    const late = await waitForValue(() => initialized(names.metalLate), 'a static Node initialized while aws is down');
    assert.equal(late.spec?.providerID, `static://${names.metalLate}`);
    const metalService = uniqueName('metal-late');
    await createService(metalService, metalClass);
    await waitFor(
      'a static Service’s address while aws is down',
      async () =>
        (await own.core.readNamespacedService({ namespace: 'default', name: metalService })).status?.loadBalancer
          ?.ingress?.[0]?.ip !== undefined,
      20_000,
    );
    // A NotReady aws Node: its provider cannot answer, and the static one must not (it would say "gone").
    await ready(a.privateDnsName, 'False');
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    await assertKept([a.privateDnsName, b.privateDnsName, names.metal2]);
    // The route table is as it was: no static Node was routed, no aws route removed by anyone.
    assert.deepEqual(await routes(), before);
  });

  // Removes `name`'s machine from the inventory and answers how long its Node then took to go, in ms.
  async function deletedAfterRemoval(name: string): Promise<number> {
    const remaining = machines().filter((m) => m !== name && !removed.has(m));
    removed.add(name);
    const next = `${inventoryFile}.next`;
    writeFileSync(next, inventory(remaining));
    const t0 = performance.now();
    renameSync(next, inventoryFile);
    await waitFor(`${name}'s Node deleted`, async () => (await readNode(name)) === undefined, 60_000);
    return Math.round(performance.now() - t0);
  }

  async function assertKept(nodes: readonly string[]): Promise<void> {
    for (const name of nodes) {
      const node = await readNode(name);
      assert.ok(node, `${name} was deleted`);
      assert.deepEqual(ownTaints(node), [], `${name} was tainted`);
    }
  }

  async function noCloudProviderEvents(name: string, atLeast: number): Promise<string[]> {
    let messages: string[] = [];
    await waitFor(
      `the NoCloudProvider Event about ${name}`,
      async () => {
        const { items } = await own.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.name=${name},reason=NoCloudProvider`,
        });
        messages = items.map((e) => `${e.message ?? ''} (count ${e.count ?? 1})`);
        return items.length >= atLeast;
      },
      20_000,
    );
    return messages;
  }

  async function createService(name: string, loadBalancerClass: string | undefined): Promise<void> {
    const body: V1Service = {
      metadata: { name },
      spec: {
        type: 'LoadBalancer',
        ...(loadBalancerClass === undefined ? {} : { loadBalancerClass }),
        ports: [{ port: 80, targetPort: 8080, protocol: 'TCP' }],
      },
    };
    await own.core.createNamespacedService({ namespace: 'default', body });
  }

  // The NLB upstream's naming gives Service `name` (`a` + its UID without dashes), if any.
  async function nlbOf(name: string) {
    const svc = await own.core.readNamespacedService({ namespace: 'default', name });
    const lbName = `a${(svc.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);
    return world.elbv2
      .send(new DescribeLoadBalancersCommand({ Names: [lbName] }))
      .then((answer) => answer.LoadBalancers?.[0])
      .catch(() => undefined);
  }
});

// The static provider's inventory: `machines` in rack-a, and a pool for its class's Services.
function inventory(machines: readonly string[]): string {
  const entries = machines.map(
    (name, i) =>
      `  - name: ${name}\n    instanceType: m1.metal\n    zone: rack-a\n    region: dc-1\n` +
      `    addresses:\n      - { type: InternalIP, address: 10.1.0.${11 + i} }\n`,
  );
  return `instances:\n${entries.join('')}loadBalancers:\n  pools:\n    - name: default\n      default: true\n      addresses: [${pool}]\n`;
}

// `cirrus <argv>` in this process, as the command line runs it.
function cirrus(argv: string[], env: Record<string, string>, signal: AbortSignal): Run {
  const run = { stderr: '' } as Run & { done: Promise<number> };
  const io = {
    stdout: { write: () => true },
    stderr: { write: (text: string) => (run.stderr += text) },
    env,
    signal,
  };
  run.done = main(argv, io).then((status) => (run.exited = status));
  return run;
}

// `node` with the pod CIDR 10.244.<n>.0/24.
function withCidr(node: V1Node, n: number): V1Node {
  return { ...node, spec: { ...node.spec, podCIDR: `10.244.${n}.0/24`, podCIDRs: [`10.244.${n}.0/24`] } };
}

async function waitForValue<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  let value: T | undefined;
  await waitFor(
    what,
    async () => {
      value = await probe();
      return value !== undefined;
    },
    timeoutMs,
  );
  return value as T;
}

/** A switch in front of the aws endpoint: passes connections through, hangs them, or refuses them. */
interface Blackhole {
  /** `http://127.0.0.1:<port>`: the endpoint to give the aws provider. */
  readonly endpoint: string;
  /** From now on, accepts connections and never answers; resets the ones passing through. */
  hang(): void;
  /** How many connections are held open, unanswered, now. */
  hanging(): number;
  /** Stops listening (connections are refused) and resets every connection. */
  close(): Promise<void>;
}

/** Starts a Blackhole passing connections through to `target`. */
async function blackhole(target: string): Promise<Blackhole> {
  const upstream = new URL(target);
  const passing = new Set<Socket>();
  const held = new Set<Socket>();
  let hanging = false;
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    const sockets = hanging ? held : passing;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    if (hanging) {
      socket.resume(); // read the request, never answer
      return;
    }
    const out = connect(Number(upstream.port), upstream.hostname);
    out.on('error', () => socket.destroy());
    out.on('close', () => socket.destroy());
    socket.on('close', () => out.destroy());
    socket.pipe(out).pipe(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    hang: () => {
      hanging = true;
      for (const socket of passing) socket.destroy();
    },
    hanging: () => held.size,
    close: async () => {
      if (!server.listening) return;
      const closed = new Promise((resolve) => server.close(resolve));
      for (const socket of [...passing, ...held]) socket.destroy();
      await closed;
    },
  };
}
