// A hybrid cluster (issue 28, ADR 0026): two providers in one cirrus — `cloud`, the default, and
// `metal`, whose Nodes carry its label and whose Services its class — against a control plane of
// the suite's own, the relay handing the functions their events in process as `cirrus start` does.
// Each provider is a fake cloud that records every call: the tests assert that each Node is
// initialized, checked and routed by its own provider and never asked about by the other, that
// each Service's load balancer is made by its class's provider over that provider's Nodes, and
// that a Node nobody owns is left alone with one Event — also when one provider's cloud fails.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CoreV1Api, V1Node } from '@kubernetes/client-node';
import { hybridFleet } from '../../shared/cloud/fleet.ts';
import { providerLabel } from '../../shared/cloud/ownership.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import {
  createNode,
  newNode,
  ownTaints,
  setReady,
  uninitialized,
  withLabels,
  withProviderId,
} from '../harness/builders.ts';
import { startCirrus, type Cirrus } from '../harness/cirrus.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { eventually } from '../harness/kube.ts';

const metalClass = 'example.com/metal';

// A fake cloud answering to `scheme` (its provider IDs `<scheme>://<id>`) with a machine per name.
function fakeCloud(scheme: string, machines: readonly string[]): FakeCloud {
  const cloud = new FakeCloud();
  cloud.scheme = scheme;
  for (const name of machines)
    cloud.machines.push({
      id: name,
      nodeName: name,
      instanceType: `${scheme}.large`,
      zone: `${scheme}-a`,
      region: scheme,
      addresses: [{ type: 'InternalIP', address: '10.0.0.1' }],
    });
  return cloud;
}

// The Node names a cloud was asked about (any call that names a Node or a Node's provider ID).
function askedAbout(cloud: FakeCloud): Set<string> {
  const names = new Set<string>();
  for (const call of cloud.calls)
    for (const arg of call.args) if (typeof arg === 'string' && arg !== '') names.add(arg.replace(/^[a-z]+:\/\//, ''));
  return names;
}

async function readNode(core: CoreV1Api, name: string): Promise<V1Node | undefined> {
  return core.readNode({ name }).catch(() => undefined);
}

describe('a hybrid cluster: two providers, each owning its own Nodes and Services', { skip: controlPlaneSkip }, () => {
  const own = ownControlPlane();
  const names = {
    metal: uniqueName('metal'),
    cloud: uniqueName('cloud'),
    foreign: uniqueName('foreign'),
    metalGone: uniqueName('metal-gone'),
    cloudDown: uniqueName('cloud-down'),
  };
  const metal = fakeCloud('metal', [names.metal]);
  const cloud = fakeCloud('cloud', [names.cloud, names.cloudDown]);
  let cirrus: Cirrus;

  before(async () => {
    const fleet = hybridFleet(
      { providers: ['metal', 'cloud'], defaultProvider: 'cloud', classes: new Map([[metalClass, 'metal']]) },
      new Map([
        ['metal', metal],
        ['cloud', cloud],
      ]),
    );
    cirrus = await startCirrus(own.admin, cloud, 'silent', { transport: 'in-process', fleet });
  });
  after(() => cirrus.stop());

  it('initializes each Node with its own provider: the label, the default, and nobody for another scheme', async () => {
    await createNode(
      own.core,
      withCidr(newNode(names.metal, uninitialized, withLabels({ [providerLabel]: 'metal' })), 1),
    );
    await createNode(own.core, withCidr(newNode(names.cloud, uninitialized), 2));
    await createNode(own.core, newNode(names.foreign, uninitialized, withProviderId(`other://${names.foreign}`)));
    const initialized = async (name: string): Promise<V1Node | undefined> => {
      const node = await readNode(own.core, name);
      return node?.spec?.providerID !== undefined && ownTaints(node).length === 0 ? node : undefined;
    };
    const metalNode = await eventually(() => initialized(names.metal), 'the metal Node initialized');
    const cloudNode = await eventually(() => initialized(names.cloud), 'the cloud Node initialized');
    assert.equal(metalNode.spec?.providerID, `metal://${names.metal}`);
    assert.equal(metalNode.metadata?.labels?.['node.kubernetes.io/instance-type'], 'metal.large');
    assert.equal(cloudNode.spec?.providerID, `cloud://${names.cloud}`);
    assert.equal(cloudNode.metadata?.labels?.['node.kubernetes.io/instance-type'], 'cloud.large');
    // The Node nobody owns stays tainted, with one Event saying why.
    const events = await eventually(async () => {
      const { items } = await own.core.listNamespacedEvent({
        namespace: 'default',
        fieldSelector: `involvedObject.name=${names.foreign},reason=NoCloudProvider`,
      });
      return items.length > 0 ? items : undefined;
    }, 'the NoCloudProvider Event');
    assert.equal(events.length, 1);
    assert.match(events[0]?.message ?? '', /other:\/\/.* is not of a provider served here/);
    assert.equal(ownTaints((await readNode(own.core, names.foreign)) as V1Node).length, 1);
    assertAskedOnlyAboutOwn();
  });

  it('deletes a Node whose instance is gone only through its own provider, and no other', async () => {
    // Not with createNode, which reads it back: its provider may delete it within milliseconds.
    await own.core.createNode({
      body: newNode(
        names.metalGone,
        withLabels({ [providerLabel]: 'metal' }),
        withProviderId(`metal://${names.metalGone}`),
      ),
    });
    // Not Ready: the cloud Node (metal has no such machine: asked, it would answer "gone"), the
    // metal Node whose machine is gone, and the Node nobody owns.
    // (A new Node has no Ready condition yet: the metal one is not Ready from the start.)
    for (const name of [names.cloud, names.foreign]) await setReady(own.core, name, 'False');
    await eventually(
      async () => ((await readNode(own.core, names.metalGone)) === undefined ? true : undefined),
      'the metal Node without a machine deleted',
    );
    // Two node-monitor periods (5 s) later the others are still there.
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    assert.ok(await readNode(own.core, names.cloud), 'the cloud Node was deleted');
    assert.ok(await readNode(own.core, names.foreign), 'the Node nobody owns was deleted');
    assertAskedOnlyAboutOwn();
  });

  it('makes each Service’s load balancer with its class’s provider, over that provider’s Nodes', async () => {
    const cloudService = uniqueName('svc-cloud');
    const metalService = uniqueName('svc-metal');
    await setReady(own.core, names.cloud, 'True');
    for (const [name, loadBalancerClass] of [
      [cloudService, undefined],
      [metalService, metalClass],
    ] as const)
      await own.core.createNamespacedService({
        namespace: 'default',
        body: {
          metadata: { name },
          spec: {
            type: 'LoadBalancer',
            ...(loadBalancerClass === undefined ? {} : { loadBalancerClass }),
            ports: [{ port: 80, targetPort: 8080 }],
          },
        },
      });
    const balancer = (c: FakeCloud, name: string): Promise<string[] | undefined> =>
      Promise.resolve(c.loadBalancers.get(`default/${name}`)?.nodes);
    assert.deepEqual(await eventually(() => balancer(cloud, cloudService), 'the cloud load balancer'), [names.cloud]);
    assert.deepEqual(await eventually(() => balancer(metal, metalService), 'the metal load balancer'), [names.metal]);
    assert.equal(metal.loadBalancers.has(`default/${cloudService}`), false);
    assert.equal(cloud.loadBalancers.has(`default/${metalService}`), false);
  });

  it('routes each Node only through its own provider', async () => {
    const routed = (c: FakeCloud): string[] => c.routeTable.map((r) => r.targetNode).sort();
    await eventually(
      () =>
        Promise.resolve(routed(cloud).includes(names.cloud) && routed(metal).includes(names.metal) ? true : undefined),
      'a route for each owned Node',
    );
    assert.deepEqual(routed(cloud), [names.cloud]);
    assert.deepEqual(routed(metal), [names.metal]);
  });

  it('keeps serving one provider’s Nodes while the other’s cloud fails every call', async () => {
    for (const method of ['instanceMetadata', 'instanceExists', 'instanceShutdown', 'listRoutes', 'ensureLoadBalancer'])
      metal.errors.set(method, new Error('metal: the cloud is unreachable'));
    const late = uniqueName('cloud-late');
    cloud.machines.push({ id: late, nodeName: late, instanceType: 'cloud.large', zone: 'cloud-a', region: 'cloud' });
    await createNode(own.core, newNode(late, uninitialized));
    const node = await eventually(async () => {
      const found = await readNode(own.core, late);
      return found?.spec?.providerID === `cloud://${late}` ? found : undefined;
    }, 'a cloud Node initialized while metal fails');
    assert.equal(ownTaints(node).length, 0);
    await setReady(own.core, names.metal, 'False');
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    assert.ok(await readNode(own.core, names.metal), 'a metal Node was deleted while its cloud failed');
    assertAskedOnlyAboutOwn();
  });

  // Neither provider was ever asked about a Node of the other, nor about the Node nobody owns.
  function assertAskedOnlyAboutOwn(): void {
    const metalAsked = askedAbout(metal);
    const cloudAsked = askedAbout(cloud);
    for (const name of [names.cloud, names.cloudDown, names.foreign])
      assert.ok(!metalAsked.has(name), `metal was asked about ${name}`);
    for (const name of [names.metal, names.metalGone, names.foreign])
      assert.ok(!cloudAsked.has(name), `cloud was asked about ${name}`);
  }
});

// `node` with the pod CIDR 10.244.<n>.0/24 (inside the harness's cluster CIDR), for routes.
function withCidr(node: V1Node, n: number): V1Node {
  return { ...node, spec: { ...node.spec, podCIDR: `10.244.${n}.0/24`, podCIDRs: [`10.244.${n}.0/24`] } };
}
