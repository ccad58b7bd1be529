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

/**
 * The Events this process recorded lately, so that a failure retried again and again (a Service
 * its pool cannot serve, retried with backoff for as long as that lasts) records its Warning once
 * per `windowMs`, not once per retry: client-go's event recorders aggregate the same way
 * (EventCorrelator: identical Events within 10 minutes become one, its count raised). Per process
 * and bounded; another instance records its own.
 */
export class RecentEvents {
  readonly #windowMs: number;
  readonly #limit: number;
  readonly #now: () => number;
  // Event identity → when it was last recorded (ms), oldest first.
  readonly #recorded = new Map<string, number>();

  constructor(options: { windowMs?: number; limit?: number; now?: () => number } = {}) {
    this.#windowMs = options.windowMs ?? 600_000;
    this.#limit = options.limit ?? 4_096;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Whether `event` should be recorded: false when an Event about the same object (uid) with the
   * same type, reason and message was recorded less than the window ago. True marks it recorded.
   */
  admit(event: CoreV1Event): boolean {
    const key = identity(event);
    const now = this.#now();
    const at = this.#recorded.get(key);
    if (at !== undefined && now - at < this.#windowMs) return false;
    this.#recorded.delete(key);
    this.#recorded.set(key, now);
    for (const oldest of this.#recorded.keys()) {
      if (this.#recorded.size <= this.#limit) break;
      this.#recorded.delete(oldest);
    }
    return true;
  }
}

// What makes two Events the same one: the object, type, reason and message.
function identity(event: CoreV1Event): string {
  const { uid, namespace, name } = event.involvedObject;
  return JSON.stringify([uid, namespace, name, event.type, event.reason, event.message]);
}
