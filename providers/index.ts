// The providers that ship with cirrus, registered by the composition root (app/root.ts)
// with factories that import them on first use, so a function that runs one provider never loads
// the others.

import { registerCloudProvider } from '../shared/cloud/registry.ts';

/** Registers the built-in providers (`fake`, `static`, `aws`, and others). Call once per process (a name registered twice is an error). */
export function registerBuiltInProviders(): void {
  registerCloudProvider('fake', async (context) => (await import('./fake/index.ts')).fakeFromConfig(context));
  registerCloudProvider('static', async (context) => (await import('./static/index.ts')).createStaticProvider(context));
  registerCloudProvider('http', async (context) => (await import('./http/index.ts')).createHttpProvider(context));
  registerCloudProvider('aws', async (context) => (await import('./aws/index.ts')).createAwsProvider(context));
}
