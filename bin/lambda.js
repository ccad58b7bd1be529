// AWS Lambda entry points of development and tests, one per reconcile function, each serving it
// from the TypeScript sources (run through Node's type stripping). What serverless.yml deploys is
// the built artifact of each function instead (`handler: dist/functions/<name>/lambda.handler`,
// scripts/build.ts); this file is plain JavaScript because Lambda loads a handler from a .js, .mjs
// or .cjs file.
import { lambdaHandler, sandboxHandler } from '../app/lambda/index.ts';

// In a Lambda sandbox, Lambda names the handler in _HANDLER (this file's path, a dot, the export): that
// function's app is built during the init phase, before its first event; elsewhere nothing starts.
const configured = process.env._HANDLER?.split('.').pop();
const entry = (name, exported) => (configured === exported ? sandboxHandler(name) : lambdaHandler(name));

export const nodeInit = await entry('node-init', 'nodeInit');
export const nodeLifecycle = await entry('node-lifecycle', 'nodeLifecycle');
export const serviceLb = await entry('service-lb', 'serviceLb');
export const routes = await entry('routes', 'routes');
