// One protocol v1 call over HTTP(S): node:http / node:https (the client certificate needs an
// https.Agent, which fetch cannot take without undici). The caller's AbortSignal, bounded by
// timeoutSeconds, is the request's deadline; a new connection must be made (TCP, and TLS for
// https://) within connectTimeoutSeconds. Every failure names the call and the endpoint (its URL
// scrubbed: shared/net/url.ts) and says what was wrong; the endpoint being unreachable or slow is
// a RetryError (the reconcile is tried again after retryAfterSeconds), and so is an error answer
// with code Retry.

import { readFile } from 'node:fs/promises';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { z } from 'zod';
import {
  ImplementedElsewhereError,
  InstanceNotFoundError,
  NotImplementedError,
  RetryError,
} from '../../shared/cloud/errors.ts';
import { displayUrl } from '../../shared/net/url.ts';
import type { HttpConfig } from './config.ts';
import { errorAnswer, errorCodes, PROTOCOL, results, type CallName } from './protocol.ts';

/** The most an answer may hold: more is an endpoint gone wrong, not a reason to run out of memory. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** Transport errors that mean the request never reached a server that could act on it. */
const unreachable = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EPIPE',
]);

/** A new connection that was not made within connectTimeoutSeconds. */
class ConnectTimeoutError extends Error {
  override readonly name = 'ConnectTimeoutError';
}

interface Answer {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly body: Buffer;
}

/** A client of one endpoint. */
export class ProtocolClient {
  readonly #config: HttpConfig;
  readonly #agent: HttpAgent | HttpsAgent;

  constructor(config: HttpConfig) {
    this.#config = config;
    this.#agent =
      config.endpoint.protocol === 'https:'
        ? new HttpsAgent({
            keepAlive: true,
            ...(config.ca === undefined ? {} : { ca: config.ca }),
            ...(config.cert === undefined ? {} : { cert: config.cert }),
            ...(config.key === undefined ? {} : { key: config.key }),
          })
        : new HttpAgent({ keepAlive: true });
  }

  /** Closes idle connections. */
  close(): void {
    this.#agent.destroy();
  }

  /** `GET /v1/capabilities`, parsed with `schema`. */
  async capabilities<S extends z.ZodType>(schema: S, signal?: AbortSignal): Promise<z.output<S>> {
    const answer = await this.#send('capabilities', 'GET', undefined, signal);
    return this.#parse('capabilities', answer, schema, false);
  }

  /** Makes call `name` with `body`; resolves with its validated result, or throws as the module comment says. */
  async call<N extends CallName>(
    name: N,
    body: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<z.output<(typeof results)[N]>> {
    const answer = await this.#send(name, 'POST', JSON.stringify(body), signal);
    const schema: z.ZodType = results[name];
    return this.#parse(name, answer, schema, true) as z.output<(typeof results)[N]>;
  }

  #url(name: string): URL {
    const base = this.#config.endpoint;
    return new URL(`${base.pathname.replace(/\/$/, '')}/${PROTOCOL}/${name}`, base);
  }

  async #headers(body: string | undefined): Promise<Record<string, string>> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      'x-cirrus-timeout-ms': String(this.#config.timeoutMs),
    };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(body));
    }
    const file = this.#config.tokenFile;
    if (file !== undefined) headers['authorization'] = `Bearer ${await secret(file, 'tokenFile')}`;
    for (const [name, path] of this.#config.headerFiles) headers[name] = await secret(path, `headerFiles.${name}`);
    return headers;
  }

  async #send(name: string, method: string, body: string | undefined, signal?: AbortSignal): Promise<Answer> {
    const url = this.#url(name);
    const timeout = AbortSignal.timeout(this.#config.timeoutMs);
    const deadline = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
    const headers = await this.#headers(body);
    const options = { method, headers, agent: this.#agent, signal: deadline };
    try {
      return await exchange(url, options, body, this.#config.connectTimeoutMs);
    } catch (error) {
      throw this.#sendFailure(name, url, error, { signal, timeout });
    }
  }

  // Why a request got no answer, as the module comment says.
  #sendFailure(
    name: string,
    url: URL,
    error: unknown,
    { signal, timeout }: { signal: AbortSignal | undefined; timeout: AbortSignal },
  ): Error {
    const shown = displayUrl(url);
    if (signal?.aborted === true)
      return new Error(
        `http provider: ${name}: cancelled by the caller (${reasonOf(signal)}) before ${shown} answered`,
        {
          cause: error,
        },
      );
    const retryAfterMs = this.#config.retryAfterMs;
    const retrying = `retrying in ${retryAfterMs / 1000} s`;
    if (error instanceof ConnectTimeoutError)
      return new RetryError(
        `http provider: ${name}: could not connect to ${shown} within ${this.#config.connectTimeoutMs / 1000} s (connectTimeoutSeconds); ${retrying}`,
        retryAfterMs,
        { cause: error },
      );
    if (timeout.aborted)
      return new RetryError(
        `http provider: ${name}: ${shown} did not answer within ${this.#config.timeoutMs / 1000} s (timeoutSeconds); ${retrying}`,
        retryAfterMs,
        { cause: error },
      );
    const code = (error as { code?: string }).code ?? '';
    if (unreachable.has(code))
      return new RetryError(
        `http provider: ${name}: could not reach ${shown}: ${(error as Error).message}; ${retrying}`,
        retryAfterMs,
        { cause: error },
      );
    return new Error(`http provider: ${name}: request to ${shown} failed: ${(error as Error).message}`, {
      cause: error,
    });
  }

  #parse<S extends z.ZodType>(name: string, answer: Answer, schema: S, enveloped: boolean): z.output<S> {
    const where = `http provider: ${name}: ${displayUrl(this.#url(name))}`;
    if (answer.status < 200 || answer.status > 299) throw this.#failure(name, where, answer);
    const value = decode(where, answer, enveloped);
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw new Error(`${where} answered ${invalidity(parsed.error, enveloped)}`);
    return parsed.data;
  }

  // An answer that is not 2xx: the protocol's error codes as the contract's errors.
  #failure(name: string, where: string, answer: Answer): Error {
    const parsed = errorAnswer.safeParse(parseJson(answer.body));
    const retryAfterMs = retryAfterHeader(answer.headers['retry-after']) ?? this.#config.retryAfterMs;
    if (!parsed.success) return plainFailure(where, answer, retryAfterMs);
    const { code, message, retryAfterSeconds } = parsed.data.error;
    const text = `${name}: ${message || code}`;
    const contractError = contractErrors[code];
    if (contractError !== undefined) return contractError(text);
    if (code === 'Retry')
      return new RetryError(text, retryAfterSeconds === undefined ? retryAfterMs : retryAfterSeconds * 1000);
    if (code === 'Failed') return new Error(`${where} failed: ${message}`);
    return new Error(
      `${where} answered error code "${code}", which protocol ${PROTOCOL} does not define (it defines ${errorCodes.join(', ')}): ${message}`,
    );
  }
}

const contractErrors: Readonly<Record<string, ((message: string) => Error) | undefined>> = {
  InstanceNotFound: (message) => new InstanceNotFoundError(message),
  NotImplemented: (message) => new NotImplementedError(message),
  ImplementedElsewhere: (message) => new ImplementedElsewhereError(message),
};

// What is wrong with an answer, as the first problem zod found: the field and the problem.
function invalidity(error: z.ZodError, enveloped: boolean): string {
  const issue = error.issues[0];
  const field = [enveloped ? 'result' : '', ...(issue?.path ?? []).map(String)].filter((p) => p !== '').join('.');
  const what = enveloped ? 'result' : 'body';
  return `a ${what} that does not follow protocol ${PROTOCOL}: ${field || '(top)'}: ${issue?.message ?? 'invalid'}`;
}

// A 2xx answer's JSON, and with `enveloped` its "result"; throws naming what is missing.
function decode(where: string, answer: Answer, enveloped: boolean): unknown {
  const json = parseJson(answer.body);
  if (json === undefined)
    throw new Error(`${where} answered ${answer.status} with a body that is not JSON: ${excerpt(answer.body)}`);
  if (!enveloped) return json;
  if (typeof json !== 'object' || json === null || !Object.hasOwn(json, 'result'))
    throw new Error(
      `${where} answered ${answer.status} without "result" (protocol ${PROTOCOL}): ${excerpt(answer.body)}`,
    );
  return (json as { result: unknown }).result;
}

// An error answer without a protocol error body (a proxy's, a server's default page).
function plainFailure(where: string, answer: Answer, retryAfterMs: number): Error {
  if (answer.status === 429 || answer.status === 503)
    return new RetryError(`${where} answered ${answer.status} (busy): ${excerpt(answer.body)}`, retryAfterMs);
  const hint = answer.status === 401 || answer.status === 403 ? ' (check tokenFile and tls.certFile)' : '';
  return new Error(
    `${where} answered ${answer.status}${hint} without a protocol ${PROTOCOL} error: ${excerpt(answer.body)}`,
  );
}

// A file's contents, trimmed, as a header value; read on every call so that a rotated secret is used at once.
async function secret(path: string, field: string): Promise<string> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch (error) {
    throw new Error(`http provider: could not read ${field} ${path}: ${(error as Error).message}`, { cause: error });
  }
}

// Destroys `request` with a ConnectTimeoutError when its socket is new and not connected (for
// https://, not through the TLS handshake) within `ms`. A reused keep-alive socket is connected.
function connectDeadline(request: ReturnType<typeof httpRequest>, ms: number): void {
  request.once('socket', (socket: Socket) => {
    if (!socket.connecting) return;
    const timer = setTimeout(() => {
      request.destroy(new ConnectTimeoutError(`no connection within ${ms} ms`));
    }, ms);
    const connected = (): void => {
      clearTimeout(timer);
    };
    socket.once(socket instanceof TLSSocket ? 'secureConnect' : 'connect', connected);
    request.once('close', connected);
  });
}

function exchange(
  url: URL,
  options: { method: string; headers: Record<string, string>; agent: HttpAgent | HttpsAgent; signal: AbortSignal },
  body: string | undefined,
  connectTimeoutMs: number,
): Promise<Answer> {
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const request = send(url, options, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) {
          request.destroy(new Error(`the answer is larger than ${MAX_ANSWER_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      response.on('error', reject);
      response.on('end', () => {
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) });
      });
    });
    request.on('error', reject);
    connectDeadline(request, connectTimeoutMs);
    request.end(body);
  });
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function retryAfterHeader(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value) * 1000;
}

function excerpt(body: Buffer): string {
  const text = body.toString('utf8').replace(/\s+/g, ' ').trim();
  if (text === '') return '(empty body)';
  return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
}

function reasonOf(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : String(reason);
}
