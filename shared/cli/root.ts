// The composition root: the one module of shared/ that imports functions/ and providers/. It
// registers the built-in providers and hands the catalogue of functions to the command line and
// the Lambda entry; everything else in shared/ receives them from here.

import { catalogue } from '../../functions/catalogue.ts';
import { registerBuiltInProviders } from '../../providers/index.ts';

registerBuiltInProviders();

export { catalogue };

/** The relay (functions/relay), imported only by the commands that run it. */
export const loadRelay = async (): Promise<typeof import('../../functions/relay/index.ts')> =>
  import('../../functions/relay/index.ts');
export type { LeaseSettings } from '../../functions/relay/index.ts';
