// deploy/: the Dockerfile, the Knative manifests and the standalone CCM, checked without a cluster where that is
// possible (structure, Knative's rules, cirrus's own configuration rules, and each container
// actually starting with its args and environment), and every core Kubernetes object validated by
// a server-side dry run on the real control plane. Knative's CRDs are not installed there, so its
// objects are validated against the schemas @kubernetes-models/knative publishes (Knative's own
// CRD schemas: types and required fields), and the zod schemas of ./knative.ts (strict: unknown
// fields, and Knative's rules for the fields cirrus sets).

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { load, loadAll } from 'js-yaml';
import { z } from 'zod';
import { buildRoutingTable } from '../../relay/index.ts';
import { envName, options, type OptionName } from '../../app/config.ts';
import { controlPlaneSkip, ownControlPlane, testCluster, uniqueName } from '../harness/cluster.ts';
import {
  apiServerSourceSchema,
  knativeServiceSchema,
  pingSourceSchema,
  scaleAnnotation,
  type KnativeService,
} from './knative.ts';
import { build, identity, knativeRoot, referencedFiles, standaloneRoot, type KubeObject } from './kustomize.ts';
import { dryRunCreate, dryRunProblems, ensureNamespace } from './dry-run.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { selectControllers } from '../../shared/catalogue.ts';
import { build as buildArtifacts } from '../../scripts/build.ts';
import { parseAwsConfig } from '../../providers/aws/index.ts';
import { parseInventory } from '../../providers/static/index.ts';
import { providerPlan } from '../../app/providers.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const exampleDir = join(knativeRoot, 'overlays/example');
const awsDir = join(knativeRoot, 'overlays/aws');
const hybridDir = join(knativeRoot, 'overlays/hybrid');
const lambdaDir = join(repoRoot, 'deploy/lambda');
// Generated per cluster and never committed (each folder's .gitignore): stand-ins for builds.
const signingSecretFiles = [exampleDir, awsDir, hybridDir, lambdaDir].map((dir) => join(dir, 'signing-secret'));
const readWithSigningSecret = (path: string): string =>
  signingSecretFiles.includes(path) && !existsSync(path) ? 'test-signing-secret\n' : readFileSync(path, 'utf8');

const builds: Readonly<Record<string, readonly KubeObject[]>> = {
  base: build(knativeRoot),
  example: build(exampleDir, { readFile: readWithSigningSecret }),
  apiserversource: build(join(knativeRoot, 'apiserversource')),
  lambda: build(lambdaDir, { readFile: readWithSigningSecret }),
  standalone: build(standaloneRoot),
  'standalone-example': build(join(standaloneRoot, 'overlays/example')),
  aws: build(awsDir, { readFile: readWithSigningSecret }),
  'standalone-aws': build(join(standaloneRoot, 'overlays/aws')),
  'standalone-hybrid': build(join(standaloneRoot, 'overlays/hybrid')),
  hybrid: build(hybridDir, { readFile: readWithSigningSecret }),
};

const functionNames = catalogue.map((entry) => entry.name);

function ofKind(objects: readonly KubeObject[], kind: string, apiVersion?: string): KubeObject[] {
  return objects.filter((o) => o.kind === kind && (apiVersion === undefined || o.apiVersion === apiVersion));
}

function knativeServices(objects: readonly KubeObject[]): KnativeService[] {
  return ofKind(objects, 'Service', 'serving.knative.dev/v1').map((o) => {
    const parsed = knativeServiceSchema.safeParse(o);
    assert.ok(parsed.success, `${identity(o)}: ${parsed.success ? '' : parsed.error.message}`);
    return parsed.data;
  });
}

function find(objects: readonly KubeObject[], id: string): KubeObject | undefined {
  return objects.find((o) => identity(o) === id);
}

function component(service: KnativeService): string {
  return service.metadata.labels?.['app.kubernetes.io/component'] ?? '';
}

describe('deploy/knative', () => {
  it('has no file that no kustomization uses', () => {
    for (const root of [knativeRoot, standaloneRoot]) {
      const used = referencedFiles(root);
      const walk = (dir: string): string[] =>
        readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
          e.isDirectory() ? walk(join(dir, e.name)) : [relative(root, join(dir, e.name))],
        );
      const unused = walk(root).filter(
        (file) => !used.has(file) && !file.endsWith('.gitignore') && !signingSecretFiles.includes(join(root, file)),
      );
      assert.deepEqual(unused, [], root);
    }
  });

  it('builds the same objects with kubectl kustomize', { skip: kubectlSkip() }, () => {
    // A copy, so that the example's signing secret can exist without touching the checkout.
    const copy = mkdtempSync(join(tmpdir(), 'cirrus-kustomize-'));
    try {
      cpSync(knativeRoot, join(copy, 'knative'), { recursive: true });
      cpSync(lambdaDir, join(copy, 'lambda'), { recursive: true });
      cpSync(standaloneRoot, join(copy, 'standalone'), { recursive: true });
      writeFileSync(join(copy, 'knative/overlays/example/signing-secret'), 'test-signing-secret\n');
      writeFileSync(join(copy, 'knative/overlays/aws/signing-secret'), 'test-signing-secret\n');
      writeFileSync(join(copy, 'knative/overlays/hybrid/signing-secret'), 'test-signing-secret\n');
      writeFileSync(join(copy, 'lambda/signing-secret'), 'test-signing-secret\n');
      const dirs = [
        ['base', 'knative'],
        ['example', 'knative/overlays/example'],
        ['apiserversource', 'knative/apiserversource'],
        ['lambda', 'lambda'],
        ['standalone', 'standalone'],
        ['standalone-example', 'standalone/overlays/example'],
        ['aws', 'knative/overlays/aws'],
        ['standalone-aws', 'standalone/overlays/aws'],
        ['standalone-hybrid', 'standalone/overlays/hybrid'],
        ['hybrid', 'knative/overlays/hybrid'],
      ] as const;
      for (const [name, dir] of dirs) {
        const result = spawnSync('kubectl', ['kustomize', join(copy, dir)], { encoding: 'utf8' });
        assert.equal(result.status, 0, result.stderr);
        const theirs = new Map(
          loadAll(result.stdout).map((o) => [identity(o as KubeObject), unwrapSecret(o as KubeObject)]),
        );
        const ours = new Map(builds[name]?.map((o) => [identity(o), o]));
        assert.deepEqual([...ours.keys()].sort(), [...theirs.keys()].sort(), name);
        for (const [id, object] of ours) assert.deepEqual(object, theirs.get(id), `${name}: ${id}`);
      }
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('validates every Knative object against the schema @kubernetes-models/knative publishes', async () => {
    const models: Record<string, KnativeModel> = {
      'serving.knative.dev/v1 Service': await knativeModel('serving.knative.dev/v1/Service'),
      'sources.knative.dev/v1 ApiServerSource': await knativeModel('sources.knative.dev/v1/ApiServerSource'),
      'sources.knative.dev/v1 PingSource': await knativeModel('sources.knative.dev/v1/PingSource'),
    };
    const Service = models['serving.knative.dev/v1 Service'];
    const knative = Object.values(builds)
      .flat()
      .filter((o) => o.apiVersion.includes('knative.dev'));
    assert.ok(knative.length >= 12, 'the Services and sources of the builds');
    for (const object of knative) {
      const Model = models[`${object.apiVersion} ${object.kind}`];
      assert.ok(Model, `${object.apiVersion} ${object.kind} has a schema here`);
      assert.doesNotThrow(() => {
        new Model(object as never).validate();
      }, identity(object));
    }
    // The check itself works: a wrongly typed field is refused.
    const service = knative.find((o) => o.kind === 'Service');
    assert.ok(Service);
    assert.throws(() => {
      new Service({
        ...service,
        spec: { template: { spec: { timeoutSeconds: '300', containers: [] } } },
      } as never).validate();
    }, /timeoutSeconds must be integer/);
  });

  it('has one valid Knative Service per function but node-init, serving it with its own arguments', () => {
    const services = knativeServices(builds['base'] ?? []);
    assert.deepEqual(
      services.map(component).sort(),
      functionNames.filter((name) => name !== 'node-init').sort(),
      'node-init is a Deployment of its own (bootstrap/)',
    );
    for (const service of services) {
      const [container] = service.spec.template.spec.containers;
      assert.deepEqual(container?.args, ['serve', component(service)], service.metadata.name);
      assert.equal(container.image, 'cirrus', 'the image name the overlays replace');
      assert.equal(service.metadata.name, `cirrus-${component(service)}`);
    }
    assert.deepEqual(
      knativeServices(builds['example'] ?? [])
        .map(component)
        .sort(),
      ['node-lifecycle', 'service-lb'],
      'static has no routes',
    );
    assert.deepEqual(
      knativeServices(builds['aws'] ?? [])
        .map(component)
        .sort(),
      functionNames.filter((name) => name !== 'node-init').sort(),
      'aws has routes',
    );
    assert.deepEqual(
      knativeServices(builds['hybrid'] ?? [])
        .map((s) => s.metadata.name)
        .sort(),
      ['node-lifecycle-aws', 'node-lifecycle-static', 'routes-aws', 'service-lb-aws', 'service-lb-static'].map(
        (name) => `cirrus-${name}`,
      ),
      'hybrid: one per function and provider, routes for aws only',
    );
    assert.deepEqual(
      knativeServices(builds['apiserversource'] ?? [])
        .map(component)
        .sort(),
      [...functionNames].sort(),
    );
  });

  it("limits each instance's requests in flight to its containerConcurrency (CIRRUS_MAX_CONCURRENT_REQUESTS)", () => {
    for (const service of knativeServices(builds['base'] ?? [])) {
      const [container] = service.spec.template.spec.containers;
      const limit = container?.env?.find((v) => v.name === envName('maxConcurrentRequests'));
      assert.equal(
        limit?.value,
        String(service.spec.template.spec.containerConcurrency),
        `${service.metadata.name}: ${envName('maxConcurrentRequests')} = containerConcurrency`,
      );
    }
  });

  it('would notice what Knative refuses or ignores (the schema itself works)', () => {
    const [valid] = ofKind(builds['base'] ?? [], 'Service', 'serving.knative.dev/v1');
    assert.ok(valid);
    const spoilt = (change: (copy: KnativeService) => void): boolean => {
      const copy = structuredClone(valid) as unknown as KnativeService;
      change(copy);
      return knativeServiceSchema.safeParse(copy).success;
    };
    type Container = KnativeService['spec']['template']['spec']['containers'][number];
    const container = (s: KnativeService): Container => {
      const [first] = s.spec.template.spec.containers;
      assert.ok(first);
      return first;
    };
    assert.equal(
      spoilt(() => undefined),
      true,
    );
    assert.equal(
      spoilt((s) => {
        s.spec.template.metadata.annotations['autoscaling.knative.dev/minScale'] = '1';
      }),
      false,
      'an unknown autoscaling annotation',
    );
    assert.equal(
      spoilt((s) => {
        s.spec.template.metadata.annotations['autoscaling.knative.dev/max-scale'] = 'one';
      }),
      false,
      'a scale that is not a number',
    );
    assert.equal(
      spoilt((s) => {
        Object.assign(container(s).volumeMounts?.[0] ?? {}, { subPath: 'cloud.yaml' });
      }),
      false,
      'a subPath mount',
    );
    assert.equal(
      spoilt((s) => {
        container(s).env?.push({ name: 'PORT', value: '9090' });
      }),
      false,
      'PORT, which Knative sets',
    );
    assert.equal(
      spoilt((s) => {
        container(s).ports.push({ name: 'http1', containerPort: 9090 });
      }),
      false,
      'a second port',
    );
    assert.equal(
      spoilt((s) => {
        s.spec.template.spec.timeoutSeconds = 3600;
      }),
      false,
      'a timeout over the maximum',
    );
  });

  it('runs each function as its own ServiceAccount, bound to a ClusterRole of its own', () => {
    const objects = builds['base'] ?? [];
    for (const service of knativeServices(objects)) {
      const account = service.spec.template.spec.serviceAccountName;
      assert.equal(account, `cirrus-${component(service)}`);
      assert.ok(find(objects, `ServiceAccount/${service.metadata.namespace}/${account}`), `${account} exists`);
      const bindings = ofKind(objects, 'ClusterRoleBinding').filter((b) =>
        subjectsOf(b).some((s) => s.name === account && s.namespace === service.metadata.namespace),
      );
      assert.deepEqual(
        bindings.map((b) => roleRefOf(b).name),
        [account],
        `${account} is bound to its own ClusterRole only`,
      );
    }
  });

  it('scales deliberately: routes is exactly one instance, the others within bounds', () => {
    for (const service of knativeServices(builds['base'] ?? [])) {
      const min = scaleAnnotation(service, 'min-scale');
      const max = scaleAnnotation(service, 'max-scale');
      assert.ok(
        min !== undefined && max !== undefined && max >= 1 && min <= max,
        `${service.metadata.name}: min-scale ${String(min)} ≤ max-scale ${String(max)}`,
      );
      const { containerConcurrency } = service.spec.template.spec;
      const target = scaleAnnotation(service, 'target');
      if (containerConcurrency > 0)
        assert.ok(
          target !== undefined && target <= containerConcurrency,
          `${service.metadata.name}: target within containerConcurrency`,
        );
    }
    const routes = knativeServices(builds['base'] ?? []).find((s) => component(s) === 'routes');
    assert.ok(routes);
    assert.equal(scaleAnnotation(routes, 'max-scale'), 1, 'routes coalesces passes per instance');
    // ADR 0030: routes may scale to zero; the drift check every 10 s keeps it warm by default.
    assert.equal(scaleAnnotation(routes, 'min-scale'), 0, 'routes may scale to zero');
    // ADR 0029: the relay sends node-lifecycle nothing while every Node is Ready.
    const lifecycle = knativeServices(builds['base'] ?? []).find((s) => component(s) === 'node-lifecycle');
    assert.ok(lifecycle);
    assert.equal(scaleAnnotation(lifecycle, 'min-scale'), 0, 'node-lifecycle scales to zero');
    assert.equal(
      routes.spec.template.spec.containerConcurrency,
      0,
      'requests must reach the instance to join its pass',
    );
  });

  it('probes the health routes, stays cluster-local, and mounts Secrets whole', () => {
    for (const service of knativeServices(builds['base'] ?? [])) {
      const [container] = service.spec.template.spec.containers;
      assert.equal(container?.readinessProbe.httpGet.path, '/readyz');
      assert.equal(container.livenessProbe.httpGet.path, '/healthz');
      const servingPort = container.ports[0]?.containerPort;
      assert.deepEqual(
        [container.readinessProbe.httpGet.port, container.livenessProbe.httpGet.port],
        [servingPort, servingPort],
        'Knative probes the serving port',
      );
      assert.equal(service.metadata.labels?.['networking.knative.dev/visibility'], 'cluster-local');
      const mounts = container.volumeMounts ?? [];
      for (const mount of mounts) assert.equal((mount as Record<string, unknown>)['subPath'], undefined);
      const secretVolume = (secretName: string): string | undefined =>
        service.spec.template.spec.volumes?.find((v) => v.secret?.secretName === secretName)?.name;
      assert.ok(
        mounts.some((m) => m.name === secretVolume('cirrus-cloud-config')),
        'the cloud-config Secret is mounted',
      );
      assert.ok(
        mounts.some((m) => m.name === secretVolume('cirrus-signing')),
        'the signing Secret is mounted',
      );
    }
  });

  it('sets only CIRRUS_* variables that cirrus knows, with values it accepts', () => {
    for (const objects of Object.values(builds)) {
      for (const [where, name, value] of configuredVariables(objects)) {
        const option = optionOfVariable(name);
        if (option === undefined) {
          assert.ok(!name.startsWith('CIRRUS_'), `${where}: ${name} is not a cirrus variable`);
          continue;
        }
        assert.equal(checkValue(option, value), undefined, `${where}: ${name}=${value}`);
      }
    }
  });

  it("points each function's file settings at the Secrets mounted in its container", () => {
    for (const [name, objects] of Object.entries(builds)) {
      for (const workload of workloads(objects)) {
        const env = containerEnv(workload, objects);
        for (const [variable, secret] of [
          ['CIRRUS_CLOUD_CONFIG', 'cirrus-cloud-config'],
          ['CIRRUS_SIGNING_SECRET_FILE', 'cirrus-signing'],
        ] as const) {
          for (const path of settingPaths(workload, env, variable)) {
            const mount = workload.mounts.find((m) => path.startsWith(`${m.mountPath}/`));
            assert.equal(
              mount?.source,
              `Secret/${secret}`,
              `${name}: ${workload.id}: ${variable}: ${path} lies in a mount of Secret ${secret}`,
            );
          }
        }
      }
    }
    const withoutSigning = builds['apiserversource'] ?? [];
    assert.ok(
      workloads(withoutSigning).every(
        (w) => containerEnv(w, withoutSigning)['CIRRUS_SIGNING_SECRET_FILE'] === undefined,
      ),
      'ApiServerSource events cannot be signed',
    );
  });

  it('runs node-init with a relay of its own, as ServiceAccount cirrus-node-init, electing a leader on a Lease of its own', () => {
    for (const name of ['base', 'example', 'aws', 'hybrid'] as const) {
      const objects = builds[name] ?? [];
      const nodeInit = workloads(objects).find((w) => w.id === 'Deployment/cirrus-system/cirrus-node-init');
      assert.ok(nodeInit, name);
      assert.deepEqual(nodeInit.container.args, ['start']);
      assert.equal(nodeInit.replicas, 2);
      assert.equal(nodeInit.pod.serviceAccountName, 'cirrus-node-init');
      const env = containerEnv(nodeInit, objects);
      assert.equal(env['CIRRUS_USE_EXISTING_CLUSTER'], 'true', "start acts on the pod's cluster only when told to");
      assert.deepEqual(
        selectControllers(catalogue, (env['CIRRUS_CONTROLLERS'] ?? '').split(',')).map((e) => e.name),
        ['node-init'],
      );
      assert.equal(env['CIRRUS_LEADER_ELECT'], 'true');
      assert.equal(env['CIRRUS_LEADER_ELECT_RESOURCE_NAMESPACE'], 'cirrus-system');
      assertLeaseRole(objects, 'cirrus-node-init', env['CIRRUS_LEADER_ELECT_RESOURCE_NAME']);
    }
  });

  it('runs the relay as two replicas electing a leader in their own namespace, delivering to the Knative Services', () => {
    for (const name of ['base', 'example', 'aws'] as const) {
      const objects = builds[name] ?? [];
      const relay = workloads(objects).find((w) => w.id === 'Deployment/cirrus-system/cirrus-relay');
      assert.ok(relay, name);
      assert.equal(relay.replicas, 2);
      const env = containerEnv(relay, objects);
      assert.equal(env['CIRRUS_LEADER_ELECT'], 'true');
      assert.equal(env['CIRRUS_LEADER_ELECT_RESOURCE_NAMESPACE'], 'cirrus-system');
      const routingPath = env['CIRRUS_ROUTING_CONFIG'] ?? '';
      const routing = load(mountedFile(relay, objects, routingPath));
      const table = buildRoutingTable(catalogue, { file: routing });
      const expected = knativeServices(objects).map((s) => [
        component(s),
        `http://${s.metadata.name}.${s.metadata.namespace}.svc.cluster.local`,
      ]);
      assert.deepEqual(
        table.destinations.map((d) => [d.name, d.url]).sort(),
        expected.sort(),
        `${name}: one destination per Knative Service`,
      );
    }
  });

  it('wires the ApiServerSource alternative to the functions, with periods Knative accepts', () => {
    const objects = builds['apiserversource'] ?? [];
    const names = new Set(knativeServices(objects).map((s) => s.metadata.name));
    const sources = ofKind(objects, 'ApiServerSource').map((o) => apiServerSourceSchema.parse(o));
    const pings = ofKind(objects, 'PingSource').map((o) => pingSourceSchema.parse(o));
    for (const source of [...sources, ...pings])
      assert.ok(names.has(source.spec.sink.ref.name), `${source.metadata.name} → ${source.spec.sink.ref.name}`);
    assert.deepEqual(
      sources.map((s) => s.spec.sink.ref.name).sort(),
      [...names].sort(),
      'one event source per function',
    );
    assert.deepEqual(
      pings.map((p) => p.spec.sink.ref.name).sort(),
      [...names].sort(),
      'one periodic trigger per function',
    );
    for (const ping of pings) {
      assert.equal(ping.spec.sink.uri, '/reconcile');
      assert.deepEqual(JSON.parse(ping.spec.data), { all: true });
    }
    const services = sources.find((s) => s.spec.resources.some((r) => r.kind === 'Service'));
    assert.deepEqual(services?.spec.namespaceSelector, {}, 'Services in every namespace');
    for (const source of sources)
      assert.ok(find(objects, `ServiceAccount/${source.metadata.namespace}/${source.spec.serviceAccountName}`));
  });

  it("deploy/lambda: the relay delivering to the function URLs of serverless.yml, and a token per function's identity", () => {
    const objects = builds['lambda'] ?? [];
    assert.deepEqual(objects.filter((o) => o.apiVersion.includes('knative.dev')).map(identity), [], 'no Knative');
    const relay = workloads(objects).find((w) => w.id === 'Deployment/cirrus-system/cirrus-relay');
    assert.ok(relay);
    const env = containerEnv(relay, objects);
    assert.equal(
      env['CIRRUS_SIGNING_SECRET_FILE'],
      '/etc/cirrus/signing/secret',
      'the relay signs: the URLs are public',
    );
    const table = buildRoutingTable(catalogue, {
      file: load(mountedFile(relay, objects, env['CIRRUS_ROUTING_CONFIG'] ?? '')),
    });
    const serverless = z
      .object({ functions: z.record(z.string(), z.unknown()) })
      .parse(load(readFileSync(join(repoRoot, 'serverless.yml'), 'utf8')));
    assert.deepEqual(
      table.destinations.map((d) => d.name).sort(),
      Object.keys(serverless.functions).sort(),
      'one destination per Lambda',
    );
    for (const destination of table.destinations)
      assert.match(destination.url, /^https:\/\/[a-z0-9-]+\.lambda-url\.[a-z0-9-]+\.on\.aws\/$/, destination.name);
    for (const name of functionNames) {
      const account = `cirrus-${name}`;
      assert.ok(find(objects, `ServiceAccount/cirrus-system/${account}`), account);
      assert.ok(
        ofKind(objects, 'ClusterRoleBinding').some((b) => roleRefOf(b).name === account),
        `${account} is bound to its ClusterRole`,
      );
      const tokens = ofKind(objects, 'Secret').filter(
        (o) =>
          o['type'] === 'kubernetes.io/service-account-token' &&
          (o.metadata['annotations'] as Record<string, string> | undefined)?.['kubernetes.io/service-account.name'] ===
            account,
      );
      assert.equal(tokens.length, 1, `a token Secret for ${account}`);
    }
  });

  it('binds only roles and ServiceAccounts that exist in the same build', () => {
    for (const [name, objects] of Object.entries(builds)) {
      for (const binding of [...ofKind(objects, 'RoleBinding'), ...ofKind(objects, 'ClusterRoleBinding')]) {
        const ref = roleRefOf(binding);
        const namespace = ref.kind === 'Role' ? (binding.metadata.namespace ?? '') : '';
        assert.ok(
          find(objects, `${ref.kind}/${namespace}/${ref.name}`),
          `${name}: ${identity(binding)} → ${ref.kind} ${ref.name}`,
        );
        for (const subject of subjectsOf(binding))
          assert.ok(
            find(objects, `ServiceAccount/${subject.namespace}/${subject.name}`),
            `${name}: ${identity(binding)} → ${subject.name}`,
          );
      }
    }
  });
});

// The taints every node of a fresh cluster carries (kubelets with --cloud-provider=external), or
// may (a network plugin not ready yet; the control plane's own).
const freshClusterTaints = [
  { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' },
  { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
  { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute' },
  { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' },
] as const;

// As the scheduler matches a toleration to a taint (k8s.io/api/core/v1 Toleration.ToleratesTaint).
function tolerates(pod: PodSpec, taint: { key: string; value?: string; effect: string }): boolean {
  return (pod.tolerations ?? []).some(
    (t) =>
      (t.effect === undefined || t.effect === taint.effect) &&
      (t.key === undefined || t.key === taint.key) &&
      (t.operator === 'Exists' || (t.value ?? '') === (taint.value ?? '')),
  );
}

interface RuleSpec {
  readonly apiGroups: string[];
  readonly resources: string[];
  readonly verbs: string[];
  readonly resourceNames?: string[];
}

// `group/resource verb [names]`, one per verb a role grants.
function grants(objects: readonly KubeObject[], id: string): string[] {
  const rules = (find(objects, id)?.['rules'] ?? []) as RuleSpec[];
  return rules.flatMap((rule) =>
    rule.apiGroups.flatMap((group) =>
      rule.resources.flatMap((resource) =>
        rule.verbs.map(
          (verb) => `${group}/${resource} ${verb}${rule.resourceNames ? ` ${rule.resourceNames.join(',')}` : ''}`,
        ),
      ),
    ),
  );
}

// Listens on `port` (the Go cloud-controller-manager's, 10258, for the standalone CCM), probes
// /readyz and /healthz there, and requests and limits resources.
function assertServing(workload: Workload, env: Record<string, string>, port: number): void {
  const [served] = workload.container.ports ?? [];
  assert.equal(served?.containerPort, port, workload.id);
  assert.equal(env['PORT'], String(port));
  const { readinessProbe, livenessProbe } = workload.container;
  assert.deepEqual(
    [readinessProbe?.httpGet.path, livenessProbe?.httpGet.path],
    ['/readyz', '/healthz'],
    'probes on the health routes',
  );
  for (const probe of [readinessProbe, livenessProbe])
    assert.ok([served.name, served.containerPort].includes(probe?.httpGet.port), 'probes on the serving port');
  assertResources(workload);
}

function assertResources(workload: Workload): void {
  const { requests = {}, limits = {} } = workload.container.resources ?? {};
  assert.ok(requests['cpu'] && requests['memory'] && limits['memory'], `${workload.id}: requests and a memory limit`);
}

describe('deploy/standalone and the bootstrap path', () => {
  // Every workload that must be scheduled before the nodes are initialized: all but Knative's.
  const bootstrapping = (): [string, Workload][] => [
    ...(
      [
        'standalone',
        'standalone-example',
        'standalone-aws',
        'standalone-hybrid',
        'base',
        'example',
        'aws',
        'hybrid',
        'lambda',
      ] as const
    ).flatMap((name) =>
      workloads(builds[name] ?? [])
        .filter((w) => w.kind !== 'Service')
        .map((w): [string, Workload] => [name, w]),
    ),
  ];

  it('runs `cirrus start` as a DaemonSet on the control-plane nodes, with every function and probes', () => {
    for (const name of ['standalone', 'standalone-example', 'standalone-aws', 'standalone-hybrid'] as const) {
      const objects = builds[name] ?? [];
      const [ccm, ...others] = workloads(objects);
      assert.ok(ccm && others.length === 0, `${name}: one workload`);
      assert.equal(ccm.id, 'DaemonSet/cirrus-system/cirrus');
      assert.deepEqual(ccm.container.args, ['start'], 'every function the provider supports');
      assert.deepEqual(ccm.pod.nodeSelector, { 'node-role.kubernetes.io/control-plane': '' });
      const env = containerEnv(ccm, objects);
      assert.equal(env['CIRRUS_CONTROLLERS'], undefined, 'the default: every function');
      assert.equal(env['CIRRUS_USE_EXISTING_CLUSTER'], 'true', "start acts on the pod's cluster only when told to");
      assertServing(ccm, env, 10258);
      assert.equal(ccm.pod.serviceAccountName, 'cirrus');
      assert.equal(env['CIRRUS_LEADER_ELECT'], 'true');
      assert.equal(env['CIRRUS_LEADER_ELECT_RESOURCE_NAMESPACE'], 'cirrus-system');
      assertLeaseRole(objects, 'cirrus', env['CIRRUS_LEADER_ELECT_RESOURCE_NAME']);
      for (const path of cloudConfigPaths(env).values())
        assert.equal(
          ccm.mounts.find((m) => path.startsWith(`${m.mountPath}/`))?.source,
          'Secret/cirrus-cloud-config',
          `${name}: each provider's cloud-config from a Secret`,
        );
    }
    const example = builds['standalone-example'] ?? [];
    const config = find(example, 'ConfigMap/cirrus-system/cirrus-config')?.['data'] as Record<string, string>;
    assert.equal(config['CIRRUS_CLOUD_PROVIDER'], 'static');
    assert.ok(find(example, 'Secret/cirrus-system/cirrus-cloud-config'));
  });

  it('schedules what must run before the nodes are initialized onto a fresh cluster, on the host network', () => {
    const workloadsOnPorts = new Map<string, string>();
    const all = bootstrapping();
    assert.deepEqual([...new Set(all.map(([, w]) => w.id))].sort(), [
      'DaemonSet/cirrus-system/cirrus',
      'Deployment/cirrus-system/cirrus-node-init',
      'Deployment/cirrus-system/cirrus-relay',
    ]);
    for (const [name, workload] of all) {
      for (const taint of freshClusterTaints)
        assert.ok(tolerates(workload.pod, taint), `${name}: ${workload.id} tolerates ${taint.key}:${taint.effect}`);
      assert.equal(workload.pod.hostNetwork, true, `${name}: ${workload.id}: pod networking may not work yet`);
      assert.equal(workload.pod.priorityClassName, 'system-cluster-critical', `${name}: ${workload.id}`);
      assert.equal(workload.pod.dnsPolicy, expectedDnsPolicy(name, workload), `${name}: ${workload.id} resolves names`);
      const port = String(workload.container.ports?.[0]?.containerPort);
      assert.equal(containerEnv(workload, builds[name] ?? [])['PORT'], port, `${name}: ${workload.id} listens on it`);
      // On the host network, two workloads on one port could not share a node.
      const other = workloadsOnPorts.get(port);
      assert.ok(other === undefined || other === workload.name, `${workload.id} and ${other ?? ''} share port ${port}`);
      workloadsOnPorts.set(port, workload.name);
    }
    // Nothing more: a node that is shutting down is not theirs.
    const [, ccm] = all[0] ?? [];
    assert.ok(ccm);
    assert.equal(tolerates(ccm.pod, { key: 'node.cloudprovider.kubernetes.io/shutdown', effect: 'NoSchedule' }), false);
  });

  it('serves /metrics and the probes of the host network on loopback only, where the kubelet probes them (issue 38)', () => {
    // Plain HTTP without authentication (the Go CCM serves 10258 over HTTPS with delegated
    // authorization): on 0.0.0.0 anyone who reaches the node read /metrics. The kubelet shares the
    // host network, so probes with `host: 127.0.0.1` reach the loopback listener.
    for (const [name, workload] of bootstrapping()) {
      const env = containerEnv(workload, builds[name] ?? []);
      assert.equal(env['CIRRUS_BIND_ADDRESS'], '127.0.0.1', `${name}: ${workload.id} listens on loopback`);
      const { readinessProbe, livenessProbe } = workload.container;
      for (const probe of [readinessProbe, livenessProbe])
        assert.equal(probe?.httpGet.host, '127.0.0.1', `${name}: ${workload.id} is probed where it listens`);
    }
  });

  it("gives the one ServiceAccount the union of the functions' and the relay's rights, and nothing else", () => {
    const base = builds['base'] ?? [];
    const lambda = builds['lambda'] ?? [];
    const union = new Set(
      [...functionNames.map((fn) => `cirrus-${fn}`), 'cirrus-relay'].flatMap((role) =>
        grants(lambda, `ClusterRole//${role}`),
      ),
    );
    const standalone = builds['standalone'] ?? [];
    assert.deepEqual(new Set(grants(standalone, 'ClusterRole//cirrus')), union);
    assert.deepEqual(
      grants(standalone, 'Role/cirrus-system/cirrus-lease'),
      // The same rules on its own Lease `cirrus` and cursor ConfigMaps `cirrus-known-*`.
      grants(base, 'Role/cirrus-system/cirrus-relay-lease').map((g) => g.replaceAll(/\bcirrus-relay\b/g, 'cirrus')),
    );
  });
});

describe('the aws overlays (deploy/knative/overlays/aws, deploy/standalone/overlays/aws)', () => {
  const roleAnnotation = 'eks.amazonaws.com/role-arn';
  // The functions a workload runs: `serve <function>`, `start` (CIRRUS_CONTROLLERS), or none (the relay).
  const functionsOf = (workload: Workload, env: Record<string, string>): string[] => {
    const [command, name = ''] = workload.container.args;
    // An instance that builds no aws provider (--serve-providers static) calls no AWS API.
    const served = providerPlan({
      cloudProvider: env['CIRRUS_CLOUD_PROVIDER'],
      cloudConfig: env['CIRRUS_CLOUD_CONFIG'],
      defaultProvider: env['CIRRUS_DEFAULT_PROVIDER'],
      loadBalancerClass: env['CIRRUS_LOAD_BALANCER_CLASS'],
      serveProviders: command === 'serve' ? env['CIRRUS_SERVE_PROVIDERS'] : undefined,
    }).served;
    if (!served.includes('aws')) return [];
    if (command === 'serve') return [name];
    if (command === 'start')
      return selectControllers(catalogue, (env['CIRRUS_CONTROLLERS'] ?? '*').split(',')).map((e) => e.name);
    return [];
  };

  // The IAM role of the ServiceAccount a workload runs as: its name, or undefined without the annotation.
  const roleOf = (objects: readonly KubeObject[], workload: Workload, where: string): string | undefined => {
    const account = workload.pod.serviceAccountName ?? 'default';
    const serviceAccount = find(objects, `ServiceAccount/${workload.namespace}/${account}`);
    assert.ok(serviceAccount, `${where}: runs as ${account}, which the build has`);
    const arn = (serviceAccount.metadata['annotations'] as Record<string, string> | undefined)?.[roleAnnotation];
    if (arn === undefined) return undefined;
    const role = /^arn:aws:iam::(?:<account>|\d{12}):role\/([\w+=,.@-]+)$/.exec(arn)?.[1];
    assert.ok(role, `${where}: ${account}'s ${roleAnnotation} is not a role's ARN: ${arn}`);
    return role;
  };

  it('gives every function an IAM role through IRSA on the ServiceAccount it runs as, with its policy of deploy/aws/iam', () => {
    const expected = {
      aws: Object.fromEntries(functionNames.map((fn) => [`cirrus-${fn}`, [fn]])),
      'standalone-aws': { cirrus: [...functionNames].sort() },
      'standalone-hybrid': { cirrus: [...functionNames].sort() },
      // The static instances run as ServiceAccounts without a role (functionsOf gives them none).
      hybrid: Object.fromEntries(functionNames.map((fn) => [`cirrus-${fn}`, [fn]])),
    };
    for (const [name, roles] of Object.entries(expected)) {
      const objects = builds[name] ?? [];
      const found: Record<string, string[]> = {};
      for (const workload of workloads(objects)) {
        const where = `${name}: ${workload.id} (ServiceAccount ${workload.pod.serviceAccountName ?? 'default'})`;
        const role = roleOf(objects, workload, where);
        const functions = functionsOf(workload, containerEnv(workload, objects));
        if (functions.length === 0) {
          assert.equal(role, undefined, `${where} calls no AWS API: no role`);
          continue;
        }
        assert.ok(role, `${where} runs ${functions.join(', ')}: annotated ${roleAnnotation}`);
        for (const fn of functions)
          assert.ok(existsSync(join(repoRoot, `deploy/aws/iam/${fn}.json`)), `deploy/aws/iam has ${fn}'s policy`);
        found[role] = [...(found[role] ?? []), ...functions].sort();
      }
      assert.deepEqual(found, roles, `${name}: the roles and the functions each serves`);
    }
  });

  it("gives each function the aws provider, the cluster's pod CIDR and a cloud-config it accepts", () => {
    for (const name of ['aws', 'standalone-aws'] as const) {
      const objects = builds[name] ?? [];
      for (const workload of workloads(objects).filter((w) => ['serve', 'start'].includes(w.container.args[0] ?? ''))) {
        const env = containerEnv(workload, objects);
        assert.equal(env['CIRRUS_CLOUD_PROVIDER'], 'aws', `${name}: ${workload.id}`);
        assert.ok(env['CIRRUS_CLUSTER_CIDR'], `${name}: ${workload.id}: routes needs the pods' CIDR`);
        const path = env['CIRRUS_CLOUD_CONFIG'] ?? '';
        const config = parseAwsConfig(mountedFile(workload, objects, path), path);
        assert.equal(
          config.clusterId,
          env['CIRRUS_CLUSTER_NAME'],
          `${name}: one cluster name, in the file and in cirrus-config`,
        );
        assert.ok(config.routeTableId, `${name}: the route table routes programs`);
      }
    }
  });
});

describe('the hybrid overlay (deploy/standalone/overlays/hybrid: static for bare metal beside aws)', () => {
  const objects = builds['standalone-hybrid'] ?? [];
  const ccm = workloads(objects).find((w) => w.id === 'DaemonSet/cirrus-system/cirrus');

  it('runs both providers in one `cirrus start`: aws the default, the static class its own, each with its cloud-config', () => {
    assert.ok(ccm);
    const env = containerEnv(ccm, objects);
    const plan = providerPlan({
      cloudProvider: env['CIRRUS_CLOUD_PROVIDER'],
      cloudConfig: env['CIRRUS_CLOUD_CONFIG'],
      defaultProvider: env['CIRRUS_DEFAULT_PROVIDER'],
      loadBalancerClass: env['CIRRUS_LOAD_BALANCER_CLASS'],
    });
    assert.deepEqual(plan.names, ['static', 'aws']);
    assert.ok(plan.ownership, 'several providers: ownership rules');
    assert.equal(plan.ownership.defaultProvider, 'aws');
    assert.deepEqual([...plan.ownership.classes], [['example.com/metal', 'static']]);
    const paths = cloudConfigPaths(env);
    assert.deepEqual([...paths.keys()], ['static', 'aws'], 'a cloud-config for each');
    const staticPath = paths.get('static') ?? '';
    const inventory = parseInventory(mountedFile(ccm, objects, staticPath), staticPath);
    assert.ok(inventory.instances.length > 0, 'the bare-metal machines');
    const awsPath = paths.get('aws') ?? '';
    const aws = parseAwsConfig(mountedFile(ccm, objects, awsPath), awsPath);
    assert.equal(aws.clusterId, env['CIRRUS_CLUSTER_NAME'], 'one cluster name, in cloud.conf and in cirrus-config');
    assert.ok(aws.routeTableId, 'the route table routes programs');
    assert.ok(env['CIRRUS_CLUSTER_CIDR'], "routes (aws's) needs the pods' CIDR");
  });

  it('grants what the RBAC proof proves for `cirrus start` with the static provider, the IAM role as overlays/aws', () => {
    // rbac-proof.ts's subject `standalone` runs every function's scenario and the static provider's
    // as ServiceAccount cirrus on ccm/ and static-provider/: the rights of this overlay exactly.
    const rights = (build: readonly KubeObject[]): Map<string, KubeObject> =>
      new Map(
        build
          .filter((o) => ['ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(o.kind))
          .map((o) => [identity(o), o]),
      );
    assert.deepEqual(rights(objects), rights(builds['standalone-example'] ?? []));
    assert.ok(find(objects, 'ConfigMap/cirrus-system/cirrus-lb-ipam'), "the static provider's allocations");
    const account = find(objects, 'ServiceAccount/cirrus-system/cirrus');
    assert.deepEqual(account, find(builds['standalone-aws'] ?? [], 'ServiceAccount/cirrus-system/cirrus'));
  });
});

describe('the Knative hybrid overlay (deploy/knative/overlays/hybrid: a Knative Service per function and provider)', () => {
  const objects = builds['hybrid'] ?? [];
  const planOf = (env: Record<string, string>, serve: boolean): ReturnType<typeof providerPlan> =>
    providerPlan({
      cloudProvider: env['CIRRUS_CLOUD_PROVIDER'],
      cloudConfig: env['CIRRUS_CLOUD_CONFIG'],
      defaultProvider: env['CIRRUS_DEFAULT_PROVIDER'],
      loadBalancerClass: env['CIRRUS_LOAD_BALANCER_CLASS'],
      serveProviders: serve ? env['CIRRUS_SERVE_PROVIDERS'] : undefined,
    });
  const relay = workloads(objects).find((w) => w.id === 'Deployment/cirrus-system/cirrus-relay');
  const relayEnv = relay === undefined ? {} : containerEnv(relay, objects);
  // The providers each Knative Service's instance acts for, by its name.
  const servedBy = (): Map<string, readonly string[]> =>
    new Map(
      knativeServices(objects).map((service) => {
        const workload = workloads(objects).find((w) => w.name === service.metadata.name);
        assert.ok(workload);
        return [service.metadata.name, planOf(containerEnv(workload, objects), true).served];
      }),
    );

  it('gives every instance and the relay the same rules; each Knative Service acts for the provider it is named after, node-init for both', () => {
    const rules = planOf(relayEnv, false).ownership;
    assert.ok(rules, 'the relay has the ownership rules');
    assert.deepEqual(rules.providers, ['static', 'aws']);
    assert.equal(rules.defaultProvider, 'aws');
    assert.deepEqual([...rules.classes], [['example.com/metal', 'static']]);
    for (const workload of workloads(objects).filter((w) => ['serve', 'start'].includes(w.container.args[0] ?? ''))) {
      const env = containerEnv(workload, objects);
      const plan = planOf(env, workload.container.args[0] === 'serve');
      assert.deepEqual(plan.ownership, rules, `${workload.id}: the relay's rules`);
      const expected = workload.kind === 'Deployment' ? ['static', 'aws'] : [/-(\w+)$/.exec(workload.name)?.[1]];
      assert.deepEqual(plan.served, expected, `${workload.id} acts for`);
      if (workload.kind === 'Deployment')
        assert.equal(env['CIRRUS_SERVE_PROVIDERS'], undefined, 'the bootstrap serves both providers');
    }
    assert.deepEqual(
      [...servedBy()].filter(([name]) => name.startsWith('cirrus-routes')),
      [['cirrus-routes-aws', ['aws']]],
      'routes for aws only: static has none',
    );
  });

  it("routes each provider's Nodes and Services to its own instances: one destination per Knative Service, by the ownership rules", () => {
    assert.ok(relay);
    const file = load(mountedFile(relay, objects, relayEnv['CIRRUS_ROUTING_CONFIG'] ?? ''));
    const table = buildRoutingTable(catalogue, { file, ownership: planOf(relayEnv, false).ownership });
    const served = servedBy();
    const expected = knativeServices(objects).map((s) => [
      component(s),
      `http://${s.metadata.name}.${s.metadata.namespace}.svc.cluster.local`,
      served.get(s.metadata.name),
    ]);
    assert.deepEqual(
      table.destinations.map((d) => [d.feed, d.url, d.providers]).sort(),
      expected.sort(),
      'each Knative Service: its function, its address, its provider',
    );
    // Without the relay's provider options, a destination naming providers is refused.
    assert.throws(() => buildRoutingTable(catalogue, { file }), /no ownership rules/);
  });

  it("grants each per-provider instance its function's rights (the static provider's allocations to service-lb-static only), node-init and the relay theirs", () => {
    // Every rule granted to `account` through any binding: `namespace group/resource verb names`.
    const rightsOf = (build: readonly KubeObject[], account: string): string[] =>
      [...ofKind(build, 'RoleBinding'), ...ofKind(build, 'ClusterRoleBinding')]
        .filter((b) => subjectsOf(b).some((s) => s.kind === 'ServiceAccount' && s.name === account))
        .flatMap((b) => {
          const ref = roleRefOf(b);
          const namespace = ref.kind === 'Role' ? (b.metadata.namespace ?? '') : '';
          return grants(build, `${ref.kind}/${namespace}/${ref.name}`).map((g) => `${namespace} ${g}`);
        })
        .sort();
    for (const service of knativeServices(objects)) {
      const account = service.spec.template.spec.serviceAccountName;
      assert.equal(account, service.metadata.name, 'a ServiceAccount of its own, named as the Knative Service');
      assert.ok(find(objects, `ServiceAccount/cirrus-system/${account}`), account);
      // The static instances as overlays/example's functions, the aws ones as overlays/aws's.
      const twin = account.endsWith('-static') ? builds['example'] : builds['aws'];
      const granted = rightsOf(objects, account);
      assert.ok(granted.length > 0, account);
      assert.deepEqual(granted, rightsOf(twin ?? [], `cirrus-${component(service)}`), account);
    }
    for (const account of ['cirrus-node-init', 'cirrus-relay'])
      assert.deepEqual(rightsOf(objects, account), rightsOf(builds['aws'] ?? [], account), account);
    assert.ok(
      rightsOf(objects, 'cirrus-service-lb-static').some((g) => g.includes('cirrus-lb-ipam')),
      "the static provider's allocations",
    );
    assert.ok(!rightsOf(objects, 'cirrus-service-lb-aws').some((g) => g.includes('cirrus-lb-ipam')));
  });

  it('mounts both cloud-configs: the static inventory and the aws cloud.conf', () => {
    const nodeInit = workloads(objects).find((w) => w.id === 'Deployment/cirrus-system/cirrus-node-init');
    assert.ok(nodeInit);
    const env = containerEnv(nodeInit, objects);
    const paths = cloudConfigPaths(env);
    assert.deepEqual([...paths.keys()], ['static', 'aws']);
    const staticPath = paths.get('static') ?? '';
    assert.ok(parseInventory(mountedFile(nodeInit, objects, staticPath), staticPath).instances.length > 0);
    const awsPath = paths.get('aws') ?? '';
    const aws = parseAwsConfig(mountedFile(nodeInit, objects, awsPath), awsPath);
    assert.equal(aws.clusterId, env['CIRRUS_CLUSTER_NAME'], 'one cluster name, in cloud.conf and in cirrus-config');
    assert.ok(aws.routeTableId, 'the route table routes programs');
    assert.ok(env['CIRRUS_CLUSTER_CIDR'], "routes (aws's) needs the pods' CIDR");
  });
});

describe('deploy/Dockerfile', () => {
  const dockerfile = readFileSync(join(repoRoot, 'deploy/Dockerfile'), 'utf8');
  const instructions = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((line) => /^[A-Z]+\s/.test(line));
  // The stages, each its instructions after FROM; the last one is the image.
  const stages = instructions.reduce<string[][]>((all, line) => {
    if (line.startsWith('FROM ')) all.push([]);
    all.at(-1)?.push(line);
    return all;
  }, []);
  const [buildStage = [], image = []] = stages;
  const all = (keyword: string, from: readonly string[] = instructions): string[] =>
    from.filter((line) => line.startsWith(`${keyword} `)).map((line) => line.slice(keyword.length + 1).trim());

  it('builds cirrus on Node.js 24 in a stage of its own, and runs the built cirrus as a non-root user', () => {
    assert.ok(
      all('ARG').some((arg) => /^NODE_IMAGE=node:24(-|$)/.test(arg)),
      'Node.js 24 base image',
    );
    assert.ok(
      all('FROM').every((from) => from.startsWith('${NODE_IMAGE}')),
      'every stage on that image',
    );
    assert.equal(stages.length, 2, 'a build stage and the image');
    assert.match(all('FROM', buildStage)[0] ?? '', /\sAS build$/);
    assert.ok(
      all('RUN', buildStage).some((run) => run.startsWith('npm ci')),
      'npm ci: the lockfile',
    );
    assert.ok(all('RUN', buildStage).includes('node scripts/build.ts image'), 'the build of the image artifact');
    assert.deepEqual(
      all('COPY', image),
      ['--from=build /src/dist/image ./'],
      'the image holds the built artifact only',
    );
    assert.deepEqual(all('WORKDIR', image), ['/app']);
    assert.ok(
      all('RUN', image).every((run) => !run.includes('npm')),
      'no npm, no node_modules in the image',
    );
    const user = all('USER').at(-1) ?? '';
    assert.match(user, /^[1-9]\d*(:\d+)?$/, 'a numeric non-root user, which runAsNonRoot can verify');
    assert.equal(user.split(':')[0], '1000', 'the uid the manifests set (runAsUser: 1000)');
    assert.deepEqual(entrypoint(dockerfile), ['node', '/app/cirrus.js']);
  });

  it('gives the build stage every file the image is built from, through the build context', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'cirrus-image-build-'));
    try {
      const [artifact] = await buildArtifacts(['image'], scratch);
      assert.ok(artifact);
      const copied = all('COPY', buildStage).flatMap((c) => c.split(/\s+/).slice(0, -1));
      for (const input of artifact.inputs) {
        const inPackage = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1];
        if (inPackage === undefined)
          assert.ok(
            copied.some((path) => input === path || input.startsWith(`${path}/`)),
            `the image is built from ${input}, which the build stage lacks`,
          );
        else if (!input.startsWith('node_modules/.'))
          assert.ok(isProduction(inPackage), `${input}: bundled from ${inPackage}, not a production dependency`);
      }
      // BuildKit reads deploy/Dockerfile.dockerignore for this Dockerfile: `**`, then what it lets in.
      const ignore = readFileSync(join(repoRoot, 'deploy/Dockerfile.dockerignore'), 'utf8').split('\n');
      const admitted = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/\*\*$/, ''));
      for (const path of copied) assert.ok(admitted.includes(path), `the build context lets ${path} in`);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it(
    'ships a self-contained cirrus: it runs from a folder with no node_modules, and a provider module gets it as cirrus-ccm',
    { skip: controlPlaneSkip },
    async () => {
      const scratch = mkdtempSync(join(tmpdir(), 'cirrus-image-'));
      try {
        await buildArtifacts(['image'], join(scratch, 'dist'));
        const app = join(scratch, 'dist/image');
        const [, script = ''] = entrypoint(dockerfile);
        const cli = join(app, relative('/app', script));
        const version = spawnSync(process.execPath, [cli, '--version'], { encoding: 'utf8' });
        assert.equal(version.status, 0, version.stderr);
        assert.match(version.stdout, /^cirrus \d+\.\d+\.\d+/);
        // An operator's provider, outside /app and with no node_modules of its own.
        mkdirSync(join(scratch, 'provider'));
        writeFileSync(
          join(scratch, 'provider/acme.ts'),
          [
            "import { InstanceNotFoundError, registerCloudProvider } from 'cirrus-ccm';",
            'const none = () => undefined;',
            "registerCloudProvider('acme', () => ({ providerName: () => 'acme', hasClusterId: () => true,",
            '  instancesV2: () => ({ instanceExists: async () => false, instanceShutdown: async () => false,',
            '    instanceMetadata: async () => { throw new InstanceNotFoundError(); } }),',
            '  instances: none, zones: none, clusters: none, routes: none, loadBalancer: none }));',
            '',
          ].join('\n'),
        );
        // serve checks at start that it reaches its cluster, and the rights node-lifecycle uses.
        writeFileSync(join(scratch, 'kubeconfig'), readFileSync((await testCluster()).info.adminKubeconfig));
        const child = spawn(
          process.execPath,
          [cli, 'serve', 'node-lifecycle', '--provider-module', join(scratch, 'provider/acme.ts')].concat(
            ['--cloud-provider', 'acme', '--kubeconfig', join(scratch, 'kubeconfig'), '--port', '0'],
            ['--bind-address', '127.0.0.1'],
          ),
          { cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        const exited = once(child, 'exit') as Promise<[number | null]>;
        // Serving with the module's provider: registered in the running cirrus's registry.
        const serving = firstLine(
          child.stdout,
          (entry) => entry['msg'] === 'node-lifecycle serving' && entry['provider'] === 'acme',
        );
        await Promise.race([
          serving,
          exited.then(([code]) => {
            throw new Error(`exited with ${String(code)} before serving:\n${stderr}`);
          }),
        ]);
        child.kill('SIGTERM');
        assert.equal((await exited)[0], 0, stderr);
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }
    },
  );
});

// A control plane of the suite's own: the standalone DaemonSet runs `cirrus start` with the example
// inventory, whose node-lifecycle would delete the shared cluster's other Nodes; and every command
// checks at start that it reaches its cluster with the rights it uses.
describe('each container, started with its arguments and environment', { skip: controlPlaneSkip }, () => {
  const own = ownControlPlane();
  let scratch: string;
  // What the image holds at /app: the Dockerfile copies the built dist/image there.
  let app: string;
  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'cirrus-containers-'));
    await buildArtifacts(['image'], join(scratch, 'dist'));
    app = join(scratch, 'dist/image');
    writeFileSync(join(scratch, 'kubeconfig'), own.admin.exportConfig());
  });
  after(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  for (const name of [
    'example',
    'standalone-example',
    'aws',
    'standalone-aws',
    'standalone-hybrid',
    'hybrid',
  ] as const) {
    const example = builds[name] ?? [];
    for (const workload of workloads(example)) {
      it(`${workload.id} (${name}) starts serving, and stops on SIGTERM`, async () => {
        await startAndStop(workload, example, { root: join(scratch, name, workload.name) });
      });
    }
  }

  // routes needs a provider with routes; none built in does real work, so this stands in for an
  // overlay of such a provider: the fake (which takes no cloud-config) and a cluster CIDR.
  it('Service/cirrus-system/cirrus-routes (base, with a provider that has routes) starts serving', async () => {
    const base = builds['base'] ?? [];
    const routes = workloads(base).find((w) => w.name === 'cirrus-routes');
    assert.ok(routes);
    const secrets = ['cirrus-cloud-config', 'cirrus-signing'].map((name): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: 'cirrus-system' },
      data: { secret: Buffer.from('test').toString('base64') },
    }));
    await startAndStop(routes, [...base, ...secrets], {
      root: join(scratch, 'routes'),
      env: { CIRRUS_CLOUD_PROVIDER: 'fake', CIRRUS_CLUSTER_CIDR: '10.244.0.0/16', CIRRUS_CLOUD_CONFIG: undefined },
    });
  });

  async function startAndStop(
    workload: Workload,
    objects: readonly KubeObject[],
    options: { root: string; env?: Record<string, string | undefined> },
  ): Promise<void> {
    const env = { ...materialize(workload, objects, options.root), ...options.env };
    const [command = '', script = ''] = entrypoint(readFileSync(join(repoRoot, 'deploy/Dockerfile'), 'utf8'));
    assert.equal(command, 'node');
    const argv = [join(app, relative('/app', script)), ...workload.container.args];
    const child = spawn(process.execPath, argv, {
      // As Knative and the kubelet would: PORT from the container port (0: any free one here).
      env: {
        PATH: process.env['PATH'],
        ...definedOnly(env),
        PORT: '0',
        CIRRUS_BIND_ADDRESS: '127.0.0.1',
        KUBECONFIG: join(scratch, 'kubeconfig'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = once(child, 'exit') as Promise<[number | null]>;
    const serving = firstLine(
      child.stdout,
      (entry) => typeof entry['msg'] === 'string' && entry['msg'].endsWith(' serving'),
    ).catch((error: unknown) => {
      throw new Error(`${workload.id}: ${(error as Error).message}:\n${stderr}`);
    });
    const early = exited.then(([code]) => {
      throw new Error(`${workload.id} exited with ${String(code)} before serving:\n${stderr}`);
    });
    await Promise.race([serving, early]);
    child.kill('SIGTERM');
    assert.equal((await exited)[0], 0, `${workload.id} stops cleanly:\n${stderr}`);
  }
});

describe('a server-side dry run of every core Kubernetes object', { skip: controlPlaneSkip }, () => {
  let admin: KubeConfig;
  before(async () => {
    admin = (await testCluster()).admin;
    await ensureNamespace(admin, 'cirrus-system');
  });

  it('accepts each of them, unknown fields refused (Knative objects excepted: no CRDs here)', async () => {
    const distinct = new Map<string, KubeObject>();
    for (const object of Object.values(builds).flat()) {
      if (object.apiVersion.includes('knative.dev')) continue;
      distinct.set(JSON.stringify(object), object);
    }
    const kinds = new Set([...distinct.values()].map((o) => o.kind));
    assert.deepEqual([...kinds].sort(), [
      'ClusterRole',
      'ClusterRoleBinding',
      'ConfigMap',
      'DaemonSet',
      'Deployment',
      'Namespace',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'Role',
      'RoleBinding',
      'Secret',
      'ServiceAccount',
    ]);
    assert.deepEqual(await dryRunProblems(admin, [...distinct.values()]), []);
  });

  it('would notice a misspelt field (the check itself works)', async () => {
    const answer = await dryRunCreate(admin, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: uniqueName('cm'), namespace: 'default' },
      dataa: {},
    });
    assert.equal(answer.status, 400);
    assert.match(answer.text, /strict decoding error: unknown field \\"dataa\\"/);
  });
});

/** A Role in cirrus-system bound to `account` grants get and update on exactly the Lease `leaseName`. */
function assertLeaseRole(objects: readonly KubeObject[], account: string, leaseName: string | undefined): void {
  assert.ok(leaseName, 'CIRRUS_LEADER_ELECT_RESOURCE_NAME is set');
  type Rule = { resources: string[]; verbs: string[]; resourceNames?: string[] };
  const rulesOf = (binding: KubeObject): Rule[] =>
    (find(objects, `Role/cirrus-system/${roleRefOf(binding).name}`)?.['rules'] ?? []) as Rule[];
  const binding = ofKind(objects, 'RoleBinding').find(
    (b) =>
      b.metadata.namespace === 'cirrus-system' &&
      subjectsOf(b).some((s) => s.name === account) &&
      rulesOf(b).some((r) => r.resources.includes('leases')),
  );
  assert.ok(binding, `${account} is bound to a Lease Role`);
  assert.deepEqual(
    rulesOf(binding).find((r) => r.verbs.includes('update'))?.resourceNames,
    [leaseName],
    `${account} may update only its own Lease`,
  );
}

// The environment of a container as the kubelet would build it, and where its volumes come from.

interface Mount {
  readonly mountPath: string;
  /** `Secret/<name>` or `ConfigMap/<name>`. */
  readonly source: string;
  readonly optional: boolean;
}

interface ContainerSpec {
  readonly args: string[];
  readonly ports?: { name?: string; containerPort: number }[];
  readonly readinessProbe?: { httpGet: { host?: string; path: string; port: string | number } };
  readonly livenessProbe?: { httpGet: { host?: string; path: string; port: string | number } };
  readonly resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  readonly env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  readonly envFrom?: { configMapRef: { name: string; optional?: boolean } }[];
  readonly volumeMounts?: { name: string; mountPath: string }[];
}

interface VolumeSpec {
  readonly name: string;
  readonly secret?: { secretName: string; optional?: boolean };
  readonly configMap?: { name: string; optional?: boolean };
}

/** The pod fields that decide where a Pod may run. */
interface PodSpec {
  readonly containers: ContainerSpec[];
  readonly volumes?: VolumeSpec[];
  readonly serviceAccountName?: string;
  readonly hostNetwork?: boolean;
  readonly dnsPolicy?: string;
  readonly nodeSelector?: Record<string, string>;
  readonly priorityClassName?: string;
  readonly tolerations?: { key?: string; operator?: string; value?: string; effect?: string }[];
}

/** A Knative Service's, Deployment's or DaemonSet's one container, with its pod's volumes. */
// The node's resolver: the cluster DNS runs on nodes that are not initialized yet. Except the Knative
// relay's, whose destinations are cluster-local names of Knative Services, which run only later.
function expectedDnsPolicy(build: string, workload: Workload): string {
  const knativeRelay = workload.id === 'Deployment/cirrus-system/cirrus-relay' && build !== 'lambda';
  return knativeRelay ? 'ClusterFirstWithHostNet' : 'Default';
}

interface Workload {
  readonly id: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  readonly replicas: number | undefined;
  readonly container: ContainerSpec;
  readonly mounts: readonly Mount[];
  readonly pod: PodSpec;
}

function workloads(objects: readonly KubeObject[]): Workload[] {
  return objects
    .filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet' || o.apiVersion === 'serving.knative.dev/v1')
    .map((object) => {
      const spec = object['spec'] as { replicas?: number; template: { spec: PodSpec } };
      const [container] = spec.template.spec.containers;
      assert.ok(container, identity(object));
      const volumes = new Map((spec.template.spec.volumes ?? []).map((v) => [v.name, v]));
      const mounts = (container.volumeMounts ?? []).map((m) => mountOf(m.mountPath, volumes.get(m.name)));
      return {
        id: identity(object),
        kind: object.kind,
        name: object.metadata.name,
        namespace: object.metadata.namespace ?? '',
        replicas: spec.replicas,
        container,
        mounts,
        pod: spec.template.spec,
      };
    });
}

function mountOf(mountPath: string, volume: VolumeSpec | undefined): Mount {
  if (volume?.secret)
    return { mountPath, source: `Secret/${volume.secret.secretName}`, optional: volume.secret.optional === true };
  const configMap = volume?.configMap;
  return { mountPath, source: `ConfigMap/${configMap?.name ?? ''}`, optional: configMap?.optional === true };
}

function dataOf(objects: readonly KubeObject[], source: string, namespace: string): Record<string, string> | undefined {
  const [kind, name] = source.split('/');
  const object = find(objects, `${kind ?? ''}/${namespace}/${name ?? ''}`);
  if (object === undefined) return undefined;
  const data = (object['data'] ?? {}) as Record<string, string>;
  return kind === 'Secret'
    ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]))
    : data;
}

/** envFrom, then env (which wins), as the kubelet resolves them; a missing required ConfigMap fails. */
function containerEnv(workload: Workload, objects: readonly KubeObject[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of workload.container.envFrom ?? []) {
    const data = dataOf(objects, `ConfigMap/${from.configMapRef.name}`, workload.namespace);
    assert.ok(
      data !== undefined || from.configMapRef.optional === true,
      `${workload.id}: ConfigMap ${from.configMapRef.name} is missing`,
    );
    Object.assign(env, data);
  }
  for (const variable of workload.container.env ?? []) {
    const field = variable.valueFrom?.fieldRef?.fieldPath;
    assert.ok(variable.value !== undefined || field === 'metadata.namespace', `${workload.id}: ${variable.name}`);
    env[variable.name] = variable.value ?? workload.namespace;
  }
  return env;
}

/** The files a workload's `variable` names: none where the command takes no such option. */
function settingPaths(workload: Workload, env: Record<string, string>, variable: string): string[] {
  // The relay reads CIRRUS_CLOUD_CONFIG from the shared ConfigMap too, but takes no such option.
  const takes =
    variable === 'CIRRUS_SIGNING_SECRET_FILE' || ['serve', 'start'].includes(workload.container.args[0] ?? '');
  const value = env[variable];
  if (!takes || value === undefined) return [];
  // With several providers, each one's file (static=…,aws=…).
  return variable === 'CIRRUS_CLOUD_CONFIG' ? [...cloudConfigPaths(env).values()] : [value];
}

/** Each provider's cloud-config path in `env`, read as cirrus reads CIRRUS_CLOUD_CONFIG (app/providers.ts). */
function cloudConfigPaths(env: Record<string, string>): Map<string, string> {
  const plan = providerPlan({
    cloudProvider: env['CIRRUS_CLOUD_PROVIDER'],
    cloudConfig: env['CIRRUS_CLOUD_CONFIG'],
    defaultProvider: env['CIRRUS_DEFAULT_PROVIDER'],
    loadBalancerClass: env['CIRRUS_LOAD_BALANCER_CLASS'],
  });
  return new Map([...plan.cloudConfigs].filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** The contents of the file at `path` inside the workload's container (from its mounted volumes). */
function mountedFile(workload: Workload, objects: readonly KubeObject[], path: string): string {
  const mount = workload.mounts.find((m) => path.startsWith(`${m.mountPath}/`));
  assert.ok(mount, `${workload.id}: nothing mounted at ${path}`);
  const content = dataOf(objects, mount.source, workload.namespace)?.[path.slice(mount.mountPath.length + 1)];
  assert.ok(content !== undefined, `${workload.id}: ${mount.source} has no ${path}`);
  return content;
}

/** Writes the workload's volumes under `root` and returns its environment with their paths moved there. */
function materialize(workload: Workload, objects: readonly KubeObject[], root: string): Record<string, string> {
  const moved = workload.mounts.map((mount) => {
    const dir = join(root, mount.mountPath);
    mkdirSync(dir, { recursive: true });
    const data = dataOf(objects, mount.source, workload.namespace);
    assert.ok(data !== undefined || mount.optional, `${workload.id}: ${mount.source} is missing`);
    for (const [file, content] of Object.entries(data ?? {})) writeFileSync(join(dir, file), content);
    return { from: `${mount.mountPath}/`, to: `${dir}/` };
  });
  const env = containerEnv(workload, objects);
  return Object.fromEntries(
    // A path alone, or each provider's (static=/etc/…,aws=/etc/…).
    Object.entries(env).map(([name, value]) => [
      name,
      value.replaceAll(/(^|[=,])(\/[^,]*)/g, (whole, before: string, path: string) => {
        const mount = moved.find((m) => path.startsWith(m.from));
        return mount === undefined ? whole : before + mount.to + path.slice(mount.from.length);
      }),
    ]),
  );
}

function definedOnly(env: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

async function firstLine(
  stream: NodeJS.ReadableStream,
  matches: (entry: Record<string, unknown>) => boolean,
): Promise<void> {
  for await (const line of createInterface({ input: stream })) {
    const entry = (() => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        return {};
      }
    })();
    if (matches(entry)) return;
  }
  throw new Error('the output ended before the line looked for');
}

// Every variable set for a container or in a ConfigMap that containers read through envFrom.
function configuredVariables(objects: readonly KubeObject[]): [where: string, name: string, value: string][] {
  const fromConfigMaps = ofKind(objects, 'ConfigMap').flatMap((cm) =>
    Object.entries((cm['data'] ?? {}) as Record<string, string>)
      .filter(([key]) => /^[A-Z_]+$/.test(key))
      .map(([key, value]): [string, string, string] => [identity(cm), key, value]),
  );
  const fromContainers = workloads(objects).flatMap((w) =>
    (w.container.env ?? []).map((v): [string, string, string] => [w.id, v.name, v.value ?? w.namespace]),
  );
  return [...fromConfigMaps, ...fromContainers];
}

function optionOfVariable(variable: string): OptionName | undefined {
  return (Object.keys(options) as OptionName[]).find((name) => envName(name) === variable);
}

// As app/config.ts reads a variable: strings through the schema, booleans as true/false/1/0.
function checkValue(option: OptionName, value: string): string | undefined {
  const spec = options[option];
  if (spec.kind === 'boolean') return /^(true|false|1|0)$/i.test(value) ? undefined : 'not a boolean';
  const parsed = spec.schema.safeParse(spec.kind === 'list' ? value.split(',') : value);
  return parsed.success ? undefined : parsed.error.message;
}

interface Subject {
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
}

function subjectsOf(binding: KubeObject): Subject[] {
  return (binding['subjects'] ?? []) as Subject[];
}

function roleRefOf(binding: KubeObject): { kind: string; name: string } {
  return binding['roleRef'] as { kind: string; name: string };
}

// Whether package `name` is installed for a production dependency, directly or not (the lockfile
// marks what only devDependencies need `dev`).
function isProduction(name: string): boolean {
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean } | undefined>;
  };
  const entry = lock.packages[`node_modules/${name}`];
  return entry !== undefined && entry.dev !== true;
}

function entrypoint(dockerfile: string): string[] {
  const line = dockerfile.split('\n').find((l) => l.startsWith('ENTRYPOINT '));
  return JSON.parse(line?.slice('ENTRYPOINT '.length) ?? '[]') as string[];
}

// kustomize wraps a Secret's base64 lines at 76 characters; the data is the same.
function unwrapSecret(object: KubeObject): KubeObject {
  if (object.kind !== 'Secret' || object['data'] === undefined) return object;
  const data = Object.fromEntries(
    Object.entries(object['data'] as Record<string, string>).map(([k, v]) => [k, v.replace(/\s/g, '')]),
  );
  return { ...object, data };
}

/** A class of @kubernetes-models/knative: built from an object, validate() throws naming what is wrong. */
type KnativeModel = new (data: never) => { validate(): void };

// Imported by a computed name: the package's type declarations do not compile under this
// project's exactOptionalPropertyTypes, and only its runtime validation is used.
async function knativeModel(path: string): Promise<KnativeModel> {
  const module = (await import(`@kubernetes-models/knative/${path}`)) as Record<string, KnativeModel | undefined>;
  const model = module[path.split('/').pop() ?? ''];
  if (model === undefined) throw new Error(`@kubernetes-models/knative/${path} exports no model`);
  return model;
}

function kubectlSkip(): string | false {
  return spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0
    ? false
    : 'kubectl is not installed: the in-process build is checked without it';
}
