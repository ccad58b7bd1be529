// A hybrid cluster with the real providers (issue 28, ADR 0026): bare metal (`static`, an inventory
// with a pool of addresses) beside `aws` (the run's AWS emulator, moto, in a world of this file's
// own), run by the real command line — `cirrus start --cloud-provider static,aws --cloud-config
// static=…,aws=… --default-provider aws --load-balancer-class static=…`, in process through
// main(argv, io) as test/integration/reconcile-start.test.ts runs it — against a control plane of
// this file's own. The aws provider reaches the emulator through a call-counting proxy
// (tools/aws-emulator/counter.ts), which the last test closes: the aws cloud is then unreachable
// (connection refused), as when a VPC endpoint or the network to it goes away.
//
// What is looked at is the outcome on both sides: Nodes, Services and Events in the API server;
// instances, load balancers and routes in the emulator. With ownership ignored (chooseForNode in
// shared/cloud/fleet.ts giving every Node to the first provider, static) every test fails: static,
// asked about the aws Nodes, finds no such machines in its inventory, so they stay tainted and
// node-lifecycle deletes them; the NLB gets no targets and the route table no routes.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
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
    foreign: uniqueName('foreign'),
  };
  let world: AwsWorld;
  let proxy: CallCounter;
  let start: Run;
  const stop = new AbortController();
  // Two aws Nodes: `a` named by its private DNS name (the default provider's), `b` with its provider ID.
  let a: WorldInstance;
  let b: WorldInstance;
  let gone: WorldInstance;

  before(async () => {
    world = await awsWorld('hybrid-aws');
    proxy = await startCallCounter(world.endpoint);
    Object.assign(process.env, awsTestEnv({ endpoint: proxy.endpoint, region: world.region }));
    [a, b, gone] = [await world.runInstance(), await world.runInstance(), await world.runInstance()];
    const dir = mkdtempSync(join(tmpdir(), 'cirrus-hybrid-aws-'));
    const kubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, own.admin.exportConfig());
    writeFileSync(join(dir, 'cloud.conf'), world.cloudConfig());
    writeFileSync(join(dir, 'inventory.yaml'), inventory([names.metal1, names.metal2, names.metalLate]));
    start = cirrus(
      [
        'start',
        '--cloud-provider',
        'static,aws',
        '--cloud-config',
        `static=${join(dir, 'inventory.yaml')},aws=${join(dir, 'cloud.conf')}`,
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

  it('keeps serving the static Nodes and Services while the aws cloud is unreachable, and touches no aws Node', async () => {
    const before = await routes();
    await proxy.close(); // the aws endpoint now refuses connections
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
