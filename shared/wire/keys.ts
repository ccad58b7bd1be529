// Objects on the wire: the key that names one (`Node/worker-1`, `Service/default/web`), how an
// event's subject is formed from it, and how a receiver finds the object an event is about.

import { z } from 'zod';
import type { CloudEvent } from './cloudevents.ts';
import { InvalidRequestError } from './replies.ts';
import { extensionNames } from './types.ts';

/** The object an event is about. `namespace` is undefined for cluster-scoped kinds. */
export interface ObjectKey {
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string | undefined;
}

/** `Node/worker-1`, `Service/default/web`: the key in logs, reports and the relay's queue. */
export function formatKey(key: ObjectKey): string {
  return key.namespace ? `${key.kind}/${key.namespace}/${key.name}` : `${key.kind}/${key.name}`;
}

/**
 * ApiServerSource's `subject`: a selfLink-like path, `/apis/<apiVersion>/namespaces/<namespace>/<kind
 * in lower case>s/<name>`, core kinds under `/apis` too and an empty namespace segment for
 * cluster-scoped kinds (knative/eventing pkg/adapter/apiserver/events `createSelfLink`).
 */
export function objectSubject(apiVersion: string, key: ObjectKey): string {
  return `/apis/${apiVersion}/namespaces/${key.namespace ?? ''}/${key.kind.toLowerCase()}s/${key.name}`;
}

// Data is only a fallback for the key (the extensions come first), so a field of the wrong type
// counts as missing rather than making the whole event invalid.
const text = z.string().min(1).optional().catch(undefined);
const resourceData = z.object({
  kind: text,
  metadata: z.object({ name: text, namespace: text }).optional().catch(undefined),
});
const refData = z.object({ kind: text, name: text, namespace: text });

interface KeyFields {
  readonly kind?: string | undefined;
  readonly name?: string | undefined;
  readonly namespace?: string | undefined;
}

function dataFields(data: unknown, mode: 'resource' | 'ref'): KeyFields {
  if (mode === 'ref') return refData.safeParse(data).data ?? {};
  const parsed = resourceData.safeParse(data).data;
  return { kind: parsed?.kind, name: parsed?.metadata?.name, namespace: parsed?.metadata?.namespace };
}

function extension(event: CloudEvent, name: string): string | undefined {
  const value = event.extensions[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * The object a Kubernetes event is about. Each of kind, name and namespace comes from the
 * extension of that name when present, else from `data` (`kind` + `metadata.name` /
 * `metadata.namespace` in resource mode, `kind` / `name` / `namespace` in ref mode). An empty
 * `namespace` extension means a cluster-scoped object, as ApiServerSource sends for Nodes.
 * Throws InvalidRequestError when no kind or no name can be found.
 */
export function eventObjectKey(event: CloudEvent, mode: 'resource' | 'ref'): ObjectKey {
  // Data is read only when an extension is missing (the relay always sends all three).
  let fields: KeyFields | undefined;
  const data = (): KeyFields => (fields ??= dataFields(event.data, mode));
  const kind = extension(event, extensionNames.kind) ?? data().kind;
  const name = extension(event, extensionNames.name) ?? data().name;
  const namespace = Object.hasOwn(event.extensions, extensionNames.namespace)
    ? extension(event, extensionNames.namespace)
    : data().namespace;
  if (kind === undefined || name === undefined) {
    const problems = [
      ...(kind === undefined ? ['kind: no "kind" extension and no data.kind'] : []),
      ...(name === undefined
        ? [`name: no "name" extension and no ${mode === 'resource' ? 'data.metadata.name' : 'data.name'}`]
        : []),
    ];
    throw new InvalidRequestError('the event does not name an object', problems, { code: 'CIRRUS_ERR_INVALID_EVENT' });
  }
  return namespace === undefined ? { kind, name } : { kind, name, namespace };
}
