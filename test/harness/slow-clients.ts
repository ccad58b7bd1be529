// Slow, unauthenticated clients over real sockets, as issue 32 found them: a request whose
// signature header is well formed and fresh but whose HMAC is zeros (of scheme v4, and of v3 for
// a host that still read v3), announcing a 100 kB body and sending one byte of it every few
// seconds; and requests that send their headers one line at a time and never finish them. Each
// client opens a new connection a moment after the server closes its last, for as long as the
// attack runs.

import { connect, type Socket } from 'node:net';

/** A running attack. */
export interface Attack {
  /** Connections opened so far. */
  readonly opened: () => number;
  /** Connections open now. */
  readonly open: () => number;
  /** Closes every connection and opens no more. */
  stop(): void;
}

/** Where and how hard to attack. */
export interface AttackOptions {
  readonly port: number;
  /** The path of the requests, e.g. `/node-init`. */
  readonly path: string;
  /** Clients dribbling their body after a forged signature header. */
  readonly slowBodies: number;
  /** Clients dribbling their headers. */
  readonly slowHeaders: number;
  /** Between two bytes (or header lines) of one client, in ms; default 5000. */
  readonly intervalMs?: number;
  /** Before a client reconnects once the server closed its connection, in ms; default 2000. */
  readonly reconnectMs?: number;
}

/** A signature header that parses and is fresh, with an HMAC no secret produced. */
export function forgedSignature(now: number = Math.floor(Date.now() / 1000)): string {
  const zeros = (n: number): string => '0'.repeat(n);
  return `t=${now},n=${zeros(32)},d=${zeros(64)},v4=${zeros(64)},v3=${zeros(64)}`;
}

/** Starts the attack; resolves once every client has sent its first bytes. */
export async function startAttack(options: AttackOptions): Promise<Attack> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  let opened = 0;
  const interval = options.intervalMs ?? 5000;
  const every = (socket: Socket, send: () => void): void => {
    const timer = setInterval(() => {
      if (!socket.destroyed) send();
    }, interval);
    timers.add(timer);
    socket.once('close', () => {
      clearInterval(timer);
      timers.delete(timer);
    });
  };
  const client = (slowBody: boolean): Promise<void> =>
    new Promise((resolve) => {
      const socket = connect(options.port, '127.0.0.1');
      opened += 1;
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.resume(); // read and drop whatever the server answers
      socket.once('close', () => {
        sockets.delete(socket);
        if (stopped) return;
        const timer = setTimeout(() => {
          timers.delete(timer);
          void client(slowBody);
        }, options.reconnectMs ?? 2000);
        timers.add(timer);
      });
      socket.once('connect', () => {
        if (slowBody) {
          socket.write(
            `POST ${options.path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
              `ce-specversion: 1.0\r\nce-id: x\r\nce-source: x\r\nce-type: dev.cirrus-ccm.reconcile.all\r\n` +
              `x-cirrus-signature: ${forgedSignature()}\r\ncontent-length: 100000\r\n\r\n{`,
          );
          every(socket, () => socket.write(' '));
        } else {
          socket.write(`POST ${options.path} HTTP/1.1\r\nhost: 127.0.0.1\r\n`);
          every(socket, () => socket.write(`x-slow-${Date.now()}: 1\r\n`));
        }
        resolve();
      });
    });
  await Promise.all([
    ...Array.from({ length: options.slowBodies }, () => client(true)),
    ...Array.from({ length: options.slowHeaders }, () => client(false)),
  ]);
  return {
    opened: () => opened,
    open: () => sockets.size,
    stop: () => {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** The q-quantile (0 to 1) of `values`, in their unit. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}
