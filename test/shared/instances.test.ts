// The instance helpers node-init and node-lifecycle share (k8s.io/cloud-provider controllers/node/
// node_controller.go, getInstanceMetadata, and controllers/nodelifecycle, ensureNodeExistsByProviderID), against
// the recording fake cloud: call order, fallbacks, and contract errors found through wrapping.

import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { InstanceNotFoundError, NotImplementedError } from '../../shared/cloud/errors.ts';
import { instanceExists, instanceMetadata, instanceShutdown, nodeAddresses } from '../../shared/cloud/instances.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { newNode, withProviderId } from '../harness/builders.ts';

const address = { type: 'InternalIP', address: '10.0.0.7' };

/** A fake cloud with one machine `m-1` behind node `node-1`, and only the legacy interfaces. */
function legacyCloud(): FakeCloud {
  const cloud = new FakeCloud();
  cloud.disabled.add('instancesV2');
  cloud.machines.push({
    id: 'm-1',
    nodeName: 'node-1',
    instanceType: 'small',
    zone: 'z1',
    region: 'r1',
    addresses: [address],
  });
  return cloud;
}

const wrapped = (error: Error): Error => new Error('provider call failed', { cause: error });

describe('instanceMetadata, legacy Instances and Zones', () => {
  let cloud: FakeCloud;
  beforeEach(() => {
    cloud = legacyCloud();
  });

  it('looks the provider ID up by name, then asks by provider ID', async () => {
    assert.deepEqual(await instanceMetadata(cloud, newNode('node-1')), {
      providerId: 'fake://m-1',
      instanceType: 'small',
      nodeAddresses: [address],
      zone: 'z1',
      region: 'r1',
      additionalLabels: {},
    });
    assert.deepEqual(cloud.methods(), [
      'instanceId',
      'nodeAddressesByProviderId',
      'instanceTypeByProviderId',
      'getZoneByProviderId',
    ]);
  });

  it("uses the node's provider ID without asking for it", async () => {
    assert.equal(
      (await instanceMetadata(cloud, newNode('node-1', withProviderId('fake://m-1'))))?.providerId,
      'fake://m-1',
    );
    assert.deepEqual(cloud.methods(), ['nodeAddressesByProviderId', 'instanceTypeByProviderId', 'getZoneByProviderId']);
  });

  it('goes on with an empty provider ID when instanceId is not implemented (wrapped), falling back to the name', async () => {
    cloud.errors.set('instanceId', wrapped(new NotImplementedError()));
    const metadata = await instanceMetadata(cloud, newNode('node-1'));
    assert.equal(metadata?.providerId, '');
    assert.equal(metadata.instanceType, 'small');
    assert.equal(metadata.zone, 'z1');
    assert.deepEqual(cloud.methods(), [
      'instanceId',
      'nodeAddressesByProviderId',
      'nodeAddresses',
      'instanceTypeByProviderId',
      'instanceType',
      'getZoneByProviderId',
      'getZoneByNodeName',
    ]);
  });

  it('throws InstanceNotFound from instanceId as it is, and wraps any other error', async () => {
    const notFound = wrapped(new InstanceNotFoundError());
    cloud.errors.set('instanceId', notFound);
    await assert.rejects(instanceMetadata(cloud, newNode('node-1')), (error) => error === notFound);
    cloud.errors.set('instanceId', new Error('boom'));
    await assert.rejects(instanceMetadata(cloud, newNode('node-1')), {
      message: 'failed to get instance ID from cloud provider: boom',
    });
  });

  it('reports both address errors, and a zone error', async () => {
    cloud.errors.set('nodeAddressesByProviderId', new Error('by id'));
    cloud.errors.set('nodeAddresses', new Error('by name'));
    await assert.rejects(instanceMetadata(cloud, newNode('node-1')), {
      message: 'error fetching node by provider ID: by id, and error by node name: by name',
    });
    cloud.errors.clear();
    cloud.errors.set('getZoneByNodeName', new Error('no zone'));
    cloud.errors.set('getZoneByProviderId', new Error('no zone by id'));
    await assert.rejects(instanceMetadata(cloud, newNode('node-1')), {
      message: 'failed to get zone from cloud provider: no zone',
    });
  });

  it('leaves zone and region empty without Zones', async () => {
    cloud.disabled.add('zones');
    const metadata = await instanceMetadata(cloud, newNode('node-1'));
    assert.deepEqual([metadata?.zone, metadata?.region], ['', '']);
  });

  it('throws without either instances interface', async () => {
    cloud.disabled.add('instances');
    await assert.rejects(instanceMetadata(cloud, newNode('node-1')), {
      message: 'cloud provider does not support instances',
    });
  });
});

describe('instanceMetadata, InstancesV2', () => {
  it("takes the node's provider ID when the cloud gives none, and fails when neither has one", async () => {
    const cloud = new FakeCloud();
    cloud.machines.push({ id: 'm-1', nodeName: 'node-1', noProviderId: true });
    assert.equal(
      (await instanceMetadata(cloud, newNode('node-1', withProviderId('fake://m-1'))))?.providerId,
      'fake://m-1',
    );
    await assert.rejects(instanceMetadata(cloud, newNode('node-1')), {
      message: 'cloud provider does not set node provider ID for node node-1',
    });
    assert.deepEqual(cloud.methods(), ['instanceMetadata', 'instanceMetadata']);
  });
});

describe('nodeAddresses', () => {
  it('makes one call: InstancesV2 metadata, or legacy addresses by provider ID', async () => {
    const v2 = new FakeCloud();
    v2.machines.push({ id: 'm-1', nodeName: 'node-1', addresses: [address] });
    assert.deepEqual(await nodeAddresses(v2, newNode('node-1')), [address]);
    assert.deepEqual(v2.methods(), ['instanceMetadata']);
    const legacy = legacyCloud();
    assert.deepEqual(await nodeAddresses(legacy, newNode('node-1', withProviderId('fake://m-1'))), [address]);
    assert.deepEqual(legacy.methods(), ['nodeAddressesByProviderId']);
  });

  it('answers undefined without either instances interface', async () => {
    const cloud = legacyCloud();
    cloud.disabled.add('instances');
    assert.equal(await nodeAddresses(cloud, newNode('node-1')), undefined);
  });
});

describe('instanceExists and instanceShutdown, legacy Instances', () => {
  let cloud: FakeCloud;
  beforeEach(() => {
    cloud = legacyCloud();
  });

  it('answers "gone" for an InstanceNotFound from instanceId, wrapped or not', async () => {
    for (const error of [new InstanceNotFoundError(), wrapped(new InstanceNotFoundError())]) {
      cloud.errors.set('instanceId', error);
      assert.equal(await instanceExists(cloud, newNode('node-1')), false);
      assert.equal(await instanceShutdown(cloud, newNode('node-1')), false);
    }
    assert.deepEqual(cloud.methods(), ['instanceId', 'instanceId', 'instanceId', 'instanceId']);
  });

  it("throws instanceId's other errors as they are", async () => {
    cloud.errors.set('instanceId', new Error('boom'));
    await assert.rejects(instanceExists(cloud, newNode('node-1')), { message: 'boom' });
  });

  it('asks by provider ID once it has one', async () => {
    assert.equal(await instanceExists(cloud, newNode('node-1')), true);
    assert.equal(await instanceShutdown(cloud, newNode('node-1')), false);
    assert.deepEqual(cloud.methods(), [
      'instanceId',
      'instanceExistsByProviderId',
      'instanceId',
      'instanceShutdownByProviderId',
    ]);
  });

  it('answers "not shut down" when the check is not implemented (wrapped)', async () => {
    cloud.errors.set('instanceShutdownByProviderId', wrapped(new NotImplementedError()));
    assert.equal(await instanceShutdown(cloud, newNode('node-1', withProviderId('fake://m-1'))), false);
  });
});
