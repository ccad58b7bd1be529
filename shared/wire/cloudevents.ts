// CloudEvents 1.0 over HTTP as the event contract uses it (docs/http-contract.md):
// binary content mode (attributes in `ce-*` headers, percent-encoded, `data` in the body) and
// structured mode (`application/cloudevents+json`, the whole event in the body). Both directions
// of the HTTP binding live here: the relay writes binary-mode headers with {@link binaryModeHeaders},
// a function reads any request into one validated event shape with {@link readCloudEvent}. Nothing
// here knows about Fastify or about which kinds a function handles.

import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { InvalidRequestError } from './replies.ts';

/** An extension attribute's value: CloudEvents' String, Integer and Boolean types in JSON. */
export type ExtensionValue = string | number | boolean;

/** A validated CloudEvent 1.0, whichever content mode it arrived in. */
export interface CloudEvent {
  readonly specversion: '1.0';
  readonly id: string;
  readonly source: string;
  readonly type: string;
  readonly subject?: string | undefined;
  readonly time?: string | undefined;
  readonly datacontenttype?: string | undefined;
  readonly dataschema?: string | undefined;
  /** Every other attribute, by its (lower-case) name: for ApiServerSource `kind`, `apiversion`, `name`, `namespace`. */
  readonly extensions: Readonly<Record<string, ExtensionValue>>;
  /** The payload: parsed JSON for a JSON content type, else a string; undefined when there is none. */
  readonly data?: unknown;
}

/** How the event arrived (CloudEvents HTTP binding). */
export type ContentMode = 'binary' | 'structured';

/**
 * Reads the CloudEvent in an HTTP request whose body has already been parsed (JSON) or read as
 * text. `application/cloudevents+json` is structured mode (the body is the whole event);
 * anything else is binary mode (attributes in `ce-*` headers, the body is `data`, the
 * Content-Type is `datacontenttype`). Throws InvalidRequestError listing every problem found:
 * missing or empty `id`, `source`, `type`, a `specversion` other than `1.0`, extension names
 * that are not lower-case letters and digits, values of the wrong type; and for batched mode or
 * a non-JSON event format.
 */
export function readCloudEvent(headers: IncomingHttpHeaders, body: unknown): CloudEvent {
  const mode = contentMode(headers['content-type']);
  const raw = mode === 'structured' ? fromStructured(body) : fromBinary(headers, body);
  return validate(raw, mode);
}

/** Binary or structured, by Content-Type; throws InvalidRequestError for the modes cirrus does not take. */
export function contentMode(contentType: string | undefined): ContentMode {
  const media = (contentType ?? '').split(';', 1)[0]?.trim().toLowerCase() ?? '';
  if (media === 'application/cloudevents+json') return 'structured';
  if (media === 'application/cloudevents-batch+json') {
    throw new InvalidRequestError('batched CloudEvents are not supported: send one event per request', undefined, {
      code: 'CIRRUS_ERR_INVALID_EVENT',
    });
  }
  if (media.startsWith('application/cloudevents')) {
    throw new InvalidRequestError(
      `event format ${media} is not supported: use application/cloudevents+json or binary mode`,
      undefined,
      { code: 'CIRRUS_ERR_INVALID_EVENT' },
    );
  }
  return 'binary';
}

interface RawEvent {
  readonly attributes: Record<string, unknown>;
  readonly data: unknown;
  readonly problems: readonly string[];
}

/** The prefix of a binary-mode attribute header: `ce-type`, `ce-kind`, … */
export const attributeHeaderPrefix = 'ce-';

/**
 * Binary-mode headers for `attributes` (core attributes and extensions alike, by their lower-case
 * names): `ce-<name>`, each value percent-encoded as the HTTP binding requires, in the order given.
 */
export function binaryModeHeaders(attributes: Readonly<Record<string, string>>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(attributes))
    headers[`${attributeHeaderPrefix}${name}`] = encodeHeaderValue(value);
  return headers;
}

// The CloudEvents HTTP binding: space, double quote, percent and anything outside printable
// ASCII are percent-encoded (UTF-8) in header values.
function encodeHeaderValue(value: string): string {
  return value.replace(/[^\x21\x23\x24\x26-\x7e]/gu, (character) => encodeURIComponent(character));
}

function fromBinary(headers: IncomingHttpHeaders, body: unknown): RawEvent {
  const attributes: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith(attributeHeaderPrefix) || value === undefined) continue;
    attributes[name.slice(attributeHeaderPrefix.length)] = percentDecode(
      Array.isArray(value) ? value.join(',') : value,
    );
  }
  // In binary mode the Content-Type header is the datacontenttype attribute.
  if (headers['content-type'] !== undefined) attributes['datacontenttype'] = headers['content-type'];
  return { attributes, data: body, problems: [] };
}

// The HTTP binding percent-encodes header values outside printable ASCII. A sender that did not
// encode (a literal "%" in a value) must not make the event unreadable, so bad escapes stay as they are.
function percentDecode(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

const structuredBody = z.record(z.string(), z.unknown(), { error: 'the body must be a JSON object (the event)' });

function fromStructured(body: unknown): RawEvent {
  const parsed = structuredBody.safeParse(body);
  if (!parsed.success) return { attributes: {}, data: undefined, problems: parsed.error.issues.map(formatIssue) };
  const { data, data_base64: base64, ...rest } = parsed.data;
  // JSON null means "absent" for any attribute (CloudEvents JSON format).
  const attributes = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== null));
  if (base64 === undefined || base64 === null) return { attributes, data, problems: [] };
  if (data !== undefined || typeof base64 !== 'string') {
    return { attributes, data, problems: ['data_base64: must be a base64 string, and not given together with data'] };
  }
  return decodeBase64Data(attributes, base64);
}

function decodeBase64Data(attributes: Record<string, unknown>, base64: string): RawEvent {
  const text = Buffer.from(base64, 'base64').toString('utf8');
  if (!isJsonMediaType(attributes['datacontenttype'])) return { attributes, data: text, problems: [] };
  try {
    return { attributes, data: JSON.parse(text) as unknown, problems: [] };
  } catch {
    return { attributes, data: undefined, problems: ['data_base64: not JSON, though datacontenttype says it is'] };
  }
}

function isJsonMediaType(contentType: unknown): boolean {
  if (contentType === undefined) return true; // the JSON format's default for data
  const media = typeof contentType === 'string' ? contentType.split(';', 1)[0]?.trim().toLowerCase() : undefined;
  return media === 'application/json' || (media?.endsWith('+json') ?? false);
}

const required = z
  .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') })
  .min(1, 'must not be empty');
const optional = z.string({ error: 'must be a string' }).min(1, 'must not be empty').optional();

const coreSchema = z.object({
  specversion: z.literal('1.0', {
    error: (issue) => (issue.input === undefined ? 'is required' : `must be "1.0", not ${JSON.stringify(issue.input)}`),
  }),
  id: required,
  source: required,
  type: required,
  subject: optional,
  time: optional,
  datacontenttype: optional,
  dataschema: optional,
});

const coreNames = new Set(Object.keys(coreSchema.shape));

// CloudEvents: extension names MUST be lower-case ASCII letters and digits.
const extensionsSchema = z.record(
  z.string().regex(/^[a-z0-9]+$/),
  z.union([z.string(), z.number(), z.boolean()], { error: 'must be a string, number or boolean' }),
  {
    error: (issue) =>
      issue.code === 'invalid_key' ? 'extension names must be lower-case letters a-z and digits only' : undefined,
  },
);

function validate(raw: RawEvent, mode: ContentMode): CloudEvent {
  const core: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(raw.attributes)) (coreNames.has(name) ? core : rest)[name] = value;
  const coreResult = coreSchema.safeParse(core);
  const extensionsResult = extensionsSchema.safeParse(rest);
  const problems = [
    ...raw.problems,
    ...(coreResult.error?.issues.map(formatIssue) ?? []),
    ...(extensionsResult.error?.issues.map(formatIssue) ?? []),
  ];
  if (!coreResult.success || !extensionsResult.success || problems.length > 0) {
    throw new InvalidRequestError(`not a valid CloudEvent (${modeHint[mode]})`, problems, {
      code: 'CIRRUS_ERR_INVALID_EVENT',
    });
  }
  return { ...coreResult.data, extensions: extensionsResult.data, data: raw.data };
}

const modeHint: Record<ContentMode, string> = {
  binary: 'binary mode: attributes in ce-* headers',
  structured: 'structured mode: the whole event in the body',
};

/** `path: message` for one zod issue; the path is an attribute name. */
export function formatIssue(issue: z.core.$ZodIssue): string {
  return issue.path.length === 0 ? issue.message : `${issue.path.join('.')}: ${issue.message}`;
}
