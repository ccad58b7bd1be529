// Endpoints that hang, for the tests of the cloud calls' timeouts: one that accepts connections
// and never answers (a request timeout), and one that never accepts them (a connect timeout).
//
// Never accepting: a listening socket whose accept queue is full. Linux drops a SYN to a listener
// whose queue is full, so the client's connect waits as it would for a blackholed address. Node
// accepts every connection as soon as it can, so the listener lives in a child process whose event
// loop is blocked (Atomics.wait) right after it listens: the kernel queues `backlog + 1`
// connections, which this process opens first; every connection after them hangs.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { createInterface } from 'node:readline';

/** A local endpoint that hangs; `url` is `http://127.0.0.1:<port>`. */
export interface Hanging {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** Accepts connections, reads requests, never answers. */
export async function silentEndpoint(): Promise<Hanging> {
  const sockets = new Set<Socket>();
  const server: Server = createServer(() => {
    /* never answers */
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

const BACKLOG = 1;

// The child: listen with the smallest backlog, print the port, then block the event loop for good.
const child = `
const net = require('node:net');
const server = net.createServer();
server.listen({ port: 0, host: '127.0.0.1', backlog: ${BACKLOG} }, () => {
  process.stdout.write(server.address().port + '\\n', () => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  });
});
`;

/** Never accepts: connections to it wait in SYN_SENT until the client gives up. */
export async function unacceptingEndpoint(): Promise<Hanging> {
  const process_: ChildProcess = spawn(process.execPath, ['-e', child], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: process_.stdout ?? assertNever() });
  const [line] = (await once(lines, 'line')) as [string];
  const port = Number(line);
  // Fill the accept queue: these are accepted by the kernel (queued), never by the child.
  const fillers: Socket[] = [];
  for (let i = 0; i <= BACKLOG; i += 1) {
    const socket = connect(port, '127.0.0.1');
    fillers.push(socket);
    await once(socket, 'connect');
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: async () => {
      for (const socket of fillers) socket.destroy();
      lines.close();
      if (process_.exitCode === null && process_.signalCode === null) {
        process_.kill('SIGKILL');
        await once(process_, 'exit');
      }
    },
  };
}

function assertNever(): never {
  throw new Error('the child has no stdout');
}
