// node-init against the real API server with the recording fake cloud (k8s.io/cloud-provider
// controllers/node).

import assert from 'node:assert/strict';
import { before, beforeEach, describe, it } from 'node:test';
import { CoreV1Api, type V1Node } from '@kubernetes/client-node';
import { LeanCore } from '../../shared/kube/core.ts';
import { nodeInitFunction } from '../../functions/node-init/index.ts';
import { findCause, InstanceNotFoundError, RetryError } from '../../shared/cloud/errors.ts';
import type { InstancesV2 } from '../../shared/cloud/provider.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { createStaticProvider } from '../../providers/static/index.ts';
import { hybridFleet } from '../../shared/cloud/fleet.ts';
import { providerLabel } from '../../shared/cloud/ownership.ts';
import type { FunctionDefinition, Report } from '../../shared/host/function.ts';
import {
  createNode,
  eventsAbout,
  firstResult,
  newNode,
  ownTaints,
  plain,
  silentLogger,
  uninitialized,
  uninitializedTaint,
  withAddresses,
  withAnnotations,
  withLabels,
  withProviderId,
  withTaints,
} from '../harness/builders.ts';
import { loadFunction } from '../harness/cirrus.ts';
import { controlPlaneSkip, offlineCore, testCluster, uniqueName } from '../harness/cluster.ts';

const log = silentLogger();
const run = { dryRun: false, log, signal: new AbortController().signal };
const dryRun = { ...run, dryRun: true };

const result = firstResult;

describe('node-init', { skip: controlPlaneSkip }, () => {
  let core: CoreV1Api;
  // The functions get LeanCore, as cirrus gives it; the tests' own setup and checks use CoreV1Api.
  let lean: LeanCore;
  let cloud: FakeCloud;
  let fn: FunctionDefinition;
  before(async () => {
    core = (await testCluster()).admin.makeApiClient(CoreV1Api);
    lean = new LeanCore((await testCluster()).admin);
  });
  beforeEach(() => {
    cloud = new FakeCloud();
    fn = nodeInitFunction({ core: lean, cloud });
  });

  function machine(nodeName: string, extra: Partial<FakeCloud['machines'][number]> = {}): void {
    cloud.machines.push({
      id: `id-${nodeName}`,
      nodeName,
      instanceType: 'm1.large',
      zone: 'zone-a',
      region: 'region-1',
      addresses: [
        { type: 'InternalIP', address: '10.1.0.5' },
        { type: 'ExternalIP', address: '203.0.113.5' },
      ],
      labels: { 'example.com/rack': 'r7', 'kubernetes.io/forbidden': 'x' },
      ...extra,
    });
  }

  const events = (name: string): Promise<string[]> => eventsAbout(core, 'default', name);

  it('initializes a tainted node: provider ID, labels, taint removal, addresses, Synced event', async () => {
    const name = uniqueName('init');
    machine(name);
    const other = { key: 'dedicated', value: 'gpu', effect: 'NoSchedule' };
    await createNode(
      core,
      newNode(name, uninitialized, withTaints(other), withAddresses({ type: 'Hostname', address: name })),
    );

    const report = await fn.reconcileOne({ kind: 'Node', name }, run);

    assert.equal(result(report), 'initialized');
    const node = await core.readNode({ name });
    assert.equal(node.spec?.providerID, `fake://id-${name}`);
    assert.deepEqual(ownTaints(node), [other]);
    const labels = node.metadata?.labels ?? {};
    for (const [key, value] of Object.entries({
      'node.kubernetes.io/instance-type': 'm1.large',
      'beta.kubernetes.io/instance-type': 'm1.large',
      'topology.kubernetes.io/zone': 'zone-a',
      'failure-domain.beta.kubernetes.io/zone': 'zone-a',
      'topology.kubernetes.io/region': 'region-1',
      'failure-domain.beta.kubernetes.io/region': 'region-1',
      'example.com/rack': 'r7',
    }))
      assert.equal(labels[key], value, key);
    assert.equal(labels['kubernetes.io/forbidden'], undefined);
    assert.deepEqual(plain(node.status?.addresses), [
      { type: 'InternalIP', address: '10.1.0.5' },
      { type: 'ExternalIP', address: '203.0.113.5' },
      { type: 'Hostname', address: name },
    ]);
    assert.deepEqual(await events(name), ['Normal/Synced/Node synced successfully']);
    assert.deepEqual(cloud.methods(), ['instanceMetadata']);
  });

  it("decides from an event's object that an initialized node with consistent labels needs nothing, reading nothing", async () => {
    const quiet = nodeInitFunction({ core: offlineCore(), cloud });
    const name = uniqueName('claimed');
    const claimed = newNode(name, withProviderId(`fake://${name}`));
    const report = await quiet.reconcileOne({ kind: 'Node', name }, { ...run, claimed });
    assert.equal(report.objects[0]?.result, 'unchanged');
    // A node the event shows tainted is read (and here, with no API server, that fails).
    await assert.rejects(quiet.reconcileOne({ kind: 'Node', name }, { ...run, claimed: newNode(name, uninitialized) }));
    assert.deepEqual(cloud.methods(), []);
  });

  it('writes nothing on a dry run, and reports the same changes', async () => {
    const name = uniqueName('dry');
    machine(name);
    const before = await createNode(core, newNode(name, uninitialized));

    const report = await fn.reconcileOne({ kind: 'Node', name }, dryRun);

    assert.equal(report.dryRun, true);
    assert.deepEqual(
      report.objects[0]?.changes.map((c) => c.action),
      ['patch', 'patch-status', 'event'],
    );
    const patch = report.objects[0].changes[0]?.detail as { spec: { providerID: string; taints: { key: string }[] } };
    assert.equal(patch.spec.providerID, `fake://id-${name}`);
    assert.deepEqual(
      patch.spec.taints.filter((t) => t.key === uninitializedTaint.key),
      [],
    );
    const after = await core.readNode({ name });
    assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
    assert.deepEqual(await events(name), []);
  });

  it('keeps labels the node already has and the provider ID it already has', async () => {
    const name = uniqueName('keep');
    machine(name);
    await createNode(
      core,
      newNode(name, uninitialized, withProviderId(`fake://id-${name}`), withLabels({ 'example.com/rack': 'mine' })),
    );

    await fn.reconcileOne({ kind: 'Node', name }, run);

    const node = await core.readNode({ name });
    assert.equal(node.metadata?.labels?.['example.com/rack'], 'mine');
    assert.equal(node.spec?.providerID, `fake://id-${name}`);
  });

  const failures: {
    name: string;
    arrange: (cloud: FakeCloud, node: string) => void;
    check: (error: unknown) => void;
  }[] = [
    {
      name: 'the instance is not found',
      arrange: () => {},
      check: (error) => {
        assert.ok(findCause(error, InstanceNotFoundError));
        assert.match(
          (error as Error).message,
          /^failed to get instance metadata for node init-fail-[0-9a-f]+: instance not found/,
        );
      },
    },
    {
      name: 'the provider fails',
      arrange: (c, node) => {
        machine(node);
        c.errors.set('instanceMetadata', new Error('cloud API unavailable'));
      },
      check: (error) => {
        assert.match((error as Error).message, /failed to get instance metadata for node .*: cloud API unavailable/);
      },
    },
    {
      name: 'the provider asks to retry later',
      arrange: (c, node) => {
        machine(node);
        c.errors.set('instanceMetadata', new RetryError('throttled', 7_000));
      },
      check: (error) => {
        assert.equal(findCause(error, RetryError)?.retryAfterMs, 7_000);
      },
    },
    {
      name: 'the provided node IP is not among the cloud addresses',
      arrange: (_c, node) => {
        machine(node);
      },
      check: (error) => {
        assert.match(
          (error as Error).message,
          /provided node ip for node "init-fail-[0-9a-f]+" is not valid: .*matches ip: 10\.9\.9\.9/,
        );
      },
    },
    {
      name: 'the provider sets no provider ID and the node has none',
      arrange: (_c, node) => {
        machine(node, { noProviderId: true });
      },
      check: (error) => {
        assert.match((error as Error).message, /cloud provider does not set node provider ID for node init-fail-/);
      },
    },
  ];
  for (const { name: title, arrange, check } of failures) {
    it(`fails and leaves the node untouched when ${title}`, async () => {
      const name = uniqueName('init-fail');
      arrange(cloud, name);
      const node = newNode(
        name,
        uninitialized,
        ...(title.startsWith('the provided')
          ? [withAnnotations({ 'alpha.kubernetes.io/provided-node-ip': '10.9.9.9' })]
          : []),
      );
      const before = await createNode(core, node);
      await assert.rejects(fn.reconcileOne({ kind: 'Node', name }, run), (error: unknown) => {
        check(error);
        return true;
      });
      const after = await core.readNode({ name });
      assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
    });
  }

  it('with one provider too, refuses a provider ID of another scheme, and leaves another CCM’s node alone', async () => {
    // Written, `aws:///…` would make the Node another CCM's, which every function then leaves alone.
    const name = uniqueName('single-id');
    const inventory = `instances:\n  - name: ${name}\n    providerID: aws:///us-east-1a/i-0abc123\n`;
    const metal = await createStaticProvider({
      config: inventory,
      configPath: undefined,
      kubeConfig: undefined,
      signal: new AbortController().signal,
      log,
    });
    const single = nodeInitFunction({ core: lean, cloud: metal });
    const before = await createNode(core, newNode(name, uninitialized));
    await assert.rejects(
      single.reconcileOne({ kind: 'Node', name }, run),
      /provider static answered provider ID "aws:\/\/\/us-east-1a\/i-0abc123" .* which is not static:\/\/…/,
    );
    assert.equal((await core.readNode({ name })).metadata?.resourceVersion, before.metadata?.resourceVersion);
    // Another CCM's uninitialized Node (its platform label names another): not initialized, no Event.
    const other = uniqueName('talos');
    const created = await createNode(
      core,
      newNode(other, uninitialized, withLabels({ 'node.cloudprovider.kubernetes.io/platform': 'nocloud' })),
    );
    assert.equal(firstResult(await single.reconcileOne({ kind: 'Node', name: other }, run)), 'other-provider');
    assert.equal((await core.readNode({ name: other })).metadata?.resourceVersion, created.metadata?.resourceVersion);
    assert.deepEqual(await eventsAbout(core, 'default', other), []);
  });

  it('in a hybrid cluster, refuses a provider ID of another provider’s scheme and leaves the node tainted', async () => {
    // A static inventory entry naming an EC2 instance's provider ID: written, aws would own the Node.
    const name = uniqueName('hybrid-id');
    const inventory =
      `instances:\n  - name: ${name}\n    providerID: aws:///us-east-1a/i-0abc123\n    instanceType: m1.metal\n` +
      '    addresses: [{ type: InternalIP, address: 10.1.0.9 }]\n';
    const metal = await createStaticProvider({
      config: inventory,
      configPath: undefined,
      kubeConfig: undefined,
      signal: new AbortController().signal,
      log,
    });
    const aws = new FakeCloud();
    aws.scheme = 'aws';
    const fleet = hybridFleet(
      { providers: ['static', 'aws'], defaultProvider: 'aws', classes: new Map() },
      new Map([
        ['static', metal],
        ['aws', aws],
      ]),
    );
    const hybrid = nodeInitFunction({ core: lean, fleet });
    const before = await createNode(core, newNode(name, uninitialized, withLabels({ [providerLabel]: 'static' })));
    await assert.rejects(
      hybrid.reconcileOne({ kind: 'Node', name }, run),
      /provider static answered provider ID "aws:\/\/\/us-east-1a\/i-0abc123" .* which is not static:\/\/…/,
    );
    const after = await core.readNode({ name });
    assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
    assert.deepEqual(aws.calls, []);
  });

  it('uses the node provider ID when the provider sets none', async () => {
    const name = uniqueName('own-id');
    machine(name, { noProviderId: true });
    await createNode(core, newNode(name, uninitialized, withProviderId(`fake://id-${name}`)));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'initialized');
  });

  it('leaves the node tainted, without error, when the provider has no metadata yet', async () => {
    const name = uniqueName('no-meta');
    machine(name, { noMetadata: true });
    await createNode(core, newNode(name, uninitialized));
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'no-metadata');
    assert.ok((await core.readNode({ name })).spec?.taints?.some((t) => t.key === uninitializedTaint.key));
  });

  it('initializes through the legacy Instances and Zones interfaces when InstancesV2 is missing', async () => {
    const name = uniqueName('legacy');
    machine(name);
    cloud.disabled.add('instancesV2');
    await createNode(core, newNode(name, uninitialized));

    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'initialized');

    const node = await core.readNode({ name });
    assert.equal(node.spec?.providerID, `fake://id-${name}`);
    assert.equal(node.metadata?.labels?.['topology.kubernetes.io/zone'], 'zone-a');
    assert.equal(node.metadata.labels['node.kubernetes.io/instance-type'], 'm1.large');
    assert.deepEqual(cloud.methods(), [
      'instanceId',
      'nodeAddressesByProviderId',
      'instanceTypeByProviderId',
      'getZoneByProviderId',
    ]);
  });

  it('reconciles the GA labels of an initialized node from its beta labels, without calling the cloud', async () => {
    const name = uniqueName('labels');
    await createNode(
      core,
      newNode(
        name,
        withLabels({ 'failure-domain.beta.kubernetes.io/zone': 'z9', 'topology.kubernetes.io/zone': 'old' }),
      ),
    );
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'labels-reconciled');
    assert.equal((await core.readNode({ name })).metadata?.labels?.['topology.kubernetes.io/zone'], 'z9');
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name }, run)), 'unchanged');
    assert.deepEqual(cloud.calls, []);
  });

  it('answers not-found for a node that does not exist', async () => {
    assert.equal(result(await fn.reconcileOne({ kind: 'Node', name: uniqueName('missing') }, run)), 'not-found');
  });

  for (const path of ['event', 'pass'] as const) {
    it(`answers not-found, not a failure, for a node deleted while the cloud was asked about it (${path})`, async () => {
      const name = uniqueName('deleted');
      cloud = new (class extends FakeCloud {
        override instancesV2(): InstancesV2 | undefined {
          const v2 = super.instancesV2();
          if (v2 === undefined) return undefined;
          return {
            ...v2,
            instanceMetadata: async (node, signal) => {
              if (node.metadata?.name === name) await core.deleteNode({ name });
              return v2.instanceMetadata(node, signal);
            },
          };
        }
      })();
      machine(name);
      await createNode(core, newNode(name, uninitialized));
      fn = nodeInitFunction({ core: lean, cloud });

      const report = path === 'event' ? await fn.reconcileOne({ kind: 'Node', name }, run) : await fn.reconcileAll(run);

      assert.equal(report.objects.find((o) => o.key === `Node/${name}`)?.result, 'not-found');
    });
  }

  it('loses no write when requests for one node race each other and another writer', async () => {
    const name = uniqueName('race');
    machine(name);
    cloud.latencyMs.set('instanceMetadata', 30);
    await createNode(core, newNode(name, uninitialized));
    const other = async (i: number): Promise<V1Node> =>
      core.patchNode(
        { name, body: { metadata: { labels: { [`example.com/writer-${i}`]: 'yes' } } } },
        (await import('../../shared/kube/api.ts')).mergePatch,
      );

    const results = await Promise.all([
      ...Array.from({ length: 4 }, () => fn.reconcileOne({ kind: 'Node', name }, run)),
      other(1),
      other(2),
    ]);

    const reports = results.slice(0, 4) as Report[];
    assert.ok(reports.filter((r) => result(r) === 'initialized').length >= 1);
    const node = await core.readNode({ name });
    assert.equal(node.spec?.taints?.some((t) => t.key === uninitializedTaint.key) ?? false, false);
    assert.equal(node.metadata?.labels?.['example.com/writer-1'], 'yes');
    assert.equal(node.metadata.labels['example.com/writer-2'], 'yes');
    assert.equal(node.metadata.labels['topology.kubernetes.io/zone'], 'zone-a');
  });

  it('refreshes the addresses of initialized nodes in the periodic pass, writing only what changed', async () => {
    const name = uniqueName('refresh');
    machine(name);
    await createNode(core, newNode(name, uninitialized));
    await fn.reconcileOne({ kind: 'Node', name }, run);
    const settled = await core.readNode({ name });

    const unchanged = await fn.reconcileAll(run);
    assert.equal(unchanged.objects.find((o) => o.key === `Node/${name}`)?.result, 'unchanged');
    assert.equal((await core.readNode({ name })).metadata?.resourceVersion, settled.metadata?.resourceVersion);

    const index = cloud.machines.findIndex((m) => m.nodeName === name);
    cloud.machines[index] = {
      ...(cloud.machines[index] as FakeCloud['machines'][number]),
      addresses: [{ type: 'InternalIP', address: '10.1.0.99' }],
    };
    const changed = await fn.reconcileAll(run);
    assert.equal(changed.objects.find((o) => o.key === `Node/${name}`)?.result, 'addresses-updated');
    assert.deepEqual(plain((await core.readNode({ name })).status?.addresses), [
      { type: 'InternalIP', address: '10.1.0.99' },
    ]);
  });

  it("a recheck refreshes from the relay's copy: the labels too, conditionally; a deleted Node is not-found, not a failure", async () => {
    const name = uniqueName('recheck');
    machine(name);
    await createNode(
      core,
      newNode(
        name,
        withProviderId(`fake://id-${name}`),
        withLabels({ 'failure-domain.beta.kubernetes.io/zone': 'zone-a' }),
      ),
    );
    const copy = JSON.parse(JSON.stringify(await core.readNode({ name }))) as V1Node;
    const recheck = { ...run, claimed: copy, claimVerified: true, recheck: true };
    const report = await fn.reconcileOne({ kind: 'Node', name }, recheck);
    assert.equal(result(report), 'addresses-updated');
    const node = await core.readNode({ name });
    assert.deepEqual(
      node.status?.addresses?.map((a) => a.address),
      ['10.1.0.5', '203.0.113.5'],
    );
    assert.equal(node.metadata?.labels?.['topology.kubernetes.io/zone'], 'zone-a', 'the GA label from the beta one');
    const written = report.objects[0]?.changes.map(
      (c) => (c.detail as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion,
    );
    assert.equal(written?.[0], copy.metadata?.resourceVersion, "the status write holds only on the copy's version");
    assert.notEqual(written?.[1], undefined, 'the label write holds only on the version the status write made');
    await core.deleteNode({ name });
    // Another instance (which has not written over that copy) starts from it: its write meets a 404.
    const other = nodeInitFunction({ core: lean, cloud });
    assert.equal(result(await other.reconcileOne({ kind: 'Node', name }, recheck)), 'not-found');
  });

  it('refuses to start with a provider that supports no instances', async () => {
    const bare = new FakeCloud();
    bare.disabled.add('instancesV2');
    bare.disabled.add('instances');
    await assert.rejects(loadFunction('node-init', { core: lean, cloud: bare }), {
      message: 'node-init: cloud provider "fake" does not support instances',
    });
  });

  it('refuses an invalid node name as a bad request', async () => {
    await assert.rejects(fn.reconcileOne({ kind: 'Node', name: 'Not_A_Name' }, run), { name: 'InvalidRequestError' });
  });
});
