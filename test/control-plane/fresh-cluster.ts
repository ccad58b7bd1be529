// The fresh-cluster scenario of scheduler.test.ts (deploy/'s kustomize builds) and helm.test.ts
// (the Helm chart's objects): a fresh cluster comes up, decided by the real kube-scheduler: every Node carries the uninitialized
// taint (kubelets with --cloud-provider=external), so an ordinary Pod cannot be scheduled, while
// the Pods of deploy/standalone and of the Knative deployment's bootstrap path (node-init with its
// own relay, and the relay) can; with `cirrus start` running, the Nodes are initialized and the
// ordinary Pod is scheduled. No kubelet runs, so no Pod ever starts, but where each one is bound is
// the scheduler's own decision.
//
// This suite starts a control plane of its own with kube-scheduler and kube-controller-manager
// (not the run's shared one: other test files' Nodes and Pods would change its decisions, and a
// controller-manager would change theirs). kube-controller-manager runs only the controllers that
// turn the manifests into Pods: deployment-controller, replicaset-controller, daemonset-controller.
// Not node-lifecycle-controller: without kubelets posting status it would mark every Node
// unreachable after the grace period and taint it NoSchedule and NoExecute, so the Pods' fate would
// depend on timing, not on the uninitialized taint; nor taint-eviction-controller, which would then
// evict them. The Nodes are created Ready, and the not-ready taint the API server's admission
// puts on a new Node is removed here, as node-lifecycle-controller does for a Ready Node.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Node,
  type V1Pod,
  type V1Taint,
} from '@kubernetes/client-node';
import { ControlPlane, resolveAssets } from '../../tools/control-plane/index.ts';
import type { KubeObject } from '../deploy/kustomize.ts';
import { apply } from '../deploy/rbac-harness.ts';
import { controlPlaneSkip } from '../harness/cluster.ts';

const cli = new URL('../../bin/cirrus.js', import.meta.url).pathname;
const uninitialized: V1Taint = {
  key: 'node.cloudprovider.kubernetes.io/uninitialized',
  value: 'true',
  effect: 'NoSchedule',
};
const controlPlaneTaint: V1Taint = { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' };
const controlPlaneNode = 'cp-1';
const workers = ['worker-1', 'worker-2'];
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The controllers that make Pods of the manifests' workloads, and nothing that judges Nodes (see above). */
export const schedulerTestControllers = ['deployment-controller', 'replicaset-controller', 'daemonset-controller'];

async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(200);
  }
}

// As a kubelet with --cloud-provider=external registers it, Ready, with room for the Pods.
async function registerNode(core: CoreV1Api, name: string, controlPlane: boolean): Promise<void> {
  const labels: Record<string, string> = { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux' };
  if (controlPlane) labels['node-role.kubernetes.io/control-plane'] = '';
  const taints = controlPlane ? [uninitialized, controlPlaneTaint] : [uninitialized];
  await core.createNode({ body: { metadata: { name, labels }, spec: { taints } } });
  const resources = { cpu: '4', memory: '8Gi', pods: '110' };
  const now = new Date();
  await core.patchNodeStatus(
    {
      name,
      body: {
        status: {
          capacity: resources,
          allocatable: resources,
          conditions: [
            { type: 'Ready', status: 'True', reason: 'KubeletReady', lastHeartbeatTime: now, lastTransitionTime: now },
          ],
        },
      },
    },
    mergePatch,
  );
  // Admission tainted the new Node not-ready; its Ready condition would make node-lifecycle-controller remove that.
  await core.patchNode({ name, body: { spec: { taints } } }, mergePatch);
}

// The static provider's inventory: one instance per Node.
function inventory(): string {
  return [
    'instances:',
    ...[controlPlaneNode, ...workers].map(
      (name, i) =>
        `  - { name: ${name}, zone: rack-a, region: dc-1, addresses: [{ type: InternalIP, address: 10.0.0.${i + 11} }] }`,
    ),
    '',
  ].join('\n');
}

function workloadOf(pod: V1Pod): string {
  const labels = pod.metadata?.labels ?? {};
  return labels['app.kubernetes.io/component'] ?? pod.metadata?.name ?? '';
}

function hasTaint(node: V1Node, key: string): boolean {
  return (node.spec?.taints ?? []).some((t) => t.key === key);
}

/**
 * Registers the scenario under `title` for `manifests()`, the objects a cluster would be given: a
 * standalone deployment (the DaemonSet) and a Knative one's without its Knative Services (no
 * Knative here: they are its own Pods, which wait for the nodes), in namespace cirrus-system.
 */
export function freshClusterOnScheduler(title: string, manifests: () => KubeObject[]): void {
  describe(title, { skip: controlPlaneSkip }, () => {
    let plane: ControlPlane;
    let core: CoreV1Api;
    let scratch: string;

    before(async () => {
      const assets = await resolveAssets({ build: false, components: true });
      plane = await ControlPlane.start({
        assets,
        components: { scheduler: true, controllers: schedulerTestControllers },
      });
      const admin = new KubeConfig();
      admin.loadFromFile(plane.info.adminKubeconfig);
      core = admin.makeApiClient(CoreV1Api);
      scratch = mkdtempSync(join(tmpdir(), 'cirrus-scheduler-test-'));
      await registerNode(core, controlPlaneNode, true);
      for (const worker of workers) await registerNode(core, worker, false);
      await apply(admin, manifests());
    });

    after(async () => {
      await plane.stop();
      rmSync(scratch, { recursive: true, force: true });
    });

    it("schedules cirrus's Pods onto uninitialized Nodes and an ordinary Pod only once cirrus has initialized them", async () => {
      await core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'ordinary', labels: { 'app.kubernetes.io/component': 'ordinary' } },
          spec: {
            containers: [
              { name: 'app', image: 'registry.example.com/app:1', resources: { requests: { cpu: '100m' } } },
            ],
          },
        },
      });

      // Before cirrus runs: the scheduler binds cirrus's Pods (and refuses the ordinary one).
      const bound = await eventually("cirrus's five Pods bound to Nodes", async () => {
        const pods = (await core.listNamespacedPod({ namespace: 'cirrus-system' })).items;
        return pods.length === 5 && pods.every((p) => p.spec?.nodeName) ? pods : undefined;
      });
      const placement = new Map<string, string[]>();
      for (const pod of bound)
        placement.set(workloadOf(pod), [...(placement.get(workloadOf(pod)) ?? []), pod.spec?.nodeName ?? '']);
      assert.deepEqual(
        placement.get('ccm'),
        [controlPlaneNode],
        'deploy/standalone: the DaemonSet on the control-plane node',
      );
      for (const component of ['node-init', 'relay']) {
        const nodes = placement.get(component) ?? [];
        assert.equal(nodes.length, 2, `${component}: two replicas`);
        assert.equal(new Set(nodes).size, 2, `${component}: on two Nodes (the host port)`);
      }
      const refused = await eventually('the scheduler to refuse the ordinary Pod', async () => {
        const pod = await core.readNamespacedPod({ namespace: 'default', name: 'ordinary' });
        const condition = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
        return condition?.status === 'False' ? { pod, condition } : undefined;
      });
      assert.equal(refused.pod.spec?.nodeName, undefined);
      assert.equal(refused.condition.reason, 'Unschedulable');
      // Every Node's taints: the uninitialized one (and the control plane's); none tolerated.
      assert.match(refused.condition.message ?? '', /^0\/3 nodes are available: 3 node\(s\) had untolerated taint/);

      // cirrus start, as the DaemonSet would run it, against this control plane.
      writeFileSync(join(scratch, 'inventory.yaml'), inventory());
      const child = spawn(
        process.execPath,
        [cli, 'start', '--kubeconfig', plane.info.adminKubeconfig, '--use-existing-cluster'].concat(
          ['--cloud-provider', 'static', '--cloud-config', join(scratch, 'inventory.yaml')],
          ['--port', '0', '--bind-address', '127.0.0.1', '--log-level', 'warn', '--log-format', 'json'],
          ['--leader-elect-resource-namespace', 'cirrus-system', '--leader-elect-resource-name', 'cirrus'],
        ),
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let output = '';
      for (const stream of [child.stdout, child.stderr])
        createInterface({ input: stream }).on('line', (line) => (output += `${line}\n`));
      const exited = once(child, 'exit') as Promise<[number | null]>;
      try {
        const failed = exited.then(() => {
          throw new Error(`cirrus start exited:\n${output}`);
        });
        const initialized = eventually('cirrus to initialize every Node', async () => {
          const nodes = (await core.listNode()).items;
          return nodes.every((n) => n.spec?.providerID && !hasTaint(n, uninitialized.key)) ? nodes : undefined;
        });
        const nodes = await Promise.race([initialized, failed]);
        assert.deepEqual(nodes.map((n) => n.spec?.providerID).sort(), [
          'static://cp-1',
          'static://worker-1',
          'static://worker-2',
        ]);
        const scheduled = await Promise.race([
          eventually('the ordinary Pod to be scheduled', async () => {
            const pod = await core.readNamespacedPod({ namespace: 'default', name: 'ordinary' });
            return pod.spec?.nodeName;
          }),
          failed,
        ]);
        assert.ok(workers.includes(scheduled), `on a worker (the control plane keeps its taint), not ${scheduled}`);
      } finally {
        child.kill('SIGTERM');
        const [code] = await exited;
        assert.equal(code, 0, output);
      }
    });
  });
}
