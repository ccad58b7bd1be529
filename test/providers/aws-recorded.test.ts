// What the emulator cannot show (moto has no blackhole routes, no draining targets, never
// throttles, and names NLBs differently), on recorded response shapes: AWS's own XML answers,
// as its API references give them, fed through the real SDK clients by an HTTP handler that
// records each request's Action. Unit tests: no emulator, no cluster.

import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { before, describe, it } from 'node:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { createAwsApi } from '../../providers/aws/api.ts';
import { awsProvider, parseAwsConfig } from '../../providers/aws/index.ts';
import { findCause, RetryError } from '../../shared/cloud/errors.ts';
import type { CloudProvider, Route } from '../../shared/cloud/provider.ts';

const EC2_NS = 'http://ec2.amazonaws.com/doc/2016-11-15/';
const ELB_NS = 'http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/';
const CLUSTER = 'kubernetes.io/cluster/recorded';

interface Answer {
  readonly status?: number;
  readonly body: string;
}

/** A cloud of recorded answers by Action; every request's Action (and parameters) is kept. */
function recordedCloud(answers: Readonly<Record<string, Answer>>): { cloud: CloudProvider; actions: string[] } {
  const actions: string[] = [];
  const requestHandler = {
    handle: (request: { body?: unknown }) => {
      const params = new URLSearchParams(typeof request.body === 'string' ? request.body : '');
      const action = params.get('Action') ?? '?';
      actions.push(
        `${action}${action === 'DeleteRoute' || action === 'CreateRoute' ? ` ${params.get('DestinationCidrBlock') ?? ''}` : ''}`,
      );
      const answer = answers[action];
      if (answer === undefined) throw new Error(`no recorded answer for ${action}`);
      return Promise.resolve({
        response: {
          statusCode: answer.status ?? 200,
          reason: '',
          headers: { 'content-type': 'text/xml' },
          body: Readable.from([Buffer.from(answer.body)]),
        },
      });
    },
  };
  const config = parseAwsConfig(
    [
      '[Global]',
      'Region = us-east-1',
      'VPC = vpc-0abc1234',
      'KubernetesClusterID = recorded',
      'RouteTableID = rtb-0abc1234',
      'DisableSecurityGroupIngress = true',
      '',
    ].join('\n'),
    'cloud.conf',
  );
  return { cloud: awsProvider(config, createAwsApi(config, { requestHandler: requestHandler as never })), actions };
}

const routeTables = (routes: string): Answer => ({
  body: `<DescribeRouteTablesResponse xmlns="${EC2_NS}"><requestId>r-1</requestId><routeTableSet><item>
    <routeTableId>rtb-0abc1234</routeTableId><vpcId>vpc-0abc1234</vpcId><routeSet>${routes}</routeSet>
    <associationSet/><tagSet><item><key>${CLUSTER}</key><value>owned</value></item></tagSet></item></routeTableSet>
    </DescribeRouteTablesResponse>`,
});

const instance = (id: string, state: string, dns: string): string =>
  `<item><instanceId>${id}</instanceId><instanceState><code>16</code><name>${state}</name></instanceState>
   <privateDnsName>${dns}</privateDnsName><instanceType>m5.large</instanceType><sourceDestCheck>false</sourceDestCheck>
   <placement><availabilityZone>us-east-1a</availabilityZone></placement>
   <tagSet><item><key>${CLUSTER}</key><value>owned</value></item></tagSet></item>`;

const instances = (...items: string[]): Answer => ({
  body: `<DescribeInstancesResponse xmlns="${EC2_NS}"><requestId>r-2</requestId><reservationSet><item>
    <reservationId>r-0abc</reservationId><instancesSet>${items.join('')}</instancesSet></item></reservationSet>
    </DescribeInstancesResponse>`,
});

const ec2Ok = (action: string): Answer => ({
  body: `<${action}Response xmlns="${EC2_NS}"><requestId>r-3</requestId><return>true</return></${action}Response>`,
});

describe('aws provider on recorded AWS answers (what the emulator cannot show)', () => {
  before(() => {
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: 'recorded',
      AWS_SECRET_ACCESS_KEY: 'recorded',
      AWS_MAX_ATTEMPTS: '1',
      AWS_EC2_METADATA_DISABLED: 'true',
    });
  });

  it('lists a route AWS marks as a blackhole as a blackhole, without asking about its instance', async () => {
    const { cloud, actions } = recordedCloud({
      DescribeRouteTables: routeTables(
        `<item><destinationCidrBlock>10.244.3.0/24</destinationCidrBlock><instanceId>i-0dead</instanceId><state>blackhole</state><origin>CreateRoute</origin></item>
         <item><destinationCidrBlock>10.0.0.0/16</destinationCidrBlock><gatewayId>local</gatewayId><state>active</state><origin>CreateRouteTable</origin></item>`,
      ),
    });
    const routes = await cloud.routes()?.listRoutes('kubernetes');
    assert.deepEqual(
      routes?.map((r) => [r.destinationCidr, r.targetNode, r.blackhole]),
      [['10.244.3.0/24', '', true]],
      'the local route is not the cluster’s',
    );
    assert.deepEqual(actions, ['DescribeRouteTables']);
  });

  it('replaces a blackhole of the same CIDR when it creates a route', async () => {
    const { cloud, actions } = recordedCloud({
      DescribeInstances: instances(instance('i-0live', 'running', 'ip-10-0-1-5.ec2.internal')),
      DescribeRouteTables: routeTables(
        `<item><destinationCidrBlock>10.244.3.0/24</destinationCidrBlock><instanceId>i-0dead</instanceId><state>blackhole</state></item>`,
      ),
      DeleteRoute: ec2Ok('DeleteRoute'),
      CreateRoute: ec2Ok('CreateRoute'),
    });
    const route: Route = {
      name: '',
      targetNode: 'ip-10-0-1-5.ec2.internal',
      enableNodeAddresses: false,
      targetNodeAddresses: [],
      destinationCidr: '10.244.3.0/24',
      blackhole: false,
    };
    await cloud.routes()?.createRoute('kubernetes', 'uid', route);
    assert.deepEqual(actions, [
      'DescribeInstances',
      'DescribeRouteTables',
      'DeleteRoute 10.244.3.0/24',
      'CreateRoute 10.244.3.0/24',
    ]);
  });

  it('leaves draining targets alone: only targets that should not be there are deregistered', async () => {
    const nlbArn = 'arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/a1/50dc6c495c0c9188';
    const tgArn = 'arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-default-web/73e2d6bc24d8a067';
    const tags = `<Tags><member><Key>${CLUSTER}</Key><Value>owned</Value></member><member><Key>kubernetes.io/service-name</Key><Value>default/web</Value></member></Tags>`;
    const { cloud, actions } = recordedCloud({
      DescribeLoadBalancers: {
        body: `<DescribeLoadBalancersResponse xmlns="${ELB_NS}"><DescribeLoadBalancersResult><LoadBalancers><member>
          <LoadBalancerArn>${nlbArn}</LoadBalancerArn><Type>network</Type><Scheme>internet-facing</Scheme>
          <DNSName>a1-50dc6c495c0c9188.elb.us-east-1.amazonaws.com</DNSName><VpcId>vpc-0abc1234</VpcId>
          <State><Code>active</Code></State></member></LoadBalancers></DescribeLoadBalancersResult>
          <ResponseMetadata><RequestId>r-4</RequestId></ResponseMetadata></DescribeLoadBalancersResponse>`,
      },
      DescribeTags: {
        body: `<DescribeTagsResponse xmlns="${ELB_NS}"><DescribeTagsResult><TagDescriptions><member>
          <ResourceArn>${nlbArn}</ResourceArn>${tags}</member></TagDescriptions></DescribeTagsResult>
          <ResponseMetadata><RequestId>r-5</RequestId></ResponseMetadata></DescribeTagsResponse>`,
      },
      DescribeListeners: {
        body: `<DescribeListenersResponse xmlns="${ELB_NS}"><DescribeListenersResult><Listeners><member>
          <ListenerArn>${nlbArn.replace('loadbalancer', 'listener')}/1</ListenerArn><LoadBalancerArn>${nlbArn}</LoadBalancerArn>
          <Port>80</Port><Protocol>TCP</Protocol><DefaultActions><member><Type>forward</Type><TargetGroupArn>${tgArn}</TargetGroupArn></member></DefaultActions>
          </member></Listeners></DescribeListenersResult><ResponseMetadata><RequestId>r-6</RequestId></ResponseMetadata></DescribeListenersResponse>`,
      },
      DescribeTargetGroups: {
        body: `<DescribeTargetGroupsResponse xmlns="${ELB_NS}"><DescribeTargetGroupsResult><TargetGroups><member>
          <TargetGroupArn>${tgArn}</TargetGroupArn><Protocol>TCP</Protocol><Port>30080</Port><HealthCheckProtocol>TCP</HealthCheckProtocol>
          <HealthCheckPort>traffic-port</HealthCheckPort><HealthCheckIntervalSeconds>30</HealthCheckIntervalSeconds>
          <HealthyThresholdCount>3</HealthyThresholdCount><UnhealthyThresholdCount>3</UnhealthyThresholdCount><TargetType>instance</TargetType>
          </member></TargetGroups></DescribeTargetGroupsResult><ResponseMetadata><RequestId>r-7</RequestId></ResponseMetadata></DescribeTargetGroupsResponse>`,
      },
      DescribeTargetHealth: {
        body: `<DescribeTargetHealthResponse xmlns="${ELB_NS}"><DescribeTargetHealthResult><TargetHealthDescriptions>
          <member><Target><Id>i-0old</Id><Port>30080</Port></Target><TargetHealth><State>draining</State><Reason>Target.DeregistrationInProgress</Reason></TargetHealth></member>
          <member><Target><Id>i-0live</Id><Port>30080</Port></Target><TargetHealth><State>healthy</State></TargetHealth></member>
          </TargetHealthDescriptions></DescribeTargetHealthResult><ResponseMetadata><RequestId>r-8</RequestId></ResponseMetadata></DescribeTargetHealthResponse>`,
      },
      DescribeLoadBalancerAttributes: {
        body: `<DescribeLoadBalancerAttributesResponse xmlns="${ELB_NS}"><DescribeLoadBalancerAttributesResult><Attributes>
          <member><Key>load_balancing.cross_zone.enabled</Key><Value>false</Value></member></Attributes></DescribeLoadBalancerAttributesResult>
          <ResponseMetadata><RequestId>r-9</RequestId></ResponseMetadata></DescribeLoadBalancerAttributesResponse>`,
      },
    });
    const service: V1Service = {
      metadata: { name: 'web', namespace: 'default', uid: '1d2c3b4a-0000-1111-2222-333344445555' },
      spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP', nodePort: 30080 }] },
    };
    const node: V1Node = { metadata: { name: 'n' }, spec: { providerID: 'aws:///us-east-1a/i-0live' } };
    const status = await cloud.loadBalancer()?.ensureLoadBalancer('kubernetes', service, [node]);
    assert.equal(
      status?.ingress?.[0]?.hostname,
      'a1-50dc6c495c0c9188.elb.us-east-1.amazonaws.com',
      'real AWS DNS name shape',
    );
    assert.deepEqual(
      actions.filter((a) => !a.startsWith('Describe')),
      [],
      'the draining target is not deregistered again, the live one not registered again',
    );
  });

  it('turns throttling the SDK’s retries did not absorb into RetryError naming the call, with a delay', async () => {
    const { cloud } = recordedCloud({
      DescribeInstances: {
        status: 503,
        body: '<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>r-10</RequestID></Response>',
      },
    });
    const node: V1Node = { metadata: { name: 'n' }, spec: { providerID: 'aws:///us-east-1a/i-0live' } };
    await assert.rejects(cloud.instancesV2()?.instanceExists(node) ?? Promise.resolve(), (error: unknown) => {
      const retry = findCause(error, RetryError);
      assert.ok(retry, String(error));
      assert.match(retry.message, /ec2:DescribeInstances was throttled by AWS \(RequestLimitExceeded\)/);
      assert.equal(retry.retryAfterMs, 20_000);
      return true;
    });
  });
});
