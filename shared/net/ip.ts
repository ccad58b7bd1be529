// IP addresses and networks (CIDRs), IPv4 and IPv6: the one place cirrus reads and writes them.
// ipaddr.js does the text: validation, the RFC 5952 form of IPv6 (lower case, no leading zeros,
// the longest run of zero groups as "::"), IPv4-mapped addresses. Values are bigints (an IPv6
// network may hold 2^64 addresses and more, beyond a JavaScript number) for masks, ranges and
// allocation.
//
// By default text is read as Kubernetes reads it (k8s.io/utils/net's ParseIPSloppy and
// ParseCIDRSloppy): leading zeros in IPv4 octets and prefix lengths are decimal, an IPv6 address
// may end in dotted IPv4, a zone (`%eth0`) is refused. An IpSyntax narrows or widens that for a
// caller that must read otherwise. Formatting is always canonical, so two spellings of one
// address or network give the same text.

import ipaddr from 'ipaddr.js';

/** The IP families, as Kubernetes' `spec.ipFamilies` names them. */
export type IpFamily = 'IPv4' | 'IPv6';

/** An IP address: its family and its value as an unsigned integer of 32 or 128 bits. */
export interface Ip {
  readonly family: IpFamily;
  readonly value: bigint;
}

/** An IP network: its family, its network address (host bits cleared) and its prefix length. */
export interface Cidr {
  readonly family: IpFamily;
  readonly network: bigint;
  readonly prefix: number;
}

/** How strictly text is read; each field left out takes the Kubernetes reading. */
export interface IpSyntax {
  /**
   * Leading zeros in IPv4 octets and prefix lengths, read as decimal (default true). False refuses
   * them: some tools read `010` as octal.
   */
  readonly leadingZeros?: boolean;
  /** An IPv6 address may end in dotted IPv4, like `::ffff:192.0.2.1` (default true). */
  readonly embeddedIpv4?: boolean;
  /** An IPv6 address may carry a zone, like `fe80::1%eth0` (default false); the zone is not part of the value. */
  readonly zone?: boolean;
}

type Address = ipaddr.IPv4 | ipaddr.IPv6;

const BITS: Readonly<Record<IpFamily, number>> = { IPv4: 32, IPv6: 128 };
const SLOPPY_IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
const HEX_IPV6 = /^[0-9a-fA-F:]+$/;
// A zone as Node.js's net.isIP takes it.
const ZONE = /^[0-9a-zA-Z.:-]+$/;

/** How many bits an address of `family` has: 32 or 128. */
export function familyBits(family: IpFamily): number {
  return BITS[family];
}

/** Parses an IPv4 or IPv6 address as `syntax` says; undefined when `text` is neither. */
export function parseIp(text: string, syntax: IpSyntax = {}): Ip | undefined {
  if (!text.includes(':')) return parseIpv4(text, syntax);
  const address = syntax.zone === true ? withoutZone(text) : text;
  const hex = address === undefined || syntax.embeddedIpv4 === false ? address : hexTail(address, syntax);
  if (hex === undefined || !HEX_IPV6.test(hex) || !ipaddr.IPv6.isValid(hex)) return undefined;
  return fromAddress(ipaddr.IPv6.parse(hex));
}

// Four decimal octets; with leading zeros allowed they are decimal (Go's sloppy parser), not octal.
function parseIpv4(text: string, syntax: IpSyntax): Ip | undefined {
  const sloppy = syntax.leadingZeros !== false && SLOPPY_IPV4.test(text);
  const decimal = sloppy
    ? text
        .split('.')
        .map((octet) => String(Number(octet)))
        .join('.')
    : text;
  return ipaddr.IPv4.isValidFourPartDecimal(decimal) ? fromAddress(ipaddr.IPv4.parse(decimal)) : undefined;
}

// The address before a zone, or undefined when the zone is empty or holds other characters.
function withoutZone(text: string): string | undefined {
  const percent = text.indexOf('%');
  if (percent < 0) return text;
  return ZONE.test(text.slice(percent + 1)) ? text.slice(0, percent) : undefined;
}

// An IPv6 address whose last group is dotted IPv4, with that group written as two hex groups;
// other text unchanged. Undefined when the dotted part is no IPv4 address.
function hexTail(text: string, syntax: IpSyntax): string | undefined {
  const colon = text.lastIndexOf(':');
  const tail = text.slice(colon + 1);
  if (!tail.includes('.')) return text;
  const v4 = parseIpv4(tail, syntax);
  if (v4 === undefined) return undefined;
  return `${text.slice(0, colon + 1)}${(v4.value >> 16n).toString(16)}:${(v4.value & 0xffffn).toString(16)}`;
}

function fromAddress(address: Address): Ip {
  const value = address.toByteArray().reduce((total, byte) => (total << 8n) | BigInt(byte), 0n);
  return { family: address.kind() === 'ipv4' ? 'IPv4' : 'IPv6', value };
}

function toAddress(ip: Ip): Address {
  const length = BITS[ip.family] / 8;
  const bytes = Array.from({ length }, (_, index) => Number((ip.value >> BigInt(8 * (length - 1 - index))) & 0xffn));
  return ipaddr.fromByteArray(bytes);
}

/** The canonical text of an address: IPv4 without leading zeros, IPv6 in RFC 5952 form (IPv4-mapped in hex). */
export function formatIp(ip: Ip): string {
  return toAddress(ip).toString();
}

/** `text` in canonical form (see formatIp) when parseIp accepts it with `syntax`, else undefined. */
export function canonicalIp(text: string, syntax: IpSyntax = {}): string | undefined {
  const ip = parseIp(text, syntax);
  return ip === undefined ? undefined : formatIp(ip);
}

/** The IPv4 address an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) stands for; any other address unchanged. */
export function unmapIp(ip: Ip): Ip {
  const address = toAddress(ip);
  return address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress() ? fromAddress(address.toIPv4Address()) : ip;
}

// A node's IPs as Node.js's net.isIP reads them (no leading zeros in IPv4 octets), without a zone.
const NODE_IP: IpSyntax = { leadingZeros: false };

// A node IP as it is compared: an IPv4-mapped IPv6 address is its IPv4 address.
function parseNodeIp(text: string): Ip | undefined {
  const ip = parseIp(text, NODE_IP);
  return ip === undefined ? undefined : unmapIp(ip);
}

/** The canonical text of a node's IP (IPv6 compressed, IPv4-mapped IPv6 as IPv4), or undefined. */
export function canonicalNodeIp(text: string): string | undefined {
  const ip = parseNodeIp(text);
  return ip === undefined ? undefined : formatIp(ip);
}

/**
 * Parses the provided-node-ip annotation: one IP, or a dual-stack pair (one IPv4, one IPv6), as
 * k8s.io/component-helpers node/util/ips.go, ParseNodeIPAnnotation. Answers their canonical texts
 * (canonicalNodeIp); throws an Error saying what is wrong otherwise.
 */
export function parseNodeIpAnnotation(value: string): string[] {
  const parts = value.split(',').map((p) => p.trim());
  if (value.trim() === '') throw new Error('the annotation is empty');
  if (parts.length > 2) throw new Error(`"${value}" has more than two IPs`);
  const ips = parts.map((p) => {
    const ip = parseNodeIp(p);
    if (ip === undefined) throw new Error(`"${p}" is not an IP address`);
    return ip;
  });
  const [first, second] = ips;
  if (first !== undefined && second !== undefined) {
    if (first.family === second.family) throw new Error(`"${value}" must be one IPv4 and one IPv6 address`);
    if (ips.some((ip) => ip.value === 0n))
      throw new Error(`"${value}": an unspecified address cannot be part of a pair`);
  }
  return ips.map(formatIp);
}

/** Parses a prefix length of `family` (0 to 32 or 128) as `syntax` says; undefined when `text` is none. */
export function parsePrefixLength(text: string, family: IpFamily, syntax: IpSyntax = {}): number | undefined {
  const pattern = syntax.leadingZeros === false ? /^(0|[1-9]\d{0,2})$/ : /^\d{1,3}$/;
  if (!pattern.test(text)) return undefined;
  const prefix = Number(text);
  return prefix <= BITS[family] ? prefix : undefined;
}

/**
 * Parses `address/prefix` (`10.244.0.0/16`, `fd00:10:244::/56`) as `syntax` says, clearing host
 * bits as Go's ParseCIDR does; undefined when `text` is no CIDR.
 */
export function parseCidr(text: string, syntax: IpSyntax = {}): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIp(text.slice(0, slash), syntax);
  const prefix = ip && parsePrefixLength(text.slice(slash + 1), ip.family, syntax);
  return ip === undefined || prefix === undefined ? undefined : cidrOf(ip, prefix);
}

/** The network of `prefix` bits that holds `ip` (its host bits cleared). */
export function cidrOf(ip: Ip, prefix: number): Cidr {
  return { family: ip.family, network: ip.value & mask(ip.family, prefix), prefix };
}

function mask(family: IpFamily, prefix: number): bigint {
  const bits = BigInt(BITS[family]);
  return ((1n << bits) - 1n) ^ ((1n << (bits - BigInt(prefix))) - 1n);
}

/** The first address of the network (the network address). */
export function firstAddress(cidr: Cidr): Ip {
  return { family: cidr.family, value: cidr.network };
}

/** The last address of the network (all host bits set). */
export function lastAddress(cidr: Cidr): Ip {
  const all = (1n << BigInt(BITS[cidr.family])) - 1n;
  return { family: cidr.family, value: cidr.network | (all ^ mask(cidr.family, cidr.prefix)) };
}

/**
 * Whether `ip` lies in `cidr`. As Go's IPNet.Contains, an IPv4-mapped IPv6 address
 * (`::ffff:a.b.c.d`) counts as its IPv4 address, and families never mix otherwise.
 */
export function cidrContains(cidr: Cidr, ip: Ip): boolean {
  const address = unmapIp(ip);
  return address.family === cidr.family && (address.value & mask(cidr.family, cidr.prefix)) === cidr.network;
}

/** The canonical text of a network: its network address (see formatIp) and prefix length. */
export function formatCidr(cidr: Cidr): string {
  return `${formatIp(firstAddress(cidr))}/${cidr.prefix}`;
}

/** `text` in canonical form (see formatCidr) when parseCidr accepts it with `syntax`, else `text` unchanged. */
export function canonicalCidr(text: string, syntax: IpSyntax = {}): string {
  const cidr = parseCidr(text, syntax);
  return cidr === undefined ? text : formatCidr(cidr);
}

/**
 * Parses `address/prefix` as parseCidr does, and keeps the address as written beside its network,
 * as Go's net.ParseCIDR returns both: a caller that wants a network address can tell one with host
 * bits set (`ip.value !== cidr.network`). Undefined when `text` is no CIDR.
 */
export function parseCidrAddress(text: string, syntax: IpSyntax = {}): { ip: Ip; cidr: Cidr } | undefined {
  const slash = text.indexOf('/');
  const ip = slash < 0 ? undefined : parseIp(text.slice(0, slash), syntax);
  const cidr = ip && parseCidr(text, syntax);
  return ip === undefined || cidr === undefined ? undefined : { ip, cidr };
}
