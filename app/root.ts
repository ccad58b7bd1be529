// The composition root: the one module that imports functions/, the relay and providers/. It
// registers the built-in providers and hands the catalogue of functions to the command line and
// the Lambda entry; the rest of app/ receives them from here.

import { catalogue } from '../functions/catalogue.ts';
import { registerBuiltInProviders } from '../providers/index.ts';

registerBuiltInProviders();

export { catalogue };

/** The relay (relay/), imported only by the commands that run it. */
export const loadRelay = async (): Promise<typeof import('../relay/index.ts')> => import('../relay/index.ts');
export type { LeaseSettings } from '../relay/index.ts';
