// The http provider against endpoints that misbehave on purpose (a node:http(s) server per test):
// each failure names the call and what was wrong, and the unreachable and the slow are RetryErrors
// (503 with Retry-After from the host, so the reconcile is tried again); TLS is verified both ways.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { V1Node } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { createHttpProvider, parseHttpConfig } from '../../providers/http/index.ts';
import { ProtocolClient } from '../../providers/http/client.ts';
import { errorCodes, results } from '../../providers/http/protocol.ts';
import { findCause, InstanceNotFoundError, RetryError } from '../../shared/cloud/errors.ts';
import type { CloudProvider } from '../../shared/cloud/provider.ts';
import { createCa, createClientCert, createServingCert } from '../../tools/control-plane/pki.ts';
import { errorReply } from '../../shared/host/errors.ts';
import { eventFor } from '../../shared/kube/events.ts';
import { silentEndpoint, unacceptingEndpoint } from '../harness/hanging.ts';

type Handler = (request: IncomingMessage, body: string, response: ServerResponse) => void;

const capabilities = { protocol: 'v1', providerName: 'acme', capabilities: ['instancesV2', 'loadBalancer'] };
const node: V1Node = { metadata: { name: 'worker-1' }, spec: { providerID: 'acme://i-1' } };

function json(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

// An endpoint whose answer to every call but capabilities is `handler`'s; records what it got.
async function endpoint(
  handler: Handler,
): Promise<{ server: Server; url: string; seen: { path: string; auth: string; body: string }[] }> {
  const seen: { path: string; auth: string; body: string }[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      seen.push({ path: request.url ?? '', auth: request.headers.authorization ?? '', body });
      if (request.url === '/base/v1/capabilities') json(response, 200, capabilities);
      else handler(request, body, response);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/base`, seen };
}

const context = (config: string, signal = new AbortController().signal): Parameters<typeof createHttpProvider>[0] => ({
  config,
  configPath: 'cloud.yaml',
  signal,
  log: pino({ level: 'silent' }),
  kubeConfig: undefined,
});

function v2(cloud: CloudProvider): NonNullable<ReturnType<CloudProvider['instancesV2']>> {
  return cloud.instancesV2() ?? assert.fail('no instancesV2');
}

describe('docs/http-provider-v1.openapi.yaml', () => {
  it('describes every call of protocol v1 and its error codes', async () => {
    const doc = load(await readFile('docs/http-provider-v1.openapi.yaml', 'utf8')) as {
      paths: Record<string, unknown>;
      components: { schemas: { ErrorAnswer: { properties: { error: { properties: { code: { enum: string[] } } } } } } };
    };
    assert.deepEqual(
      Object.keys(doc.paths).sort(),
      ['/v1/capabilities', ...Object.keys(results).map((c) => `/v1/${c}`)].sort(),
    );
    assert.deepEqual(doc.components.schemas.ErrorAnswer.properties.error.properties.code.enum, [...errorCodes]);
  });
});

describe('the http provider', () => {
  let dir: string;
  const servers: Server[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cirrus-http-'));
  });
  after(async () => {
    for (const s of servers) s.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function provider(
    handler: Handler,
    extra = '',
  ): Promise<{
    cloud: CloudProvider;
    url: string;
    seen: { path: string; auth: string; body: string }[];
    server: Server;
  }> {
    const e = await endpoint(handler);
    servers.push(e.server);
    const cloud = await createHttpProvider(context(`endpoint: ${e.url}\n${extra}`));
    return { cloud, ...e };
  }

  it('asks for the capabilities, then makes each call one POST to /v1/<call> with the bearer token', async () => {
    const token = join(dir, 'token');
    await writeFile(token, 'first\n');
    const { cloud, seen } = await provider((_request, _body, response) => {
      json(response, 200, {
        result: { providerId: 'acme://i-1', nodeAddresses: [{ type: 'InternalIP', address: '10.0.0.1' }] },
      });
    }, `tokenFile: ${token}\n`);
    assert.equal(cloud.providerName(), 'acme');
    assert.equal(cloud.routes(), undefined);
    assert.deepEqual(await v2(cloud).instanceMetadata(node), {
      providerId: 'acme://i-1',
      instanceType: '',
      nodeAddresses: [{ type: 'InternalIP', address: '10.0.0.1' }],
      zone: '',
      region: '',
      additionalLabels: {},
    });
    await writeFile(token, 'rotated\n');
    await v2(cloud).instanceMetadata(node);
    assert.deepEqual(
      seen.map((s) => [s.path, s.auth]),
      [
        ['/base/v1/capabilities', 'Bearer first'],
        ['/base/v1/instanceMetadata', 'Bearer first'],
        ['/base/v1/instanceMetadata', 'Bearer rotated'],
      ],
    );
    assert.deepEqual(JSON.parse(seen[1]?.body ?? ''), { node });
  });

  it('turns the error codes into the contract errors, and an unknown code into an error naming it', async () => {
    const answers = [
      [404, { error: { code: 'InstanceNotFound', message: 'no i-1' } }],
      [503, { error: { code: 'Retry', message: 'busy', retryAfterSeconds: 7 } }],
      [500, { error: { code: 'Weird', message: 'huh' } }],
      [500, { error: { code: 'Failed', message: 'the cloud is on fire' } }],
    ] as const;
    let next = 0;
    const { cloud, url } = await provider((_request, _body, response) => {
      const [status, body] = answers[next++] ?? [500, {}];
      json(response, status, body);
    });
    const notFound = await v2(cloud)
      .instanceMetadata(node)
      .catch((e: unknown) => e);
    assert.ok(findCause(notFound, InstanceNotFoundError), String(notFound));
    const retry = await v2(cloud)
      .instanceExists(node)
      .catch((e: unknown) => e);
    assert.equal(findCause(retry, RetryError)?.retryAfterMs, 7000);
    await assert.rejects(v2(cloud).instanceExists(node), {
      message: `http provider: instanceExists: ${url}/v1/instanceExists answered error code "Weird", which protocol v1 does not define (it defines InstanceNotFound, NotImplemented, ImplementedElsewhere, Retry, Failed): huh`,
    });
    await assert.rejects(v2(cloud).instanceExists(node), /instanceExists: .* failed: the cloud is on fire/);
  });

  it('names the call and what was wrong when the endpoint answers garbage', async () => {
    const answers = ['<html>oops</html>', '{"result": {"providerId": 5, "nodeAddresses": []}}', '{"answer": true}'];
    let next = 0;
    const { cloud, url } = await provider((_request, _body, response) => {
      response.writeHead(200).end(answers[next++]);
    });
    await assert.rejects(v2(cloud).instanceMetadata(node), {
      message: `http provider: instanceMetadata: ${url}/v1/instanceMetadata answered 200 with a body that is not JSON: "<html>oops</html>"`,
    });
    await assert.rejects(v2(cloud).instanceMetadata(node), {
      message: `http provider: instanceMetadata: ${url}/v1/instanceMetadata answered a result that does not follow protocol v1: result.providerId: Invalid input: expected string, received number`,
    });
    await assert.rejects(
      v2(cloud).instanceExists(node),
      /instanceExists: .* answered 200 without "result" \(protocol v1\)/,
    );
  });

  it('is retried when the endpoint is down: a RetryError naming the call, and a 503 with Retry-After from the host', async () => {
    const { cloud, server, url } = await provider(() => assert.fail('not reached'), 'retryAfterSeconds: 3\n');
    server.close();
    await once(server, 'close');
    const error = await (
      cloud.loadBalancer()?.ensureLoadBalancer('k', { metadata: { uid: 'u' } }, []) ?? Promise.resolve()
    ).catch((e: unknown) => e);
    assert.equal(findCause(error, RetryError)?.retryAfterMs, 3000);
    assert.match(
      (error as Error).message,
      new RegExp(
        `^http provider: ensureLoadBalancer: could not reach ${url}/v1/ensureLoadBalancer: .*(ECONNREFUSED|socket hang up).*; retrying in 3 s$`,
      ),
    );
    const reply = errorReply(error);
    assert.deepEqual([reply.status, reply.retryAfterSeconds], [503, 3]);
  });

  it('says so when the endpoint is down at start-up', async () => {
    const { server, url } = await endpoint(() => undefined);
    server.close();
    await once(server, 'close');
    await assert.rejects(createHttpProvider(context(`endpoint: ${url}\n`)), {
      message: new RegExp(
        `^the endpoint ${url} did not say what it supports: http provider: capabilities: could not reach ${url}/v1/capabilities: connect ECONNREFUSED [^;]*$`,
      ),
    });
  });

  it('gives up on a slow endpoint at timeoutSeconds (a RetryError), and at once when the caller aborts', async () => {
    const { cloud } = await provider(() => undefined /* never answers */, 'timeoutSeconds: 0.2\n');
    const started = performance.now();
    const slow = await v2(cloud)
      .instanceExists(node)
      .catch((e: unknown) => e);
    assert.ok(findCause(slow, RetryError), String(slow));
    assert.match((slow as Error).message, /instanceExists: .* did not answer within 0\.2 s \(timeoutSeconds\)/);
    assert.ok(performance.now() - started < 2000);
    const controller = new AbortController();
    const call = v2(cloud).instanceExists(node, controller.signal);
    setTimeout(() => {
      controller.abort(new Error('shutting down'));
    }, 20);
    const cancelled = await call.catch((e: unknown) => e);
    assert.equal(findCause(cancelled, RetryError), undefined);
    assert.match((cancelled as Error).message, /^http provider: instanceExists: cancelled by the caller/);
    assert.match((cancelled as Error).message, /cancelled by the caller \(shutting down\)/);
  });

  it('sends each header of headerFiles from its file, read on every call', async () => {
    const key = join(dir, 'api-key');
    const basic = join(dir, 'basic');
    await writeFile(key, 'k1\n');
    await writeFile(basic, `Basic ${Buffer.from('cirrus:s3cret').toString('base64')}\n`);
    const headers: Record<string, string | undefined>[] = [];
    const { cloud } = await provider((request, _body, response) => {
      headers.push({ key: request.headers['x-api-key'] as string, auth: request.headers.authorization });
      json(response, 200, { result: true });
    }, `headerFiles: { X-Api-Key: ${key}, Authorization: ${basic} }\n`);
    assert.equal(await v2(cloud).instanceExists(node), true);
    await writeFile(key, 'k2');
    assert.equal(await v2(cloud).instanceExists(node), true);
    assert.deepEqual(headers, [
      { key: 'k1', auth: 'Basic Y2lycnVzOnMzY3JldA==' },
      { key: 'k2', auth: 'Basic Y2lycnVzOnMzY3JldA==' },
    ]);
  });

  it('refuses credentials in the endpoint URL (they would be repeated in logs, errors and Events), and a query', () => {
    for (const endpoint of ['https://cirrus:s3cret@provider.example', 'https://token@provider.example/base']) {
      assert.throws(
        () => parseHttpConfig(`endpoint: ${endpoint}\n`, 'cloud.yaml'),
        (error: Error) => {
          assert.match(error.message, /^cloud\.yaml: endpoint: must not carry credentials \(user:password@\)/);
          assert.match(error.message, /tokenFile/);
          assert.match(error.message, /headerFiles/);
          assert.doesNotMatch(error.message, /s3cret|token@/);
          return true;
        },
      );
    }
    assert.throws(() => parseHttpConfig('endpoint: https://provider.example/?api_key=s3cret\n', 'cloud.yaml'), {
      message: /^cloud\.yaml: endpoint: must not have a query \(\?…\)/,
    });
    assert.throws(
      () => parseHttpConfig('endpoint: https://x\ntokenFile: /t\nheaderFiles: { authorization: /a }\n', 'cloud.yaml'),
      {
        message:
          'cloud.yaml: headerFiles.authorization: is set beside tokenFile, which sends Authorization: Bearer; give one',
      },
    );
    assert.throws(() => parseHttpConfig('endpoint: https://x\nheaderFiles: { Content-Type: /a }\n', 'cloud.yaml'), {
      message: /headerFiles\.Content-Type.*is a header cirrus sets itself/,
    });
    assert.throws(() => parseHttpConfig('endpoint: https://x\nheaderFiles: { "a b": /a }\n', 'cloud.yaml'), {
      message: /is not an HTTP header name/,
    });
    assert.throws(
      () => parseHttpConfig('endpoint: http://provider.example\nheaderFiles: { X-Api-Key: /a }\n', 'cloud.yaml'),
      { message: /endpoint: is http:\/\/ to provider\.example, which would send the headerFiles unencrypted/ },
    );
    assert.throws(() => parseHttpConfig('endpoint: https://x\nconnectTimeoutSeconds: 0\n', 'cloud.yaml'), {
      message: /^cloud\.yaml: connectTimeoutSeconds: /,
    });
  });

  it("scrubs a URL's credentials and query out of an endpoint's error text before it reaches a reply or an Event", async () => {
    const leak = 'could not open https://admin:hunter2@db.example/x?token=abc';
    const { cloud } = await provider((_request, _body, response) => {
      json(response, 500, { error: { code: 'Failed', message: leak } });
    });
    const error = await (
      cloud.loadBalancer()?.ensureLoadBalancer('k', { metadata: { uid: 'u' } }, []) ?? Promise.resolve()
    ).catch((e: unknown) => e);
    assert.match((error as Error).message, /hunter2/, "the error itself is the endpoint's text");
    const reply = errorReply(new Error(`failed to ensure load balancer: ${(error as Error).message}`));
    const event = eventFor(
      { kind: 'Service', name: 'web', namespace: 'tenant' },
      { type: 'Warning', reason: 'SyncLoadBalancerFailed', message: (error as Error).message, component: 'c' },
    );
    for (const text of [reply.body.error, event.message ?? '']) {
      assert.doesNotMatch(text, /hunter2|admin|token=abc/);
      assert.match(text, /could not open https:\/\/\[redacted\]@db\.example\/x\?\[redacted\]/);
    }
  });

  it(
    'gives up on an endpoint that never accepts at connectTimeoutSeconds, and on one that never answers at timeoutSeconds',
    { timeout: 20_000 },
    async () => {
      const unaccepting = await unacceptingEndpoint();
      const silent = await silentEndpoint();
      try {
        const config = (url: string): ReturnType<typeof parseHttpConfig> =>
          parseHttpConfig(`endpoint: ${url}\nconnectTimeoutSeconds: 0.3\ntimeoutSeconds: 1\n`, 'cloud.yaml');
        const client = new ProtocolClient(config(unaccepting.url));
        const connect = await client.call('instanceExists', { node }).catch((e: unknown) => e);
        client.close();
        assert.ok(findCause(connect, RetryError), String(connect));
        assert.equal(
          (connect as Error).message,
          `http provider: instanceExists: could not connect to ${unaccepting.url}/v1/instanceExists within 0.3 s (connectTimeoutSeconds); retrying in 5 s`,
        );
        await assert.rejects(
          createHttpProvider(context(`endpoint: ${unaccepting.url}\nconnectTimeoutSeconds: 0.3\n`)),
          {
            message: `the endpoint ${unaccepting.url}/ did not say what it supports: http provider: capabilities: could not connect to ${unaccepting.url}/v1/capabilities within 0.3 s (connectTimeoutSeconds)`,
          },
        );
        const slow = new ProtocolClient(config(silent.url));
        const request = await slow.call('instanceExists', { node }).catch((e: unknown) => e);
        slow.close();
        assert.ok(findCause(request, RetryError), String(request));
        assert.equal(
          (request as Error).message,
          `http provider: instanceExists: ${silent.url}/v1/instanceExists did not answer within 1 s (timeoutSeconds); retrying in 5 s`,
        );
      } finally {
        await unaccepting.close();
        await silent.close();
      }
    },
  );

  it('refuses a cloud-config it cannot use, naming the field', async () => {
    await assert.rejects(createHttpProvider(context('endpoint: ftp://x\n')), {
      message: 'cloud.yaml: endpoint: must be an http:// or https:// URL',
    });
    await assert.rejects(
      createHttpProvider(context('endpoint: http://provider.example\ntokenFile: /t\n')),
      /endpoint: is http:\/\/ to provider\.example, which would send the bearer token \(tokenFile\) unencrypted/,
    );
    await assert.rejects(createHttpProvider(context('endpoint: https://x\ntls: { certFile: /c }\n')), {
      message: 'cloud.yaml: tls.keyFile: is required with the other: a client certificate needs its key',
    });
    await assert.rejects(
      createHttpProvider(context('endpoint: https://x\ntls: { caFile: /nonexistent/ca.crt }\n')),
      /cloud\.yaml: tls\.caFile: could not read \/nonexistent\/ca\.crt/,
    );
    await assert.rejects(
      createHttpProvider(context('endpoint: https://x\nextra: 1\n')),
      /cloud\.yaml: : Unrecognized key: "extra"|cloud\.yaml: Unrecognized key/,
    );
  });

  describe('over TLS with a client certificate', () => {
    let url: string;
    let files: { ca: string; cert: string; key: string };
    let server: Server;
    before(async () => {
      const pki = join(dir, 'pki');
      await writeFile(join(dir, '.keep'), '');
      await import('node:fs/promises').then((fs) => fs.mkdir(pki));
      const ca = await createCa(pki);
      const serving = await createServingCert(ca, pki);
      const client = await createClientCert(ca, pki, 'cirrus', { user: 'cirrus' });
      files = { ca: ca.cert, cert: client.cert, key: client.key };
      server = createTlsServer(
        {
          cert: await readFile(serving.cert),
          key: await readFile(serving.key),
          ca: await readFile(ca.cert),
          requestCert: true,
          rejectUnauthorized: true,
        },
        (_request, response) => {
          json(response, 200, capabilities);
        },
      );
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => {
      server.close();
    });

    it('verifies the endpoint with caFile and shows it the client certificate', async () => {
      const cloud = await createHttpProvider(
        context(`endpoint: ${url}\ntls: { caFile: ${files.ca}, certFile: ${files.cert}, keyFile: ${files.key} }\n`),
      );
      assert.equal(cloud.providerName(), 'acme');
    });

    it('fails without the CA (the endpoint is not trusted) and without the client certificate', async () => {
      await assert.rejects(
        createHttpProvider(context(`endpoint: ${url}\n`)),
        /capabilities: request to .* failed: .*(self-signed|unable to verify|certificate)/i,
      );
      await assert.rejects(
        createHttpProvider(context(`endpoint: ${url}\ntls: { caFile: ${files.ca} }\n`)),
        /capabilities: /,
      );
    });
  });
});
