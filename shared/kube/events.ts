// Kubernetes Events, as the Go controllers' event recorders write them (core/v1; Events about
// cluster-scoped objects such as Nodes live in the `default` namespace). An Event's message is read
// by whoever may read Events in its namespace (a tenant, for a Service): the URLs in it are
// scrubbed of credentials and query strings, whatever error text it repeats.

import type { CoreV1Event, V1ObjectReference } from '@kubernetes/client-node';
import { scrubUrls } from '../net/url.ts';
import type { Core } from './core.ts';

/** An Event to record about one object. */
export interface EventSpec {
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  readonly message: string;
  /** The controller that reports it, e.g. `cloud-node-controller`. */
  readonly component: string;
}

/** The core/v1 Event for `object`, its message's URLs scrubbed (shared/net/url.ts); pure, so a dry run can report it. */
export function eventFor(object: V1ObjectReference, spec: EventSpec, now = new Date()): CoreV1Event {
  const namespace = object.namespace ?? 'default';
  return {
    metadata: { generateName: `${object.name ?? 'object'}.`, namespace },
    involvedObject: object,
    type: spec.type,
    reason: spec.reason,
    message: scrubUrls(spec.message),
    source: { component: spec.component },
    reportingComponent: spec.component,
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
}

/** Records `event`. */
export async function recordEvent(core: Core, event: CoreV1Event): Promise<void> {
  await core.createNamespacedEvent({ namespace: event.metadata.namespace ?? 'default', body: event });
}
