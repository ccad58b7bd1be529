// Pointing AWS SDK clients and child processes at the emulator: its credentials, the standard
// variables (nothing cirrus-specific), and a warm-up of its backends. Every call goes through
// step(), which names the operation in a failure (moto answers HTTP 500 with an HTML page to
// anything it does not implement, which the SDK otherwise reports as an XML parse error).

import { DescribeAvailabilityZonesCommand, EC2Client } from '@aws-sdk/client-ec2';
import { DescribeLoadBalancersCommand, ElasticLoadBalancingV2Client } from '@aws-sdk/client-elastic-load-balancing-v2';

/** moto accepts any key; these are the ones its docs and the SDK examples use. */
export const emulatorCredentials = { accessKeyId: 'testing', secretAccessKey: 'testing' } as const;
export const defaultRegion = 'us-east-1';

/** An EC2 and an ELBv2 client for the emulator, making one attempt per call (moto's 500s are not worth retrying). */
export function emulatorClients(
  endpoint: string,
  region: string,
): { ec2: EC2Client; elbv2: ElasticLoadBalancingV2Client } {
  const config = { endpoint, region, credentials: emulatorCredentials, maxAttempts: 1 };
  return { ec2: new EC2Client(config), elbv2: new ElasticLoadBalancingV2Client(config) };
}

/**
 * The environment that points the AWS SDK (and so the aws provider) at the emulator: the standard
 * variables, nothing cirrus-specific. Apply it with awsProcessEnv() to drop variables that would
 * override it (a profile, a web-identity role, service-specific endpoints).
 */
export function awsEnv(endpoint: string, region: string): Record<string, string> {
  return {
    AWS_ACCESS_KEY_ID: emulatorCredentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: emulatorCredentials.secretAccessKey,
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
    AWS_ENDPOINT_URL: endpoint,
    // No instance-metadata lookups (1 s timeouts) for a region or credentials the environment gives.
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

/** Variables of `base` that would win over awsEnv()'s or send the SDK elsewhere. */
const overriding = [
  'AWS_PROFILE',
  'AWS_SESSION_TOKEN',
  'AWS_ROLE_ARN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
  'AWS_IGNORE_CONFIGURED_ENDPOINT_URLS',
];

/** `base` (default process.env) with awsEnv() applied and the variables that would override it removed: a child process's env. */
export function awsProcessEnv(
  endpoint: string,
  region: string,
  base: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(base)) {
    if (!overriding.includes(key) && !key.startsWith('AWS_ENDPOINT_URL_')) env[key] = value;
  }
  return { ...env, ...awsEnv(endpoint, region) };
}

/**
 * Makes the emulator load its EC2 and ELBv2 backends for `region` (moto loads them on first use:
 * ~1 s for EC2), so that second is not spent inside the first test that calls it.
 */
export async function warmEmulator(endpoint: string, region: string = defaultRegion): Promise<void> {
  const { ec2, elbv2 } = emulatorClients(endpoint, region);
  try {
    await step('DescribeAvailabilityZones', ec2.send(new DescribeAvailabilityZonesCommand({})));
    await step('DescribeLoadBalancers', elbv2.send(new DescribeLoadBalancersCommand({})));
  } finally {
    ec2.destroy();
    elbv2.destroy();
  }
}

/** Runs one SDK call; a failure names the operation (moto's HTML 500s otherwise read as an XML parse error). */
export async function step<T>(operation: string, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw new Error(`emulator: ${operation} failed: ${(error as Error).name}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}
