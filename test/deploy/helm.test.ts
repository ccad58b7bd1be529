// deploy/helm/cirrus with real Helm (ADR 0025): `helm lint` and `helm template` of each values
// example; each renders the objects of its kustomize twin (deploy/standalone/overlays/example and
// aws, deploy/knative/overlays/example and aws), so that manifests.test.ts's checks of those hold
// for the chart too; a server-side dry run of the rendered objects; the values the chart refuses
// (values.schema.json: a value of the wrong shape; templates/validate.yaml: one that cannot work or
// a required one not given), its NOTES.txt, and that every path the chart's files name exists. The RBAC proof (rbac.test.ts) and the fresh-cluster scenario on the real scheduler
// (test/control-plane/scheduler.test.ts) run on the chart's objects (helm.ts deployedObjects):
// with the equality here, one run proves the chart and the bases.

import assert from 'node:assert/strict';
import { existsSync, globSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { dryRunProblems, ensureNamespace } from './dry-run.ts';
import {
  chartDir,
  exampleArgs,
  examples,
  findHelm,
  kustomizeTwin,
  namespace,
  repository,
  runHelm,
  template,
} from './helm.ts';
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

  it('renders the least values: the standalone deployment with the static provider, bringing your own cloud-config', () => {
    const objects = template(binary, [
      '--set',
      `image.repository=${repository}`,
      '--set',
      'cloudConfig.secretName=mine',
    ]);
    const daemonSet = objects.find((o) => identity(o) === 'DaemonSet/cirrus-system/cirrus');
    assert.ok(daemonSet);
    assert.ok(!objects.some((o) => o.kind === 'Secret'), 'no Secret: cloudConfig.content is empty');
    const volumes = ((daemonSet['spec'] as Json)['template'] as { spec: { volumes: Json[] } }).spec.volumes;
    assert.deepEqual(volumes, [{ name: 'cloud-config', secret: { secretName: 'mine' } }]);
    const config = objects.find((o) => identity(o) === 'ConfigMap/cirrus-system/cirrus-config');
    assert.equal((config?.['data'] as Json | undefined)?.['CIRRUS_CLOUD_PROVIDER'], 'static');
  });

  it('refuses a bare install, naming every value it needs: the image, the cloud-config, on Knative the signing secret', () => {
    const bare = runHelm(binary, ['template', 'cirrus', chartDir, '--namespace', namespace]);
    assert.ok(!bare.ok, 'rendered');
    assert.match(
      bare.err,
      /required values not given \(deploy\/helm\/cirrus\/README\.md says how\):\n- image\.repository: /,
    );
    assert.match(bare.err, /\n- cloudConfig: the provider's cloud-config/);
    assert.doesNotMatch(bare.err, /- signing:/);
    const knative = runHelm(binary, [
      ...['template', 'cirrus', chartDir, '--namespace', namespace, '--set', 'deployment=knative'],
      ...['--set', 'clusterCIDR=10.244.0.0/16', '--set', `image.repository=${repository}`],
      ...['--set', 'cloudConfig.content=x'],
    ]);
    assert.ok(!knative.ok, 'rendered');
    assert.match(knative.err, /required values not given[^\n]*\n- signing: the secret the relay signs deliveries with/);
    assert.doesNotMatch(knative.err, /- image\.repository|- cloudConfig/);
  });

  // Each with the values a bare install lacks, so that only the value named is wrong.
  const schemaRefusals: [string, RegExp][] = [
    ['logLevel=verbose', /at '\/logLevel': value must be one of 'fatal', 'error', 'warn', 'info'/],
    ['standalone.port=abc', /at '\/standalone\/port': got string, want integer/],
    ['standalone.port=70000', /at '\/standalone\/port': maximum: got 70,000, want 65,535/],
    ['relay.port=abc', /at '\/relay\/port': got string, want integer/],
    ['nodeInit.replicas=0', /at '\/nodeInit\/replicas': minimum: got 0, want 1/],
    ['clusterCIDR=banana', /at '\/clusterCIDR': 'banana' does not match pattern/],
    ['image.repository=', /at '\/image\/repository': minLength: got 0, want 1/],
    ['image.repository=Registry.example.com/cirrus:0.1.0', /at '\/image\/repository': 'Registry/],
    ['image.pullPolicy=Sometimes', /at '\/image\/pullPolicy': value must be one of '', 'Always'/],
    ['bindAddress=localhost', /at '\/bindAddress': 'localhost' does not match pattern/],
    ['clusterName=-prod', /at '\/clusterName': '-prod' does not match pattern/],
    ['deployment=lambda', /at '\/deployment': value must be one of 'standalone', 'knative'/],
    ['loglevel=debug', /at '': additional properties 'loglevel' not allowed/],
    ['aws.roleArns.ipam=arn:aws:iam::1:role/x', /at '\/aws\/roleArns': additional properties 'ipam' not allowed/],
    ['aws.roleArn=cirrus', /at '\/aws\/roleArn': 'cirrus' does not match pattern/],
    ['config.CIRRUS-LOG=x', /invalid propertyName 'CIRRUS-LOG'\n.*'CIRRUS-LOG' does not match pattern '\^\[A-Za-z_\]/],
    ['cloudConfig.secretName=My_Secret', /at '\/cloudConfig\/secretName': 'My_Secret' does not match pattern/],
  ];
  for (const [value, message] of schemaRefusals) {
    it(`refuses ${value} by its schema, naming the value`, () => {
      const result = runHelm(binary, [
        ...['template', 'cirrus', chartDir, '--namespace', namespace, '--set', `image.repository=${repository}`],
        ...['--set', 'cloudConfig.content=x', '--set', value],
      ]);
      assert.ok(!result.ok, 'rendered');
      assert.match(result.err, /values don't meet the specifications of the schema\(s\)/);
      assert.match(result.err, message);
    });
  }

  it('takes what the schema must not refuse: two CIDRs, an IPv6 address, a registry port, numbers as config', () => {
    const folder = mkdtempSync(join(tmpdir(), 'cirrus-helm-'));
    const values = join(folder, 'values.yaml');
    writeFileSync(
      values,
      [
        'image: { repository: "registry.example.com:5000/team/cirrus", digest: "sha256:abc", pullPolicy: IfNotPresent }',
        'cloudConfig: { configMapName: inventory }',
        'clusterCIDR: "10.244.0.0/16, fd00:10:244::/56"',
        'bindAddress: "::"',
        'config: { CIRRUS_CONCURRENT_SERVICE_SYNCS: 20, CIRRUS_DRY_RUN: false }',
        'imagePullSecrets: [{ name: regcred }]',
        '',
      ].join('\n'),
    );
    const config = template(binary, ['-f', values]).find(
      (o) => identity(o) === 'ConfigMap/cirrus-system/cirrus-config',
    );
    assert.equal((config?.['data'] as Json | undefined)?.['CIRRUS_CONCURRENT_SERVICE_SYNCS'], '20');
  });

  const refusals: [string, string[], RegExp][] = [
    ['no provider', ['--set', 'cloudProvider='], /cloudProvider: required/],
    ['an unknown controller', ['--set', 'controllers={node-init,ipam}'], /controllers: "ipam" is not one of/],
    [
      "routes on Knative without the pods' CIDRs",
      ['--set', 'deployment=knative', '--set', 'signing.secretName=mine'],
      /clusterCIDR: required with routes/,
    ],
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
      ['--set', 'cloudConfig.secretName=', '--set', 'cloudConfig.configMapName=inv', '--set', 'cloudConfig.content=x'],
      /cloudConfig: content goes into the Secret/,
    ],
    [
      'a Secret and a ConfigMap',
      ['--set', 'cloudConfig.configMapName=inv'],
      /cloudConfig: secretName and configMapName both name where the cloud-config is; give one/,
    ],
  ];
  for (const [what, args, message] of refusals) {
    it(`refuses ${what}, naming the value`, () => {
      const result = runHelm(binary, [
        ...['template', 'cirrus', chartDir, '--namespace', namespace, '--set', `image.repository=${repository}`],
        ...['--set', 'cloudConfig.secretName=mine', ...args],
      ]);
      assert.ok(!result.ok, 'rendered');
      assert.match(result.err, message);
    });
  }

  it('sets what the values name: a ConfigMap cloud-config, CIRRUS_CONTROLLERS, a digest, relay options', () => {
    const standalone = template(binary, [
      '--set',
      `image.repository=${repository}`,
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

// The paths a file of the chart names that start at the repository's root (docs/…, deploy/…), and
// the chart's own files it names (README.md, values.schema.json, templates/…).
function namedPaths(text: string): { fromRoot: string[]; fromChart: string[] } {
  const start = String.raw`(?<![\w./-])`;
  const path = String.raw`[\w.-]+(?:/[\w.-]+)*[\w-]`;
  const fromRoot = [
    ...text.matchAll(new RegExp(`${start}((?:docs|deploy|app|shared|test|tools|examples)/${path})`, 'g')),
  ];
  const fromChart = [
    ...text.matchAll(new RegExp(`${start}(README\\.md|values\\.schema\\.json|templates/${path})`, 'g')),
  ];
  return { fromRoot: fromRoot.map((m) => m[1] ?? ''), fromChart: fromChart.map((m) => m[1] ?? '') };
}

describe("the chart's references", () => {
  it('names only files that exist (values.yaml once pointed at a docs/configuration.md that never did)', () => {
    const repoRoot = join(chartDir, '../../..');
    const missing: string[] = [];
    for (const file of globSync('**/*', { cwd: chartDir }).filter((f) => !f.endsWith('/') && f.includes('.'))) {
      const { fromRoot, fromChart } = namedPaths(readFileSync(join(chartDir, file), 'utf8'));
      for (const path of fromRoot) if (!existsSync(join(repoRoot, path))) missing.push(`${file}: ${path}`);
      for (const path of fromChart) if (!existsSync(join(chartDir, path))) missing.push(`${file}: ${path}`);
    }
    assert.deepEqual(missing, []);
  });

  it('sees the paths a text names', () => {
    assert.deepEqual(
      namedPaths('see (docs/configuration.md), deploy/aws/iam/ and README.md; -f deploy/helm/cirrus/examples/x.yaml.'),
      {
        fromRoot: ['docs/configuration.md', 'deploy/aws/iam', 'deploy/helm/cirrus/examples/x.yaml'],
        fromChart: ['README.md'],
      },
    );
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

  it('prints NOTES.txt on install: what runs, where the cloud-config comes from, how to watch it start', async () => {
    const { info } = await testCluster();
    const install = (args: readonly string[]): string => {
      const result = runHelm(binary, [
        ...['install', uniqueName('cirrus'), chartDir, '--dry-run=client', '--kubeconfig', info.adminKubeconfig],
        ...['--namespace', namespace, ...args],
      ]);
      assert.ok(result.ok, result.ok ? '' : result.err);
      return result.out.slice(result.out.indexOf('\nNOTES:\n'));
    };
    const standalone = install(['--set', `image.repository=${repository}`, '--set', 'cloudConfig.secretName=mine']);
    assert.match(
      standalone,
      /^\nNOTES:\ncirrus 0\.1\.0 is installed in namespace cirrus-system: deployment standalone, provider static, image registry\.example\.com\/cirrus:0\.1\.0\.\n/,
    );
    assert.match(standalone, /key cloud\.yaml of your Secret mine: until it exists in cirrus-system, the pods wait/);
    assert.match(standalone, /^ {2}kubectl -n cirrus-system rollout status daemonset\/cirrus$/m);
    // node-init alone: the control plane has no Knative, whose Services Helm would have to map.
    const knative = install([...exampleArgs(knativeExample), '--set', 'controllers={node-init}']);
    assert.match(knative, /key cloud\.yaml of the Secret cirrus-cloud-config, created by this release/);
    assert.match(knative, /^ {2}kubectl -n cirrus-system rollout status deployment\/cirrus-relay$/m);
    assert.doesNotMatch(knative, /your Secret/);
  });
});
