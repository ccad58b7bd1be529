// A local stand-in for a Lambda function URL in front of a function under the emulator (./rie.ts):
// it turns each HTTP request into the function URL event (payload format 2.0), invokes the
// function, and answers with the response the function returned; a function error (or a result
// that is no HTTP response) becomes 502, as a function URL answers. Invokes are serialised by the
// emulator's harness (the emulator panics on a second concurrent invoke), as one sandbox takes one
// request at a time.

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LambdaFunctionURLEvent } from 'aws-lambda';
import type { Rie } from './rie.ts';

/** A function URL on localhost. */
export interface FunctionUrlFront {
  readonly url: string;
  /** Requests answered, and with which status. */
  readonly answered: number[];
  close(): Promise<void>;
}

// The event a function URL builds from `request`: headers in lower case, a repeated one joined by
// commas, the body as text (base64 when it is not UTF-8 text).
function eventOf(request: IncomingMessage, body: Buffer): LambdaFunctionURLEvent {
  const [rawPath = '/', rawQueryString = ''] = (request.url ?? '/').split(/\?(.*)/s);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headersDistinct))
    if (value !== undefined) headers[name] = value.join(',');
  const text = body.toString('utf8');
  const binary = !Buffer.from(text, 'utf8').equals(body);
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString,
    headers,
    ...(rawQueryString === ''
      ? {}
      : { queryStringParameters: Object.fromEntries(new URLSearchParams(rawQueryString)) }),
    requestContext: requestContextOf(request, rawPath, headers),
    ...(body.length === 0 ? {} : { body: binary ? body.toString('base64') : text }),
    isBase64Encoded: binary,
  };
}

function requestContextOf(
  request: IncomingMessage,
  path: string,
  headers: Record<string, string>,
): LambdaFunctionURLEvent['requestContext'] {
  const now = new Date();
  return {
    accountId: 'anonymous',
    apiId: 'local',
    domainName: headers['host'] ?? 'local',
    domainPrefix: 'local',
    http: {
      method: request.method ?? 'GET',
      path,
      protocol: 'HTTP/1.1',
      sourceIp: request.socket.remoteAddress ?? '127.0.0.1',
      userAgent: headers['user-agent'] ?? '',
    },
    requestId: randomUUID(),
    routeKey: '$default',
    stage: '$default',
    time: now.toUTCString(),
    timeEpoch: now.getTime(),
  };
}

interface HttpResult {
  statusCode?: unknown;
  headers?: Record<string, string>;
  body?: string;
  isBase64Encoded?: boolean;
  errorType?: unknown;
}

/** Serves `rie`'s function at a function URL of its own on 127.0.0.1. */
export async function startFront(rie: Rie): Promise<FunctionUrlFront> {
  const answered: number[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const reply = (status: number, headers: Record<string, string>, body: Buffer | string): void => {
        answered.push(status);
        response.writeHead(status, headers).end(body);
      };
      rie
        .invoke(eventOf(request, Buffer.concat(chunks)))
        .then(({ status, body }) => {
          const result = JSON.parse(body) as HttpResult | null;
          if (
            status !== 200 ||
            result === null ||
            result.errorType !== undefined ||
            typeof result.statusCode !== 'number'
          ) {
            reply(502, { 'content-type': 'application/json' }, '{"Message":"Internal Server Error"}');
            return;
          }
          const payload = result.body ?? '';
          reply(
            result.statusCode,
            result.headers ?? {},
            result.isBase64Encoded === true ? Buffer.from(payload, 'base64') : payload,
          );
        })
        .catch(() => {
          reply(502, { 'content-type': 'application/json' }, '{"Message":"Internal Server Error"}');
        });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    answered,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
