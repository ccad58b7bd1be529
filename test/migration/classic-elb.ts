// Reads Classic ELBs (the Elastic Load Balancing 2012-06-01 Query API) from the emulator, for the
// migration test's snapshots: cloud-provider-aws makes one for every Service without a type
// annotation. The project has no client for that API (it has the ELBv2 one), so this sends the
// Query requests itself; the emulator does not check signatures, only the credential scope, which
// names the service and region.

import type { AwsWorld } from '../harness/aws.ts';

/** An XML element as nested records: repeated `member` elements become arrays, text becomes strings. */
export type Xml = string | Xml[] | { [name: string]: Xml };

/** One Query API call; the result element of its answer, or an Error with the answer's text. */
async function query(world: AwsWorld, action: string, params: Record<string, string>): Promise<Xml> {
  const body = new URLSearchParams({ Action: action, Version: '2012-06-01', ...params });
  const scope = `testing/20250101/${world.region}/elasticloadbalancing/aws4_request`;
  const response = await fetch(world.endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
      authorization: `AWS4-HMAC-SHA256 Credential=${scope}, SignedHeaders=host, Signature=0`,
    },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`elb ${action}: HTTP ${response.status}: ${text.slice(0, 500)}`);
  const root = parseXml(text);
  return field(field(root, `${action}Response`), `${action}Result`);
}

/** `value[name]` of an element, or '' when absent. */
export function field(value: Xml | undefined, name: string): Xml {
  if (value === undefined || typeof value === 'string' || Array.isArray(value)) return '';
  return value[name] ?? '';
}

/** The members of a list element (an empty list when absent). */
export function members(value: Xml): Xml[] {
  return Array.isArray(value) ? value : [];
}

/** The text of an element ('' when absent). */
export function text(value: Xml): string {
  return typeof value === 'string' ? value : '';
}

/** The Classic ELBs of `world`'s VPC, each with its attributes, policies and tags. */
export async function classicLoadBalancers(world: AwsWorld): Promise<ClassicElb[]> {
  const described = members(field(await query(world, 'DescribeLoadBalancers', {}), 'LoadBalancerDescriptions'));
  const ours = described.filter((lb) => text(field(lb, 'VPCId')) === world.vpcId);
  return Promise.all(ours.map((lb) => withDetails(world, lb)));
}

export interface ClassicElb {
  readonly name: string;
  readonly description: Xml;
  readonly attributes: Xml;
  readonly policies: Xml;
  readonly tags: Xml;
}

async function withDetails(world: AwsWorld, description: Xml): Promise<ClassicElb> {
  const name = text(field(description, 'LoadBalancerName'));
  const byName = { LoadBalancerName: name };
  const [attributes, policies, tags] = await Promise.all([
    query(world, 'DescribeLoadBalancerAttributes', byName),
    query(world, 'DescribeLoadBalancerPolicies', byName),
    query(world, 'DescribeTags', { 'LoadBalancerNames.member.1': name }),
  ]);
  return {
    name,
    description,
    attributes: field(attributes, 'LoadBalancerAttributes'),
    policies: field(policies, 'PolicyDescriptions'),
    tags: field(members(field(tags, 'TagDescriptions'))[0], 'Tags'),
  };
}

/**
 * Parses the plain XML the Query APIs answer with (elements and text; no attributes, CDATA or
 * mixed content are used by them). An element whose children are all `member` is a list.
 */
export function parseXml(source: string): Xml {
  const tokens = source.replace(/<\?[^>]*\?>/g, '').match(/<[^>]+>|[^<]+/g) ?? [];
  const stack: { name: string; children: [string, Xml][]; text: string }[] = [{ name: '', children: [], text: '' }];
  for (const token of tokens) {
    const top = stack[stack.length - 1] as (typeof stack)[number];
    if (token.startsWith('</')) {
      stack.pop();
      const parent = stack[stack.length - 1] as (typeof stack)[number];
      parent.children.push([top.name, element(top)]);
    } else if (token.startsWith('<')) {
      const name = (/^<\s*([^\s/>]+)/.exec(token)?.[1] ?? '').replace(/^.*:/, '');
      if (token.endsWith('/>')) top.children.push([name, '']);
      else stack.push({ name, children: [], text: '' });
    } else top.text += unescape(token);
  }
  return element(stack[0] as (typeof stack)[number]);
}

function element(node: { children: [string, Xml][]; text: string }): Xml {
  if (node.children.length === 0) return node.text.trim();
  if (node.children.every(([name]) => name === 'member')) return node.children.map(([, value]) => value);
  return Object.fromEntries(node.children);
}

function unescape(value: string): string {
  return value.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos);/gi, (_, entity: string) => {
    const named: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
    if (entity.startsWith('#x') || entity.startsWith('#X')) return String.fromCodePoint(parseInt(entity.slice(2), 16));
    if (entity.startsWith('#')) return String.fromCodePoint(Number(entity.slice(1)));
    return named[entity.toLowerCase()] ?? '';
  });
}
