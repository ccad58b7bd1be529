// The aws provider's timeouts (issue 38): every AWS call has a connection and a request timeout,
// named in the cloud-config ([Global] ConnectTimeoutSeconds, RequestTimeoutSeconds), so a cloud
// that hangs fails the call instead of holding it (the SDK sets none of its own). Against local
// endpoints that hang (test/harness/hanging.ts), through [ServiceOverride] as a cluster would point
// cirrus elsewhere. Unit tests: no emulator, no cluster.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { createAwsApi } from '../../providers/aws/api.ts';
import { awsProvider, parseAwsConfig } from '../../providers/aws/index.ts';
import { silentEndpoint, unacceptingEndpoint, type Hanging } from '../harness/hanging.ts';

const node: V1Node = {
  metadata: { name: 'ip-10-0-0-1.ec2.internal' },
  spec: { providerID: 'aws:///us-east-1a/i-0123456789abcdef0' },
};

function cloudConf(extra: readonly string[], url?: string): string {
  return [
    '[Global]',
    'Region = us-east-1',
    'VPC = vpc-0abc1234',
    'KubernetesClusterID = timeouts',
    ...extra,
    ...(url === undefined
      ? []
      : ['[ServiceOverride "1"]', 'Service = EC2', 'Region = us-east-1', `URL = ${url}`, 'SigningRegion = us-east-1']),
    '',
  ].join('\n');
}

describe('the aws provider against an endpoint that hangs', () => {
  const saved = { ...process.env };
  let unaccepting: Hanging;
  let silent: Hanging;

  before(async () => {
    // Credentials to sign with (nothing checks them), two attempts per call, no instance metadata.
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: 'AKIDTIMEOUTS',
      AWS_SECRET_ACCESS_KEY: 'timeouts',
      AWS_MAX_ATTEMPTS: '2',
      AWS_RETRY_MODE: 'standard',
      AWS_EC2_METADATA_DISABLED: 'true',
    });
    unaccepting = await unacceptingEndpoint();
    silent = await silentEndpoint();
  });
  after(async () => {
    process.env = saved;
    await unaccepting.close();
    await silent.close();
  });

  function instances(conf: string): NonNullable<ReturnType<ReturnType<typeof awsProvider>['instancesV2']>> {
    const config = parseAwsConfig(conf, 'cloud.conf');
    return awsProvider(config, createAwsApi(config)).instancesV2() ?? assert.fail('no instancesV2');
  }

  it(
    'fails a call to an endpoint that never accepts at ConnectTimeoutSeconds, naming it',
    { timeout: 20_000 },
    async () => {
      const v2 = instances(cloudConf(['ConnectTimeoutSeconds = 0.3', 'RequestTimeoutSeconds = 1'], unaccepting.url));
      await assert.rejects(v2.instanceExists(node), (error: Error) => {
        assert.equal(
          error.message,
          'ec2:DescribeInstances: no connection to AWS within 0.3 s (ConnectTimeoutSeconds in [Global]), on each of its 2 attempts',
        );
        assert.equal((error.cause as Error).name, 'TimeoutError');
        return true;
      });
    },
  );

  it(
    'fails a call to an endpoint that accepts and never answers at RequestTimeoutSeconds, naming it',
    { timeout: 20_000 },
    async () => {
      const v2 = instances(cloudConf(['ConnectTimeoutSeconds = 0.3', 'RequestTimeoutSeconds = 0.5'], silent.url));
      await assert.rejects(v2.instanceExists(node), {
        message:
          'ec2:DescribeInstances: no answer from AWS within 0.5 s (RequestTimeoutSeconds in [Global]), on each of its 2 attempts',
      });
    },
  );
});

describe('the timeouts in the cloud-config', () => {
  it('default to 5 s to connect and 30 s a request', () => {
    const config = parseAwsConfig(cloudConf([]), 'cloud.conf');
    assert.deepEqual([config.connectTimeoutMs, config.requestTimeoutMs], [5000, 30_000]);
    const set = parseAwsConfig(cloudConf(['ConnectTimeoutSeconds = 2.5', 'RequestTimeoutSeconds = 60']), 'cloud.conf');
    assert.deepEqual([set.connectTimeoutMs, set.requestTimeoutMs], [2500, 60_000]);
  });

  it('refuses a value that is not a number of seconds, and a connection longer than the request', () => {
    for (const [line, message] of [
      [
        'ConnectTimeoutSeconds = 0',
        'cloud.conf: Global.ConnectTimeoutSeconds: "0" is not a number of seconds above 0 and at most 3600',
      ],
      [
        'RequestTimeoutSeconds = 30s',
        'cloud.conf: Global.RequestTimeoutSeconds: "30s" is not a number of seconds above 0 and at most 3600',
      ],
      [
        'RequestTimeoutSeconds = 3601',
        'cloud.conf: Global.RequestTimeoutSeconds: "3601" is not a number of seconds above 0 and at most 3600',
      ],
      [
        'ConnectTimeoutSeconds = 40',
        'cloud.conf: Global.ConnectTimeoutSeconds: 40 is longer than RequestTimeoutSeconds (30), which includes the connection',
      ],
    ] as const)
      assert.throws(() => parseAwsConfig(cloudConf([line]), 'cloud.conf'), { message });
  });
});
