// deploy/knative's and deploy/standalone's RBAC on the real API server: sufficient and minimal (the
// proof and its scenarios: rbac-proof.ts).

import { proveRbac } from './rbac-proof.ts';

proveRbac('RBAC of deploy/knative and deploy/standalone, on the real API server');
