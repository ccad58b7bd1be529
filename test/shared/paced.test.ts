// pacedProvider and withCallBudget (shared/cloud/paced.ts): a pass's cloud calls paced to its share
// of the relay's budget, and nothing else changed about the provider.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Service } from '@kubernetes/client-node';
import { countCloudCalls, pacedProvider, withCallBudget } from '../../shared/cloud/paced.ts';
import { FakeCloud } from '../../providers/fake/index.ts';

const node = { metadata: { name: 'a' } };
const service: V1Service = { metadata: { name: 'web', namespace: 'default', uid: 'u1' } };

describe('pacedProvider', () => {
  it('keeps the provider as it is outside a pass: same name, same capabilities, undefined ones undefined', () => {
    const fake = new FakeCloud();
    fake.disabled.add('routes');
    fake.disabled.add('instances');
    const cloud = pacedProvider(fake);
    assert.equal(cloud.providerName(), fake.providerName());
    assert.equal(cloud.hasClusterId(), fake.hasClusterId());
    assert.equal(cloud.routes(), undefined);
    assert.equal(cloud.instances(), undefined);
    assert.equal(cloud.instancesV2(), cloud.instancesV2(), 'a capability asked for twice is one object');
    const method = (): unknown => Reflect.get(cloud.instancesV2() ?? {}, 'instanceExists');
    assert.equal(method(), method(), 'a method asked for twice is one function');
    const lb = cloud.loadBalancer();
    assert.ok(lb);
    // A pure method stays synchronous.
    assert.equal(lb.getLoadBalancerName('c', service), fake.loadBalancer()?.getLoadBalancerName('c', service));
    assert.equal('listLoadBalancers' in lb, 'listLoadBalancers' in (fake.loadBalancer() ?? {}));
  });

  it('paces every call inside withCallBudget, each pass with a bucket of its own', async () => {
    const cloud = pacedProvider(new FakeCloud());
    const instances = cloud.instancesV2();
    assert.ok(instances);
    const signal = new AbortController().signal;
    const pass = async (): Promise<number> => {
      const started = performance.now();
      for (let i = 0; i < 4; i++) await instances.instanceExists(node, signal);
      return performance.now() - started;
    };
    const [a, b] = await Promise.all([
      withCallBudget({ rate: 20, burst: 1 }, signal, pass),
      withCallBudget({ rate: 20, burst: 1 }, signal, pass),
    ]);
    for (const ms of [a, b]) assert.ok(ms >= 140 && ms < 1_000, `${ms} ms for 4 calls at 20 a second`);
    const outside = await pass();
    assert.ok(outside < 50, `${outside} ms for 4 calls outside a pass`);
  });

  it('makes no call once the pass is aborted', async () => {
    const fake = new FakeCloud();
    const cloud = pacedProvider(fake);
    const controller = new AbortController();
    const instances = cloud.instancesV2();
    assert.ok(instances);
    await withCallBudget({ rate: 1, burst: 1 }, controller.signal, async () => {
      await instances.instanceExists(node, controller.signal); // the burst
      const waiting = instances.instanceExists(node, controller.signal); // a second's wait
      controller.abort();
      await assert.rejects(waiting, { name: 'AbortError' });
    });
    assert.equal(fake.calls.filter((c) => c.method === 'instanceExists').length, 1);
  });

  it('counts the calls made through it inside countCloudCalls, a pass inside it included, and no pure method', async () => {
    const cloud = pacedProvider(new FakeCloud());
    const signal = new AbortController().signal;
    const instances = cloud.instancesV2();
    const lb = cloud.loadBalancer();
    assert.ok(instances && lb);
    const { result, calls } = await countCloudCalls(async () => {
      await instances.instanceExists(node, signal);
      lb.getLoadBalancerName('c', service);
      await withCallBudget({ rate: 1_000, burst: 5 }, signal, async () => {
        await instances.instanceExists(node, signal);
        await instances.instanceExists(node, signal);
      });
      return 'done';
    });
    assert.deepEqual({ result, calls }, { result: 'done', calls: 3 });
    assert.equal((await countCloudCalls(() => Promise.resolve(0))).calls, 0, 'none made');
  });
});
