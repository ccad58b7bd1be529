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

// C0 (newline, carriage return, escape, …), DEL and C1: what a terminal acts on instead of showing.
// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]/g;
const shortEscapes: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * `text` with every control character (C0, DEL, C1) written as JSON writes it (`\n`, `\u001b`,
 * `\u009b`): one line, with nothing a terminal would act on — no forged line, no escape sequence.
 */
export function escapeControl(text: string): string {
  return text.replace(
    controlCharacters,
    (c) => shortEscapes[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

// The fields pino-pretty leads a line with (its time and level) or that messageFormat prints itself.
const shownApart = new Set(['time', 'level', 'msg', 'fn', 'function', 'err']);

/**
 * How pino-pretty shows a line (logDestination); exported for the tests that read lines back.
 * Everything but the time and the level is written by messageFormat, control characters escaped
 * (a Service's annotation can reach a message or a field): pino-pretty prints a function's
 * messageFormat as it is, leaves newlines in the fields it prints apart (`name`, `hostname`,
 * `caller`, an error-like object's stack) and DEL and C1 in the others.
 */
export const prettyOptions = {
  singleLine: true,
  translateTime: 'HH:MM:ss.l',
  // pino-pretty prints the time and the level only (and the line's end); messageFormat the rest:
  // the function leading the message (`function` where many share one process's `fn`, as under
  // cirrus start), an error as its message (the stack is in --log-format json), then the other
  // fields as one JSON object.
  include: 'level,time',
  // A line's own `time` field, where one overrides pino's, is shown as pino-pretty shows a date it
  // cannot read (as it is), escaped.
  customPrettifiers: { time: (time: unknown): string => `[${escapeControl(String(time))}]` },
  messageFormat: (
    line: Record<string, unknown>,
    messageKey: string,
    _levelLabel?: string,
    extras?: { colors?: { gray?: (text: string) => string } },
  ): string => {
    const err = line['err'] as { message?: unknown } | undefined;
    const error = typeof err?.message === 'string' ? `: ${err.message}` : '';
    const text = (value: unknown): string =>
      typeof value === 'string' || value === undefined ? (value ?? '') : JSON.stringify(value);
    const fields = Object.fromEntries(
      Object.entries(line).filter(([key]) => key !== messageKey && !shownApart.has(key)),
    );
    const gray = extras?.colors?.gray ?? ((t: string): string => t);
    const object = Object.keys(fields).length === 0 ? '' : ` ${gray(escapeControl(JSON.stringify(fields)))}`;
    return `${escapeControl(`${text(line['function'] ?? line['fn'])}: ${text(line[messageKey])}${error}`)}${object}`;
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
