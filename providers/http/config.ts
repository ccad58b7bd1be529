// The http provider's cloud-config: where the endpoint is and how to authenticate to it.
// Format for users: docs/providers/http.md.

import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { load } from 'js-yaml';
import { z } from 'zod';
import { CloudConfigError } from '../../shared/cloud/errors.ts';

const path = z.string().trim().min(1, 'must not be empty');

const schema = z.strictObject({
  /** The endpoint's base URL; calls go to <endpoint>/v1/<call>. */
  endpoint: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
  /** A file holding a bearer token, sent as `Authorization: Bearer …`; read on every call. */
  tokenFile: path.optional(),
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
  /** The delay asked for (RetryError) when the endpoint cannot be reached or does not answer in time. */
  retryAfterSeconds: z.number().min(0).max(3600).default(5),
});

/** The parsed cloud-config, with the TLS files read. */
export interface HttpConfig {
  readonly endpoint: URL;
  readonly tokenFile: string | undefined;
  readonly ca: Buffer | undefined;
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  readonly timeoutMs: number;
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
  checkTransport(file, endpoint, config);
  checkClientCertificate(file, tls);
  return {
    endpoint,
    tokenFile: config.tokenFile,
    ca: readPem(file, 'tls.caFile', tls.caFile),
    cert: readPem(file, 'tls.certFile', tls.certFile),
    key: readPem(file, 'tls.keyFile', tls.keyFile),
    timeoutMs: Math.round(config.timeoutSeconds * 1000),
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

// Plain http carries no client certificate, and a bearer token only to this machine.
function checkTransport(file: string | undefined, endpoint: URL, config: z.output<typeof schema>): void {
  if (endpoint.protocol !== 'http:') return;
  if (config.tls !== undefined)
    throw new CloudConfigError(file, 'tls', 'is set, but the endpoint is http://; use https://');
  if (config.tokenFile !== undefined && !isLoopback(endpoint.hostname))
    throw new CloudConfigError(
      file,
      'endpoint',
      `is http:// to ${endpoint.hostname}, which would send the bearer token (tokenFile) unencrypted; use https:// (plain http only to a loopback address)`,
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
