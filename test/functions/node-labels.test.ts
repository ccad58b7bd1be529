import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { initializationLabels, initializationPatch, labelReconcile } from '../../functions/node-init/labels.ts';
import type { InstanceMetadata } from '../../shared/cloud/provider.ts';

const metadata = (overrides: Partial<InstanceMetadata> = {}): InstanceMetadata => ({
  providerId: 'fake://1',
  instanceType: '',
  nodeAddresses: [],
  zone: '',
  region: '',
  additionalLabels: {},
  ...overrides,
});
const node = (labels: Record<string, string> = {}, extra: Partial<V1Node> = {}): V1Node => ({
  metadata: { name: 'w1', resourceVersion: '7', labels },
  ...extra,
});
const uninitialized = { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' };

describe('initializationLabels', () => {
  it('sets instance type, zone and region under both the GA and the beta keys, overwriting', () => {
    const labels = initializationLabels(
      node({ 'topology.kubernetes.io/zone': 'old' }),
      metadata({ instanceType: 'm1', zone: 'z1', region: 'r1' }),
    );
    assert.deepEqual(labels, {
      'beta.kubernetes.io/instance-type': 'm1',
      'node.kubernetes.io/instance-type': 'm1',
      'failure-domain.beta.kubernetes.io/zone': 'z1',
      'topology.kubernetes.io/zone': 'z1',
      'failure-domain.beta.kubernetes.io/region': 'r1',
      'topology.kubernetes.io/region': 'r1',
    });
  });

  it('skips empty metadata values', () => {
    assert.deepEqual(initializationLabels(node(), metadata()), {});
  });

  const additional: { key: string; kept: boolean }[] = [
    { key: 'example.com/rack', kept: true },
    { key: 'app.k8snio/x', kept: true },
    { key: 'kubernetes.io/x', kept: false },
    { key: 'k8s.io/x', kept: false },
    { key: 'topology.kubernetes.io/x', kept: false },
    { key: 'topology.k8s.io/x', kept: false },
  ];
  for (const { key, kept } of additional) {
    it(`${kept ? 'adds' : 'never adds'} the additional label ${key}`, () => {
      const labels = initializationLabels(node(), metadata({ additionalLabels: { [key]: 'v' } }));
      assert.equal(key in labels, kept);
    });
  }

  it('never overwrites a label the node already has', () => {
    const labels = initializationLabels(
      node({ 'example.com/rack': 'mine' }),
      metadata({ additionalLabels: { 'example.com/rack': 'theirs' } }),
    );
    assert.deepEqual(labels, {});
  });
});

describe('initializationPatch', () => {
  it('removes every uninitialized taint, keeps others, sets the provider ID and the resourceVersion', () => {
    const other = { key: 'dedicated', value: 'gpu', effect: 'NoSchedule' };
    const patch = initializationPatch(
      node({}, { spec: { taints: [uninitialized, other, { ...uninitialized, effect: 'NoExecute' }] } }),
      metadata(),
    );
    assert.deepEqual(patch, {
      metadata: { resourceVersion: '7', labels: {} },
      spec: { taints: [other], providerID: 'fake://1' },
    });
  });

  it('keeps the node provider ID', () => {
    const patch = initializationPatch(
      node({}, { spec: { providerID: 'aws://x', taints: [uninitialized] } }),
      metadata(),
    );
    assert.equal(patch.spec?.providerID, undefined);
  });

  it('refuses a provided node IP that the cloud does not report, naming the node', () => {
    const annotated: V1Node = {
      metadata: { name: 'w1', annotations: { 'alpha.kubernetes.io/provided-node-ip': '10.0.0.9' } },
      spec: { taints: [uninitialized] },
    };
    assert.throws(
      () => initializationPatch(annotated, metadata({ nodeAddresses: [{ type: 'InternalIP', address: '10.0.0.1' }] })),
      /failed to get node modifiers from cloud provider: provided node ip for node "w1" is not valid: failed to get node address from cloud provider that matches ip: 10\.0\.0\.9/,
    );
  });
});

describe('labelReconcile', () => {
  const cases: { name: string; labels: Record<string, string>; want: Record<string, string> }[] = [
    {
      name: 'copies a beta label whose GA label is missing',
      labels: { 'failure-domain.beta.kubernetes.io/zone': 'z' },
      want: { 'topology.kubernetes.io/zone': 'z' },
    },
    {
      name: 'overwrites a GA label that differs',
      labels: { 'beta.kubernetes.io/instance-type': 'a', 'node.kubernetes.io/instance-type': 'b' },
      want: { 'node.kubernetes.io/instance-type': 'a' },
    },
    { name: 'does nothing without the beta label', labels: { 'topology.kubernetes.io/region': 'r' }, want: {} },
    {
      name: 'does nothing when in step',
      labels: { 'failure-domain.beta.kubernetes.io/region': 'r', 'topology.kubernetes.io/region': 'r' },
      want: {},
    },
  ];
  for (const { name, labels, want } of cases) {
    it(name, () => {
      assert.deepEqual(labelReconcile(node(labels)), want);
    });
  }
});
