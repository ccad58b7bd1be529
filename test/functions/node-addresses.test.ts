import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { addressesChanged, addressesForNodeIp, desiredAddresses } from '../../functions/node-init/addresses.ts';

const a = (type: string, address: string): V1NodeAddress => ({ type, address });

describe('addressesForNodeIp', () => {
  const cloud = [
    a('InternalIP', '10.0.0.1'),
    a('InternalIP', '10.0.0.2'),
    a('ExternalIP', '203.0.113.5'),
    a('Hostname', 'w1'),
  ];

  it('puts the matching address first and drops other addresses of its type', () => {
    assert.deepEqual(addressesForNodeIp('10.0.0.2', cloud), [
      a('InternalIP', '10.0.0.2'),
      a('ExternalIP', '203.0.113.5'),
      a('Hostname', 'w1'),
    ]);
  });

  it('matches IPv6 semantically and keeps the cloud spelling', () => {
    const v6 = [a('InternalIP', '2001:DB8::0:1'), a('InternalIP', '10.0.0.1')];
    assert.deepEqual(addressesForNodeIp('2001:db8::1', v6), [a('InternalIP', '2001:DB8::0:1')]);
  });

  it('keeps dual-stack order of the annotation', () => {
    const dual = [a('InternalIP', '10.0.0.1'), a('InternalIP', '2001:db8::1'), a('Hostname', 'w1')];
    assert.deepEqual(addressesForNodeIp('2001:db8::1,10.0.0.1', dual), [
      a('InternalIP', '2001:db8::1'),
      a('InternalIP', '10.0.0.1'),
      a('Hostname', 'w1'),
    ]);
  });

  it('fails when the node IP is not among the cloud addresses', () => {
    assert.throws(
      () => addressesForNodeIp('10.9.9.9', cloud),
      /failed to get node address from cloud provider that matches ip: 10\.9\.9\.9/,
    );
  });
});

describe('addressesChanged', () => {
  const cases: { name: string; current: V1NodeAddress[]; next: V1NodeAddress[]; want: boolean }[] = [
    { name: 'same', current: [a('InternalIP', '1.1.1.1')], next: [a('InternalIP', '1.1.1.1')], want: false },
    {
      name: 'reordered',
      current: [a('InternalIP', '1.1.1.1'), a('Hostname', 'h')],
      next: [a('Hostname', 'h'), a('InternalIP', '1.1.1.1')],
      want: false,
    },
    { name: 'different length', current: [a('InternalIP', '1.1.1.1')], next: [], want: true },
    {
      name: 'different address',
      current: [a('InternalIP', '1.1.1.1')],
      next: [a('InternalIP', '1.1.1.2')],
      want: true,
    },
    { name: 'different type', current: [a('InternalIP', '1.1.1.1')], next: [a('ExternalIP', '1.1.1.1')], want: true },
  ];
  for (const { name, current, next, want } of cases) {
    it(name, () => {
      assert.equal(addressesChanged(current, next), want);
    });
  }
});

describe('desiredAddresses', () => {
  const node = (addresses: V1NodeAddress[], annotation?: string): V1Node => ({
    metadata: {
      name: 'w1',
      ...(annotation === undefined ? {} : { annotations: { 'alpha.kubernetes.io/provided-node-ip': annotation } }),
    },
    status: { addresses },
  });

  it('writes nothing when the cloud has no addresses', () => {
    assert.equal(desiredAddresses(node([a('InternalIP', '1.1.1.1')]), []), undefined);
  });

  it('keeps the kubelet Hostname when the cloud reports none', () => {
    assert.deepEqual(desiredAddresses(node([a('Hostname', 'w1')]), [a('InternalIP', '10.0.0.1')]), [
      a('InternalIP', '10.0.0.1'),
      a('Hostname', 'w1'),
    ]);
  });

  it('writes nothing when only the order differs', () => {
    assert.equal(
      desiredAddresses(node([a('Hostname', 'w1'), a('InternalIP', '10.0.0.1')]), [
        a('InternalIP', '10.0.0.1'),
        a('Hostname', 'w1'),
      ]),
      undefined,
    );
  });

  it('applies the provided-node-ip annotation', () => {
    const cloud = [a('InternalIP', '10.0.0.1'), a('InternalIP', '10.0.0.2')];
    assert.deepEqual(desiredAddresses(node([], '10.0.0.2'), cloud), [a('InternalIP', '10.0.0.2')]);
  });

  it('throws for an annotation that matches no cloud address', () => {
    assert.throws(() => desiredAddresses(node([], '10.0.0.9'), [a('InternalIP', '10.0.0.1')]), /matches ip/);
  });
});
