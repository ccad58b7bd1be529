// What AWS Lambda gives a handler, for the Lambda tests: function URL events (payload format 2.0),
// an invocation context, and the AWS Parameters and Secrets Lambda Extension's local endpoint.

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1Node } from '@kubernetes/client-node';
import type { Context, LambdaFunctionURLEvent } from 'aws-lambda';
import { signRequest } from '../../shared/wire/signing.ts';

/** A request as the relay would send it. */
export interface HttpRequest {
  readonly method?: string;
  /** Path and query, e.g. `/reconcile?dryRun=true`. */
  readonly path?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /** Send the body base64-encoded, as a function URL does for content it does not take for text. */
  readonly base64?: boolean;
  /** Sign with this secret (X-Cirrus-Signature), as the relay does. */
  readonly signWith?: string;
  /** Sign for this path and query instead of `path` (a request changed after signing). */
  readonly signedPath?: string;
}

/** A binary-mode CloudEvent about `node`, as the relay sends it. */
export function nodeEvent(node: V1Node, type = 'dev.knative.apiserver.resource.add'): HttpRequest {
  const name = node.metadata?.name ?? '';
  return {
    headers: {
      'content-type': 'application/json',
      'ce-specversion': '1.0',
      'ce-id': `${name}-1`,
      'ce-source': 'https://kubernetes.default.svc',
      'ce-type': type,
      'ce-subject': `/apis/v1/namespaces//nodes/${name}`,
      'ce-kind': 'Node',
      'ce-name': name,
      'ce-apiversion': 'v1',
    },
    body: JSON.stringify(node),
  };
}

/** The event a function URL hands the function for `request`. */
export function functionUrlEvent(request: HttpRequest): LambdaFunctionURLEvent {
  const method = request.method ?? 'POST';
  const [rawPath = '/', rawQueryString = ''] = (request.path ?? '/').split('?');
  const headers: Record<string, string> = {
    host: 'abcdefgh.lambda-url.eu-west-1.on.aws',
    'user-agent': 'cirrus-relay',
    ...request.headers,
  };
  const body = request.body;
  if (request.signWith !== undefined) headers['x-cirrus-signature'] = signature(request.signWith, request, headers);
  const query = queryStringParameters(rawQueryString);
  const now = new Date();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString,
    headers,
    ...(rawQueryString === '' ? {} : { queryStringParameters: Object.fromEntries(query) }),
    requestContext: {
      accountId: 'anonymous',
      apiId: 'abcdefgh',
      domainName: 'abcdefgh.lambda-url.eu-west-1.on.aws',
      domainPrefix: 'abcdefgh',
      http: { method, path: rawPath, protocol: 'HTTP/1.1', sourceIp: '198.51.100.7', userAgent: 'cirrus-relay' },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(body === undefined ? {} : { body: request.base64 === true ? Buffer.from(body).toString('base64') : body }),
    isBase64Encoded: request.base64 === true,
  };
}

// The query as a function URL gives it to the handler: decoded, a repeated name's values joined by commas.
function queryStringParameters(rawQueryString: string): Map<string, string> {
  const query = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(rawQueryString)) {
    const before = query.get(name);
    query.set(name, before === undefined ? value : `${before},${value}`);
  }
  return query;
}

// X-Cirrus-Signature for `request`, as the relay signs: for its method, path and query (or `signedPath`).
function signature(secret: string, request: HttpRequest, headers: Record<string, string>): string {
  const url = request.signedPath ?? request.path ?? '/';
  return signRequest(secret, { method: request.method ?? 'POST', url, headers, body: request.body ?? '' });
}

/** An invocation context of function `name`. */
export function lambdaContext(name: string): Context {
  // Without done/fail/succeed: deprecated, and handlers that return promises never call them.
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: name,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:eu-west-1:123456789012:function:${name}`,
    memoryLimitInMB: '1024',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/${name}`,
    logStreamName: '2026/11/23/[$LATEST]0123456789abcdef',
    getRemainingTimeInMillis: () => 300_000,
  } as Context;
}

/** A stand-in for the secrets extension on localhost: GET /secretsmanager/get?secretId=… */
export interface SecretsExtension {
  readonly port: number;
  /** The session token callers must send (AWS_SESSION_TOKEN in the sandbox). */
  readonly token: string;
  readonly secrets: Map<string, string>;
  /** Secret IDs asked for, in order. */
  readonly requests: string[];
  /** Answer this many more requests "not ready" (400), as the extension does just after start. */
  notReady: number;
  close(): Promise<void>;
}

/** Starts a secrets extension serving `secrets` (ID → value), on `port` and with `token` when given. */
export async function startSecretsExtension(
  secrets: Record<string, string>,
  options: { readonly port?: number; readonly token?: string } = {},
): Promise<SecretsExtension> {
  const extension = {
    token: options.token ?? `session-${randomUUID()}`,
    secrets: new Map(Object.entries(secrets)),
    requests: [] as string[],
    notReady: 0,
  };
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    const id = url.searchParams.get('secretId') ?? '';
    extension.requests.push(id);
    const answer = (status: number, body: string): void => {
      response.writeHead(status, { 'content-type': 'application/json' }).end(body);
    };
    if (request.headers['x-aws-parameters-secrets-token'] !== extension.token) {
      answer(401, '{"message":"missing or wrong token"}');
      return;
    }
    if (url.pathname !== '/secretsmanager/get') {
      answer(404, '{"message":"no such path"}');
      return;
    }
    if (extension.notReady > 0) {
      extension.notReady -= 1;
      answer(400, 'not ready to serve traffic, please wait');
      return;
    }
    const value = extension.secrets.get(id);
    if (value === undefined) {
      answer(404, `{"message":"Secrets Manager can't find the specified secret ${id}"}`);
      return;
    }
    answer(
      200,
      JSON.stringify({
        ARN: id,
        Name: id,
        SecretString: value,
        VersionId: randomUUID(),
        VersionStages: ['AWSCURRENT'],
      }),
    );
  });
  // Dual-stack: the extension's address is `localhost`, whichever family that resolves to.
  server.listen(options.port ?? 0);
  await once(server, 'listening');
  return Object.assign(extension, {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      server.close();
      await once(server, 'close');
    },
  });
}
