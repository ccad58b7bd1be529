// The tags that mark what belongs to a cluster, as upstream writes and reads them: resources the
// provider creates get `kubernetes.io/cluster/<id>=owned` (and `KubernetesCluster=<id>` when the
// cluster ID came from the legacy KubernetesClusterTag key); anything it reads counts as the
// cluster's with `kubernetes.io/cluster/<id>` of any value, or the legacy tag.

import type { AwsConfig } from './config.ts';

export interface Tag {
  readonly Key?: string | undefined;
  readonly Value?: string | undefined;
}

export const SERVICE_NAME_TAG = 'kubernetes.io/service-name';
export const LEGACY_CLUSTER_TAG = 'KubernetesCluster';

export function clusterTagKey(clusterId: string): string {
  return `kubernetes.io/cluster/${clusterId}`;
}

/** Whether `tags` mark a resource as this cluster's (`owned` or `shared`, or the legacy tag). */
export function hasClusterTag(tags: readonly Tag[] | undefined, clusterId: string): boolean {
  const key = clusterTagKey(clusterId);
  return (tags ?? []).some((t) => t.Key === key || (t.Key === LEGACY_CLUSTER_TAG && t.Value === clusterId));
}

/** Whether `tags` say this cluster owns the resource (created it and may delete it). */
export function isOwned(tags: readonly Tag[] | undefined, clusterId: string): boolean {
  const key = clusterTagKey(clusterId);
  return (tags ?? []).some(
    (t) => (t.Key === key && t.Value === 'owned') || (t.Key === LEGACY_CLUSTER_TAG && t.Value === clusterId),
  );
}

/** The tags for a resource this cluster creates, after `extra` (which cannot override them). */
export function ownedTags(
  config: AwsConfig,
  extra: Readonly<Record<string, string>> = {},
): { Key: string; Value: string }[] {
  const tags = new Map(Object.entries(extra));
  tags.set(clusterTagKey(config.clusterId), 'owned');
  if (config.legacyClusterTag) tags.set(LEGACY_CLUSTER_TAG, config.clusterId);
  return [...tags].map(([Key, Value]) => ({ Key, Value }));
}

/** The value of tag `key`, or undefined. */
export function tagValue(tags: readonly Tag[] | undefined, key: string): string | undefined {
  return (tags ?? []).find((t) => t.Key === key)?.Value;
}
