// The fake provider's throttling mode (issue 20, row 9): a cloud whose API refuses calls above a
// rate, as a stand-in for the rate limits of real clouds.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { CloudConfigError, findCause, RetryError } from '../../shared/cloud/errors.ts';
import { FakeCloud, fakeFromConfig } from '../../providers/fake/index.ts';

const log = pino({ level: 'silent' });
const service = { metadata: { namespace: 'default', name: 'web', uid: 'u1' } };

describe('FakeCloud.throttle', () => {
  it('refuses calls above perSecond in a 1-s window with RetryError(retryAfterMs), and counts them', async () => {
    const cloud = new FakeCloud();
    cloud.throttle = { perSecond: 3, retryAfterMs: 750 };
    const lb = cloud.loadBalancer();
    assert.ok(lb);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 5 }, () => lb.ensureLoadBalancer('kubernetes', service, [])),
    );
    assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 3);
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as unknown] : []));
    assert.equal(refused.length, 2);
    for (const error of refused) {
      const retry = findCause(error, RetryError);
      assert.equal(retry?.retryAfterMs, 750);
      assert.match(retry.message, /ensureLoadBalancer throttled/);
    }
    assert.equal(cloud.throttled, 2);
    assert.equal(cloud.throttledByMethod.get('ensureLoadBalancer'), 2);
    // Only accepted calls are recorded, and a refused call changed nothing.
    assert.equal(cloud.methods().length, 3);
    assert.equal(cloud.peakCallsPerSecond, 3);
  });

  it('accepts calls again once the window has moved on', async () => {
    const cloud = new FakeCloud();
    cloud.throttle = { perSecond: 2, retryAfterMs: 100 };
    const lb = cloud.loadBalancer();
    assert.ok(lb);
    await lb.getLoadBalancer('kubernetes', service);
    await lb.getLoadBalancer('kubernetes', service);
    await assert.rejects(lb.getLoadBalancer('kubernetes', service), RetryError);
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    await lb.getLoadBalancer('kubernetes', service);
    assert.equal(cloud.throttled, 1);
    assert.equal(cloud.methods().length, 3);
  });

  it('throttles nothing by default, and records the peak rate', async () => {
    const cloud = new FakeCloud();
    const lb = cloud.loadBalancer();
    assert.ok(lb);
    await Promise.all(Array.from({ length: 50 }, () => lb.getLoadBalancer('kubernetes', service)));
    assert.equal(cloud.throttled, 0);
    assert.equal(cloud.peakCallsPerSecond, 50);
  });
});

describe('fakeFromConfig', () => {
  const context = (config: string | undefined) => ({
    config,
    configPath: config === undefined ? undefined : '/etc/fake.yaml',
    log,
    signal: new AbortController().signal,
    kubeConfig: undefined,
  });

  it('without a cloud-config, an unthrottled FakeCloud', () => {
    assert.equal(fakeFromConfig(context(undefined)).throttle, undefined);
  });

  it('gives every load balancer an address of its own, kept through later ensures and never reused', async () => {
    const cloud = fakeFromConfig(context(undefined));
    const lb = cloud.loadBalancer();
    assert.ok(lb);
    const svc = (name: string) => ({ metadata: { name, namespace: 'default', uid: `uid-${name}` } });
    const ip = async (name: string) => (await lb.ensureLoadBalancer('kubernetes', svc(name), [])).ingress?.[0]?.ip;
    const [a, b] = [await ip('a'), await ip('b')];
    assert.notEqual(a, b);
    assert.equal(await ip('a'), a);
    await lb.ensureLoadBalancerDeleted('kubernetes', svc('a'));
    const c = await ip('c');
    assert.ok(c !== a && c !== b, `${String(c)} was handed out before`);
  });

  it('takes the throttle from its cloud-config (YAML or JSON)', () => {
    assert.deepEqual(fakeFromConfig(context('throttle: { perSecond: 20, retryAfterMs: 1000 }\n')).throttle, {
      perSecond: 20,
      retryAfterMs: 1000,
    });
    assert.deepEqual(fakeFromConfig(context('{"throttle": {"perSecond": 5, "retryAfterMs": 0}}')).throttle, {
      perSecond: 5,
      retryAfterMs: 0,
    });
    assert.equal(fakeFromConfig(context('')).throttle, undefined);
  });

  for (const [config, field, problem] of [
    ['throttle: { perSecond: 0, retryAfterMs: 10 }', 'throttle.perSecond', /at least 1/],
    ['throttle: { perSecond: 5, retryAfterMs: -1 }', 'throttle.retryAfterMs', /0 or more/],
    ['throttle: { perSecond: 5 }', 'throttle.retryAfterMs', /expected number/],
    ['throttle: { perSecond: 5, retryAfterMs: 1, burst: 2 }', 'throttle', /burst/],
    ['instances: []', '', /instances/],
  ] as const) {
    it(`refuses ${config}, naming ${field === '' ? 'the key' : field}`, () => {
      assert.throws(
        () => fakeFromConfig(context(config)),
        (error: unknown) => {
          const invalid = findCause(error, CloudConfigError);
          return (
            invalid?.field === field && problem.test(invalid.message) && invalid.message.startsWith('/etc/fake.yaml')
          );
        },
      );
    });
  }

  it('refuses a cloud-config that is not YAML', () => {
    assert.throws(() => fakeFromConfig(context('throttle: [')), /\/etc\/fake\.yaml: not YAML/);
  });
});
