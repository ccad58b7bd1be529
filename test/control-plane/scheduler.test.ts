// A fresh cluster comes up under the real kube-scheduler with deploy/standalone's example and the
// Knative example's objects but its Knative Services (the scenario: fresh-cluster.ts).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build, knativeRoot, standaloneRoot } from '../deploy/kustomize.ts';
import { freshClusterOnScheduler } from './fresh-cluster.ts';

freshClusterOnScheduler('a fresh cluster on a real scheduler', () => {
  const knative = build(join(knativeRoot, 'overlays/example'), {
    readFile: (path) =>
      path.endsWith('/signing-secret') && !existsSync(path) ? 'test-signing-secret\n' : readFileSync(path, 'utf8'),
  }).filter((o) => !o.apiVersion.includes('knative.dev'));
  return [...build(join(standaloneRoot, 'overlays/example')), ...knative];
});
