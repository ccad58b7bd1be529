// IP address arithmetic for the static provider's load balancer pools: addresses as bigints (an
// IPv6 pool may hold 2^64 addresses and more, beyond a JavaScript number), the pool entries users
// write (CIDRs, ranges, single addresses), and the canonical text of an address.
//
// Addresses are always written out in canonical form (RFC 5952 for IPv6: lower case, no leading
// zeros, the longest run of zero groups as "::"), so that the same address is the same string
// wherever it is compared: in the allocations ConfigMap, in requests and in Service status.

import { isIP } from 'node:net';

/** The IP families of Kubernetes' `spec.ipFamilies`. */
export type IpFamily = 'IPv4' | 'IPv6';

/** An IP address: its family and its value as an unsigned integer of 32 or 128 bits. */
export interface Ip {
  readonly family: IpFamily;
  readonly value: bigint;
}

/** One entry of a pool's `addresses`, parsed. */
export interface AddressBlock {
  /** As written. */
  readonly text: string;
  readonly family: IpFamily;
  /** The whole extent written: a CIDR's network to its last address, or a range's ends. Used for overlap checks. */
  readonly first: bigint;
  readonly last: bigint;
  /** The addresses handed out: the extent less a CIDR's network/broadcast (IPv4) or subnet-router anycast (IPv6) address. */
  readonly usableFirst: bigint;
  readonly usableLast: bigint;
}

const BITS: Readonly<Record<IpFamily, bigint>> = { IPv4: 32n, IPv6: 128n };
const IPV4 = /^(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})$/;

/**
 * Parses an IPv4 address in dotted decimal (no leading zeros, which some tools read as octal) or
 * an IPv6 address without a zone and without an embedded dotted IPv4 part. Undefined otherwise.
 */
export function parseIp(text: string): Ip | undefined {
  const v4 = IPV4.exec(text);
  if (v4 !== null) {
    const octets = v4.slice(1).map(Number);
    if (octets.some((octet) => octet > 255)) return undefined;
    return { family: 'IPv4', value: octets.reduce((value, octet) => (value << 8n) | BigInt(octet), 0n) };
  }
  if (isIP(text) !== 6 || /[%.]/.test(text)) return undefined;
  return { family: 'IPv6', value: ipv6Value(text) };
}

// `text` is a valid IPv6 address without zone or dotted tail, so it holds at most one "::".
function ipv6Value(text: string): bigint {
  const [head = '', tail] = text.split('::');
  const groups = (part: string): number[] => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const before = groups(head);
  const after = tail === undefined ? [] : groups(tail);
  const zeros = new Array<number>(8 - before.length - after.length).fill(0);
  return [...before, ...zeros, ...after].reduce((value, group) => (value << 16n) | BigInt(group), 0n);
}

/** The canonical text of an address. */
export function formatIp(ip: Ip): string {
  if (ip.family === 'IPv4') {
    return [24n, 16n, 8n, 0n].map((shift) => String((ip.value >> shift) & 0xffn)).join('.');
  }
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((shift) => Number((ip.value >> shift) & 0xffffn));
  const [start, length] = longestZeroRun(groups);
  const hex = (part: number[]): string => part.map((group) => group.toString(16)).join(':');
  if (length < 2) return hex(groups);
  return `${hex(groups.slice(0, start))}::${hex(groups.slice(start + length))}`;
}

// RFC 5952 §4.2: the longest run of zero groups (the first of equal ones) becomes "::", never a single group.
function longestZeroRun(groups: readonly number[]): [start: number, length: number] {
  let best: [number, number] = [0, 0];
  let start = 0;
  groups.forEach((group, index) => {
    if (group !== 0) {
      start = index + 1;
      return;
    }
    const length = index - start + 1;
    if (length > best[1]) best = [start, length];
  });
  return best;
}

/** The canonical form of `text`, or undefined when it is no address parseIp accepts. */
export function canonicalIp(text: string): string | undefined {
  const ip = parseIp(text);
  return ip === undefined ? undefined : formatIp(ip);
}

const EXAMPLES = 'a CIDR (like 192.0.2.0/28), a range (like 192.0.2.10-192.0.2.20) or a single address';

/**
 * Parses a pool entry: a CIDR (`192.0.2.0/28`, `2001:db8::/120`), a range of two addresses of the
 * same family joined by "-" (`192.0.2.10-192.0.2.20`), or a single address. Returns the block, or
 * the problem with `text` as a sentence fragment (for CloudConfigError).
 *
 * Usable addresses: an IPv4 CIDR of /30 or wider leaves out its first and last address (network
 * and broadcast: a CIDR usually names the link's subnet, and those two are not host addresses on
 * it); an IPv6 CIDR of /126 or wider leaves out its first address (the subnet-router anycast
 * address, RFC 4291 §2.6.1). /31, /32, /127, /128, ranges and single addresses are used whole.
 */
export function parseBlock(text: string): AddressBlock | string {
  const block = text.includes('/') ? parseCidr(text) : parseRange(text);
  if (typeof block === 'string') return block;
  return reservedProblem(block) ?? block;
}

function parseCidr(text: string): AddressBlock | string {
  const [address = '', prefixText = '', extra] = text.split('/').map((part) => part.trim());
  if (extra !== undefined) return `is not ${EXAMPLES}`;
  const ip = parseIp(address);
  if (ip === undefined) return notAnAddress(address);
  const bits = BITS[ip.family];
  const prefix = /^(0|[1-9]\d{0,2})$/.test(prefixText) ? BigInt(prefixText) : -1n;
  if (prefix < 0n || prefix > bits) return `has the prefix length /${prefixText}; an ${ip.family} prefix length is 0 to ${bits}`;
  const hostBits = bits - prefix;
  const first = (ip.value >> hostBits) << hostBits;
  if (first !== ip.value) {
    return `has bits set after its /${prefix} prefix; the network is ${formatIp({ family: ip.family, value: first })}/${prefix}`;
  }
  return cidrBlock(text, ip.family, first, hostBits);
}

// IPv4 /30 and wider lose network and broadcast, IPv6 /126 and wider the subnet-router anycast address.
function cidrBlock(text: string, family: IpFamily, first: bigint, hostBits: bigint): AddressBlock {
  const last = first + (1n << hostBits) - 1n;
  const trims = hostBits >= 2n;
  const usableLast = trims && family === 'IPv4' ? last - 1n : last;
  return { text, family, first, last, usableFirst: trims ? first + 1n : first, usableLast };
}

function parseRange(text: string): AddressBlock | string {
  const parts = text.split('-').map((part) => part.trim());
  if (parts.length > 2) return `is not ${EXAMPLES}`;
  const [startText = '', endText = startText] = parts;
  const start = parseIp(startText);
  if (start === undefined) return notAnAddress(startText);
  const end = parseIp(endText);
  if (end === undefined) return notAnAddress(endText);
  if (start.family !== end.family) return `starts with an ${start.family} address and ends with an ${end.family} address`;
  if (end.value < start.value) return `ends (${formatIp(end)}) before it starts (${formatIp(start)})`;
  return { text, family: start.family, first: start.value, last: end.value, usableFirst: start.value, usableLast: end.value };
}

function notAnAddress(address: string): string {
  if (address.includes('%')) return `holds ${JSON.stringify(address)}, an address with a zone, which cannot be a load balancer address`;
  if (isIP(address) === 6) return `holds ${JSON.stringify(address)}, an IPv6 address with an embedded IPv4 part; write IPv4 addresses as such`;
  return `holds ${JSON.stringify(address)}, which is not an IPv4 or IPv6 address; write ${EXAMPLES}`;
}

// Addresses no Service may have: a pool that reaches into them is a typo or a misunderstanding.
const RESERVED: readonly (readonly [cidr: string, what: string])[] = [
  ['0.0.0.0/8', '"this network" addresses'],
  ['127.0.0.0/8', 'loopback addresses'],
  ['224.0.0.0/4', 'multicast addresses'],
  ['255.255.255.255/32', 'the limited broadcast address'],
  ['::/128', 'the unspecified address'],
  ['::1/128', 'the loopback address'],
  ['::ffff:0:0/96', 'IPv4-mapped addresses'],
  ['ff00::/8', 'multicast addresses'],
];

const RESERVED_BLOCKS = RESERVED.map(([cidr, what]) => ({ block: parseCidr(cidr) as AddressBlock, what }));

function reservedProblem(block: AddressBlock): string | undefined {
  for (const { block: reserved, what } of RESERVED_BLOCKS) {
    const shared = firstCommon(block, reserved);
    if (shared !== undefined) {
      return `holds ${formatIp({ family: block.family, value: shared })}, which is in ${reserved.text} (${what}): no load balancer can have such an address`;
    }
  }
  return undefined;
}

/** The first address two blocks' written extents have in common, or undefined when they do not overlap. */
export function firstCommon(a: AddressBlock, b: AddressBlock): bigint | undefined {
  if (a.family !== b.family) return undefined;
  const first = a.first > b.first ? a.first : b.first;
  const last = a.last < b.last ? a.last : b.last;
  return first <= last ? first : undefined;
}

/** How many addresses the block hands out. */
export function blockSize(block: AddressBlock): bigint {
  return block.usableLast - block.usableFirst + 1n;
}

/** Whether the block hands out `ip`. */
export function blockContains(block: AddressBlock, ip: Ip): boolean {
  return block.family === ip.family && ip.value >= block.usableFirst && ip.value <= block.usableLast;
}

/**
 * The lowest address of `block` not in `taken`, which holds values of the block's family sorted
 * ascending; undefined when every usable address is taken.
 */
export function lowestFree(block: AddressBlock, taken: readonly bigint[]): bigint | undefined {
  let candidate = block.usableFirst;
  for (const value of taken) {
    if (value > candidate) break;
    if (value === candidate) candidate += 1n;
  }
  return candidate <= block.usableLast ? candidate : undefined;
}
