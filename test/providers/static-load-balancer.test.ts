// The static provider's load balancers against the real API server: allocations recorded in a
// ConfigMap, conditional writes, and many provider instances (as separate function replicas)
// allocating at once. Each test has its own namespace, holding its Services and its ConfigMap.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { before, describe, it } from 'node:test';
import {
  CoreV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1ConfigMap,
  type V1LoadBalancerStatus,
  type V1Service,
} from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import {
  ADDRESSES_ANNOTATION,
  AllocationError,
  createStaticProvider,
  POOL_ANNOTATION,
  type StaticProviderOptions,
} from '../../providers/static/index.ts';
import { partName, partNames, partOf } from '../../providers/static/allocations.ts';
import { silentLogger } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const CLUSTER = 'kubernetes';
const CONFIG_MAP = 'ipam';
// The part the tests' addresses (192.0.2.0/24) are recorded in (ADR 0028).
const PART = partName(CONFIG_MAP, partOf('192.0.2.1') ?? 0);
const log = silentLogger();

interface Recorded {
  readonly namespace: string;
  readonly name: string;
  readonly pool: string;
  readonly addresses: string[];
}

interface ServiceOptions {
  readonly annotations?: Record<string, string>;
  readonly loadBalancerIP?: string;
}

function ips(status: V1LoadBalancerStatus | undefined): string[] {
  return (status?.ingress ?? []).map((ingress) => ingress.ip ?? '');
}

function uidOf(service: V1Service): string {
  const uid = service.metadata?.uid;
  assert.ok(uid, 'the Service has a UID');
  return uid;
}

describe('static load balancer', { skip: controlPlaneSkip }, () => {
  let kubeConfig: KubeConfig;
  let core: CoreV1Api;
  before(async () => {
    kubeConfig = (await testCluster()).admin;
    core = kubeConfig.makeApiClient(CoreV1Api);
  });

  async function namespace(prefix = 'lb'): Promise<string> {
    const name = uniqueName(prefix);
    await core.createNamespace({ body: { metadata: { name } } });
    return name;
  }

  /** The inventory with `pools` (YAML list items) recording allocations in `ns`. */
  function inventory(ns: string, pools: string): string {
    return `instances: []\nloadBalancers:\n  allocations: { namespace: ${ns}, configMap: ${CONFIG_MAP} }\n  pools:\n${pools}`;
  }

  /** A provider instance, as one function replica would build it. */
  async function provider(
    config: string,
    options: {
      configPath?: string;
      signal?: AbortSignal;
      logger?: Logger;
      reload?: StaticProviderOptions;
      kubeConfig?: KubeConfig;
    } = {},
  ): Promise<LoadBalancer> {
    const context = {
      config,
      configPath: options.configPath,
      signal: options.signal ?? new AbortController().signal,
      log: options.logger ?? log,
      kubeConfig: options.kubeConfig ?? kubeConfig,
    };
    // Never the namespace of a pod these tests may run in: inventories without a namespace say which.
    const cloud = await createStaticProvider(context, { namespaceFile: '/nonexistent/namespace', ...options.reload });
    const loadBalancer = cloud.loadBalancer();
    assert.ok(loadBalancer, 'loadBalancer() is supported');
    return loadBalancer;
  }

  /** A Service of type LoadBalancer, created on the cluster (IPv4: the test cluster is single-stack). */
  async function service(ns: string, name: string, options: ServiceOptions = {}): Promise<V1Service> {
    const { annotations, loadBalancerIP } = options;
    return core.createNamespacedService({
      namespace: ns,
      body: {
        metadata: { name, ...(annotations === undefined ? {} : { annotations }) },
        spec: {
          type: 'LoadBalancer',
          allocateLoadBalancerNodePorts: false,
          ports: [{ port: 80 }],
          ...(loadBalancerIP === undefined ? {} : { loadBalancerIP }),
        },
      },
    });
  }

  /** A Service object that is not on the cluster, for IP families the test cluster does not serve. */
  function detached(ns: string, name: string, ipFamilies: string[], annotations?: Record<string, string>): V1Service {
    return {
      metadata: { name, namespace: ns, uid: randomUUID(), ...(annotations === undefined ? {} : { annotations }) },
      spec: { type: 'LoadBalancer', ipFamilies, ports: [{ port: 80 }] },
    };
  }

  async function recorded(ns: string): Promise<{ resourceVersion: string; entries: Map<string, Recorded> }> {
    // Every part: an IPv6 address, or one outside 192.0.2.0/24, is recorded in another.
    const parts = await Promise.all(
      partNames(CONFIG_MAP).map((name) =>
        core.readNamespacedConfigMap({ name, namespace: ns }).catch((): V1ConfigMap => ({})),
      ),
    );
    const entries = new Map(
      parts.flatMap((part) =>
        Object.entries(part.data ?? {}).map(([uid, value]) => [uid, JSON.parse(value) as Recorded] as const),
      ),
    );
    const main = parts[partOf('192.0.2.1') ?? 0];
    return { resourceVersion: main?.metadata?.resourceVersion ?? '', entries };
  }

  async function configMapExists(ns: string): Promise<boolean> {
    return core.readNamespacedConfigMap({ name: PART, namespace: ns }).then(
      () => true,
      () => false,
    );
  }

  function rejectsWith(message: string | RegExp) {
    return (error: unknown): boolean => {
      assert.ok(error instanceof AllocationError, `an AllocationError, not ${String(error)}`);
      if (typeof message === 'string') assert.equal(error.message, message);
      else assert.match(error.message, message);
      return true;
    };
  }

  const DEFAULT_POOL = '    - { name: default, default: true, addresses: [192.0.2.0/29] }\n';

  it('allocates from the default pool, recording each Service in a ConfigMap it creates', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const [a, b] = [await service(ns, 'a'), await service(ns, 'b')];
    assert.equal(await configMapExists(ns), false);
    assert.deepEqual(await lb.ensureLoadBalancer(CLUSTER, a, []), { ingress: [{ ip: '192.0.2.1', ipMode: 'VIP' }] });
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, b, [])), ['192.0.2.2']);
    const { entries } = await recorded(ns);
    assert.deepEqual(Object.fromEntries(entries), {
      [uidOf(a)]: { namespace: ns, name: 'a', pool: 'default', addresses: ['192.0.2.1'] },
      [uidOf(b)]: { namespace: ns, name: 'b', pool: 'default', addresses: ['192.0.2.2'] },
    });
    const configMap = await core.readNamespacedConfigMap({ name: PART, namespace: ns });
    assert.equal(configMap.metadata?.labels?.['app.kubernetes.io/managed-by'], 'cirrus');
    assert.deepEqual(await lb.getLoadBalancer(CLUSTER, a), { ingress: [{ ip: '192.0.2.1', ipMode: 'VIP' }] });
    assert.equal(await lb.getLoadBalancer(CLUSTER, await service(ns, 'c')), undefined);
    assert.equal(lb.getLoadBalancerName(CLUSTER, a), `a${uidOf(a).replaceAll('-', '')}`.slice(0, 32));
    await lb.updateLoadBalancer(CLUSTER, a, []);
  });

  it('is idempotent: a Service keeps its addresses, and ensuring it again writes nothing, in any replica', async () => {
    const ns = await namespace();
    const config = inventory(ns, DEFAULT_POOL);
    const [first, second] = [await provider(config), await provider(config)];
    const [a, b] = [await service(ns, 'a'), await service(ns, 'b')];
    await first.ensureLoadBalancer(CLUSTER, a, []);
    await first.ensureLoadBalancer(CLUSTER, b, []);
    const before = (await recorded(ns)).resourceVersion;
    assert.deepEqual(ips(await second.ensureLoadBalancer(CLUSTER, b, [])), ['192.0.2.2']);
    assert.deepEqual(ips(await first.ensureLoadBalancer(CLUSTER, a, [])), ['192.0.2.1']);
    assert.equal((await recorded(ns)).resourceVersion, before);
  });

  it("uses the pool that lists the Service's namespace, else the default", async () => {
    const [ns, team] = [await namespace(), await namespace('team')];
    const lb = await provider(
      inventory(ns, `${DEFAULT_POOL}    - { name: team, namespaces: [${team}], addresses: [198.51.100.8/30] }\n`),
    );
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, await service(team, 'web'), [])), ['198.51.100.9']);
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'web'), [])), ['192.0.2.1']);
    assert.equal((await recorded(ns)).entries.size, 2, 'one ConfigMap for every namespace');
  });

  it('uses the pool the annotation names, and says so when it does not exist or no pool applies', async () => {
    const [ns, team] = [await namespace(), await namespace('team')];
    const lb = await provider(
      inventory(
        ns,
        `    - { name: team, namespaces: [${team}], addresses: [192.0.2.0/29] }\n    - { name: special, addresses: [203.0.113.5] }\n`,
      ),
    );
    const special = await service(team, 'special', { annotations: { [POOL_ANNOTATION]: 'special' } });
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, special, [])), ['203.0.113.5']);
    const gold = await service(team, 'gold', { annotations: { [POOL_ANNOTATION]: 'gold' } });
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, gold, []),
      rejectsWith(
        `service ${team}/gold names pool "gold" in its annotation ${POOL_ANNOTATION}, but there is no such pool; the pools for namespace ${team} are team, special`,
      ),
    );
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, await service(ns, 'stray'), []),
      rejectsWith(
        `no address pool applies to service ${ns}/stray: no pool lists namespace ${ns} and no pool is the default; name one with the annotation ${POOL_ANNOTATION} (the pools for namespace ${ns} are special)`,
      ),
    );
  });

  it('gives a requested address when it is free, and refuses one that is taken or outside the pools', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const pinned = await service(ns, 'pinned', { loadBalancerIP: '192.0.2.5' });
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, pinned, [])), ['192.0.2.5']);
    const rival = await service(ns, 'rival', { annotations: { [ADDRESSES_ANNOTATION]: '192.0.2.5' } });
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, rival, []),
      rejectsWith(`service ${ns}/rival requests 192.0.2.5, which is already allocated to service ${ns}/pinned`),
    );
    const outside = await service(ns, 'outside', { annotations: { [ADDRESSES_ANNOTATION]: '203.0.113.7' } });
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, outside, []),
      rejectsWith(
        `service ${ns}/outside requests 203.0.113.7, which is not in its pool "default" (the default pool); nor in any other pool`,
      ),
    );
    const { entries } = await recorded(ns);
    assert.deepEqual([...entries.keys()], [uidOf(pinned)], 'a refused request records nothing');
    // A free address is handed out around the pinned one.
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'auto'), [])), ['192.0.2.1']);
  });

  it('moves a Service whose request changed, freeing its old address', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const web = await service(ns, 'web');
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, web, [])), ['192.0.2.1']);
    const moved = { ...web, metadata: { ...web.metadata, annotations: { [ADDRESSES_ANNOTATION]: '192.0.2.6' } } };
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, moved, [])), ['192.0.2.6']);
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'next'), [])), ['192.0.2.1']);
  });

  it('reports an exhausted pool with its size, and records nothing for the Service left out', async () => {
    const ns = await namespace();
    const lb = await provider(
      inventory(ns, '    - { name: small, default: true, addresses: [192.0.2.1-192.0.2.2] }\n'),
    );
    await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'a'), []);
    await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'b'), []);
    const c = await service(ns, 'c');
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, c, []),
      rejectsWith(
        `pool "small" is exhausted (2 IPv4 addresses, all allocated): no IPv4 address for service ${ns}/c (the default pool)`,
      ),
    );
    const { entries } = await recorded(ns);
    assert.equal(entries.size, 2);
    assert.equal(entries.has(uidOf(c)), false);
  });

  it("releases a Service's addresses on delete (succeeding when there are none) and hands them out again", async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const never = await service(ns, 'never');
    await lb.ensureLoadBalancerDeleted(CLUSTER, never);
    assert.equal(await configMapExists(ns), false, 'deleting nothing writes nothing');
    const [a, b] = [await service(ns, 'a'), await service(ns, 'b')];
    await lb.ensureLoadBalancer(CLUSTER, a, []);
    await lb.ensureLoadBalancer(CLUSTER, b, []);
    await lb.ensureLoadBalancerDeleted(CLUSTER, a);
    assert.equal(await lb.getLoadBalancer(CLUSTER, a), undefined);
    assert.deepEqual([...(await recorded(ns)).entries.keys()], [uidOf(b)]);
    await lb.ensureLoadBalancerDeleted(CLUSTER, a);
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'c'), [])), ['192.0.2.1']);
  });

  /** The Service object a delete event could carry: any namespace, name and UID. */
  function claim(ns: string, name: string, uid: string): V1Service {
    return { metadata: { namespace: ns, name, uid }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } };
  }

  it("matches a Service's allocation by namespace, name and UID: a claim with a live UID and another name releases nothing", async () => {
    const [ns, elsewhere] = [await namespace(), await namespace()];
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const live = await service(ns, 'live');
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, live, [])), ['192.0.2.1']);
    const before = await recorded(ns);
    // A forged delete event: a Service that does not exist, carrying the live Service's UID.
    const claims = [
      claim(ns, 'ghost', uidOf(live)),
      claim(elsewhere, 'live', uidOf(live)),
      claim(ns, 'live', randomUUID()),
    ];
    for (const forged of claims) {
      assert.equal(await lb.getLoadBalancer(CLUSTER, forged), undefined, 'it holds no load balancer');
      await lb.ensureLoadBalancerDeleted(CLUSTER, forged);
    }
    const after = await recorded(ns);
    assert.equal(after.resourceVersion, before.resourceVersion, 'nothing written');
    assert.deepEqual(after.entries.get(uidOf(live)), {
      namespace: ns,
      name: 'live',
      pool: 'default',
      addresses: ['192.0.2.1'],
    });
    // The live Service keeps its address, and no other Service gets it.
    assert.deepEqual(ips(await lb.getLoadBalancer(CLUSTER, live)), ['192.0.2.1']);
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'next'), [])), ['192.0.2.2']);
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, live, [])), ['192.0.2.1']);
    // Nor can the claim take the record over: its UID is the live Service's.
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, claim(ns, 'ghost', uidOf(live)), []),
      rejectsWith(
        `service ${ns}/ghost has UID ${uidOf(live)}, which the allocations record for service ${ns}/live (192.0.2.1); ` +
          'a Service holds addresses only under its own namespace, name and UID',
      ),
    );
    assert.deepEqual((await recorded(ns)).entries.get(uidOf(live))?.name, 'live');
  });

  it('gives a Service created again under the same name nothing of the old one, which its own cleanup releases', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const old = await service(ns, 'web');
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, old, [])), ['192.0.2.1']);
    await core.deleteNamespacedService({ name: 'web', namespace: ns });
    const again = await service(ns, 'web');
    assert.equal(await lb.getLoadBalancer(CLUSTER, again), undefined);
    await lb.ensureLoadBalancerDeleted(CLUSTER, again);
    assert.deepEqual(
      [...(await recorded(ns)).entries.keys()],
      [uidOf(old)],
      "the new one cannot release the old one's",
    );
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, again, [])), ['192.0.2.2'], 'a fresh allocation');
    await lb.ensureLoadBalancerDeleted(CLUSTER, old);
    assert.deepEqual([...(await recorded(ns)).entries.keys()], [uidOf(again)]);
    assert.deepEqual(ips(await lb.getLoadBalancer(CLUSTER, again)), ['192.0.2.2']);
  });

  it('takes over a record under its UID whose Service is gone (a hand-edited key), as any leftover', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const web = await service(ns, 'web');
    await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'first'), []);
    const record = JSON.stringify({ namespace: ns, name: 'gone', pool: 'default', addresses: ['192.0.2.5'] });
    await core.patchNamespacedConfigMap({
      name: PART,
      namespace: ns,
      body: [{ op: 'add', path: `/data/${uidOf(web)}`, value: record }],
    });
    assert.equal(await lb.getLoadBalancer(CLUSTER, web), undefined);
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, web, [])), ['192.0.2.2']);
    assert.deepEqual((await recorded(ns)).entries.get(uidOf(web)), {
      namespace: ns,
      name: 'web',
      pool: 'default',
      addresses: ['192.0.2.2'],
    });
  });

  it('hands out IPv6 and dual-stack addresses, one per family in the order of spec.ipFamilies', async () => {
    const ns = await namespace();
    const lb = await provider(
      inventory(
        ns,
        '    - { name: dual, default: true, addresses: [192.0.2.0/29, "2001:db8::/125"] }\n    - { name: v4, addresses: [198.51.100.1] }\n',
      ),
    );
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, detached(ns, 'v6', ['IPv6']), [])), ['2001:db8::1']);
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, detached(ns, 'dual', ['IPv4', 'IPv6']), [])), [
      '192.0.2.1',
      '2001:db8::2',
    ]);
    const pinned = detached(ns, 'pinned', ['IPv6', 'IPv4'], { [ADDRESSES_ANNOTATION]: '2001:DB8::6' });
    assert.deepEqual(await lb.ensureLoadBalancer(CLUSTER, pinned, []), {
      ingress: [
        { ip: '2001:db8::6', ipMode: 'VIP' },
        { ip: '192.0.2.2', ipMode: 'VIP' },
      ],
    });
    const noV6 = detached(ns, 'no-v6', ['IPv4', 'IPv6'], { [POOL_ANNOTATION]: 'v4' });
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, noV6, []),
      rejectsWith(
        `pool "v4" (named by its annotation ${POOL_ANNOTATION} of service ${ns}/no-v6) has no IPv6 addresses, and the Service's spec.ipFamilies are IPv4, IPv6`,
      ),
    );
    assert.deepEqual((await recorded(ns)).entries.get(uidOf(pinned))?.addresses, ['2001:db8::6', '192.0.2.2']);
  });

  it('reclaims the addresses of a Service deleted without cleanup when the pool is exhausted', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, '    - { name: one, default: true, addresses: [192.0.2.9] }\n'));
    const gone = await service(ns, 'gone');
    await lb.ensureLoadBalancer(CLUSTER, gone, []);
    await core.deleteNamespacedService({ name: 'gone', namespace: ns });
    const next = await service(ns, 'next');
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, next, [])), ['192.0.2.9']);
    assert.deepEqual([...(await recorded(ns)).entries.keys()], [uidOf(next)]);
    // Deleted and created again under the same name: a new UID, so the old allocation is stale too.
    await core.deleteNamespacedService({ name: 'next', namespace: ns });
    await service(ns, 'next');
    const pinned = await service(ns, 'pinned', { loadBalancerIP: '192.0.2.9' });
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, pinned, [])), ['192.0.2.9']);
    // A live holder is never reclaimed.
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, await service(ns, 'late'), []),
      /pool "one" is exhausted \(1 IPv4 address, all allocated\)/,
    );
  });

  it("lists every allocation as the Service it was made for, which releases it as service-lb's pass does", async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    assert.equal(typeof lb.listLoadBalancers, 'function', 'the static provider lists what it owns');
    if (lb.listLoadBalancers === undefined) return;
    assert.deepEqual(await lb.listLoadBalancers(CLUSTER), [], 'no ConfigMap yet: nothing');
    const kept = await service(ns, 'kept');
    const gone = await service(ns, 'gone');
    await lb.ensureLoadBalancer(CLUSTER, kept, []);
    await lb.ensureLoadBalancer(CLUSTER, gone, []);
    const listed = await lb.listLoadBalancers(CLUSTER);
    assert.deepEqual(
      listed.map((owned) => owned.service).sort((a, b) => a.name.localeCompare(b.name)),
      [
        { namespace: ns, name: 'gone', uid: uidOf(gone) },
        { namespace: ns, name: 'kept', uid: uidOf(kept) },
      ],
    );
    assert.ok(
      listed.every(
        (owned) => owned.name === lb.getLoadBalancerName(CLUSTER, owned.service.name === 'gone' ? gone : kept),
      ),
    );
    // Deleted without cleanup: service-lb's pass hands the provider just the recorded identity.
    await core.deleteNamespacedService({ name: 'gone', namespace: ns });
    const identity: V1Service = {
      metadata: { namespace: ns, name: 'gone', uid: uidOf(gone) },
      spec: { type: 'LoadBalancer' },
    };
    await lb.ensureLoadBalancerDeleted(CLUSTER, identity);
    assert.deepEqual([...(await recorded(ns)).entries.keys()], [uidOf(kept)]);
    assert.deepEqual(
      (await lb.listLoadBalancers(CLUSTER)).map((owned) => owned.service.name),
      ['kept'],
    );
  });

  it('hands 30 Services ensured at once through 5 replicas 30 distinct addresses, all recorded', async () => {
    const ns = await namespace();
    const config = inventory(ns, '    - { name: default, default: true, addresses: [192.0.2.0/27] }\n'); // exactly 30 usable
    const replicas = await Promise.all(Array.from({ length: 5 }, () => provider(config)));
    const services = await Promise.all(Array.from({ length: 30 }, (_, index) => service(ns, `svc-${index}`)));
    const statuses = await Promise.all(
      services.map((svc, index) => (replicas[index % 5] as LoadBalancer).ensureLoadBalancer(CLUSTER, svc, [])),
    );
    const addresses = statuses.map((status) => ips(status));
    assert.ok(addresses.every((list) => list.length === 1));
    assert.equal(new Set(addresses.flat()).size, 30, 'every address distinct');
    const { entries, resourceVersion } = await recorded(ns);
    assert.equal(entries.size, 30, 'none lost');
    services.forEach((svc, index) => {
      assert.deepEqual(
        entries.get(uidOf(svc))?.addresses,
        addresses[index],
        `${svc.metadata?.name ?? ''} is recorded with the address it got`,
      );
    });
    // Again, all at once: the same answers and no write.
    const again = await Promise.all(
      services.map((svc, index) => (replicas[(index + 1) % 5] as LoadBalancer).ensureLoadBalancer(CLUSTER, svc, [])),
    );
    assert.deepEqual(
      again.map((status) => ips(status)),
      addresses,
    );
    assert.equal((await recorded(ns)).resourceVersion, resourceVersion);
  });

  it('lets exactly as many Services as there are addresses win a race for a small pool', async () => {
    const ns = await namespace();
    const config = inventory(ns, '    - { name: default, default: true, addresses: [192.0.2.10-192.0.2.19] }\n');
    const replicas = await Promise.all(Array.from({ length: 5 }, () => provider(config)));
    const services = await Promise.all(Array.from({ length: 25 }, (_, index) => service(ns, `svc-${index}`)));
    const results = await Promise.allSettled(
      services.map((svc, index) => (replicas[index % 5] as LoadBalancer).ensureLoadBalancer(CLUSTER, svc, [])),
    );
    const won = results.flatMap((result) => (result.status === 'fulfilled' ? ips(result.value) : []));
    const lost = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
    assert.equal(won.length, 10);
    assert.equal(new Set(won).size, 10);
    assert.equal(lost.length, 15);
    for (const error of lost)
      rejectsWith(/^pool "default" is exhausted \(10 IPv4 addresses, all allocated\): no IPv4 address for service /)(
        error,
      );
    const { entries } = await recorded(ns);
    assert.deepEqual([...entries.values()].flatMap((entry) => entry.addresses).sort(), [...won].sort());
  });

  it('refuses to hand out addresses while the ConfigMap holds a value it cannot read, but still releases', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const a = await service(ns, 'a');
    await lb.ensureLoadBalancer(CLUSTER, a, []);
    await core.patchNamespacedConfigMap({
      name: PART,
      namespace: ns,
      body: [{ op: 'add', path: '/data/broken', value: '{"addresses": "192.0.2.2"}' }],
    });
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, await service(ns, 'b'), []),
      new RegExp(
        `^Error: ConfigMap ${ns}/${CONFIG_MAP}-\\{0\\.\\.7\\} holds values that are not allocations \\(keys ${PART}/broken\\); no address is handed out until they are fixed or removed`,
      ),
    );
    await lb.ensureLoadBalancerDeleted(CLUSTER, a);
    assert.deepEqual([...(await recorded(ns)).entries.keys()], ['broken']);
  });

  it('says which namespace is missing when the ConfigMap cannot be created', async () => {
    const missing = uniqueName('absent');
    const lb = await provider(inventory(missing, DEFAULT_POOL));
    const ns = await namespace();
    await assert.rejects(lb.ensureLoadBalancer(CLUSTER, await service(ns, 'a'), []), (error: unknown) => {
      assert.ok(error instanceof Error);
      assert.match(
        error.message,
        new RegExp(
          `^could not create ConfigMap ${missing}/${PART} to record load balancer addresses: namespace ${missing} \\(set by loadBalancers\\.allocations\\.namespace\\) does not exist; create it`,
        ),
      );
      return true;
    });
  });

  it('records allocations in the namespace cirrus runs in when the file names none', async (t) => {
    const ns = await namespace();
    const dir = await mkdtemp(join(tmpdir(), 'cirrus-lb-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const namespaceFile = join(dir, 'namespace');
    await writeFile(namespaceFile, `${ns}\n`);
    const config = `instances: []\nloadBalancers:\n  pools:\n${DEFAULT_POOL}`;
    const lb = await provider(config, { reload: { namespaceFile } });
    const web = await service(ns, 'web');
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, web, [])), ['192.0.2.1']);
    const configMap = await core.readNamespacedConfigMap({
      name: partName('cirrus-lb-ipam', partOf('192.0.2.1') ?? 0),
      namespace: ns,
    });
    assert.deepEqual(Object.keys(configMap.data ?? {}), [uidOf(web)]);
    // Outside a pod, cirrus-system; a missing namespace is named, with where it came from.
    const missing = uniqueName('absent');
    await writeFile(namespaceFile, missing);
    const elsewhere = await provider(config, { reload: { namespaceFile } });
    await assert.rejects(elsewhere.ensureLoadBalancer(CLUSTER, web, []), {
      message:
        `could not create ConfigMap ${missing}/${partName('cirrus-lb-ipam', partOf('192.0.2.1') ?? 0)} to record load balancer addresses: namespace ${missing} ` +
        `(the namespace cirrus runs in, read from ${namespaceFile}) does not exist; ` +
        'create it, or set loadBalancers.allocations.namespace in the cloud-config',
    });
  });

  it('says the ConfigMap is missing when cirrus may read and patch it but not create it (as deployed)', async () => {
    const ns = await namespace();
    const rbac = kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const rules = [
      {
        apiGroups: [''],
        resources: ['configmaps'],
        resourceNames: [CONFIG_MAP, ...partNames(CONFIG_MAP)],
        verbs: ['get', 'patch'],
      },
    ];
    await rbac.createNamespacedRole({ namespace: ns, body: { metadata: { name: 'ipam' }, rules } });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'ipam' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'ipam' },
        subjects: [{ kind: 'ServiceAccount', name: 'lb', namespace: ns }],
      },
    });
    const account = await (await testCluster()).asServiceAccount(ns, 'lb');
    const lb = await provider(inventory(ns, DEFAULT_POOL), { kubeConfig: account });
    const web = await service(ns, 'web');
    // The authorizer sees the Role a moment after it is written: until then, the read is refused.
    const deadline = Date.now() + 10_000;
    let message = '';
    while (!message.startsWith('could not create') && Date.now() < deadline) {
      const error = await lb.ensureLoadBalancer(CLUSTER, web, []).then(
        () => undefined,
        (failure: unknown) => failure,
      );
      assert.ok(error instanceof Error, 'refused');
      message = error.message;
      await sleep(50);
    }
    assert.match(
      message,
      new RegExp(
        `^could not create ConfigMap ${ns}/${PART} to record load balancer addresses, as it does not exist: 403: .*` +
          '\\(create it, empty, as the deployment does, or allow cirrus to create ConfigMaps there\\)$',
      ),
    );
  });

  it('stops when the signal aborts', async () => {
    const ns = await namespace();
    const lb = await provider(inventory(ns, DEFAULT_POOL));
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    await assert.rejects(
      lb.ensureLoadBalancer(CLUSTER, await service(ns, 'a'), [], controller.signal),
      /shutting down/,
    );
    await assert.rejects(
      lb.getLoadBalancer(CLUSTER, await service(ns, 'b'), controller.signal),
      /shutting down|abort/i,
    );
    assert.equal(await configMapExists(ns), false);
  });

  it('follows a reload of the pools; Services keep the addresses they have', async (t) => {
    const ns = await namespace();
    const dir = await mkdtemp(join(tmpdir(), 'cirrus-lb-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const controller = new AbortController();
    t.after(() => {
      controller.abort();
    });
    const file = join(dir, 'inventory.yaml');
    const original = inventory(ns, DEFAULT_POOL);
    await writeFile(file, original);
    const logged: { level: number; field?: string }[] = [];
    const logger = pino(
      { level: 'info' },
      {
        write: (line: string) => {
          logged.push(JSON.parse(line) as { level: number; field?: string });
        },
      },
    );
    const lb = await provider(original, {
      configPath: file,
      signal: controller.signal,
      logger,
      reload: { pollIntervalMs: 20, debounceMs: 5 },
    });
    const old = await service(ns, 'old');
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, old, [])), ['192.0.2.1']);
    await writeFile(file, inventory(ns, '    - { name: default, default: true, addresses: [198.51.100.0/29] }\n'));
    const fresh = await service(ns, 'fresh');
    const deadline = Date.now() + 5_000;
    let got = ips(await lb.ensureLoadBalancer(CLUSTER, fresh, []));
    while (got[0] !== '198.51.100.1' && Date.now() < deadline) {
      await lb.ensureLoadBalancerDeleted(CLUSTER, fresh);
      await sleep(20);
      got = ips(await lb.ensureLoadBalancer(CLUSTER, fresh, []));
    }
    assert.deepEqual(got, ['198.51.100.1']);
    assert.deepEqual(
      ips(await lb.ensureLoadBalancer(CLUSTER, old, [])),
      ['192.0.2.1'],
      'a pool that shrinks does not renumber',
    );
    // A reload that removes the section is refused: the pools stay.
    await writeFile(file, 'instances: []\n');
    while (!logged.some((entry) => entry.level === 50 && entry.field === 'loadBalancers')) {
      assert.ok(Date.now() < deadline + 5_000, 'the refused reload is logged');
      await sleep(20);
    }
    assert.deepEqual(ips(await lb.ensureLoadBalancer(CLUSTER, await service(ns, 'later'), [])), ['198.51.100.2']);
  });
});
