// The benchmark cloud's forget() and update log: the scale bench (bench/scenarios/scale.ts) makes a node's
// machine gone so that the CCM's node-lifecycle deletes the Node; the Go CCM's cloud
// (bench/go-ccm/cloud.go) answers the same.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import { BenchCloud } from '../harness/cloud.ts';
import { NodeSetReader, NodeSetRecorder } from '../harness/node-sets.ts';

const node = (name: string, providerID?: string): V1Node => ({
  metadata: { name },
  ...(providerID === undefined ? {} : { spec: { providerID } }),
});

test('a forgotten machine no longer exists, by name or by provider ID, and the others still do', async () => {
  const cloud = new BenchCloud();
  const instances = cloud.instancesV2() ?? assert.fail('the benchmark cloud has InstancesV2');
  assert.equal(await instances.instanceExists(node('a')), true);
  assert.equal(await instances.instanceExists(node('b', 'fake://b')), true);
  cloud.forget('a');
  cloud.forget('b');
  assert.equal(await instances.instanceExists(node('a')), false);
  assert.equal(await instances.instanceExists(node('b', 'fake://b')), false);
  await assert.rejects(instances.instanceMetadata(node('a')), InstanceNotFoundError);
  assert.equal(await instances.instanceExists(node('c')), true);
  assert.equal((await instances.instanceMetadata(node('c')))?.providerId, 'fake://c');
});

// Its updateLoadBalancer log keeps each node set as bench/go-ccm/calls.go keeps it (node-sets.ts):
// the same set is one string whatever the order of its nodes, served with the names it numbers.
test('the update log keeps a node set once whatever its order, as bits over numbered names', async () => {
  const cloud = new BenchCloud();
  const lb = cloud.loadBalancer() ?? assert.fail('the benchmark cloud has load balancers');
  const service = { metadata: { namespace: 'default', name: 's', uid: 'u' } };
  const names = Array.from({ length: 10 }, (_, i) => `n${i}`);
  await lb.updateLoadBalancer(
    'c',
    service,
    names.map((n) => node(n)),
  );
  await lb.updateLoadBalancer(
    'c',
    service,
    [...names].reverse().map((n) => node(n)),
  );
  await lb.updateLoadBalancer('c', service, [node('n9'), node('n0'), node('n2')]);
  await lb.updateLoadBalancer('c', service, []);
  const { updates, names: numbered } = cloud.recorded(0, Infinity, 0);
  assert.deepEqual(numbered, names);
  // n0…n9 are bits 0…9: 0xff 0x03; n0, n2, n9: 0x05 0x02; none: no byte.
  assert.deepEqual(
    updates.map((u) => u.nodes),
    [Buffer.from([0xff, 0x03]), Buffer.from([0xff, 0x03]), Buffer.from([0x05, 0x02]), Buffer.alloc(0)].map((b) =>
      b.toString('base64'),
    ),
  );
  assert.equal(cloud.recorded(2, 1, 9).updates.length, 1);
  assert.deepEqual(cloud.recorded(2, 1, 9).names, ['n9']);
  assert.equal(cloud.updatesTotal, 4);
  assert.deepEqual(
    cloud.updates.map((u) => [u.service, u.nodes]),
    [
      ['default/s', names],
      ['default/s', names],
      ['default/s', ['n0', 'n2', 'n9']],
      ['default/s', []],
    ],
  );
  // One array per distinct set, in the order of the names' numbers.
  assert.equal(cloud.updates[0]?.nodes, cloud.updates[1]?.nodes);
});

test('a node set reader turns sets back into names from the names it was given, and refuses a number it lacks', () => {
  const recorder = new NodeSetRecorder();
  const set = recorder.record(['b', 'a', 'c', 'a'], (n) => n);
  assert.equal(
    recorder.record(['c', 'b', 'a'], (n) => n),
    set,
  );
  const reader = new NodeSetReader();
  assert.throws(() => reader.decode(set), /node set names node 0, of 0 known/);
  reader.names.push(...recorder.names);
  assert.deepEqual(reader.decode(set), ['b', 'a', 'c']);
  assert.equal(reader.decode(set), reader.decode(set));
});
