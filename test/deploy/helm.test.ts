// deploy/helm/cirrus with real Helm (ADR 0025): `helm lint` and `helm template` of each values
// example; each renders the objects of its kustomize twin (deploy/standalone/overlays/example and
// aws, deploy/knative/overlays/example and aws), so that manifests.test.ts's checks of those hold
// for the chart too; a server-side dry run of the rendered objects; and the values the chart
// refuses. The RBAC proof (rbac.test.ts) and the fresh-cluster scenario on the real scheduler
// (test/control-plane/scheduler.test.ts) run on the chart's objects (helm.ts deployedObjects):
// with the equality here, one run proves the chart and the bases.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { controlPlaneSkip, testCluster } from '../harness/cluster.ts';
import { dryRunProblems, ensureNamespace } from './dry-run.ts';
import { chartDir, exampleArgs, examples, findHelm, kustomizeTwin, namespace, runHelm, template } from './helm.ts';
import { identity, type KubeObject } from './kustomize.ts';

const helm = await findHelm();
const binary = helm.binary ?? '';
const rendered = new Map(
  examples.map((e) => [e.values, helm.binary === undefined ? [] : template(binary, exampleArgs(e))]),
);

function renderedOf(values: string): KubeObject[] {
  const objects = rendered.get(values);
  assert.ok(objects, values);
  return objects;
}

type Json = Record<string, unknown>;
type Env = { name: string; value?: string }[];

// An object as compared with its twin: without the labels Helm adds (checked apart) and the
// cursor ConfigMaps' descriptions; environments sorted by name (their order carries no meaning
// where no value refers to another, which the comparison checks); YAML files in ConfigMaps parsed.
function comparable(object: KubeObject): Json {
  const copy = structuredClone(object) as Json & { metadata: Json };
  delete copy.metadata['labels'];
  const annotations = (copy.metadata['annotations'] ?? {}) as Record<string, string>;
  delete annotations['description'];
  if (Object.keys(annotations).length === 0) delete copy.metadata['annotations'];
  const template = (copy['spec'] as { template?: { spec?: { containers?: { env?: Env }[] } } } | undefined)?.template;
  for (const container of template?.spec?.containers ?? []) container.env = sortedEnv(identity(object), container.env);
  if (object.kind === 'ConfigMap') copy['data'] = parsedYamlFiles((copy['data'] ?? {}) as Record<string, string>);
  return copy;
}

function sortedEnv(id: string, env: Env = []): Env {
  assert.ok(!env.some((e) => e.value?.includes('$(')), `${id}: an env value refers to another`);
  return env.toSorted((a, b) => a.name.localeCompare(b.name));
}

function parsedYamlFiles(data: Record<string, string>): Json {
  return Object.fromEntries(
    Object.entries(data).map(([key, value]) => [key, key.endsWith('.yaml') ? load(value) : value]),
  );
}

const knativeExample = examples.find((e) => e.values === 'examples/knative.yaml') ?? examples[0];
assert.ok(knativeExample);

describe('deploy/helm/cirrus with Helm', { skip: helm.skip }, () => {
  for (const example of examples) {
    it(`lints with ${example.values}`, () => {
      const result = runHelm(binary, ['lint', '--strict', chartDir, ...exampleArgs(example)]);
      assert.ok(result.ok, result.ok ? '' : result.err);
    });

    it(`renders ${example.values} as ${example.kustomize.replace(/.*deploy\//, 'deploy/')} builds, but the Namespace`, () => {
      const chart = new Map(renderedOf(example.values).map((o) => [identity(o), o]));
      const twin = new Map(kustomizeTwin(example).map((o) => [identity(o), o]));
      // Helm installs into a namespace that exists (--create-namespace); kustomize creates it.
      assert.deepEqual(
        [...twin.keys()].filter((id) => !chart.has(id)),
        ['Namespace//cirrus-system'],
      );
      assert.deepEqual(
        [...chart.keys()].filter((id) => !twin.has(id)),
        [],
      );
      for (const [id, object] of chart) {
        const expected = twin.get(id);
        assert.ok(expected);
        assert.deepEqual(comparable(object), comparable(expected), id);
        for (const [label, value] of Object.entries(expected.metadata.labels ?? {}))
          assert.equal(object.metadata.labels?.[label], value, `${id}: label ${label}`);
      }
    });
  }

  it('renders the default values: the standalone deployment with the static provider, bringing your own cloud-config', () => {
    const objects = template(binary, []);
    const daemonSet = objects.find((o) => identity(o) === 'DaemonSet/cirrus-system/cirrus');
    assert.ok(daemonSet);
    assert.ok(!objects.some((o) => o.kind === 'Secret'), 'no Secret: cloudConfig.content is empty');
    const config = objects.find((o) => identity(o) === 'ConfigMap/cirrus-system/cirrus-config');
    assert.equal((config?.['data'] as Json | undefined)?.['CIRRUS_CLOUD_PROVIDER'], 'static');
  });

  const refusals: [string, string[], RegExp][] = [
    ['no provider', ['--set', 'cloudProvider='], /cloudProvider: required/],
    ['an unknown deployment', ['--set', 'deployment=lambda'], /deployment: "lambda" is neither standalone nor knative/],
    ['an unknown controller', ['--set', 'controllers={node-init,ipam}'], /controllers: "ipam" is not one of/],
    ["routes on Knative without the pods' CIDRs", ['--set', 'deployment=knative'], /clusterCIDR: required with routes/],
    [
      'an IAM role without aws',
      ['--set', 'aws.roleArn=arn:aws:iam::1:role/x'],
      /IAM roles are for cloudProvider aws, not "static"/,
    ],
    [
      'a role per function on standalone',
      ['--set', 'cloudProvider=aws', '--set', 'aws.roleArns.routes=arn:aws:iam::1:role/x'],
      /aws.roleArns: a role per function is for deployment knative/,
    ],
    [
      'content with a ConfigMap',
      ['--set', 'cloudConfig.configMapName=inv', '--set', 'cloudConfig.content=x'],
      /cloudConfig: content goes into the Secret/,
    ],
  ];
  for (const [what, args, message] of refusals) {
    it(`refuses ${what}, naming the value`, () => {
      const result = runHelm(binary, ['template', 'cirrus', chartDir, '--namespace', namespace, ...args]);
      assert.ok(!result.ok, 'rendered');
      assert.match(result.err, message);
    });
  }

  it('sets what the values name: a ConfigMap cloud-config, CIRRUS_CONTROLLERS, a digest, relay options', () => {
    const standalone = template(binary, [
      '--set',
      'cloudConfig.configMapName=inventory',
      '--set',
      'controllers={node-init,service-lb}',
      '--set',
      'image.digest=sha256:abc',
    ]);
    const pod = (standalone.find((o) => o.kind === 'DaemonSet')?.['spec'] as Json)['template'] as {
      spec: { volumes: Json[]; containers: { image: string; env: { name: string; value?: string }[] }[] };
    };
    assert.deepEqual(pod.spec.volumes, [{ name: 'cloud-config', configMap: { name: 'inventory' } }]);
    const container = pod.spec.containers[0];
    assert.ok(container);
    assert.equal(container.image, 'registry.example.com/cirrus@sha256:abc');
    assert.equal(container.env.find((e) => e.name === 'CIRRUS_CONTROLLERS')?.value, 'cloud-node,service');
    const knative = template(binary, [
      ...exampleArgs(knativeExample),
      '--set',
      'relay.options.CIRRUS_SERVICE_SYNC_PERIOD=10m',
    ]);
    const relay = (knative.find((o) => identity(o) === 'Deployment/cirrus-system/cirrus-relay')?.['spec'] as Json)[
      'template'
    ] as typeof pod;
    assert.equal(relay.spec.containers[0]?.env.find((e) => e.name === 'CIRRUS_SERVICE_SYNC_PERIOD')?.value, '10m');
  });
});

describe("a server-side dry run of the chart's objects", { skip: helm.skip || controlPlaneSkip }, () => {
  let admin: KubeConfig;
  before(async () => {
    admin = (await testCluster()).admin;
    await ensureNamespace(admin, namespace);
  });

  it('accepts every core object of every example, unknown fields refused', async () => {
    const distinct = new Map<string, KubeObject>();
    for (const object of [...rendered.values()].flat())
      if (!object.apiVersion.includes('knative.dev')) distinct.set(JSON.stringify(object), object);
    assert.ok(distinct.size > 50, `${distinct.size} objects`);
    assert.deepEqual(await dryRunProblems(admin, [...distinct.values()]), []);
  });
});
