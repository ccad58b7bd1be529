// The probes' address (--bind-address:--port), tried before anything starts: a port another process
// holds is found at once, not after the control plane has started, and named as the flag to change.

import { once } from 'node:events';
import { createServer } from 'node:net';

/** The message for an address `--port` cannot listen on, naming the flag and the fix. */
export function portProblem(host: string, port: number, error: NodeJS.ErrnoException): string {
  const what =
    error.code === 'EADDRINUSE'
      ? 'is already in use by another process'
      : error.code === 'EACCES'
        ? 'may not be listened on by this user'
        : `cannot be listened on (${error.message})`;
  return `--port ${port}: ${host}:${port} ${what}; choose another --port (0 lets the system pick) or --bind-address`;
}

/** Rejects with portProblem()'s message unless `host:port` can be listened on now (port 0 always can). */
export async function checkPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  try {
    server.listen({ host, port, exclusive: true });
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve).once('error', reject);
    });
  } catch (error) {
    throw new Error(portProblem(host, port, error as NodeJS.ErrnoException), { cause: error });
  } finally {
    if (server.listening) {
      server.close();
      await once(server, 'close');
    }
  }
}
