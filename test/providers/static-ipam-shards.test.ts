// The static provider's sharded allocations record (ADR 0028) against the real API server: 20,000
// allocations from one /17 pool, every part under the 1 MiB object limit; the single ConfigMap of
// earlier versions moved into the parts, with nothing lost and nothing handed out twice.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import {
  AllocationStore,
  MOVED_KEY,
  PART_LIMIT_BYTES,
  PARTS,
  partName,
  partOf,
} from '../../providers/static/allocations.ts';
import { allocate, type AddressRequest, type Allocation } from '../../providers/static/ipam.ts';
import { parseBlock, type Pool } from '../../providers/static/pools.ts';
import type { AddressBlock } from '../../providers/static/ip.ts';
import { silentLogger } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const log = silentLogger();

function pool(name: string, text: string): Pool {
  const block = parseBlock(text) as AddressBlock;
  return { name, blocks: [block], namespaces: [], isDefault: true };
}

function request(target: Pool, name: string): AddressRequest {
  return {
    uid: randomUUID(),
    namespace: 'tenant-with-a-long-namespace-name',
    name,
    pool: target,
    poolReason: 'the default pool',
    families: ['IPv4'],
    requested: new Map(),
  };
}

describe('static provider: the sharded allocations record', { skip: controlPlaneSkip }, () => {
  let kubeConfig: KubeConfig;
  let core: CoreV1Api;
  before(async () => {
    kubeConfig = (await testCluster()).admin;
    core = kubeConfig.makeApiClient(CoreV1Api);
  });

  async function namespace(): Promise<string> {
    const name = uniqueName('ipam-shards');
    await core.createNamespace({ body: { metadata: { name } } });
    return name;
  }

  function store(ns: string): AllocationStore {
    return new AllocationStore(core, { namespace: ns, configMap: 'ipam', namespaceFrom: 'set by the test' }, log);
  }

  it('holds 20,000 allocations of one /17 pool, every part under the 1 MiB limit', async () => {
    const ns = await namespace();
    const big = pool('big', '10.128.0.0/17');
    const record = store(ns);
    // The addresses the allocator hands out in order (lowest free first), written 5,000 a write:
    // the record is what is measured, not 20,000 Services.
    const total = 20_000;
    const batch = 5_000;
    const allocations = new Map<string, Allocation>();
    for (let start = 0; start < total; start += batch) {
      await record.transact((state) => {
        assert.equal(state.entries.size, start, 'every earlier allocation read back');
        const changes = new Map<string, Allocation>();
        for (let i = start; i < Math.min(total, start + batch); i += 1) {
          // 10.128.0.1 is the first usable address of the /17.
          const value = 0x0a800001 + i;
          const address = [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
          const allocation = {
            namespace: 'tenant-with-a-long-namespace-name',
            name: `service-${i}`,
            pool: 'big',
            addresses: [address],
          };
          changes.set(randomUUID(), allocation);
        }
        for (const [uid, allocation] of changes) allocations.set(uid, allocation);
        return Promise.resolve({ changes, result: undefined });
      });
    }

    // Every part exists and is under the limit. The bound: a /24 is 256 addresses and lies in one
    // part; 20,000 addresses from 10.128.0.1 span 79 /24s, at most ⌈79 / 8⌉ = 10 of them a part, so
    // at most 2,560 entries a part, each under 160 bytes here: 410 KB, under the 960 KiB limit.
    let counted = 0;
    for (let index = 0; index < PARTS; index += 1) {
      const configMap = await core.readNamespacedConfigMap({ name: partName('ipam', index), namespace: ns });
      const data = configMap.data ?? {};
      const entries = Object.keys(data).length;
      const bytes = Object.entries(data).reduce((sum, [key, value]) => sum + key.length + value.length, 0);
      assert.ok(entries <= 2_560, `part ${index}: ${entries} entries`);
      assert.ok(bytes <= 2_560 * 160 && bytes < PART_LIMIT_BYTES, `part ${index}: ${bytes} bytes`);
      for (const value of Object.values(data)) {
        const { addresses } = JSON.parse(value) as Allocation;
        assert.equal(partOf(addresses[0] ?? ''), index, 'each entry in the part of its address');
      }
      counted += entries;
    }
    assert.equal(counted, total);

    // The allocator reads them all back: the next Service gets the next address, not a taken one.
    const state = await record.read();
    assert.equal(state.entries.size, total);
    assert.deepEqual(
      [...state.entries.values()].map((a) => a.addresses[0]).filter((a, i, all) => all.indexOf(a) !== i),
      [],
    );
    const next = allocate(request(big, 'one-more'), state.entries);
    assert.deepEqual(next.addresses, ['10.128.78.33']);
  });

  it('moves the single ConfigMap of an earlier version into the parts, losing nothing and handing nothing out twice', async () => {
    const ns = await namespace();
    const small = pool('small', '192.0.2.0/29'); // 192.0.2.1 to .6
    const held = (name: string, address: string): string =>
      JSON.stringify({ namespace: 'team', name, pool: 'small', addresses: [address] });
    const old = { a: randomUUID(), b: randomUUID() };
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: { name: 'ipam' },
        data: { [old.a]: held('a', '192.0.2.1'), [old.b]: held('b', '192.0.2.3') },
      },
    });

    const record = store(ns);
    const state = await record.read();
    assert.deepEqual(
      [...state.entries].map(([uid, allocation]) => [uid, allocation.addresses]).sort(),
      [
        [old.a, ['192.0.2.1']],
        [old.b, ['192.0.2.3']],
      ].sort(),
    );
    // The old ConfigMap keeps only the mark that stops an earlier version from allocating from it.
    const legacy = await core.readNamespacedConfigMap({ name: 'ipam', namespace: ns });
    assert.deepEqual(Object.keys(legacy.data ?? {}), [MOVED_KEY]);
    const part = await core.readNamespacedConfigMap({
      name: partName('ipam', partOf('192.0.2.1') ?? -1),
      namespace: ns,
    });
    assert.deepEqual(Object.keys(part.data ?? {}).sort(), [old.a, old.b].sort());

    // The next allocations skip the moved addresses.
    const got: string[] = [];
    for (const name of ['c', 'd']) {
      const wanted = request(small, name);
      got.push(
        ...(await record.transact((now) => {
          const allocation = allocate(wanted, now.entries);
          return Promise.resolve({ changes: new Map([[wanted.uid, allocation]]), result: allocation.addresses });
        })),
      );
    }
    assert.deepEqual(got, ['192.0.2.2', '192.0.2.4']);

    // An earlier version's entry written after the move is refused by it (it reads the mark as a
    // value that is not an allocation), and a new store moves one it finds all the same.
    const late = randomUUID();
    const current = await core.readNamespacedConfigMap({ name: 'ipam', namespace: ns });
    await core.replaceNamespacedConfigMap({
      name: 'ipam',
      namespace: ns,
      body: { ...current, data: { ...current.data, [late]: held('late', '192.0.2.5') } },
    });
    const again = await store(ns).read();
    assert.deepEqual(again.entries.get(late)?.addresses, ['192.0.2.5']);
    assert.equal(again.entries.size, 5);
  });
});
