// Raw HTTP/1.1 over a socket, for tests that must see what fetch hides: whether a server answers a
// request before its body has been sent, and whether it closes the connection after.

import { connect } from 'node:net';

/** A request line and headers; the body is announced by Content-Length and never sent. */
export interface HeadersOnly {
  readonly method?: string;
  /** Path and query. */
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** The Content-Length announced. */
  readonly contentLength: number;
}

/** What the server answered. */
export interface EarlyReply {
  readonly status: number;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** Whether the server closed the connection after answering (within half a second). */
  readonly closedByServer: boolean;
}

/**
 * Sends the request line and headers of `request` to 127.0.0.1:`port`, announcing a body that it
 * never sends, and resolves with the reply. Rejects when no reply comes within `timeoutMs`: the
 * server is waiting for the body, that is, it would have read it before answering.
 */
export async function answerWithoutBody(port: number, request: HeadersOnly, timeoutMs = 3000): Promise<EarlyReply> {
  const socket = connect(port, '127.0.0.1');
  const lines = [
    `${request.method ?? 'POST'} ${request.path} HTTP/1.1`,
    'host: 127.0.0.1',
    ...Object.entries(request.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
    `content-length: ${request.contentLength}`,
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  let received = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (received += chunk));
  const ended = new Promise<void>((resolve) =>
    socket.once('close', () => {
      resolve();
    }),
  );
  try {
    const deadline = Date.now() + timeoutMs;
    let reply: Omit<EarlyReply, 'closedByServer'> | undefined;
    while ((reply = parse(received)) === undefined) {
      if (Date.now() > deadline)
        throw new Error(`no reply within ${timeoutMs} ms without the body: the server waits for it`);
      await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 10))]);
      if (socket.destroyed && parse(received) === undefined) throw new Error(`the connection closed: ${received}`);
    }
    const closedByServer = await Promise.race([
      ended.then(() => true),
      new Promise<boolean>((resolve) =>
        setTimeout(() => {
          resolve(false);
        }, 500),
      ),
    ]);
    return { ...reply, closedByServer };
  } finally {
    socket.destroy();
  }
}

// A whole response (status line, headers, Content-Length body) in `text`, or undefined.
function parse(text: string): Omit<EarlyReply, 'closedByServer'> | undefined {
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const [status = '', ...fields] = text.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(
    fields.map((field) => {
      const colon = field.indexOf(':');
      return [field.slice(0, colon).trim().toLowerCase(), field.slice(colon + 1).trim()];
    }),
  );
  const body = text.slice(end + 4);
  if (body.length < Number(headers['content-length'] ?? 0)) return undefined;
  return { status: Number(status.split(' ')[1]), headers, body };
}
