// The fake's records and answers that the benchmark's cloud (test/harness/cloud.ts) is built on:
// counts and calls in flight by method, the answered calls in order, machines for any node name,
// an ingress per load balancer, and a load balancer without listLoadBalancers.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Service } from '@kubernetes/client-node';
import { FakeCloud } from '../../providers/fake/index.ts';
import type { InstancesV2, LoadBalancer } from '../../shared/cloud/provider.ts';

const service = (name: string, uid = `uid-${name}`): V1Service => ({ metadata: { namespace: 'default', name, uid } });
const lbOf = (cloud: FakeCloud): LoadBalancer => cloud.loadBalancer() ?? assert.fail('no load balancers');
const instancesOf = (cloud: FakeCloud): InstancesV2 => cloud.instancesV2() ?? assert.fail('no InstancesV2');

describe('FakeCloud records', () => {
  it('counts calls by method, and the most of each in flight at once', async () => {
    const cloud = new FakeCloud();
    cloud.latencyMs.set('updateLoadBalancer', 20);
    const lb = lbOf(cloud);
    await Promise.all([lb.updateLoadBalancer('k', service('a'), []), lb.updateLoadBalancer('k', service('b'), [])]);
    await lb.getLoadBalancer('k', service('a'));
    await lb.getLoadBalancer('k', service('b'));
    assert.deepEqual(Object.fromEntries(cloud.callCounts), { updateLoadBalancer: 2, getLoadBalancer: 2 });
    assert.deepEqual(Object.fromEntries(cloud.peakInFlight), { updateLoadBalancer: 2, getLoadBalancer: 1 });
  });

  it('lists the calls in the order they were answered, an error included, with when', async () => {
    const cloud = new FakeCloud();
    cloud.latencyMs.set('ensureLoadBalancer', 30);
    cloud.errors.set('getLoadBalancer', new Error('down'));
    const lb = lbOf(cloud);
    const asked = performance.now();
    const slow = lb.ensureLoadBalancer('k', service('a'), []);
    await assert.rejects(lb.getLoadBalancer('k', service('a')), /down/);
    assert.equal(cloud.calls[0]?.answeredAt, undefined, 'in flight: not answered yet');
    await slow;
    assert.deepEqual(
      cloud.answered.map((c) => c.method),
      ['getLoadBalancer', 'ensureLoadBalancer'],
    );
    assert.ok(cloud.answered.every((c) => (c.answeredAt ?? 0) >= asked));
  });
});

describe('FakeCloud answers', () => {
  it('has a machine for any node name with instanceFor, by name and by provider ID', async () => {
    const cloud = new FakeCloud();
    const instances = instancesOf(cloud);
    assert.equal(await instances.instanceExists({ metadata: { name: 'w1' } }), false);
    cloud.instanceFor = (name) => ({ id: name, nodeName: name, zone: `zone-of-${name}` });
    assert.equal(await instances.instanceExists({ metadata: { name: 'w1' } }), true);
    const byProviderId = await instances.instanceMetadata({
      metadata: { name: 'x' },
      spec: { providerID: 'fake://w2' },
    });
    assert.equal(byProviderId?.zone, 'zone-of-w2');
    assert.equal(byProviderId.providerId, 'fake://w2');
  });

  it('gives the n-th load balancer its own ingress with ingressFor, kept through later ensures', async () => {
    const cloud = new FakeCloud();
    cloud.ingressFor = (n) => ({ ip: `198.18.0.${n}`, ipMode: 'VIP' });
    const lb = lbOf(cloud);
    const first = await lb.ensureLoadBalancer('k', service('a'), []);
    const second = await lb.ensureLoadBalancer('k', service('b'), []);
    const again = await lb.ensureLoadBalancer('k', service('a'), []);
    assert.deepEqual(
      [first, second, again].map((s) => s.ingress?.[0]?.ip),
      ['198.18.0.1', '198.18.0.2', '198.18.0.1'],
    );
  });

  it('answers loadBalancerIp for every ensure without ingressFor', async () => {
    const cloud = new FakeCloud();
    const lb = lbOf(cloud);
    await lb.ensureLoadBalancer('k', service('a'), []);
    cloud.loadBalancerIp = '192.0.2.7';
    assert.deepEqual(await lb.ensureLoadBalancer('k', service('a'), []), { ingress: [{ ip: '192.0.2.7' }] });
  });

  it('names load balancers as upstream does by default when it finds them by uid', () => {
    const cloud = new FakeCloud();
    const svc = service('web', '1b4e28ba-2fa1-11d2-883f-0016d3cca427');
    assert.equal(lbOf(cloud).getLoadBalancerName('k', svc), 'fake-default-web');
    cloud.namesByUid = true;
    assert.equal(lbOf(cloud).getLoadBalancerName('k', svc), 'a1b4e28ba2fa111d2883f0016d3cca42');
  });

  it('has load balancers without listLoadBalancers when that is switched off', () => {
    const cloud = new FakeCloud();
    assert.equal('listLoadBalancers' in lbOf(cloud), true);
    cloud.disabled.add('listLoadBalancers');
    assert.equal('listLoadBalancers' in lbOf(cloud), false);
    assert.equal('ensureLoadBalancer' in lbOf(cloud), true);
  });
});
