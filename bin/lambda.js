// AWS Lambda entry points, one per reconcile function (serverless.yml: `handler: bin/lambda.<name>`).
// Plain JavaScript because Lambda loads a handler from a .js, .mjs or .cjs file; what it imports
// is TypeScript, run through Node's type stripping (the nodejs24.x runtime).
import { lambdaHandler } from '../app/lambda/index.ts';

export const nodeInit = lambdaHandler('node-init');
export const nodeLifecycle = lambdaHandler('node-lifecycle');
export const serviceLb = lambdaHandler('service-lb');
export const routes = lambdaHandler('routes');

// Build the configured function during the sandbox's init phase, before its first event.
// Lambda names the handler in _HANDLER (`bin/lambda.nodeInit`); elsewhere (tests) nothing starts.
const configured = { nodeInit, nodeLifecycle, serviceLb, routes }[process.env._HANDLER?.split('.').pop() ?? ''];
configured?.prepare();
