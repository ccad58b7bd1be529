// The RBAC of deploy/knative and deploy/standalone, and of the Helm chart that renders their objects,
// on the real API server: sufficient and minimal (the proof and its scenarios: rbac-proof.ts). With
// helm, the proof runs on the chart's objects, which helm.test.ts holds equal to the bases' (ADR
// 0025); without it, on the bases'.

import { deployedObjects } from './helm.ts';
import { proveRbac } from './rbac-proof.ts';

const deployed = await deployedObjects();
if (deployed.source === 'chart')
  proveRbac(
    'RBAC of the Helm chart (= deploy/knative and deploy/standalone), on the real API server',
    deployed.substitute,
  );
else proveRbac('RBAC of deploy/knative and deploy/standalone, on the real API server');
