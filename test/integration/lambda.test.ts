// The AWS Lambda handler (app/lambda) against the real API server: function URL events reach
// the same app `cirrus serve` runs, signed by the relay's secret; the kubeconfig, cloud-config and
// signing secret come from the secrets extension; a configuration that cannot work stops with an
// error naming the variable, and the next event tries again.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { lambdaHandler, type HttpEvent, type HttpResult, type LambdaHandler } from '../../app/lambda/index.ts';
import { extensionSecretStore } from '../../app/lambda/secrets.ts';
import { createNode, newNode, ownTaints, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import {
  functionUrlEvent,
  lambdaContext,
  nodeEvent,
  startSecretsExtension,
  type HttpRequest,
  type SecretsExtension,
} from '../harness/lambda.ts';

const signing = 'lambda-test-signing-secret';

async function invoke(handler: LambdaHandler, request: HttpRequest): Promise<HttpResult> {
  return handler(functionUrlEvent(request), lambdaContext(`cirrus-test-${handler.functionName}`));
}

function without(env: NodeJS.ProcessEnv, name: string): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([key]) => key !== name));
}

describe('the AWS Lambda handler', { skip: controlPlaneSkip }, () => {
  const names = [uniqueName('lam'), uniqueName('lam'), uniqueName('lam'), uniqueName('lam')];
  const stop = new AbortController();
  let core: CoreV1Api;
  let extension: SecretsExtension;
  let env: NodeJS.ProcessEnv;
  let nodeInit: LambdaHandler;

  before(async () => {
    const cluster = await testCluster();
    core = cluster.admin.makeApiClient(CoreV1Api);
    const machines = names.map(
      (name, i) =>
        `  - { name: ${name}, instanceType: m1.small, zone: rack-a, addresses: [{ type: InternalIP, address: 10.8.0.${i + 1} }] }`,
    );
    extension = await startSecretsExtension({
      'cirrus/kubeconfig': await readFile(cluster.info.adminKubeconfig, 'utf8'),
      'cirrus/cloud-config': `instances:\n${machines.join('\n')}\n`,
      'cirrus/signing': `${signing}\n`,
    });
    env = {
      AWS_SESSION_TOKEN: extension.token,
      PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(extension.port),
      CIRRUS_CLOUD_PROVIDER: 'static',
      CIRRUS_KUBECONFIG_SECRET_ID: 'cirrus/kubeconfig',
      CIRRUS_CLOUD_CONFIG_SECRET_ID: 'cirrus/cloud-config',
      CIRRUS_SIGNING_SECRET_ID: 'cirrus/signing',
      CIRRUS_LOG_LEVEL: 'silent',
    };
    nodeInit = lambdaHandler('node-init', { env, signal: stop.signal });
  });
  after(async () => {
    stop.abort();
    await extension.close();
  });

  it('initializes a Node from a signed CloudEvent in a function URL event, reading each secret once', async () => {
    const name = names[0] ?? '';
    const node = await createNode(core, newNode(name, uninitialized));
    const result = await invoke(nodeInit, { ...nodeEvent(node), signWith: signing });
    assert.equal(result.statusCode, 202, result.body);
    const initialized = await core.readNode({ name });
    assert.equal(initialized.spec?.providerID, `static://${name}`);
    assert.deepEqual(ownTaints(initialized), []);
    assert.deepEqual([...extension.requests].sort(), ['cirrus/cloud-config', 'cirrus/kubeconfig', 'cirrus/signing']);

    const again = await invoke(nodeInit, {
      ...nodeEvent(initialized, 'dev.knative.apiserver.resource.update'),
      signWith: signing,
    });
    assert.equal(again.statusCode, 202, again.body);
    assert.equal(extension.requests.length, 3, 'the sandbox keeps what it read');
  });

  it('takes a base64-encoded body (the signature covers the decoded bytes)', async () => {
    const name = names[1] ?? '';
    const node = await createNode(core, newNode(name, uninitialized));
    const result = await invoke(nodeInit, { ...nodeEvent(node), signWith: signing, base64: true });
    assert.equal(result.statusCode, 202, result.body);
    assert.equal((await core.readNode({ name })).spec?.providerID, `static://${name}`);
  });

  it('answers 401 to an unsigned or wrongly signed event, and changes nothing', async () => {
    const name = names[2] ?? '';
    const node = await createNode(core, newNode(name, uninitialized));
    const unsigned = await invoke(nodeInit, nodeEvent(node));
    assert.equal(unsigned.statusCode, 401, unsigned.body);
    const forged = await invoke(nodeInit, { ...nodeEvent(node), signWith: 'not-the-secret' });
    assert.equal(forged.statusCode, 401, forged.body);
    assert.equal((await core.readNode({ name })).spec?.providerID, undefined);
  });

  it('routes the URL path and query: probes, and a signed manual reconcile with a dry run', async () => {
    const health = await invoke(nodeInit, { method: 'GET', path: '/healthz' });
    assert.equal(health.statusCode, 200, health.body);
    const name = names[3] ?? '';
    await createNode(core, newNode(name, uninitialized));
    const dry = await invoke(nodeInit, {
      path: '/reconcile?dryRun=true',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
      signWith: signing,
    });
    assert.equal(dry.statusCode, 200, dry.body);
    const report = JSON.parse(dry.body) as { dryRun: boolean; objects: { result: string }[] };
    assert.equal(report.dryRun, true);
    assert.equal((await core.readNode({ name })).spec?.providerID, undefined, 'a dry run changes nothing');
  });

  it('answers 401 to a query outside the signature: signed ?dryRun=true, sent ?dryRun=false', async () => {
    const name = names[3] ?? '';
    const replayed = await invoke(nodeInit, {
      path: '/reconcile?dryRun=false',
      signedPath: '/reconcile?dryRun=true',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
      signWith: signing,
    });
    assert.equal(replayed.statusCode, 401, replayed.body);
    assert.equal((await core.readNode({ name })).spec?.providerID, undefined, 'nothing was written');
  });

  it('reads the query the caller sent: a misspelt or repeated dryRun is a 400 naming it', async () => {
    const name = names[3] ?? '';
    for (const [query, error] of [
      ['dryrun=true', /unknown query parameter "dryrun"/],
      ['dryRun=true&dryRun=false', /"dryRun" is given 2 times/],
      ['dryRun[]=true', /unknown query parameter "dryRun\[\]"/],
    ] as const) {
      const result = await invoke(nodeInit, {
        path: `/reconcile?${query}`,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
        signWith: signing,
      });
      assert.equal(result.statusCode, 400, `${query}: ${result.body}`);
      assert.match((JSON.parse(result.body) as { error: string }).error, error);
    }
    assert.equal((await core.readNode({ name })).spec?.providerID, undefined, 'nothing was written');
  });

  it('hands the app the query as the caller sent it, not as rebuilt from parsed parameters', async () => {
    // A function URL joins a repeated name's values with commas, and the adapter would split a
    // value at its commas again: the signature (over `dryRun=true,false`) would then not match.
    const result = await invoke(nodeInit, {
      path: '/reconcile?dryRun=true,false',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: names[3] ?? '' }),
      signWith: signing,
    });
    assert.equal(result.statusCode, 400, result.body);
    assert.equal(
      (JSON.parse(result.body) as { error: string }).error,
      'invalid query: query parameter "dryRun" must be true or false, not "true,false"',
    );
  });

  it('keeps /metrics from the public function URL without a signature; /healthz and /readyz stay open', async () => {
    for (const path of ['/healthz', '/readyz'])
      assert.equal((await invoke(nodeInit, { method: 'GET', path })).statusCode, 200, path);
    const open = await invoke(nodeInit, { method: 'GET', path: '/metrics' });
    assert.equal(open.statusCode, 401, open.body);
    assert.doesNotMatch(open.body, /cirrus_reconcile/);
    const signed = await invoke(nodeInit, { method: 'GET', path: '/metrics', signWith: signing });
    assert.equal(signed.statusCode, 200, signed.body);
    assert.match(signed.body, /cirrus_reconcile_requests_total/);
  });

  it('refuses to start without a signing secret or a kubeconfig, naming the variable', async () => {
    await assert.rejects(
      invoke(lambdaHandler('node-init', { env: without(env, 'CIRRUS_SIGNING_SECRET_ID'), signal: stop.signal }), {
        method: 'GET',
        path: '/healthz',
      }),
      /CIRRUS_SIGNING_SECRET_ID \(or CIRRUS_SIGNING_SECRET_FILE\) is required on AWS Lambda/,
    );
    await assert.rejects(
      invoke(lambdaHandler('node-init', { env: without(env, 'CIRRUS_KUBECONFIG_SECRET_ID'), signal: stop.signal }), {
        method: 'GET',
        path: '/healthz',
      }),
      /CIRRUS_KUBECONFIG_SECRET_ID \(or CIRRUS_KUBECONFIG\) is required/,
    );
    await assert.rejects(
      invoke(
        lambdaHandler('node-init', { env: { ...env, CIRRUS_KUBECONFIG: '/etc/kubeconfig' }, signal: stop.signal }),
        { method: 'GET', path: '/healthz' },
      ),
      /set CIRRUS_KUBECONFIG_SECRET_ID or CIRRUS_KUBECONFIG, not both/,
    );
    assert.throws(() => lambdaHandler('node-unknown'), /unknown function 'node-unknown'/);
  });

  it('names a secret it cannot read, and tries again at the next event', async () => {
    const handler = lambdaHandler('node-lifecycle', {
      env: { ...env, CIRRUS_CLOUD_CONFIG_SECRET_ID: 'cirrus/later' },
      signal: stop.signal,
    });
    await assert.rejects(
      invoke(handler, { method: 'GET', path: '/healthz' }),
      /CIRRUS_CLOUD_CONFIG_SECRET_ID: cannot read secret 'cirrus\/later': the secrets extension at localhost:\d+ answered 404/,
    );
    extension.secrets.set('cirrus/later', extension.secrets.get('cirrus/cloud-config') ?? '');
    const health = await invoke(handler, { method: 'GET', path: '/healthz' });
    assert.equal(health.statusCode, 200, health.body);
  });
});

describe('a cold sandbox and a stranger (a function URL is AuthType NONE)', () => {
  // No cluster needed: the kubeconfig names a server nothing listens on, which building the app
  // does not reach. Whether the app was built shows in the secrets read (three, once).
  const kubeconfig = [
    'apiVersion: v1',
    'kind: Config',
    "clusters: [{ name: c, cluster: { server: 'https://127.0.0.1:9' } }]",
    'users: [{ name: u, user: { token: t } }]',
    'contexts: [{ name: x, context: { cluster: c, user: u } }]',
    'current-context: x',
  ].join('\n');
  const stop = new AbortController();
  let extension: SecretsExtension;
  let handler: LambdaHandler;
  before(async () => {
    extension = await startSecretsExtension({ k: kubeconfig, c: 'instances: []\n', s: `${signing}\n` });
    const env = {
      AWS_SESSION_TOKEN: extension.token,
      PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(extension.port),
      CIRRUS_CLOUD_PROVIDER: 'static',
      CIRRUS_KUBECONFIG_SECRET_ID: 'k',
      CIRRUS_CLOUD_CONFIG_SECRET_ID: 'c',
      CIRRUS_SIGNING_SECRET_ID: 's',
      CIRRUS_LOG_LEVEL: 'silent',
    };
    handler = lambdaHandler('node-init', { env, signal: stop.signal });
  });
  after(async () => {
    stop.abort();
    await extension.close();
  });

  it('refuses a request without a signature header 401 before reading a secret or building the app', async () => {
    const missing = { error: 'unauthorized: missing x-cirrus-signature header', code: 'CIRRUS_ERR_SIGNATURE_MISSING' };
    const event = { method: 'POST', path: '/', headers: { 'content-type': 'application/json' }, body: '{}' };
    const rest = { ...functionUrlEvent(event), version: '1.0', path: '/reconcile', httpMethod: 'POST' };
    for (const request of [
      functionUrlEvent(event),
      functionUrlEvent({ ...event, path: '/reconcile?dryRun=true' }),
      functionUrlEvent({ method: 'GET', path: '/metrics' }),
      functionUrlEvent({ method: 'GET', path: '/healthz/../metrics' }),
      rest as unknown as HttpEvent,
    ]) {
      const result = await handler(request, lambdaContext('cirrus-test-node-init'));
      assert.equal(result.statusCode, 401, result.body);
      assert.deepEqual(JSON.parse(result.body), missing);
    }
    assert.equal(extension.requests.length, 0, 'no secret read: the app was not built');
  });

  it('hands a request with a signature header, and the probes, to the app, which checks the signature', async () => {
    const forged = await invoke(handler, { method: 'POST', path: '/', body: '{}', signWith: 'not-the-secret' });
    assert.equal(forged.statusCode, 401, forged.body);
    assert.equal((JSON.parse(forged.body) as { code: string }).code, 'CIRRUS_ERR_SIGNATURE_INVALID');
    assert.equal(extension.requests.length, 3, 'the app was built: the kubeconfig, cloud-config and secret read');
    const health = await invoke(handler, { method: 'GET', path: '/healthz' });
    assert.equal(health.statusCode, 200, health.body);
    const metrics = await invoke(handler, { method: 'GET', path: '/metrics', signWith: signing });
    assert.equal(metrics.statusCode, 200, metrics.body);
  });
});

describe('the secrets extension client', () => {
  let extension: SecretsExtension;
  before(async () => {
    extension = await startSecretsExtension({ 'a/secret': 'value' });
  });
  after(async () => {
    await extension.close();
  });
  const store = (token: string | undefined): ReturnType<typeof extensionSecretStore> =>
    extensionSecretStore({
      PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(extension.port),
      ...(token === undefined ? {} : { AWS_SESSION_TOKEN: token }),
    });

  it('waits out the extension\'s start ("not ready") and reads the secret', async () => {
    extension.notReady = 2;
    const before = extension.requests.length;
    assert.equal(await store(extension.token).read('a/secret'), 'value');
    assert.equal(extension.requests.length - before, 3);
  });

  it('does not ask again for a secret that does not exist', async () => {
    const before = extension.requests.length;
    await assert.rejects(
      store(extension.token).read('b/missing'),
      /answered 404 .*can't find the specified secret b\/missing/,
    );
    assert.equal(extension.requests.length - before, 1);
  });

  it("needs the sandbox's session token", async () => {
    await assert.rejects(store(undefined).read('a/secret'), /AWS_SESSION_TOKEN is not set/);
  });
});

describe('bin/lambda.js', () => {
  it('exports one handler per function, under the names serverless.yml uses', async () => {
    const entry = (await import(new URL('../../bin/lambda.js', import.meta.url).href)) as Record<string, LambdaHandler>;
    assert.deepEqual(
      Object.entries(entry)
        .map(([name, handler]) => [name, handler.functionName])
        .sort(),
      [
        ['nodeInit', 'node-init'],
        ['nodeLifecycle', 'node-lifecycle'],
        ['routes', 'routes'],
        ['serviceLb', 'service-lb'],
      ],
    );
  });
});
