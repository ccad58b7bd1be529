// The aws-cloud-controller-manager binary for the migration test, from the per-machine cache that
// `npm run cloud-provider-aws:build` (and .ci/run before the tests) fills: a first build takes
// minutes, too long for a test's time, so a test never builds it. Without it the migration suites
// skip with what is missing, and with CIRRUS_TEST_REQUIRE_CONTROL_PLANE=1 (CI) a test fails with it.

import { AssetsUnavailableError } from '../../tools/control-plane/index.ts';
import { resolveCloudProviderAws } from '../../tools/cloud-provider-aws/assets.ts';

export interface Incumbent {
  /** The binary; undefined when missing. */
  readonly binary: string | undefined;
  /** What is missing and how to get it; undefined when the binary is there. */
  readonly missing: string | undefined;
  /** Why a suite needing it skips, or false: for describe's `skip`. */
  readonly skip: string | false;
  /** Why the check that it is there skips (not required here), or false. */
  readonly checkSkip: string | false;
}

export async function incumbent(env: NodeJS.ProcessEnv = process.env): Promise<Incumbent> {
  const required = env['CIRRUS_TEST_REQUIRE_CONTROL_PLANE'] === '1';
  try {
    const { binary } = await resolveCloudProviderAws({ build: false, env });
    return { binary, missing: undefined, skip: false, checkSkip: false };
  } catch (error) {
    if (!(error instanceof AssetsUnavailableError)) throw error;
    const skip = `no cloud-provider-aws: ${error.message}`;
    return { binary: undefined, missing: error.message, skip, checkSkip: required ? false : skip };
  }
}
