// Another CCM's Nodes in a cluster served by one provider (issue 38): a single-provider cirrus
// (the real static provider, with the relay handing the functions their events in process as
// `cirrus start` does) leaves alone every Node whose provider ID or platform names another
// provider — never initialized, checked, tainted or deleted, through many node-monitor passes — and
// counts each skip in cloudprovider_node_ownership_skipped_total. A control plane of the suite's
// own: a lifecycle pass here would delete other suites' NotReady Nodes.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { createStaticProvider } from '../../providers/static/index.ts';
import { platformAnnotation, talosPlatformLabel } from '../../shared/cloud/ownership.ts';
import { ownershipSkippedMetric } from '../../shared/cloud/skips.ts';
import {
  createNode,
  eventsAbout,
  newNode,
  ownTaints,
  setReady,
  silentLogger,
  uninitialized,
  withLabels,
  withProviderId,
} from '../harness/builders.ts';
import { startCirrus, type Cirrus } from '../harness/cirrus.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { eventually } from '../harness/kube.ts';

describe('one provider beside another CCM: its Nodes are left alone', { skip: controlPlaneSkip }, () => {
  const own = ownControlPlane();
  const names = {
    metal: uniqueName('metal'),
    gone: uniqueName('metal-gone'),
    sky: uniqueName('sky-worker'),
    talos: uniqueName('talos-worker'),
    kep: uniqueName('kep-worker'),
  };
  const controller = new AbortController();
  let cirrus: Cirrus;

  before(async () => {
    const cloud = await createStaticProvider({
      config: `instances:\n  - name: ${names.metal}\n    instanceType: m1.metal\n    zone: rack-a\n    region: dc-1\n`,
      configPath: undefined,
      signal: controller.signal,
      log: silentLogger(),
      kubeConfig: own.admin,
    });
    cirrus = await startCirrus(own.admin, cloud, 'silent', { transport: 'in-process' });
  });
  after(async () => {
    await cirrus.stop();
    controller.abort();
  });

  const readNode = (name: string): Promise<V1Node | undefined> => own.core.readNode({ name }).catch(() => undefined);

  it('never deletes, taints or initializes a NotReady Node of another provider, and counts the skips', async () => {
    // Another CCM's Nodes, as the issue found them: initialized by it (a provider ID of its own) and
    // NotReady; and two new ones whose platform names another provider (still tainted by the kubelet).
    await createNode(own.core, newNode(names.sky, withProviderId('skycloud://m-001')));
    await createNode(own.core, newNode(names.talos, uninitialized, withLabels({ [talosPlatformLabel]: 'nocloud' })));
    const kep = newNode(names.kep, uninitialized);
    kep.metadata = { ...kep.metadata, annotations: { [platformAnnotation]: 'skycloud' } };
    await createNode(own.core, kep);
    // The control: this provider's Nodes are served as before — a new one initialized, one whose
    // machine is not in the inventory deleted (so the lifecycle passes do run).
    await createNode(own.core, newNode(names.metal, uninitialized));
    // (Not with createNode, which reads it back: with no Ready condition it is not Ready, and may be
    // deleted within milliseconds.)
    await own.core.createNode({ body: newNode(names.gone, withProviderId(`static://${names.gone}`)) });
    for (const name of [names.sky, names.talos, names.kep]) await setReady(own.core, name, 'False');
    const before = new Map<string, string | undefined>();
    for (const name of [names.sky, names.talos, names.kep])
      before.set(name, (await readNode(name))?.metadata?.resourceVersion);

    await eventually(
      async () => ((await readNode(names.gone)) === undefined ? true : undefined),
      'the gone Node deleted',
    );
    const metal = await eventually(async () => {
      const node = await readNode(names.metal);
      return node?.spec?.providerID !== undefined && ownTaints(node).length === 0 ? node : undefined;
    }, 'the metal Node initialized');
    assert.equal(metal.spec?.providerID, `static://${names.metal}`);

    // Three node-monitor periods (5 s each) of periodic passes later, the other CCM's Nodes are as
    // they were: not deleted, not written at all (same resourceVersion), no Event about them.
    await new Promise((resolve) => setTimeout(resolve, 16_000));
    for (const [name, version] of before) {
      const node = await readNode(name);
      assert.ok(node, `${name} was deleted`);
      assert.equal(node.metadata?.resourceVersion, version, `${name} was written`);
      assert.deepEqual(await eventsAbout(own.core, 'default', name), [], `Events about ${name}`);
    }
    assert.deepEqual(
      ownTaints((await readNode(names.talos)) as V1Node).map((t) => t.key),
      ['node.cloudprovider.kubernetes.io/uninitialized'],
    );

    const metrics = await (await fetch(`${cirrus.url}/metrics`)).text();
    const count = (fn: string, reason: string): number => {
      const line = metrics
        .split('\n')
        .find((l) => l.startsWith(`${ownershipSkippedMetric}{function="${fn}",reason="${reason}"}`));
      return line === undefined ? 0 : Number(line.split(' ').at(-1));
    };
    // Each periodic pass skips each of them once, and each of their events once.
    assert.ok(count('node-lifecycle', 'provider-id') >= 3, metrics);
    assert.ok(count('node-lifecycle', 'platform-label') >= 3, metrics);
    assert.ok(count('node-lifecycle', 'platform-annotation') >= 3, metrics);
    assert.ok(count('node-init', 'platform-label') >= 1, metrics);
    assert.ok(count('node-init', 'platform-annotation') >= 1, metrics);
    // Bounded labels: a function and a reason, never a Node's name or a value it carries.
    assert.doesNotMatch(metrics, /sky-worker|skycloud|nocloud/);
  });
});
