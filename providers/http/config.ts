// The http provider's cloud-config: where the endpoint is, how to authenticate to it and how long
// to wait for it. Credentials come from files (tokenFile, headerFiles), never from the endpoint's
// URL: a URL is repeated in log lines and errors, and errors reach Events and replies.
// Format for users: docs/providers/http.md.

import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { load } from 'js-yaml';
import { z } from 'zod';
import { CloudConfigError } from '../../shared/cloud/errors.ts';
import { hasUserinfo } from '../../shared/net/url.ts';

const path = z.string().trim().min(1, 'must not be empty');

/** Headers cirrus sets itself, which headerFiles may not replace. */
const ownHeaders = new Set(['accept', 'content-type', 'content-length', 'host', 'connection', 'x-cirrus-timeout-ms']);

// RFC 9110's token: the characters of a field name.
const headerName = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

const schema = z.strictObject({
  /** The endpoint's base URL; calls go to <endpoint>/v1/<call>. */
  endpoint: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
  /** A file holding a bearer token, sent as `Authorization: Bearer …`; read on every call. */
  tokenFile: path.optional(),
  /**
   * Headers whose values are files' contents (trimmed), read on every call: `Authorization: Basic …`,
   * an API key header. Instead of credentials in the endpoint's URL.
   */
  headerFiles: z.record(z.string(), path).optional(),
  tls: z
    .strictObject({
      /** CA certificates (PEM) to verify the endpoint with, instead of the system's. */
      caFile: path.optional(),
      /** A client certificate (PEM) and its key, for endpoints that require one. */
      certFile: path.optional(),
      keyFile: path.optional(),
    })
    .optional(),
  /** The deadline of one call, when the caller's signal does not end it sooner. */
  timeoutSeconds: z.number().min(0.001).max(3600).default(30),
  /** How long a new connection (TCP, and TLS for https://) may take, within timeoutSeconds. */
  connectTimeoutSeconds: z.number().min(0.001).max(3600).default(5),
  /** The delay asked for (RetryError) when the endpoint cannot be reached or does not answer in time. */
  retryAfterSeconds: z.number().min(0).max(3600).default(5),
});

/** The parsed cloud-config, with the TLS files read. */
export interface HttpConfig {
  readonly endpoint: URL;
  readonly tokenFile: string | undefined;
  /** Header name (lower case) → the file holding its value. */
  readonly headerFiles: ReadonlyMap<string, string>;
  readonly ca: Buffer | undefined;
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  readonly timeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly retryAfterMs: number;
}

/** Parses and checks the cloud-config; throws CloudConfigError naming the field and the problem. */
export function parseHttpConfig(text: string | undefined, file: string | undefined): HttpConfig {
  if (text === undefined)
    throw new CloudConfigError(file, '', 'the http provider needs --cloud-config naming its endpoint');
  const parsed = schema.safeParse(loadYaml(text, file) ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CloudConfigError(file, (issue?.path ?? []).join('.'), issue?.message ?? 'invalid');
  }
  const config = parsed.data;
  const endpoint = new URL(config.endpoint.replace(/\/+$/, ''));
  const tls = config.tls ?? {};
  checkEndpoint(file, endpoint);
  const headerFiles = readHeaderFiles(file, config);
  checkTransport(file, endpoint, config);
  checkClientCertificate(file, tls);
  return {
    endpoint,
    tokenFile: config.tokenFile,
    headerFiles,
    ca: readPem(file, 'tls.caFile', tls.caFile),
    cert: readPem(file, 'tls.certFile', tls.certFile),
    key: readPem(file, 'tls.keyFile', tls.keyFile),
    timeoutMs: Math.round(config.timeoutSeconds * 1000),
    connectTimeoutMs: Math.round(Math.min(config.connectTimeoutSeconds, config.timeoutSeconds) * 1000),
    retryAfterMs: Math.round(config.retryAfterSeconds * 1000),
  };
}

function checkClientCertificate(
  file: string | undefined,
  tls: { certFile?: string | undefined; keyFile?: string | undefined },
): void {
  if ((tls.certFile === undefined) === (tls.keyFile === undefined)) return;
  const missing = tls.certFile === undefined ? 'tls.certFile' : 'tls.keyFile';
  throw new CloudConfigError(file, missing, 'is required with the other: a client certificate needs its key');
}

// No credentials in the URL (they would be repeated in every log line and error naming the
// endpoint), and no query or fragment: calls go to <endpoint>/v1/<call>, which would drop them.
function checkEndpoint(file: string | undefined, endpoint: URL): void {
  if (hasUserinfo(endpoint))
    throw new CloudConfigError(
      file,
      'endpoint',
      'must not carry credentials (user:password@): a URL is repeated in logs, errors and Events; put a bearer token in tokenFile, or a header such as "Authorization: Basic …" in a file named in headerFiles',
    );
  if (endpoint.search !== '' || endpoint.hash !== '')
    throw new CloudConfigError(
      file,
      'endpoint',
      `must not have a ${endpoint.search === '' ? 'fragment (#…)' : 'query (?…)'}: calls go to <endpoint>/v1/<call> without it; put credentials in tokenFile or headerFiles`,
    );
}

// The header files by lower-case name. A name that is not a header's, a header cirrus sets, one
// name given twice in two spellings, or Authorization beside tokenFile (which sends it) is an error.
function readHeaderFiles(file: string | undefined, config: z.output<typeof schema>): ReadonlyMap<string, string> {
  const files = new Map<string, string>();
  for (const [name, path] of Object.entries(config.headerFiles ?? {})) {
    const lower = name.toLowerCase();
    if (!headerName.test(name)) throw new CloudConfigError(file, `headerFiles.${name}`, 'is not an HTTP header name');
    if (ownHeaders.has(lower))
      throw new CloudConfigError(file, `headerFiles.${name}`, 'is a header cirrus sets itself');
    if (files.has(lower))
      throw new CloudConfigError(
        file,
        `headerFiles.${name}`,
        'names a header given already (names are case-insensitive)',
      );
    if (lower === 'authorization' && config.tokenFile !== undefined)
      throw new CloudConfigError(
        file,
        `headerFiles.${name}`,
        'is set beside tokenFile, which sends Authorization: Bearer; give one',
      );
    files.set(lower, path);
  }
  return files;
}

// Plain http carries no client certificate, and credentials (a bearer token, header files) only
// to this machine.
function checkTransport(file: string | undefined, endpoint: URL, config: z.output<typeof schema>): void {
  if (endpoint.protocol !== 'http:') return;
  if (config.tls !== undefined)
    throw new CloudConfigError(file, 'tls', 'is set, but the endpoint is http://; use https://');
  if (isLoopback(endpoint.hostname)) return;
  const credentials =
    config.tokenFile !== undefined
      ? 'the bearer token (tokenFile)'
      : Object.keys(config.headerFiles ?? {}).length > 0
        ? 'the headerFiles'
        : undefined;
  if (credentials !== undefined)
    throw new CloudConfigError(
      file,
      'endpoint',
      `is http:// to ${endpoint.hostname}, which would send ${credentials} unencrypted; use https:// (plain http only to a loopback address)`,
    );
}

function loadYaml(text: string, file: string | undefined): unknown {
  try {
    return load(text);
  } catch (error) {
    throw new CloudConfigError(file, '', `is not valid YAML: ${(error as Error).message.split('\n')[0] ?? ''}`);
  }
}

function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  if (bare === 'localhost') return true;
  return isIP(bare) === 4 ? bare.startsWith('127.') : bare === '::1';
}

function readPem(file: string | undefined, field: string, path: string | undefined): Buffer | undefined {
  if (path === undefined) return undefined;
  try {
    return readFileSync(path);
  } catch (error) {
    throw new CloudConfigError(file, field, `could not read ${path}: ${(error as Error).message}`);
  }
}
