// A counting proxy in front of the emulator: every AWS API call that passes is counted by service
// and operation (`ec2:DescribeInstances`, `elasticloadbalancing:CreateTargetGroup`), with its
// outcome. What the cloud saw, whatever the client did to get there (retries included), so the
// bench and the tests can hold a provider to "one DescribeInstances per node" without
// instrumenting it. Point the SDK at `endpoint` instead of the emulator's.
//
// EC2 and ELBv2 speak the AWS query protocol: the operation is the form body's `Action`, the
// service the SigV4 credential scope's fourth part.

import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';

/** Calls by `<service>:<Operation>` (and `<service>:<Operation>:error` for answers >= 400). */
export type CallCounts = Record<string, number>;

export interface CallCounter {
  /** `http://127.0.0.1:<port>`: use it as the AWS endpoint. */
  readonly endpoint: string;
  /** A copy of the counts so far. */
  counts(): CallCounts;
  close(): Promise<void>;
}

/** Starts a proxy on a free loopback port forwarding to `target` (the emulator's endpoint). */
export async function startCallCounter(target: string): Promise<CallCounter> {
  const upstream = new URL(target);
  const counts: CallCounts = {};
  const server = createServer((req, res) => {
    void forward(upstream, req, res, counts);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    counts: () => ({ ...counts }),
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

async function forward(upstream: URL, req: IncomingMessage, res: ServerResponse, counts: CallCounts): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  const key = callKey(req.headers.authorization, body);
  const out = request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      const status = answer.statusCode ?? 502;
      counts[key] = (counts[key] ?? 0) + 1;
      if (status >= 400) counts[`${key}:error`] = (counts[`${key}:error`] ?? 0) + 1;
      res.writeHead(status, answer.headers);
      answer.pipe(res);
    },
  );
  out.on('error', (error) => {
    res.writeHead(502, { 'content-type': 'text/plain' }).end(`call counter: ${error.message}`);
  });
  out.end(body);
}

/** `<service>:<Action>` of a query-protocol request; `unknown` parts when it is not one. */
export function callKey(authorization: string | undefined, body: Buffer): string {
  const service = /Credential=[^/]+\/[^/]+\/[^/]+\/([^/]+)\//.exec(authorization ?? '')?.[1] ?? 'unknown';
  const action = new URLSearchParams(body.toString('utf8')).get('Action') ?? 'unknown';
  return `${service}:${action}`;
}

/** The difference of two snapshots (what happened in between). */
export function callsBetween(after: CallCounts, before: CallCounts): CallCounts {
  const delta: CallCounts = {};
  for (const [key, n] of Object.entries(after)) {
    const d = n - (before[key] ?? 0);
    if (d > 0) delta[key] = d;
  }
  return delta;
}

/** Whether an operation changes something (not Describe*, Get*, List*). */
export function isMutating(operation: string): boolean {
  return !/^(Describe|Get|List)/.test(operation);
}

/** The sum of calls (errors not counted twice) that `wanted(service, operation)` selects. */
export function sumCalls(counts: CallCounts, wanted: (service: string, operation: string) => boolean): number {
  let sum = 0;
  for (const [key, n] of Object.entries(counts)) {
    const [service = '', operation = '', error] = key.split(':');
    if (error === undefined && wanted(service, operation)) sum += n;
  }
  return sum;
}
