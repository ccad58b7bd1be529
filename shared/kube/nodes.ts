// Reads of Nodes shared by the node functions.

import type { V1Node } from '@kubernetes/client-node';
import { apiStatus } from './api.ts';
import type { Core } from './core.ts';

/** The Node called `name`, or undefined when there is none. Other failures throw. */
export async function readNode(core: Core, name: string): Promise<V1Node | undefined> {
  try {
    return await core.readNode({ name });
  } catch (error) {
    if (apiStatus(error) === 404) return undefined;
    throw error;
  }
}

/** The reference an Event about `node` names (Nodes are cluster-scoped: no namespace). */
export function nodeReference(node: V1Node): { apiVersion: string; kind: string; name: string; uid: string } {
  return { apiVersion: 'v1', kind: 'Node', name: node.metadata?.name ?? '', uid: node.metadata?.uid ?? '' };
}
