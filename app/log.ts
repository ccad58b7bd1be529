// The one logger factory: pino, JSON lines on stdout (what Knative's and any cluster's log
// collectors read), no formatted timestamps (they cost throughput). On a terminal (or with
// --log-format pretty) the lines go through pino-pretty instead: one readable line an event,
// coloured where the terminal supports it. pino-pretty is imported only then, so the JSON path
// (every deployed function's cold start) never loads it.

import {
  pino,
  stdSerializers,
  type DestinationStream,
  type LevelWithSilent,
  type Logger,
  type LoggerOptions,
} from 'pino';
import { scrubUrls } from '../shared/net/url.ts';

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
  // Synchronous, as pino's own destination: the last lines before an exit are not lost.
  return pretty({ ...prettyOptions, destination: fd, sync: true });
}

/** How pino-pretty shows a line (logDestination); exported for the tests that read lines back. */
export const prettyOptions = {
  singleLine: true,
  translateTime: 'HH:MM:ss.l',
  // The function leads the message (`function` where many share one process's `fn`, as under
  // cirrus start); an error is its message (the stack is in --log-format json).
  ignore: 'fn,function,err',
  messageFormat: (line: Record<string, unknown>, messageKey: string): string => {
    const err = line['err'] as { message?: unknown } | undefined;
    const error = typeof err?.message === 'string' ? `: ${err.message}` : '';
    const text = (value: unknown): string =>
      typeof value === 'string' || value === undefined ? (value ?? '') : JSON.stringify(value);
    return `${text(line['function'] ?? line['fn'])}: ${text(line[messageKey])}${error}`;
  },
};

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
 * The paths censored (createLogger): each secret-like field at the top level of a line and one and two
 * levels down (`token`, `user.token`, `req.headers.authorization`); in a child logger's bindings,
 * the top level only. Deeper secrets must not be logged in the first place.
 */
export const redactedPaths: readonly string[] = secretFields.flatMap((field) => {
  const key = /^[A-Za-z_$][\w$]*$/.test(field) ? `.${field}` : `["${field}"]`;
  return [key.startsWith('.') ? field : key, `*${key}`, `*.*${key}`];
});

const secretFieldSet = new Set(secretFields);

const censor = '[redacted]';
const secretSerializers: Record<string, () => string> = Object.fromEntries(secretFields.map((f) => [f, () => censor]));

/**
 * `value` with the values of secret-like fields replaced by `[redacted]` at the depths of
 * {@link redactedPaths} (the top level and two levels down), copying only the objects on the way
 * to a secret: a line without one is returned as it is, and costs one look at each key.
 */
export function censorSecrets<T>(value: T, depth = 0): T {
  if (value === null || typeof value !== 'object' || depth > 2) return value;
  // An error is serialized first (its message and stack are not its own enumerable fields), so that
  // a secret it carries (a request's headers) is censored and the rest kept.
  if (value instanceof Error) return censoredError(value, depth) as T;
  const copy = censoredFields(value as Record<string, unknown>, depth);
  if (copy === undefined) return value;
  return (Array.isArray(value) ? Object.assign([], copy) : copy) as T;
}

// A copy of `source`'s fields with secrets censored; undefined when it has none.
function censoredFields(source: Record<string, unknown>, depth: number): Record<string, unknown> | undefined {
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(source)) {
    const field = source[key];
    const censored = secretFieldSet.has(key) ? censor : censorSecrets(field, depth + 1);
    if (censored !== field) {
      copy ??= { ...source };
      copy[key] = censored;
    }
  }
  return copy;
}

function censoredError(error: Error, depth: number): unknown {
  const serialized = serializeError(error);
  const censored = censorSecrets(serialized, depth);
  return censored === serialized ? error : censored;
}

// An error's message, not pino's message with its causes appended: a wrapping error here already
// says its cause's message (`failed to …: <cause>`), which pino would repeat. The URLs in its
// message and stack are scrubbed of credentials and query strings (shared/net/url.ts): a provider's
// error may repeat a URL it was given.
function serializeError(error: unknown): unknown {
  const serialized = stdSerializers.err(error as Error) as unknown;
  if (error instanceof Error && serialized !== null && typeof serialized === 'object') {
    const fields = serialized as { message: string; stack?: unknown };
    fields.message = scrubUrls(error.message);
    if (typeof fields.stack === 'string') fields.stack = scrubUrls(fields.stack);
  }
  return serialized;
}

/**
 * A pino logger writing JSON lines to stdout (or `destination`): base field `fn` = `name`, the
 * level as its label (`"level":"info"`), and the values of secret-like fields (see
 * {@link redactedPaths}) replaced by `[redacted]`, in the line's fields and in a child's bindings.
 * Throws on an unknown level.
 *
 * The censoring is a formatter, not pino's `redact` option: with redact's 75 wildcard paths, each
 * child logger (one per request, shared/host/run.ts) and its line cost about 400 µs; the
 * formatter walks each line's fields once instead.
 */
export function createLogger(options: LogOptions): Logger {
  const settings: LoggerOptions = {
    level: options.level ?? 'info',
    base: { fn: options.name },
    formatters: {
      level: (label) => ({ level: label }),
      log: (object) => censorSecrets(object),
    },
    // A child's bindings skip the formatters (pino resets them for children): its secret-like
    // fields are censored by these serializers, at the top level (what children bind are ids).
    serializers: { ...secretSerializers, err: serializeError },
  };
  // pino's default destination writes synchronously, so the last lines before an exit are not lost.
  return options.destination === undefined ? pino(settings) : pino(settings, options.destination);
}
