// The benchmark cloud's forget(): the scale bench (bench/scenarios/scale.ts) makes a node's
// machine gone so that the CCM's node-lifecycle deletes the Node; the Go CCM's cloud
// (bench/go-ccm/cloud.go) answers the same.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import { BenchCloud } from '../harness/cloud.ts';

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
