// The ownership rules of a hybrid cluster (shared/cloud/ownership.ts, fleet.ts, ADR 0026) and how
// the command line gives them (app/providers.ts): pure, no cluster.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { initProviders, providerPlan } from '../../app/providers.ts';
import '../../app/root.ts';
import { silentLogger } from '../harness/builders.ts';
import { chooseForNode, chooseForService, hybridFleet, singleFleet } from '../../shared/cloud/fleet.ts';
import {
  nodeOwner,
  providerLabel,
  serviceOwner,
  validOwnership,
  type Ownership,
} from '../../shared/cloud/ownership.ts';
import { FakeCloud } from '../../providers/fake/index.ts';

const ownership: Ownership = {
  providers: ['static', 'aws'],
  defaultProvider: 'aws',
  classes: new Map([['example.com/metal', 'static']]),
};

const node = (providerID?: string, label?: string) => ({
  metadata: { labels: label === undefined ? {} : { [providerLabel]: label } },
  spec: providerID === undefined ? {} : { providerID },
});

describe('ownership of Nodes and Services', () => {
  it('decides a Node by its provider ID first, then the label, then the default', () => {
    assert.deepEqual(nodeOwner(ownership, node('static://rack1/m1', 'aws')), { provider: 'static', by: 'provider-id' });
    assert.deepEqual(nodeOwner(ownership, node(undefined, 'static')), { provider: 'static', by: 'label' });
    assert.deepEqual(nodeOwner(ownership, node()), { provider: 'aws', by: 'default' });
    assert.deepEqual(nodeOwner(ownership, node('')), { provider: 'aws', by: 'default' });
  });

  it('gives nobody a Node of another scheme or label, without falling through to the default', () => {
    const foreign = nodeOwner(ownership, node('gce://p/z/i', 'static'));
    assert.equal(foreign.provider, undefined);
    assert.match('why' in foreign ? foreign.why : '', /gce:\/\/p\/z\/i.*not of a provider served here/);
    const labelled = nodeOwner(ownership, node(undefined, 'vsphere'));
    assert.equal(labelled.provider, undefined);
    const none = nodeOwner({ ...ownership, defaultProvider: undefined }, node());
    assert.match('why' in none ? none.why : '', /no default provider is configured/);
  });

  it('decides a Service by its class, the default provider serving those without one', () => {
    assert.equal(serviceOwner(ownership, { spec: { loadBalancerClass: 'example.com/metal' } }), 'static');
    assert.equal(serviceOwner(ownership, { spec: {} }), 'aws');
    assert.equal(serviceOwner(ownership, { spec: { loadBalancerClass: null } }), 'aws');
    assert.equal(serviceOwner(ownership, { spec: { loadBalancerClass: 'other.io/lb' } }), undefined);
  });

  it('refuses rules that cannot be followed, naming each problem', () => {
    assert.throws(
      () => validOwnership({ providers: ['a', 'a'], defaultProvider: 'c', classes: new Map([['x/y', 'b']]) }),
      /provider a named twice; the default provider c is not one of a, a; class x\/y is given to b/,
    );
    assert.throws(
      () => validOwnership({ providers: ['a', 'b'], defaultProvider: 'a', classes: new Map([['x/y', 'a']]) }),
      /the default provider, which serves the Services without a class/,
    );
  });

  it('gives one provider every object (no rules), and several each their own or a reason', () => {
    const one = new FakeCloud();
    assert.equal(chooseForNode(singleFleet(one), node('gce://x')).provider, 'fake');
    const metal = new FakeCloud();
    metal.scheme = 'static';
    const split = hybridFleet(ownership, new Map([['static', metal]]));
    assert.equal(chooseForNode(split, node(undefined, 'static')).provider, 'static');
    const other = chooseForNode(split, node());
    assert.deepEqual(other.provider === undefined && other.nobody, false);
    assert.match(other.provider === undefined ? other.why : '', /aws \(by default\), which another instance serves/);
    assert.equal(chooseForService(split, { spec: {} }).provider, undefined);
    assert.throws(() => hybridFleet(ownership, new Map([['gce', one]])), /gce is served but not one of static, aws/);
  });
});

describe('providers on the command line', () => {
  it('reads one provider as before, and refuses what names providers with one', () => {
    const plan = providerPlan({ cloudProvider: 'aws', cloudConfig: '/etc/aws.conf' });
    assert.equal(plan.ownership, undefined);
    assert.equal(plan.cloudConfigs.get('aws'), '/etc/aws.conf');
    assert.throws(() => providerPlan({ cloudProvider: 'aws', defaultProvider: 'aws' }), /--default-provider/);
    assert.throws(() => providerPlan({ cloudProvider: 'aws', cloudConfig: 'aws=/x' }), /by provider name/);
    assert.throws(() => providerPlan({ cloudProvider: 'aws', loadBalancerClass: 'aws=a/b' }), /by provider name/);
  });

  it('reads several providers with their files, default and classes', () => {
    const plan = providerPlan({
      cloudProvider: 'static,aws',
      cloudConfig: 'static=/etc/inventory.yaml,aws=/etc/aws.conf',
      defaultProvider: 'aws',
      loadBalancerClass: 'static=example.com/metal',
    });
    assert.deepEqual(plan.names, ['static', 'aws']);
    assert.equal(plan.cloudConfigs.get('static'), '/etc/inventory.yaml');
    const rules = plan.ownership;
    assert.ok(rules !== undefined);
    assert.equal(rules.classes.get('example.com/metal'), 'static');
    assert.equal(rules.defaultProvider, 'aws');
  });

  it('serves all providers by default, or those --serve-providers names, and builds only them', async () => {
    const base = { cloudProvider: 'static,fake', defaultProvider: 'fake' };
    assert.deepEqual(providerPlan(base).served, ['static', 'fake']);
    const plan = providerPlan({ ...base, serveProviders: 'fake' });
    assert.deepEqual(plan.served, ['fake']);
    assert.deepEqual(plan.ownership?.providers, ['static', 'fake']);
    // The static provider is not built: its missing inventory would fail it.
    const built = await initProviders(plan, { signal: new AbortController().signal, log: silentLogger() });
    assert.deepEqual([...built.keys()], ['fake']);
    assert.throws(
      () => providerPlan({ ...base, serveProviders: 'aws' }),
      /aws is not one of --cloud-provider static,fake/,
    );
    assert.throws(() => providerPlan({ ...base, serveProviders: 'fake,fake' }), /fake named twice/);
    assert.throws(
      () => providerPlan({ cloudProvider: 'fake', serveProviders: 'static' }),
      /not the one --cloud-provider/,
    );
  });

  it('refuses a file or class for a provider not named, twice, or not by name', () => {
    const base = { cloudProvider: 'static,aws' };
    assert.throws(() => providerPlan({ ...base, cloudConfig: '/etc/aws.conf' }), /give each one's as name=path/);
    assert.throws(() => providerPlan({ ...base, cloudConfig: 'gce=/x' }), /gce is not one of --cloud-provider/);
    assert.throws(() => providerPlan({ ...base, cloudConfig: 'aws=/x,aws=/y' }), /aws given twice/);
    assert.throws(() => providerPlan({ ...base, defaultProvider: 'gce' }), /the default provider gce is not one of/);
    assert.throws(() => providerPlan({ cloudProvider: 'aws,aws' }), /aws named twice/);
  });
});
