// A thin admin client for the benchmark's own requests: raw JSON over node:https with a keep-alive
// agent, so that the harness costs the API server (and the 2 cores) as little as possible, and
// counts what it sends so that cirrus's share of the API server's request counters can be told apart.

import { Agent, request, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

export interface KubeObject {
  metadata: { name: string; resourceVersion?: string; labels?: Record<string, string>; [key: string]: unknown };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [key: string]: unknown;
}

interface WatchEvent {
  readonly type: string;
  readonly object: KubeObject;
}

/** What the harness itself sent, by "VERB resource". */
export type Counts = Record<string, number>;

export class Kube {
  readonly sent: Counts = {};
  readonly #base: RequestOptions;
  readonly #url: URL;

  private constructor(url: URL, base: RequestOptions) {
    this.#url = url;
    this.#base = base;
  }

  static async connect(kubeConfig: KubeConfig, maxSockets = 64): Promise<Kube> {
    const server = kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('the kubeconfig names no cluster');
    const options: RequestOptions = {};
    await kubeConfig.applyToHTTPSOptions(options);
    const agent = new Agent({ keepAlive: true, maxSockets, ca: options.ca, cert: options.cert, key: options.key });
    return new Kube(new URL(server), { ...options, agent });
  }

  /** One request; resolves with the parsed JSON body, rejects on a status of 400 or more. */
  async call<T = KubeObject>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    const text = await this.#text(method, path, body, contentType);
    return (text === '' ? {} : JSON.parse(text)) as T;
  }

  async text(path: string): Promise<string> {
    return this.#text('GET', path, undefined, 'application/json');
  }

  /** Creates many objects, at most `concurrency` in flight; calls `created` as each create returns. */
  async createAll(
    path: string,
    objects: readonly KubeObject[],
    options: { concurrency: number; ratePerSecond?: number; created?: (name: string) => void },
  ): Promise<void> {
    const start = performance.now();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < objects.length) {
        const index = next++;
        const object = objects[index];
        if (object === undefined) return;
        if (options.ratePerSecond !== undefined)
          await sleep(start + (index * 1000) / options.ratePerSecond - performance.now());
        await this.call('POST', path, object);
        options.created?.(object.metadata.name);
      }
    };
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  }

  /**
   * Watches a collection from `resourceVersion`, calling `onEvent` per event, until the signal
   * aborts or the API server ends the stream; resolves with the last resourceVersion seen, a
   * bookmark's included (the API server's BOOKMARK events, about one a minute, are asked for and
   * not handed on). Rejects when the connection breaks or the API server answers with an error.
   */
  watch(
    path: string,
    resourceVersion: string,
    onEvent: (event: WatchEvent) => void,
    signal: AbortSignal,
  ): Promise<string> {
    const url = new URL(
      `${path}${path.includes('?') ? '&' : '?'}watch=1&allowWatchBookmarks=true&resourceVersion=${resourceVersion}`,
      this.#url,
    );
    this.#count('WATCH', path);
    let version = resourceVersion;
    return new Promise((resolve, reject) => {
      const req = request(url, { ...this.#base, method: 'GET', signal }, (res) => {
        const failed = (res.statusCode ?? 0) >= 400;
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffer += chunk;
          if (failed) return;
          let newline;
          while ((newline = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + 1);
            if (line.trim() === '') continue;
            const event = JSON.parse(line) as WatchEvent;
            if (event.type !== 'ERROR') version = event.object.metadata.resourceVersion ?? version;
            if (event.type !== 'BOOKMARK') onEvent(event);
          }
        });
        res.on('end', () => {
          if (failed) reject(new Error(`WATCH ${path}: ${res.statusCode} ${buffer.slice(0, 300)}`));
          else resolve(version);
        });
        res.on('error', (error) => {
          if (signal.aborted) resolve(version);
          else reject(error);
        });
      });
      req.on('error', (error) => {
        if (signal.aborted) resolve(version);
        else reject(error);
      });
      req.end();
    });
  }

  /** The API server's `apiserver_request_total`, summed by "VERB resource". */
  async requestCounters(): Promise<Counts> {
    const text = await this.text('/metrics');
    const counts: Counts = {};
    for (const line of text.split('\n')) {
      if (!line.startsWith('apiserver_request_total{')) continue;
      const labels = new Map([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']));
      const sub = labels.get('subresource') ?? '';
      const key = `${labels.get('verb') ?? ''} ${labels.get('resource') ?? ''}${sub === '' ? '' : `/${sub}`}`;
      counts[key] = (counts[key] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return counts;
  }

  #count(method: string, path: string): void {
    const key = `${method} ${resourceOf(path)}`;
    this.sent[key] = (this.sent[key] ?? 0) + 1;
  }

  #text(method: string, path: string, body: unknown, contentType: string): Promise<string> {
    this.#count(method, path);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers =
      payload === undefined ? {} : { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) };
    return new Promise((resolve, reject) => {
      const req = request(new URL(path, this.#url), { ...this.#base, method, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => {
          if ((res.statusCode ?? 0) >= 400)
            reject(new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 300)}`));
          else resolve(text);
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(payload);
    });
  }
}

// "/api/v1/namespaces/x/services/y/status" → "services/status"; "/api/v1/nodes" → "nodes".
function resourceOf(path: string): string {
  const parts = (path.split('?')[0] ?? '').split('/').filter(Boolean);
  const start = parts[0] === 'api' ? 2 : 3;
  const rest = parts.slice(start);
  const tail = rest[0] === 'namespaces' && rest.length > 2 ? rest.slice(2) : rest;
  return tail.length > 2 ? `${tail[0] ?? ''}/${tail[2] ?? ''}` : (tail[0] ?? path);
}

/** `after − before`, keeping only keys that changed. */
export function difference(after: Counts, before: Counts): Counts {
  const out: Counts = {};
  for (const [key, value] of Object.entries(after)) {
    const delta = value - (before[key] ?? 0);
    if (delta > 0) out[key] = delta;
  }
  return out;
}

export function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

/** The p-th percentile (0–100) of `values`, nearest rank; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

/** Resolves when `done()` is true, polling every 20 ms; rejects after `timeoutMs`. */
export async function until(done: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(20);
  }
}

/**
 * Polls `probe` every 100 ms until it answers something other than undefined, and returns that;
 * rejects naming `what` after `timeoutMs`.
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (performance.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(100);
  }
}

/**
 * The requests the API server at `admin` counted while `during` ran, by "VERB resource[/subresource]"
 * (its apiserver_request_total), only those that moved; reported as a diagnostic of `t`.
 */
export async function countRequests(
  admin: KubeConfig,
  t: { diagnostic(message: string): void },
  during: () => Promise<void>,
): Promise<Counts> {
  const kube = await Kube.connect(admin);
  const before = await kube.requestCounters();
  await during();
  const after = await kube.requestCounters();
  const diff: Counts = {};
  for (const [key, value] of Object.entries(after)) {
    const delta = value - (before[key] ?? 0);
    if (delta > 0) diff[key] = delta;
  }
  t.diagnostic(JSON.stringify(diff));
  return diff;
}
