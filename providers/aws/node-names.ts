// Node names and instances, both ways, as cloud-provider-aws maps them for routes through its node
// informer (pkg/providers/v1/aws.go, nodeNameToInstanceID and instanceIDToNodeName): a Node's
// instance is the one its `spec.providerID` names, whatever the Node is called; an instance's Node
// is the Node whose provider ID names it. The route controller passes Node names
// (k8s.io/cloud-provider controllers/route/route_controller.go sets Route.TargetNode to the Node's
// name), so without this a Node whose name is not its instance's private DNS name gets no route,
// and its route would be listed under the private DNS name and seen as unknown. cirrus keeps no
// informer: the Nodes are listed from the API server when asked (from its watch cache). Without a
// cluster client (tests, conformance without a kubeconfig) nothing is known, and the callers fall
// back to the instance's names.

import { CoreV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { instanceIdFromProviderId } from './instances.ts';

export interface NodeNames {
  /** The instance ID that Node `name`'s provider ID names; undefined: no such Node, or no provider ID. */
  instanceIdOf(name: string): Promise<string | undefined>;
  /** Each Node's name by the instance ID its provider ID names. */
  byInstanceId(): Promise<Map<string, string>>;
}

export function nodeNames(kubeConfig: KubeConfig | undefined): NodeNames {
  const core = kubeConfig?.makeApiClient(CoreV1Api);
  if (core === undefined)
    return { instanceIdOf: () => Promise.resolve(undefined), byInstanceId: () => Promise.resolve(new Map()) };
  return {
    // Lists, as the routes function does, so its RBAC (list Nodes) is all this needs.
    async instanceIdOf(name) {
      const { items } = await core.listNode({ fieldSelector: `metadata.name=${name}`, resourceVersion: '0' });
      return items[0] === undefined ? undefined : instanceIdOf(items[0]);
    },
    async byInstanceId() {
      const { items } = await core.listNode({ resourceVersion: '0' });
      const names = new Map<string, string>();
      for (const node of items) {
        const id = instanceIdOf(node);
        if (id !== undefined) names.set(id, node.metadata?.name ?? '');
      }
      return names;
    },
  };
}

/** The instance ID in a Node's provider ID; undefined when it has none or it is not an EC2 one. */
function instanceIdOf(node: V1Node): string | undefined {
  const providerId = node.spec?.providerID ?? '';
  if (providerId === '') return undefined;
  try {
    return instanceIdFromProviderId(providerId);
  } catch {
    // Not an EC2 provider ID: the Node is not one of this provider's.
    return undefined;
  }
}
