// The one logger factory: pino, JSON lines on stdout (what Knative's and any cluster's log
// collectors read), no formatted timestamps (they cost throughput). On a terminal (or with
// --log-format pretty) the lines go through pino-pretty instead: one readable line an event,
// coloured where the terminal supports it. pino-pretty is imported only then, so the JSON path
// (every deployed function's cold start) never loads it.

import { pino, type DestinationStream, type LevelWithSilent, type Logger, type LoggerOptions } from 'pino';

/** `json`: JSON lines; `pretty`: readable lines; `auto`: pretty when stdout is a terminal. */
export type LogFormat = 'json' | 'pretty' | 'auto';

/** The format `auto` stands for, given whether stdout is a terminal. */
export function resolveLogFormat(format: LogFormat, stdoutIsTty: boolean): 'json' | 'pretty' {
  if (format === 'auto') return stdoutIsTty ? 'pretty' : 'json';
  return format;
}

/**
 * Where createLogger() writes for `format`: undefined (pino's own JSON destination, stdout) or a
 * pino-pretty stream on stdout (or on file descriptor `fd`: 2 for a command whose stdout is its
 * report). `isTty` defaults to whether this process's stdout is a terminal, which is where the lines go.
 */
export async function logDestination(
  format: LogFormat,
  isTty: boolean = process.stdout.isTTY,
  fd: 1 | 2 = 1,
): Promise<DestinationStream | undefined> {
  if (resolveLogFormat(format, isTty) === 'json') return undefined;
  const { default: pretty } = await import('pino-pretty');
  return pretty({
    destination: fd,
    // Synchronous, as pino's own destination: the last lines before an exit are not lost.
    sync: true,
    singleLine: true,
    translateTime: 'HH:MM:ss.l',
    // `fn` leads the message; an error is its message (the stack is in --log-format json).
    ignore: 'fn,err',
    messageFormat: (line, messageKey) => {
      const err = line['err'] as { message?: unknown } | undefined;
      const error = typeof err?.message === 'string' ? `: ${err.message}` : '';
      const text = (value: unknown): string =>
        typeof value === 'string' || value === undefined ? (value ?? '') : JSON.stringify(value);
      return `${text(line['fn'])}: ${text(line[messageKey])}${error}`;
    },
  });
}

/** How to create a function's logger. */
export interface LogOptions {
  /** The function's name; every line carries it as `fn`. */
  readonly name: string;
  /** Default `info`. */
  readonly level?: LevelWithSilent | undefined;
  /** Default stdout (JSON). logDestination() gives the pretty one; tests pass a stream to read the lines back. */
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
