// `npm run aws:emulator`: an AWS account on this machine for trying the aws provider. Starts the
// emulator (moto, installed on first use), builds a cluster's VPC in it with three instances,
// writes the cloud-config and the Node and Service manifests, prints the commands to run cirrus
// against it, and runs until Ctrl-C. Other modes act on the running demo (found through the
// demo.json it writes): --show prints what the cloud holds, --stop/--start/--terminate change an
// instance as a user of EC2 would.

import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startEmulator } from './server.ts';
import {
  DescribeInstancesCommand,
  StartInstancesCommand,
  StopInstancesCommand,
  TerminateInstancesCommand,
} from '@aws-sdk/client-ec2';
import { awsEnv, createWorld, defaultRegion, emulatorClients, type AwsWorld, type WorldInstance } from './world.ts';
import { showWorld } from './show.ts';

const usage = `Usage: npm run aws:emulator -- [options]

Starts the AWS emulator (moto, installed into the cache on first use, about 30 s), builds a cluster's
VPC with three instances in it, writes the cloud-config, nodes.yaml and service.yaml into --dir, prints
the commands that run cirrus's aws provider against it, and runs until Ctrl-C (which stops moto).

Options:
  --port <n>            the emulator's port (default 5555)
  --region <name>       the region (default ${defaultRegion})
  --cluster-id <id>     the cluster ID: KubernetesClusterID and the kubernetes.io/cluster/<id> tag (default cirrus-demo)
  --instances <n>       instances to run (default 3)
  --dir <path>          where the files go (default .cirrus/aws-demo)
  --help                this text

While it runs, from another terminal (same --dir):
  --show                print the instances, load balancers, target groups, listeners, routes and
                        node security group rules in the demo's VPC
  --stop <instance-id>, --start <instance-id>, --terminate <instance-id>
                        change an instance's state, as the EC2 console would

Without the AWS CLI, the whole emulator state is also at curl -s http://127.0.0.1:<port>/moto-api/data.json`;

const defaultDir = join('.cirrus', 'aws-demo');

const { values } = parseFlags();

function parseFlags() {
  try {
    return parseArgs({
      options: {
        port: { type: 'string', default: '5555' },
        region: { type: 'string', default: defaultRegion },
        'cluster-id': { type: 'string', default: 'cirrus-demo' },
        instances: { type: 'string', default: '3' },
        dir: { type: 'string', default: defaultDir },
        show: { type: 'boolean', default: false },
        stop: { type: 'string' },
        start: { type: 'string' },
        terminate: { type: 'string' },
        help: { type: 'boolean', default: false },
      },
    });
  } catch (error) {
    process.stderr.write(`aws:emulator: ${(error as Error).message} (see --help)\n`);
    process.exit(2);
  }
}

/** What a running demo writes for the other modes. */
interface DemoState {
  readonly pid: number;
  readonly endpoint: string;
  readonly region: string;
  readonly clusterId: string;
  readonly vpcId: string;
  readonly routeTableId: string;
  readonly securityGroupId: string;
}

const dir = resolve(values.dir);
const stateFile = join(dir, 'demo.json');

async function runningDemo(): Promise<DemoState> {
  let state: DemoState;
  try {
    state = JSON.parse(await readFile(stateFile, 'utf8')) as DemoState;
  } catch {
    throw new Error(`no running demo in ${dir} (no demo.json): start one with \`npm run aws:emulator\``);
  }
  try {
    process.kill(state.pid, 0);
  } catch {
    throw new Error(
      `the demo that wrote ${stateFile} (pid ${state.pid}) is gone: start one with \`npm run aws:emulator\``,
    );
  }
  return state;
}

async function changeInstance(state: DemoState): Promise<void> {
  const { ec2, elbv2 } = emulatorClients(state.endpoint, state.region);
  const changes: [string | undefined, (InstanceIds: string[]) => Promise<unknown>][] = [
    [values.stop, (InstanceIds) => ec2.send(new StopInstancesCommand({ InstanceIds }))],
    [values.start, (InstanceIds) => ec2.send(new StartInstancesCommand({ InstanceIds }))],
    [values.terminate, (InstanceIds) => ec2.send(new TerminateInstancesCommand({ InstanceIds }))],
  ];
  try {
    for (const [id, change] of changes) {
      if (id === undefined) continue;
      await change([id]);
      const answer = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [id] }));
      console.log(`${id}: ${answer.Reservations?.[0]?.Instances?.[0]?.State?.Name ?? 'unknown'}`);
    }
  } finally {
    ec2.destroy();
    elbv2.destroy();
  }
}

async function runDemo(): Promise<void> {
  const port = positive(values.port, '--port');
  const count = positive(values.instances, '--instances');
  const say = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  const emulator = await startEmulator({ port, progress: say }).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}\n(another program on port ${port}? pick one with --port)`, {
      cause: error,
    });
  });
  const stop = async (): Promise<void> => {
    await rm(stateFile, { force: true });
    await emulator.stop();
  };
  try {
    const world = await createWorld(emulator.endpoint, { clusterId: values['cluster-id'], region: values.region });
    const instances: WorldInstance[] = [];
    for (let i = 0; i < count; i++) {
      instances.push(
        await world.runInstance({ az: world.publicSubnets[i % world.publicSubnets.length]?.az ?? '', publicIp: true }),
      );
    }
    await writeFiles(world, instances);
    const state: DemoState = {
      pid: process.pid,
      endpoint: emulator.endpoint,
      region: world.region,
      clusterId: world.clusterId,
      vpcId: world.vpcId,
      routeTableId: world.routeTableId,
      securityGroupId: world.securityGroupId,
    };
    await writeFile(stateFile, `${JSON.stringify(state, null, 2)}\n`);
    world.close();
    console.log(nextSteps(world, instances));
  } catch (error) {
    await stop();
    throw error;
  }
  await new Promise<void>((done) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        done();
      });
    }
  });
  await stop();
  say('\nstopped the emulator (its state is gone)');
}

function positive(value: string, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new Error(`${flag}: "${value}" is not a positive integer`);
  return n;
}

const clusterCidr = '10.244.0.0/16';

async function writeFiles(world: AwsWorld, instances: readonly WorldInstance[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  const env = awsEnv(world.endpoint, world.region);
  await writeFile(join(dir, 'cloud.conf'), world.cloudConfig());
  await writeFile(
    join(dir, 'env.sh'),
    Object.entries(env)
      .map(([k, v]) => `export ${k}=${v}\n`)
      .join(''),
  );
  await writeFile(join(dir, 'nodes.yaml'), instances.map((instance, i) => nodeYaml(instance, i)).join('---\n'));
  await writeFile(join(dir, 'service.yaml'), serviceYaml);
}

// A Node as a kubelet with --cloud-provider=external registers it: named by the instance's private
// DNS name, no provider ID (the provider finds the instance by name), tainted until initialized.
// The pod CIDR is what the routes function routes to the instance.
function nodeYaml(instance: WorldInstance, index: number): string {
  return `apiVersion: v1
kind: Node
metadata:
  name: ${instance.privateDnsName}
spec:
  podCIDR: 10.244.${index}.0/24
  podCIDRs: [10.244.${index}.0/24]
  taints:
    - key: node.cloudprovider.kubernetes.io/uninitialized
      value: "true"
      effect: NoSchedule
`;
}

const serviceYaml = `apiVersion: v1
kind: Service
metadata:
  name: web
  annotations:
    service.beta.kubernetes.io/aws-load-balancer-type: nlb
spec:
  type: LoadBalancer
  selector:
    app: web
  ports:
    - name: http
      port: 80
      targetPort: 8080
      protocol: TCP
`;

function nextSteps(world: AwsWorld, instances: readonly WorldInstance[]): string {
  const env = Object.entries(awsEnv(world.endpoint, world.region))
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  const [first, second] = instances;
  const file = (name: string): string => join(dir, name);
  const demo = `npm run aws:emulator --${values.dir === defaultDir ? '' : ` --dir ${dir}`}`;
  return `
AWS emulator (moto) at ${world.endpoint}, region ${world.region}: VPC ${world.vpcId} (${world.vpcCidr}) of cluster ${world.clusterId},
public subnets ${world.publicSubnets.map((s) => `${s.id} (${s.az})`).join(', ')}, route table ${world.routeTableId},
instances:
${instances.map((i) => `  ${i.instanceId}  ${i.privateDnsName}  ${i.privateIp}  ${i.publicIp ?? ''}  ${i.az}`).join('\n')}

Files in ${dir}:
  cloud.conf    the cloud-config (cloud-provider-aws's INI format)
  env.sh        the AWS SDK's variables for this emulator
  nodes.yaml    ${instances.length} Nodes named by the instances' private DNS names, tainted uninitialized
  service.yaml  Service web, type LoadBalancer (an NLB)

1. In a second terminal, run cirrus with the aws provider against the emulator (with no KUBECONFIG
   it starts a local control plane and prints KUBECONFIG=<path>):

   export ${env}
   npm start -- --cloud-provider aws --cloud-config ${file('cloud.conf')} --cluster-cidr ${clusterCidr}

2. In a third terminal:

   export KUBECONFIG=<the path it printed>
   kubectl apply -f ${file('nodes.yaml')}
   kubectl get nodes -o wide                      # addresses from EC2, no uninitialized taint
   kubectl get node ${first?.privateDnsName ?? ''} -o jsonpath='{.spec.providerID}{"\\n"}{.metadata.labels}{"\\n"}'
   kubectl apply -f ${file('service.yaml')}
   kubectl get service web                        # EXTERNAL-IP: the NLB's DNS name

3. Look at the cloud:

   ${demo} --show                 # instances, NLBs, target groups and targets, listeners, routes
   curl -s ${world.endpoint}/moto-api/data.json   # everything moto holds, as JSON

4. Change it:

   ${demo} --stop ${second?.instanceId ?? ''}        # on node-lifecycle's next pass: its Node gets the shutdown taint
   ${demo} --terminate ${second?.instanceId ?? ''}   # then: its Node is deleted, and its target leaves the NLB
   kubectl delete service web                     # the NLB, its target group and listener are deleted

Ctrl-C here stops the emulator.`;
}

// Last, so that every constant above is initialized.
try {
  if (values.help) {
    console.log(usage);
  } else if (values.show) {
    await showWorld(await runningDemo(), (line) => {
      console.log(line);
    });
  } else if (values.stop !== undefined || values.start !== undefined || values.terminate !== undefined) {
    await changeInstance(await runningDemo());
  } else {
    await runDemo();
  }
} catch (error) {
  process.stderr.write(`aws:emulator: ${(error as Error).message}\n`);
  process.exitCode = 1;
}
