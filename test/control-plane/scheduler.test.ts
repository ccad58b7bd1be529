// A fresh cluster comes up under the real kube-scheduler with deploy/standalone's example and the
// Knative example's objects but its Knative Services (the scenario: fresh-cluster.ts): rendered by
// the Helm chart, which renders the bases' objects (helm.test.ts, ADR 0025), or without helm built
// by kustomize.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { deployedObjects, namespace } from '../deploy/helm.ts';
import { build, knativeRoot, standaloneRoot, type KubeObject } from '../deploy/kustomize.ts';
import { freshClusterOnScheduler } from './fresh-cluster.ts';

const deployed = await deployedObjects();
const notKnative = (o: KubeObject): boolean => !o.apiVersion.includes('knative.dev');

if (deployed.source === 'chart')
  // The namespace as `helm install --create-namespace` makes it: the chart has none.
  freshClusterOnScheduler('a fresh cluster on a real scheduler, from the Helm chart', () => [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    ...deployed.rendered('examples/static.yaml'),
    ...deployed.rendered('examples/knative.yaml').filter(notKnative),
  ]);
else
  freshClusterOnScheduler('a fresh cluster on a real scheduler', () => {
    const knative = build(join(knativeRoot, 'overlays/example'), {
      readFile: (path) =>
        path.endsWith('/signing-secret') && !existsSync(path) ? 'test-signing-secret\n' : readFileSync(path, 'utf8'),
    }).filter(notKnative);
    return [...build(join(standaloneRoot, 'overlays/example')), ...knative];
  });
