// IP networks in CIDR notation, IPv4 and IPv6, as Go's net and k8s.io/utils/net read them:
// parsing (leading zeros in IPv4 octets allowed, as ParseCIDRSloppy does; host bits cleared, as
// ParseCIDR does), containment, and a canonical text for comparing two spellings of one network.
// Pure functions over bigint addresses; no dependency.

/** An IP network: its family, its network address (host bits cleared) and its prefix length. */
export interface Cidr {
  readonly family: 4 | 6;
  readonly network: bigint;
  readonly prefix: number;
}

/** An IP address: its family and value. */
export interface IpAddress {
  readonly family: 4 | 6;
  readonly value: bigint;
}

const bitsOf = { 4: 32, 6: 128 } as const;

/** Parses `a.b.c.d/n` or an IPv6 `x::y/n`; undefined when `text` is not a CIDR. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const address = parseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (address === undefined || !/^[0-9]{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > bitsOf[address.family]) return undefined;
  return { family: address.family, network: address.value & mask(address.family, prefix), prefix };
}

/** Parses an IPv4 or IPv6 address (no zone); undefined when `text` is neither. */
export function parseIp(text: string): IpAddress | undefined {
  if (text.includes(':')) {
    const value = parseIpv6(text);
    return value === undefined ? undefined : { family: 6, value };
  }
  const value = parseIpv4(text);
  return value === undefined ? undefined : { family: 4, value };
}

// Four decimal octets; leading zeros are read as decimal (Go's sloppy parser), not octal.
function parseIpv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!/^[0-9]{1,3}$/.test(part) || Number(part) > 255) return undefined;
    value = (value << 8n) | BigInt(part);
  }
  return value;
}

// Up to eight hex groups, one `::` standing for the missing zero groups, and an optional IPv4
// address in place of the last two groups.
function parseIpv6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = groupsOf(halves[0] ?? '', halves.length === 1);
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? '', true) : [];
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const groups = [...head, ...Array<bigint>(halves.length === 2 ? missing : 0).fill(0n), ...tail];
  return groups.reduce((value, group) => (value << 16n) | group, 0n);
}

// The 16-bit groups of one side of `::`; an IPv4 address may end the last side.
function groupsOf(text: string, last: boolean): bigint[] | undefined {
  if (text === '') return [];
  const parts = text.split(':');
  const groups: bigint[] = [];
  for (const [index, part] of parts.entries()) {
    if (last && index === parts.length - 1 && part.includes('.')) {
      const v4 = parseIpv4(part);
      if (v4 === undefined) return undefined;
      groups.push(v4 >> 16n, v4 & 0xffffn);
    } else {
      if (!/^[0-9a-fA-F]{1,4}$/.test(part)) return undefined;
      groups.push(BigInt(`0x${part}`));
    }
  }
  return groups;
}

function mask(family: 4 | 6, prefix: number): bigint {
  const bits = BigInt(bitsOf[family]);
  const host = bits - BigInt(prefix);
  return ((1n << bits) - 1n) ^ ((1n << host) - 1n);
}

/** The first address of the network (the network address). */
export function firstAddress(cidr: Cidr): IpAddress {
  return { family: cidr.family, value: cidr.network };
}

/** The last address of the network (all host bits set). */
export function lastAddress(cidr: Cidr): IpAddress {
  const all = (1n << BigInt(bitsOf[cidr.family])) - 1n;
  return { family: cidr.family, value: cidr.network | (all ^ mask(cidr.family, cidr.prefix)) };
}

/**
 * Whether `address` lies in `cidr`. As Go's IPNet.Contains, an IPv4-mapped IPv6 address
 * (`::ffff:a.b.c.d`) counts as its IPv4 address, and families never mix otherwise.
 */
export function cidrContains(cidr: Cidr, address: IpAddress): boolean {
  const ip = unmapped(address);
  if (ip.family !== cidr.family) return false;
  return (ip.value & mask(cidr.family, cidr.prefix)) === cidr.network;
}

function unmapped(address: IpAddress): IpAddress {
  if (address.family === 6 && address.value >> 32n === 0xffffn) return { family: 4, value: address.value & 0xffffffffn };
  return address;
}

/**
 * The canonical text of a network: host bits cleared, IPv4 without leading zeros, IPv6 in
 * RFC 5952 form (lower case, the longest run of zero groups as `::`; IPv4-mapped in hex). Two spellings of one
 * network have the same canonical text.
 */
export function formatCidr(cidr: Cidr): string {
  return `${formatIp(firstAddress(cidr))}/${cidr.prefix}`;
}

/** The canonical text of an address (see formatCidr). */
export function formatIp(address: IpAddress): string {
  if (address.family === 4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((address.value >> shift) & 0xffn)).join('.');
  }
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((shift) => ((address.value >> shift) & 0xffffn).toString(16));
  // The WHATWG URL serializer compresses IPv6 as RFC 5952 asks (IPv4-mapped addresses stay in hex).
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/** `text` in canonical form when it is a CIDR, else `text` unchanged. */
export function canonicalCidr(text: string): string {
  const cidr = parseCidr(text);
  return cidr === undefined ? text : formatCidr(cidr);
}
