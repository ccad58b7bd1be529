// The ownership rules (shared/cloud/ownership.ts, fleet.ts, ADR 0026) with one provider and with
// several, the skip counter every function shares (shared/cloud/skips.ts), and how the command line
// gives them (app/providers.ts): pure, no cluster.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { initProviders, providerPlan } from '../../app/providers.ts';
import '../../app/root.ts';
import { silentLogger } from '../harness/builders.ts';
import { Registry } from 'prom-client';
import { chooseForNode, chooseForService, hybridFleet, singleFleet } from '../../shared/cloud/fleet.ts';
import { OwnershipCheck, ownershipSkippedMetric } from '../../shared/cloud/skips.ts';
import {
  nodeOwner,
  platformAnnotation,
  providerLabel,
  talosPlatformLabel,
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

  it('gives several providers each their own Node or a reason', () => {
    const one = new FakeCloud();
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

// A Node as the rules read it: its provider ID, and its markers by key.
const marked = (
  providerID: string | undefined,
  labels: Record<string, string> = {},
  annotations: Record<string, string> = {},
) => ({
  metadata: { name: 'n', uid: 'u-n', labels, annotations },
  spec: providerID === undefined ? {} : { providerID },
});

describe('ownership with one provider (issue 38)', () => {
  const staticCloud = (): FakeCloud => {
    const cloud = new FakeCloud();
    cloud.scheme = 'static';
    return cloud;
  };
  const rows: readonly {
    readonly what: string;
    readonly node: ReturnType<typeof marked>;
    readonly provider: string | undefined;
    readonly reason?: string;
  }[] = [
    { what: 'a new Node (no provider ID, no marker)', node: marked(undefined), provider: 'static' },
    { what: 'an empty provider ID', node: marked(''), provider: 'static' },
    { what: 'its own provider ID', node: marked('static://rack1/m1'), provider: 'static' },
    {
      what: 'its own provider ID, whatever the markers say',
      node: marked('static://m1', { [talosPlatformLabel]: 'nocloud' }, { [platformAnnotation]: 'gce' }),
      provider: 'static',
    },
    { what: "another CCM's provider ID", node: marked('skycloud://m-001'), provider: undefined, reason: 'provider-id' },
    {
      what: "another CCM's provider ID beside cirrus's label naming this provider",
      node: marked('skycloud://m-001', { [providerLabel]: 'static' }),
      provider: undefined,
      reason: 'provider-id',
    },
    { what: 'a provider ID without a scheme', node: marked('m-001'), provider: undefined, reason: 'provider-id' },
    {
      what: "cirrus's label naming another provider",
      node: marked(undefined, { [providerLabel]: 'aws' }),
      provider: undefined,
      reason: 'label',
    },
    {
      what: "cirrus's label naming this provider",
      node: marked(undefined, { [providerLabel]: 'static' }),
      provider: 'static',
    },
    {
      what: "KEP-5778's annotation naming another platform",
      node: marked(undefined, {}, { [platformAnnotation]: 'skycloud' }),
      provider: undefined,
      reason: 'platform-annotation',
    },
    {
      what: "KEP-5778's annotation naming this provider",
      node: marked(undefined, {}, { [platformAnnotation]: 'static' }),
      provider: 'static',
    },
    {
      what: "Talos's label naming another platform",
      node: marked(undefined, { [talosPlatformLabel]: 'nocloud' }),
      provider: undefined,
      reason: 'platform-label',
    },
    {
      what: "cirrus's label before the annotation and Talos's label",
      node: marked(
        undefined,
        { [providerLabel]: 'static', [talosPlatformLabel]: 'metal' },
        { [platformAnnotation]: 'skycloud' },
      ),
      provider: 'static',
    },
    {
      what: "the annotation before Talos's label, with no fall-through to the default",
      node: marked(undefined, { [talosPlatformLabel]: 'static' }, { [platformAnnotation]: 'skycloud' }),
      provider: undefined,
      reason: 'platform-annotation',
    },
  ];
  for (const row of rows)
    it(`${row.provider === undefined ? 'leaves alone' : 'acts on'} ${row.what}`, () => {
      const choice = chooseForNode(singleFleet(staticCloud()), row.node);
      assert.equal(choice.provider, row.provider);
      if (choice.provider !== undefined) return;
      assert.equal(choice.reason, row.reason);
      // Another CCM's Node: no NoCloudProvider Event from node-init (nobody is a hybrid cluster's case).
      assert.equal(choice.nobody, false);
      assert.match(choice.why, /^another CCM's: /);
    });

  it('still gives one provider every Service', () => {
    assert.equal(
      chooseForService(singleFleet(staticCloud()), { spec: { loadBalancerClass: 'x/y' } }).provider,
      'static',
    );
  });

  it('reads the markers in a hybrid cluster too, nobody owning a Node whose platform is served by none', () => {
    const foreign = nodeOwner(ownership, marked(undefined, { [talosPlatformLabel]: 'nocloud' }));
    assert.deepEqual(foreign.provider === undefined && foreign.reason, 'platform-label');
    assert.deepEqual(nodeOwner(ownership, marked(undefined, {}, { [platformAnnotation]: 'static' })), {
      provider: 'static',
      by: 'platform-annotation',
    });
    const split = hybridFleet(ownership, new Map([['static', staticCloud()]]));
    const choice = chooseForNode(split, marked('gce://p/z/i'));
    assert.deepEqual(choice.provider === undefined && [choice.nobody, choice.reason], [true, 'provider-id']);
    const elsewhere = chooseForNode(split, marked('aws:///us-east-1a/i-1'));
    assert.deepEqual(elsewhere.provider === undefined && elsewhere.reason, 'other-instance');
  });
});

describe('the ownership check every function makes', () => {
  it('counts each skip by function and reason, and logs a Node once at info, then at debug', async () => {
    const registry = new Registry();
    const lifecycle = new OwnershipCheck('node-lifecycle');
    const routes = new OwnershipCheck('routes');
    lifecycle.register(registry);
    routes.register(registry); // the same counter, shared in one process
    const lines: { level: string; msg: string }[] = [];
    const log = {
      info: (_: unknown, msg: string) => lines.push({ level: 'info', msg }),
      debug: (_: unknown, msg: string) => lines.push({ level: 'debug', msg }),
    } as unknown as Parameters<OwnershipCheck['choose']>[2];
    const cloud = new FakeCloud();
    const fleet = singleFleet(cloud);
    const sky = marked('skycloud://m-001');
    assert.equal(lifecycle.choose(fleet, sky, log).provider, undefined);
    assert.equal(lifecycle.choose(fleet, sky, log).provider, undefined);
    assert.equal(lifecycle.choose(fleet, marked('fake://1'), log).provider, 'fake');
    assert.equal(lifecycle.choose(fleet, marked(undefined), log).provider, 'fake');
    assert.equal(routes.owns(fleet, 'fake', marked(undefined, { [talosPlatformLabel]: 'metal' }), undefined), false);
    assert.deepEqual(
      lines.map((l) => l.level),
      ['info', 'debug'],
    );
    assert.match(lines[0]?.msg ?? '', /node n left alone: another CCM's: its spec.providerID "skycloud:\/\/m-001"/);
    const text = await registry.metrics();
    assert.match(text, new RegExp(`${ownershipSkippedMetric}\\{function="node-lifecycle",reason="provider-id"\\} 2`));
    assert.match(text, new RegExp(`${ownershipSkippedMetric}\\{function="routes",reason="platform-label"\\} 1`));
    assert.equal(text.match(new RegExp(`^${ownershipSkippedMetric}\\{`, 'gm'))?.length, 2);
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
