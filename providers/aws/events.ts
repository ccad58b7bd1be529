// Warning Events the provider records on a Service for what it did not apply while the ensure
// itself went on (as cloud-provider-aws records through its event recorder): with the cluster's
// client when the provider has one, else only in the log.

import { CoreV1Api, type KubeConfig, type V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { eventFor, recordEvent } from '../../shared/kube/events.ts';

const COMPONENT = 'aws-cloud-provider';

export interface ServiceWarnings {
  warn(service: V1Service, reason: string, message: string): Promise<void>;
}

/** Records on the Service through `kubeConfig` (and logs); only logs without one. An Event that cannot be written is logged, never fatal. */
export function serviceWarnings(log: Logger | undefined, kubeConfig: KubeConfig | undefined): ServiceWarnings {
  const core = kubeConfig?.makeApiClient(CoreV1Api);
  return {
    async warn(service, reason, message) {
      const reference = referenceOf(service);
      const key = `${reference.namespace}/${reference.name}`;
      log?.warn({ service: key, reason }, message);
      if (core === undefined) return;
      try {
        await recordEvent(core, eventFor(reference, { type: 'Warning', reason, message, component: COMPONENT }));
      } catch (error) {
        log?.warn({ service: key, err: error }, 'event not recorded');
      }
    },
  };
}

function referenceOf(service: V1Service): {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid: string;
} {
  const { namespace = 'default', name = '', uid = '' } = service.metadata ?? {};
  return { apiVersion: 'v1', kind: 'Service', namespace, name, uid };
}
