// A proxy in front of the AWS emulator that throttles: the first `times` requests of one action get
// EC2's answer to a caller over its request rate (HTTP 503, RequestLimitExceeded, in EC2's XML
// error shape), the others go through to the emulator. moto never throttles; this is the wire
// answer the SDK and the provider see from AWS when it does.

import { once } from 'node:events';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { callKey } from '../../tools/aws-emulator/counter.ts';

export interface ThrottlingProxy {
  /** `http://127.0.0.1:<port>`: the AWS endpoint to use. */
  readonly endpoint: string;
  /** How many requests were throttled so far. */
  throttled(): number;
  close(): Promise<void>;
}

const throttledBody =
  '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>RequestLimitExceeded</Code>' +
  '<Message>Request limit exceeded.</Message></Error></Errors><RequestID>throttled-by-the-test</RequestID></Response>';

/** Starts the proxy to `target`, throttling the first `times` requests of `action` (an EC2 action, `DescribeInstances`). */
export async function startThrottlingProxy(
  target: string,
  throttle: { readonly action: string; readonly times: number },
): Promise<ThrottlingProxy> {
  const upstream = new URL(target);
  let throttled = 0;
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      const [, action] = callKey(req.headers.authorization, body).split(':');
      if (action === throttle.action && throttled < throttle.times) {
        throttled += 1;
        res.writeHead(503, { 'content-type': 'text/xml;charset=UTF-8' }).end(throttledBody);
        return;
      }
      forward(upstream, req, res, body);
    })();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    throttled: () => throttled,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

function forward(upstream: URL, req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const out = request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  out.on('error', (error) => {
    res.writeHead(502, { 'content-type': 'text/plain' }).end(`throttling proxy: ${error.message}`);
  });
  out.end(body);
}
