// serverless.yml, packaged offline by osls (`osls package`: no AWS account, no network) after the
// functions' build (scripts/build.ts functions), both in a temporary copy of the service: the
// CloudFormation template holds one Lambda per function with the handler, URL, limits,
// environment and rights that serverless.yml means, and each function's zip holds its own built
// artifact and nothing else, within the size goal. Then the packaged handler itself, unzipped,
// initializes a Node on the real control plane from a function URL event: the artifact is
// self-contained.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, globSync, readFileSync } from 'node:fs';
import { copyFile, cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import yauzl, { type Entry } from 'yauzl';
import { z } from 'zod';
import { parseConfig } from '../../app/config.ts';
import { lambdaCommand, type LambdaHandler } from '../../app/lambda/index.ts';
import { createNode, newNode, ownTaints, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import {
  functionUrlEvent,
  lambdaContext,
  nodeEvent,
  startSecretsExtension,
  type SecretsExtension,
} from '../harness/lambda.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { build as buildArtifacts } from '../../scripts/build.ts';
import { knativeServiceSchema } from './knative.ts';
import { rieSuite } from './rie-suite.ts';
import { build, knativeRoot } from './kustomize.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const osls = join(repoRoot, 'node_modules/osls/bin/serverless.js');
const stage = 'test';
// The goal for one function's zip (it was 17 MB with node_modules and the TypeScript).
const zipGoalBytes = 5 * 1024 * 1024;
// ADR 0033: a package for the aws provider carries the AWS SDK (1.5 MB unpacked).
const awsGoalBytes = 5.5 * 1024 * 1024;

const params = {
  cloudProvider: 'static',
  clusterCidr: '10.244.0.0/16',
  secretsExtensionLayerArn:
    'arn:aws:lambda:eu-west-1:123456789012:layer:AWS-Parameters-and-Secrets-Lambda-Extension-Arm64:1',
};
// The default secretPrefix: <service>-<stage>.
const secretPrefix = `cirrus-${stage}`;

// serverless.yml's intent, as far as this test reads it.
const intentSchema = z.looseObject({
  service: z.string(),
  provider: z.looseObject({
    runtime: z.string(),
    architecture: z.string(),
    environment: z.record(z.string(), z.string()),
  }),
  functions: z.record(
    z.string(),
    z.looseObject({
      handler: z.string(),
      url: z.literal(true),
      memorySize: z.number(),
      timeout: z.number(),
      reservedConcurrency: z.number(),
      environment: z.record(z.string(), z.string()).optional(),
    }),
  ),
});
const intent = intentSchema.parse(load(await readFile(join(repoRoot, 'serverless.yml'), 'utf8')));

const resourceSchema = z.looseObject({ Type: z.string(), Properties: z.looseObject({}) });
const templateSchema = z.looseObject({
  Resources: z.record(z.string(), resourceSchema),
  Outputs: z.record(z.string(), z.unknown()),
  Conditions: z.unknown(),
});
type Resource = z.infer<typeof resourceSchema>;
const lambdaSchema = z.looseObject({
  FunctionName: z.string(),
  Handler: z.string(),
  Runtime: z.string(),
  Architectures: z.array(z.string()),
  MemorySize: z.number(),
  Timeout: z.number(),
  ReservedConcurrentExecutions: z.number(),
  Role: z.object({ 'Fn::GetAtt': z.tuple([z.string(), z.literal('Arn')]) }),
  Layers: z.array(z.string()),
  Environment: z.object({ Variables: z.record(z.string(), z.string()) }),
});
type LambdaProperties = z.infer<typeof lambdaSchema>;

/** Runs osls in the service folder `cwd`; its exit status and everything it printed. */
async function runOsls(cwd: string, args: readonly string[]): Promise<{ status: number | null; output: string }> {
  const child = spawn(process.execPath, [osls, ...args], {
    cwd,
    env: {
      ...process.env,
      SLS_TELEMETRY_DISABLED: '1',
      SLS_NOTIFICATIONS_MODE: 'off',
      SLS_INTERACTIVE_SETUP_DISABLE: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const [status] = (await once(child, 'exit')) as [number | null];
  return { status, output };
}

const paramArgs = (values: Record<string, string>): string[] =>
  Object.entries(values).map(([name, value]) => `--param=${name}=${value}`);

/** Unzips `file` into `dir`; the names of its entries. */
async function unzip(file: string, dir: string): Promise<string[]> {
  const zip = await yauzl.openPromise(file, { lazyEntries: true });
  const names: string[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('error', reject);
    zip.on('end', resolve);
    zip.on('entry', (entry: Entry) => {
      names.push(entry.fileName);
      const target = join(dir, entry.fileName);
      const write = async (): Promise<void> => {
        await mkdir(dirname(target), { recursive: true });
        if (!entry.fileName.endsWith('/'))
          await pipeline(await zip.openReadStreamPromise(entry), createWriteStream(target));
        zip.readEntry();
      };
      write().catch(reject);
    });
    zip.readEntry();
  });
  return names;
}

/** The entries of zip `file`: names and uncompressed sizes. */
async function zipEntries(file: string): Promise<{ name: string; size: number }[]> {
  const zip = await yauzl.openPromise(file, { lazyEntries: true });
  const entries: { name: string; size: number }[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('error', reject);
    zip.on('end', resolve);
    zip.on('entry', (entry: Entry) => {
      entries.push({ name: entry.fileName, size: entry.uncompressedSize });
      zip.readEntry();
    });
    zip.readEntry();
  });
  return entries;
}

async function folderBytes(folder: string): Promise<number> {
  const files = (await readdir(folder, { withFileTypes: true, recursive: true })).filter((e) => e.isFile());
  const sizes = await Promise.all(files.map(async (e) => (await stat(join(e.parentPath, e.name))).size));
  return sizes.reduce((a, b) => a + b, 0);
}

/** The sizes docs/build.md states for a function's package, in MB: for another provider than aws, and with aws. */
function docsBuildSizes(text: string): { zipped: number; unpacked: number; awsUnpacked: number } {
  const flat = text.replace(/\s+/g, ' ');
  const other = /package is ([\d.]+) MB zipped and ([\d.]+) MB unpacked for a provider other than aws/.exec(flat);
  const aws = /([\d.]+) MB zipped and ([\d.]+) MB unpacked with aws/.exec(flat);
  assert.ok(other && aws, 'docs/build.md states the sizes of a package, for another provider than aws and with aws');
  return { zipped: Number(other[1]), unpacked: Number(other[2]), awsUnpacked: Number(aws[2]) };
}

/** A role's policies without those that apply only under a condition (the aws provider's). */
function unconditional(policies: unknown): unknown {
  return Array.isArray(policies)
    ? policies.filter((p: unknown) => !(typeof p === 'object' && p !== null && 'Fn::If' in p))
    : policies;
}

describe('serverless.yml, packaged by osls', () => {
  let dir: string;
  let resources: Record<string, Resource>;
  let conditions: unknown;
  let outputs: Record<string, unknown>;
  const lambdas = new Map<string, LambdaProperties>();

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cirrus-osls-'));
    // The service as an operator packages it: serverless.yml after `npm run build`.
    for (const file of ['serverless.yml', 'package.json']) await copyFile(join(repoRoot, file), join(dir, file));
    // The aws provider's IAM policies, which serverless.yml includes.
    await cp(join(repoRoot, 'deploy/aws/iam'), join(dir, 'deploy/aws/iam'), { recursive: true });
    await buildArtifacts(['functions'], join(dir, 'dist'));
    const { status, output } = await runOsls(dir, [
      'package',
      '--package',
      join(dir, 'package'),
      '--stage',
      stage,
      ...paramArgs(params),
    ]);
    assert.equal(status, 0, output);
    const template = templateSchema.parse(
      JSON.parse(await readFile(join(dir, 'package/cloudformation-template-update-stack.json'), 'utf8')),
    );
    resources = template.Resources;
    conditions = template.Conditions;
    outputs = template.Outputs;
    for (const resource of Object.values(resources)) {
      if (resource.Type !== 'AWS::Lambda::Function') continue;
      const properties = lambdaSchema.parse(resource.Properties);
      lambdas.set(properties.FunctionName.replace(`${intent.service}-${stage}-`, ''), properties);
    }
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('has one Lambda per reconcile function, running its handler on Node.js 24 (arm64) with the secrets extension', () => {
    assert.deepEqual([...lambdas.keys()].sort(), ['node-init', 'node-lifecycle', 'routes', 'service-lb']);
    for (const [name, lambda] of lambdas) {
      const declared = intent.functions[name];
      assert.ok(declared, name);
      assert.equal(lambda.Handler, declared.handler, name);
      assert.equal(lambda.Runtime, 'nodejs24.x', name);
      assert.deepEqual(lambda.Architectures, ['arm64'], name);
      assert.deepEqual(lambda.Layers, [params.secretsExtensionLayerArn], name);
      assert.equal(lambda.MemorySize, declared.memorySize, name);
    }
  });

  it("runs each function's handler from its own built artifact, for the function it is deployed as", async () => {
    // Every function of the catalogue is deployed.
    assert.deepEqual([...lambdas.keys()].sort(), catalogue.map((e) => e.name).sort(), 'one Lambda per catalogue entry');
    for (const [name, lambda] of lambdas) {
      assert.equal(lambda.Handler, `dist/functions/${name}/lambda.handler`, name);
      const entry = (await import(pathToFileURL(join(dir, `dist/functions/${name}/lambda.js`)).href)) as {
        handler?: LambdaHandler;
      };
      assert.equal(entry.handler?.functionName, name, `${lambda.Handler} serves ${name}`);
    }
  });

  it('keeps bin/lambda.js, the entry of development and tests, serving every function', async () => {
    const entry = (await import(pathToFileURL(join(repoRoot, 'bin/lambda.js')).href)) as Record<
      string,
      LambdaHandler | undefined
    >;
    const exported = Object.values(entry).flatMap((handler) =>
      handler?.functionName === undefined ? [] : [handler.functionName],
    );
    assert.deepEqual(
      exported.sort(),
      catalogue.map((e) => e.name).sort(),
      'one bin/lambda.js export per catalogue entry',
    );
  });

  it("serves each function at a public function URL (the relay's signature authenticates), and no API Gateway", () => {
    const urls = Object.values(resources).filter((r) => r.Type === 'AWS::Lambda::Url');
    assert.equal(urls.length, lambdas.size);
    for (const url of urls) {
      assert.equal(url.Properties['AuthType'], 'NONE');
      assert.ok(
        url.Properties['InvokeMode'] === undefined || url.Properties['InvokeMode'] === 'BUFFERED',
        'buffered: a reply comes once the reconcile is done',
      );
    }
    assert.deepEqual(
      Object.values(resources).filter((r) => r.Type.startsWith('AWS::ApiGateway')),
      [],
    );
    const urlOutputs = Object.keys(outputs).filter((k) => k.endsWith('LambdaFunctionUrl'));
    assert.equal(urlOutputs.length, lambdas.size, "each URL is a stack output, for the relay's routing");
  });

  it('limits each function deliberately: timeouts of its Knative Service, one writer of routes', () => {
    // Every function is a Knative Service in the ApiServerSource wiring (the relay's base runs
    // node-init as a bootstrap Deployment instead).
    const knative = new Map(
      build(join(knativeRoot, 'apiserversource'))
        .filter((o) => o.apiVersion === 'serving.knative.dev/v1' && o.kind === 'Service')
        .map((o) => knativeServiceSchema.parse(o))
        .map((s) => [s.metadata.name.replace(/^cirrus-/, ''), s]),
    );
    for (const [name, lambda] of lambdas) {
      const declared = intent.functions[name];
      assert.equal(lambda.Timeout, declared?.timeout, name);
      assert.equal(
        lambda.Timeout,
        knative.get(name)?.spec.template.spec.timeoutSeconds,
        `${name}: the same timeout as on Knative`,
      );
      assert.ok(lambda.Timeout <= 300, `${name}: within the relay's delivery timeout (300 s)`);
      assert.equal(lambda.ReservedConcurrentExecutions, declared?.reservedConcurrency, name);
      assert.ok(
        lambda.ReservedConcurrentExecutions >= 1 && lambda.ReservedConcurrentExecutions <= 50,
        `${name}: bounded`,
      );
    }
    assert.equal(lambdas.get('routes')?.ReservedConcurrentExecutions, 1, 'one writer of the route table');
  });

  it('sets only CIRRUS_* variables a function reads on Lambda, with values it accepts', () => {
    for (const [name, lambda] of lambdas) {
      const variables = lambda.Environment.Variables;
      const config = parseConfig(lambdaCommand, [], variables);
      assert.equal(config.cloudProvider, params.cloudProvider, name);
      assert.equal(
        config.signingSecretId,
        `${secretPrefix}/signing-secret`,
        `${name}: a public URL needs the signature`,
      );
      assert.equal(
        config.kubeconfigSecretId,
        `${secretPrefix}/kubeconfig/${name}`,
        `${name}: its own identity in the cluster`,
      );
      assert.equal(config.cloudConfigSecretId, `${secretPrefix}/cloud-config`, name);
      assert.deepEqual(
        Object.keys(variables).filter((v) => !v.startsWith('CIRRUS_')),
        [],
        name,
      );
    }
    assert.deepEqual(parseConfig(lambdaCommand, [], lambdas.get('routes')?.Environment.Variables ?? {}).clusterCidr, [
      '10.244.0.0/16',
    ]);
  });

  it('gives each function a role of its own: reading the secrets it names, writing its log group, nothing else', () => {
    assert.equal(
      Object.values(resources).filter((r) => r.Type === 'AWS::IAM::Role').length,
      lambdas.size,
      'no shared role',
    );
    const statementSchema = z.object({
      Effect: z.literal('Allow'),
      Action: z.union([z.string(), z.array(z.string())]),
      Resource: z.unknown(),
    });
    const policiesSchema = z.array(z.object({ PolicyDocument: z.object({ Statement: z.array(statementSchema) }) }));
    for (const [name, lambda] of lambdas) {
      const [roleName] = lambda.Role['Fn::GetAtt'];
      const statements = policiesSchema
        .parse(unconditional(resources[roleName]?.Properties['Policies']))
        .flatMap((p) => p.PolicyDocument.Statement);
      const granted = (action: string): unknown[] =>
        statements.filter((s) => [s.Action].flat().includes(action)).flatMap((s) => [s.Resource].flat());
      assert.deepEqual(
        [...new Set(statements.flatMap((s) => [s.Action].flat()))].sort(),
        ['logs:CreateLogStream', 'logs:PutLogEvents', 'secretsmanager:GetSecretValue'],
        name,
      );
      // arn:…:secret:<name>-?????? (Secrets Manager's random suffix) → <name>
      const secretNames = granted('secretsmanager:GetSecretValue')
        .map((r) => z.object({ 'Fn::Sub': z.string() }).parse(r)['Fn::Sub'])
        .map(
          (arn) =>
            /^arn:\$\{AWS::Partition\}:secretsmanager:\$\{AWS::Region\}:\$\{AWS::AccountId\}:secret:(.+)-\?{6}$/.exec(
              arn,
            )?.[1],
        );
      const variables = lambda.Environment.Variables;
      assert.deepEqual(
        secretNames.sort(),
        [
          variables['CIRRUS_CLOUD_CONFIG_SECRET_ID'],
          variables['CIRRUS_KUBECONFIG_SECRET_ID'],
          variables['CIRRUS_SIGNING_SECRET_ID'],
        ].sort(),
        name,
      );
      const logGroup = Object.entries(resources).find(
        ([, r]) =>
          r.Type === 'AWS::Logs::LogGroup' && r.Properties['LogGroupName'] === `/aws/lambda/${lambda.FunctionName}`,
      );
      assert.ok(logGroup, `${name}: its log group`);
      for (const action of ['logs:CreateLogStream', 'logs:PutLogEvents'])
        assert.deepEqual(granted(action), [{ 'Fn::GetAtt': [logGroup[0], 'Arn'] }], `${name}: ${action}`);
    }
  });

  it("adds the aws provider's least policy of each function (deploy/aws/iam) to its role only when cloudProvider is aws", async () => {
    const conditionSchema = z.object({ IsAws: z.object({ 'Fn::Equals': z.tuple([z.string(), z.literal('aws')]) }) });
    const isAws = conditionSchema.parse(conditions).IsAws;
    assert.deepEqual(isAws['Fn::Equals'], [params.cloudProvider, 'aws'], 'false for this package');
    const ifSchema = z.object({
      'Fn::If': z.tuple([
        z.literal('IsAws'),
        z.object({ PolicyName: z.string(), PolicyDocument: z.unknown() }),
        z.object({ Ref: z.literal('AWS::NoValue') }),
      ]),
    });
    for (const [name, lambda] of lambdas) {
      const [roleName] = lambda.Role['Fn::GetAtt'];
      const policies = z.array(z.unknown()).parse(resources[roleName]?.Properties['Policies']);
      const conditional = policies
        .filter((p) => ifSchema.safeParse(p).success)
        .map((p) => ifSchema.parse(p)['Fn::If'][1]);
      assert.equal(conditional.length, 1, name);
      const expected: unknown = JSON.parse(await readFile(join(repoRoot, `deploy/aws/iam/${name}.json`), 'utf8'));
      assert.deepEqual(conditional[0]?.PolicyDocument, expected, name);
    }
  });

  it("packages each function's own artifact: bundled, no node_modules, within 5 MB", async () => {
    for (const name of lambdas.keys()) {
      const zip = join(dir, `package/${name}.zip`);
      const names = await unzip(zip, join(dir, 'unzipped', name));
      const folder = `dist/functions/${name}/`;
      assert.deepEqual(
        names.filter((n) => !n.startsWith(folder)),
        [],
        `${name}: only its own folder (no node_modules, no sources, no other function)`,
      );
      for (const file of ['lambda.js', 'index.js', 'package.json'])
        assert.ok(names.includes(`${folder}${file}`), `${name}: ${file}`);
      assert.deepEqual(
        names.filter((n) => n.endsWith('.ts')),
        [],
        `${name}: JavaScript only`,
      );
      const zipped = (await stat(zip)).size;
      assert.ok(zipped <= zipGoalBytes, `${name}: ${zipped} bytes zipped, goal ${zipGoalBytes}`);
    }
  });

  it("leaves the aws provider's modules out of a package for another provider: within 5 MB unpacked, as docs/build.md says", async () => {
    const stated = docsBuildSizes(await readFile(join(repoRoot, 'docs/build.md'), 'utf8'));
    for (const name of lambdas.keys()) {
      const zip = join(dir, `package/${name}.zip`);
      const entries = await zipEntries(zip);
      assert.deepEqual(
        entries.filter((e) => /\/aws-[^/]*\.js$/.test(e.name)).map((e) => e.name),
        [],
        `${name}: packaged for ${params.cloudProvider}`,
      );
      const unpacked = entries.reduce((sum, e) => sum + e.size, 0);
      assert.ok(unpacked <= zipGoalBytes, `${name}: ${String(unpacked)} bytes unpacked, goal ${String(zipGoalBytes)}`);
      // What a package for aws holds: the whole artifact.
      const artifact = await folderBytes(join(dir, `dist/functions/${name}`));
      assert.ok(artifact <= awsGoalBytes, `${name}: ${String(artifact)} bytes with aws, goal ${String(awsGoalBytes)}`);
      const mb = (bytes: number): number => bytes / 1048576;
      const near = (measured: number, said: number, what: string): void => {
        assert.ok(
          Math.abs(measured - said) <= 0.1,
          `docs/build.md says ${String(said)} MB ${what}, measured ${mb(measured * 1048576).toFixed(2)} MB (${name})`,
        );
      };
      near(mb((await stat(zip)).size), stated.zipped, 'zipped');
      near(mb(unpacked), stated.unpacked, 'unpacked');
      near(mb(artifact), stated.awsUnpacked, 'unpacked with aws');
    }
  });

  it('names the handler serverless.yml deploys wherever a handler is named', () => {
    // Lambda's handler setting is `<file>.<export>`: bin/lambda.<export> is what was deployed before ADR 0011.
    const stale = globSync(
      '{README.md,serverless.yml,docs/**/*.md,deploy/**/*.md,app/**/*.ts,bin/*.js,scripts/*.ts,test/layout.test.ts}',
      {
        cwd: repoRoot,
      },
    ).filter((file) => /bin\/lambda\.(?!js\b)|handler: bin\//.test(readFileSync(join(repoRoot, file), 'utf8')));
    assert.deepEqual(stale, []);
  });

  it('stops packaging when a parameter is missing, naming where it is used', async () => {
    const incomplete = Object.fromEntries(Object.entries(params).filter(([name]) => name !== 'cloudProvider'));
    const { status, output } = await runOsls(dir, [
      'package',
      '--package',
      join(dir, 'incomplete'),
      '--stage',
      stage,
      ...paramArgs(incomplete),
    ]);
    assert.notEqual(status, 0);
    assert.match(output, /Cannot resolve variable at "provider\.environment\.CIRRUS_CLOUD_PROVIDER"/);
  });

  const unzipped = new Map<string, Promise<string>>();
  rieSuite(() => ({
    secretPrefix,
    handler: (name) => lambdas.get(name)?.Handler ?? '',
    env: (name) => ({ ...lambdas.get(name)?.Environment.Variables }),
    // The zip unzipped once for the emulator's runs, as Lambda unpacks it into /var/task.
    unzipped: (name) => {
      let root = unzipped.get(name);
      if (root === undefined) {
        const target = join(dir, 'task-root', name);
        root = unzip(join(dir, `package/${name}.zip`), target).then(() => target);
        unzipped.set(name, root);
      }
      return root;
    },
  }));

  describe('the packaged handler, unzipped', { skip: controlPlaneSkip }, () => {
    const name = uniqueName('pkg');
    let extension: SecretsExtension;
    before(async () => {
      const cluster = await testCluster();
      extension = await startSecretsExtension({
        [`${secretPrefix}/kubeconfig/node-init`]: await readFile(cluster.info.adminKubeconfig, 'utf8'),
        [`${secretPrefix}/cloud-config`]: `instances:\n  - { name: ${name}, instanceType: m1.small, zone: rack-b, addresses: [{ type: InternalIP, address: 10.7.0.1 }] }\n`,
        [`${secretPrefix}/signing-secret`]: 'packaged-signing-secret',
      });
      // The variables the template gives node-init, and those Lambda sets in a sandbox.
      Object.assign(process.env, lambdas.get('node-init')?.Environment.Variables, {
        AWS_SESSION_TOKEN: extension.token,
        PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(extension.port),
        CIRRUS_LOG_LEVEL: 'silent',
      });
    });
    after(async () => {
      await extension.close();
    });

    it('initializes a Node from a signed function URL event', async () => {
      const core = (await testCluster()).admin.makeApiClient(CoreV1Api);
      const node = await createNode(core, newNode(name, uninitialized));
      const { handler } = (await import(
        pathToFileURL(join(dir, 'unzipped/node-init/dist/functions/node-init/lambda.js')).href
      )) as { handler?: LambdaHandler };
      assert.ok(handler);
      const result = await handler(
        functionUrlEvent({ ...nodeEvent(node), signWith: 'packaged-signing-secret' }),
        lambdaContext('cirrus-test-node-init'),
      );
      assert.equal(result.statusCode, 202, result.body);
      const initialized = await core.readNode({ name });
      assert.equal(initialized.spec?.providerID, `static://${name}`);
      assert.deepEqual(ownTaints(initialized), []);
    });

    it("starts with an out-of-tree provider in the package, whose 'cirrus-ccm' is the function's own", async () => {
      // A module beside the artifact, with no node_modules: registered in the handler's registry.
      const module = join(dir, 'unzipped/node-lifecycle/acme.ts');
      await writeFile(
        module,
        [
          "import { registerCloudProvider } from 'cirrus-ccm';",
          'const none = () => undefined;',
          "registerCloudProvider('acme', () => ({ providerName: () => 'acme', hasClusterId: () => true,",
          '  instancesV2: () => ({ instanceExists: async () => true, instanceShutdown: async () => false,',
          "    instanceMetadata: async () => { throw new Error('unused'); } }),",
          '  instances: none, zones: none, clusters: none, routes: none, loadBalancer: none }));',
          '',
        ].join('\n'),
      );
      Object.assign(process.env, lambdas.get('node-lifecycle')?.Environment.Variables, {
        CIRRUS_CLOUD_PROVIDER: 'acme',
        CIRRUS_PROVIDER_MODULE: module,
        // Any kubeconfig will do: the probe reads nothing.
        CIRRUS_KUBECONFIG_SECRET_ID: `${secretPrefix}/kubeconfig/node-init`,
      });
      const { handler } = (await import(
        pathToFileURL(join(dir, 'unzipped/node-lifecycle/dist/functions/node-lifecycle/lambda.js')).href
      )) as { handler?: LambdaHandler };
      assert.ok(handler);
      const result = await handler(
        functionUrlEvent({ method: 'GET', path: '/healthz' }),
        lambdaContext('cirrus-test-node-lifecycle'),
      );
      assert.equal(result.statusCode, 200, result.body);
    });
  });
});
