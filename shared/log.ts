// The one logger factory: pino, JSON lines on stdout (what Knative's and any cluster's log
// collectors read), no pretty printing, no formatted timestamps (both cost throughput).

import { pino, type DestinationStream, type LevelWithSilent, type Logger, type LoggerOptions } from 'pino';

/** How to create a function's logger. */
export interface LogOptions {
  /** The function's name; every line carries it as `fn`. */
  readonly name: string;
  /** Default `info`. */
  readonly level?: LevelWithSilent | undefined;
  /** Default stdout. Tests pass a stream to read the lines back. */
  readonly destination?: DestinationStream | undefined;
}

// Field names whose values are credentials, wherever a caller puts them: kubeconfig users,
// cloud-config, HTTP headers, provider errors that echo their request.
const secretFields = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'token',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'idToken',
  'id_token',
  'bearerToken',
  'password',
  'passwd',
  'secret',
  'clientSecret',
  'client_secret',
  'secretAccessKey',
  'apiKey',
  'api_key',
  'x-api-key',
  'privateKey',
  'private_key',
  'keyData',
  'client-key-data',
];

/**
 * The paths pino censors: each secret-like field at the top level of a line and one and two
 * levels down (`token`, `user.token`, `req.headers.authorization`). pino's redaction has no
 * "any depth" wildcard; deeper secrets must not be logged in the first place.
 */
export const redactedPaths: readonly string[] = secretFields.flatMap((field) => {
  const key = /^[A-Za-z_$][\w$]*$/.test(field) ? `.${field}` : `["${field}"]`;
  return [key.startsWith('.') ? field : key, `*${key}`, `*.*${key}`];
});

/**
 * A pino logger writing JSON lines to stdout (or `destination`): base field `fn` = `name`, the
 * level as its label (`"level":"info"`), and the values of secret-like fields (see
 * {@link redactedPaths}) replaced by `[redacted]`. Throws on an unknown level.
 */
export function createLogger(options: LogOptions): Logger {
  const settings: LoggerOptions = {
    level: options.level ?? 'info',
    base: { fn: options.name },
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: [...redactedPaths], censor: '[redacted]' },
  };
  // pino's default destination writes synchronously, so the last lines before an exit are not lost.
  return options.destination === undefined ? pino(settings) : pino(settings, options.destination);
}
