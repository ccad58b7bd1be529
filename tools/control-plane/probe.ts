// Waiting for the control plane's processes: polling a check until it holds or a process exits,
// and the small HTTP(S) GETs the checks make.

import type { IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readFile } from 'node:fs/promises';
import type { ManagedProcess } from './processes.ts';

// Polls `check` every 100 ms until it holds; fails at once when one of the processes has exited.
export async function waitUntil(
  deadline: number,
  processes: ManagedProcess[],
  what: string,
  check: () => Promise<boolean>,
): Promise<void> {
  for (;;) {
    const dead = processes.find((p) => p.hasExited());
    if (dead) throw new Error(`${dead.name} exited while waiting for ${what}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** An answer's status and body. */
export interface Response {
  status: number;
  body: string;
}

// A component's health endpoint: served with a self-signed certificate, open without credentials.
export function getInsecure(url: string): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { rejectUnauthorized: false, timeout: 2_000 }, (res) => {
      collect(res, resolve, reject);
    });
    req
      .on('error', reject)
      .on('timeout', () => req.destroy(new Error('timeout')))
      .end();
  });
}

/** A plain HTTP GET (etcd's endpoints). */
export function getHttp(url: string): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { timeout: 2_000 }, (res) => {
      collect(res, resolve, reject);
    });
    req
      .on('error', reject)
      .on('timeout', () => req.destroy(new Error('timeout')))
      .end();
  });
}

/** An HTTPS GET of `path` on the API server, with a client certificate. */
export async function getHttps(
  server: string,
  path: string,
  tls: { ca: string; cert: string; key: string },
): Promise<Response> {
  const [ca, cert, key] = await Promise.all([readFile(tls.ca), readFile(tls.cert), readFile(tls.key)]);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${server}${path}`, { ca, cert, key, timeout: 2_000 }, (res) => {
      collect(res, resolve, reject);
    });
    req
      .on('error', reject)
      .on('timeout', () => req.destroy(new Error('timeout')))
      .end();
  });
}

function collect(res: IncomingMessage, resolve: (r: Response) => void, reject: (e: Error) => void): void {
  let body = '';
  res.setEncoding('utf8');
  res.on('data', (chunk: string) => (body += chunk));
  res.on('end', () => {
    resolve({ status: res.statusCode ?? 0, body });
  });
  res.on('error', reject);
}
