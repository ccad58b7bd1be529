// The shared IP module: parsing under each syntax, canonical text, IPv4-mapped addresses, prefix
// lengths, CIDRs and containment. Each caller's own rules are tested with the caller.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  canonicalCidr,
  canonicalIp,
  cidrContains,
  cidrOf,
  familyBits,
  firstAddress,
  formatCidr,
  formatIp,
  lastAddress,
  parseCidr,
  parseIp,
  parsePrefixLength,
  unmapIp,
  type Ip,
  type IpFamily,
  type IpSyntax,
} from '../../shared/net/ip.ts';

const strict: IpSyntax = { leadingZeros: false };
const hexOnly: IpSyntax = { embeddedIpv4: false };
const zoned: IpSyntax = { zone: true };

const v4 = (value: bigint): Ip => ({ family: 'IPv4', value });
const v6 = (value: bigint): Ip => ({ family: 'IPv6', value });

function ip(text: string): Ip {
  const parsed = parseIp(text);
  assert.ok(parsed, `${text} is an address`);
  return parsed;
}

describe('familyBits', () => {
  it('is 32 for IPv4 and 128 for IPv6', () => {
    assert.equal(familyBits('IPv4'), 32);
    assert.equal(familyBits('IPv6'), 128);
  });
});

describe('parseIp', () => {
  const cases: [text: string, syntax: IpSyntax, want: Ip | undefined][] = [
    ['192.0.2.1', {}, v4(0xc0000201n)],
    ['0.0.0.0', strict, v4(0n)],
    ['255.255.255.255', {}, v4(0xffffffffn)],
    ['010.001.000.1', {}, v4(0x0a010001n)], // leading zeros are decimal by default (Go's ParseIPSloppy)
    ['010.0.0.1', strict, undefined],
    ['0010.0.0.1', {}, undefined], // at most three digits
    ['192.0.2.256', {}, undefined],
    ['192.0.2', {}, undefined],
    ['1.2.3.4.5', {}, undefined],
    [' 1.2.3.4', {}, undefined],
    ['1.2.3.4 ', {}, undefined],
    ['1.2.3.-1', {}, undefined],
    ['0x7f.0.0.1', {}, undefined], // ipaddr.js alone would read these inet_aton forms
    ['127.1', {}, undefined],
    ['2130706433', {}, undefined],
    ['1.2.3.4%eth0', zoned, undefined], // zones are IPv6 only
    ['2001:db8::1', {}, v6(0x20010db8000000000000000000000001n)],
    ['2001:DB8:0000::0001', {}, v6(0x20010db8000000000000000000000001n)],
    ['::', {}, v6(0n)],
    ['1:2:3:4:5:6:7::', {}, v6(0x00010002000300040005000600070000n)],
    ['::2:3:4:5:6:7:8', {}, v6(0x00000002000300040005000600070008n)],
    ['1:2:3:4:5:6:7:8', {}, v6(0x00010002000300040005000600070008n)],
    ['1:2:3:4:5:6:7::8', {}, undefined], // "::" stands for at least one group
    ['1:2:3:4:5:6:7:8::', {}, undefined],
    ['1:2:3:4:5:6:7', {}, undefined],
    ['1:2:3:4:5:6:7:8:9', {}, undefined],
    ['1::2::3', {}, undefined],
    [':::', {}, undefined],
    [':1::', {}, undefined],
    ['1::2:', {}, undefined],
    ['12345::', {}, undefined],
    ['g::1', {}, undefined],
    ['::ffff:192.0.2.1', {}, v6(0xffffc0000201n)],
    ['::ffff:192.000.002.001', {}, v6(0xffffc0000201n)], // the dotted part is read like an IPv4 address
    ['::ffff:192.000.002.001', strict, undefined],
    ['::ffff:192.0.2.1', hexOnly, undefined],
    ['::ffff:c000:201', hexOnly, v6(0xffffc0000201n)],
    ['::1.2.3.4', {}, v6(0x01020304n)], // IPv4-compatible, not mapped (ipaddr.js alone would map it)
    ['1:2:3:4:5:6:1.2.3.4', {}, v6(0x00010002000300040005000601020304n)],
    ['1:2:3:4:5:6:7:1.2.3.4', {}, undefined],
    ['1.2.3.4::', {}, undefined],
    ['::ffff:1.2.3', {}, undefined],
    ['::ffff:0x7f.0.0.1', {}, undefined],
    ['fe80::1%eth0', {}, undefined], // zones are refused by default
    ['fe80::1%eth0', zoned, v6(0xfe800000000000000000000000000001n)],
    ['fe80::1%eth-0.1:x', zoned, v6(0xfe800000000000000000000000000001n)], // the zone characters Node.js's net.isIP takes
    ['::ffff:1.2.3.4%x', zoned, v6(0xffff01020304n)],
    ['fe80::1%', zoned, undefined],
    ['fe80::1%a/b', zoned, undefined],
    ['fe80::1%a%b', zoned, undefined],
    ['', {}, undefined],
    ['example.com', {}, undefined],
  ];
  for (const [text, syntax, want] of cases) {
    it(`${JSON.stringify(text)} with ${JSON.stringify(syntax)} → ${want === undefined ? 'refused' : `${want.family} 0x${want.value.toString(16)}`}`, () => {
      assert.deepEqual(parseIp(text, syntax), want);
    });
  }
});

describe('formatIp and canonicalIp', () => {
  const cases: [text: string, canonical: string][] = [
    ['192.0.2.1', '192.0.2.1'],
    ['010.0.0.1', '10.0.0.1'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // equal runs: the first one is compressed
    ['2001:db8:0:0:1:0:0:0', '2001:db8:0:0:1::'], // the longest run wins
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is never "::"
    ['0:0:0:0:0:0:0:0', '::'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['1:0:0:0:0:0:0:0', '1::'],
    ['::ffff:10.1.0.0', '::ffff:a01:0'], // IPv4-mapped stays IPv6, in hex
    ['::1.2.3.4', '::102:304'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ];
  for (const [text, canonical] of cases) {
    it(`writes ${text} as ${canonical}`, () => {
      assert.equal(canonicalIp(text), canonical);
      assert.equal(formatIp(ip(text)), canonical);
    });
  }

  it('formats values of the full width', () => {
    assert.equal(formatIp(v4(0n)), '0.0.0.0');
    assert.equal(formatIp(v6((1n << 128n) - 1n)), 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff');
  });

  it('canonicalIp reads with the syntax given', () => {
    assert.equal(canonicalIp('010.0.0.1', strict), undefined);
    assert.equal(canonicalIp('::ffff:192.0.2.1', hexOnly), undefined);
    assert.equal(canonicalIp('fe80::0:1%eth0', zoned), 'fe80::1');
    assert.equal(canonicalIp('not an address'), undefined);
  });
});

describe('unmapIp', () => {
  const cases: [text: string, want: Ip][] = [
    ['::ffff:10.0.0.1', v4(0x0a000001n)],
    ['::ffff:0:0', v4(0n)],
    ['::ffff:ffff:ffff', v4(0xffffffffn)],
    ['::10.0.0.1', v6(0x0a000001n)], // IPv4-compatible is not mapped
    ['::fffe:10.0.0.1', v6(0xfffe0a000001n)],
    ['1::ffff:10.0.0.1', v6(0x00010000000000000000ffff0a000001n)],
    ['2001:db8::1', v6(0x20010db8000000000000000000000001n)],
    ['10.0.0.1', v4(0x0a000001n)],
  ];
  for (const [text, want] of cases) {
    it(`${text} → ${want.family} 0x${want.value.toString(16)}`, () => {
      assert.deepEqual(unmapIp(ip(text)), want);
    });
  }
});

describe('parsePrefixLength', () => {
  const cases: [text: string, family: IpFamily, syntax: IpSyntax, want: number | undefined][] = [
    ['0', 'IPv4', strict, 0],
    ['32', 'IPv4', strict, 32],
    ['33', 'IPv4', {}, undefined],
    ['128', 'IPv6', strict, 128],
    ['129', 'IPv6', {}, undefined],
    ['024', 'IPv4', {}, 24], // leading zeros are decimal by default, as Go's ParseCIDR
    ['024', 'IPv4', strict, undefined],
    ['00', 'IPv6', strict, undefined],
    ['0128', 'IPv6', {}, undefined], // at most three digits
    ['', 'IPv4', {}, undefined],
    ['-1', 'IPv4', {}, undefined],
    [' 8', 'IPv4', {}, undefined],
    ['8 ', 'IPv4', {}, undefined],
    ['0x8', 'IPv4', {}, undefined],
  ];
  for (const [text, family, syntax, want] of cases) {
    it(`${JSON.stringify(text)} for ${family} with ${JSON.stringify(syntax)} → ${String(want)}`, () => {
      assert.equal(parsePrefixLength(text, family, syntax), want);
    });
  }
});

describe('parseCidr, formatCidr and canonicalCidr', () => {
  const cases: [text: string, syntax: IpSyntax, canonical: string | undefined][] = [
    ['10.244.1.0/24', {}, '10.244.1.0/24'],
    ['10.244.1.7/24', {}, '10.244.1.0/24'], // host bits cleared
    ['010.244.001.0/024', {}, '10.244.1.0/24'],
    ['010.244.001.0/24', strict, undefined],
    ['10.244.1.0/024', strict, undefined],
    ['0.0.0.0/0', {}, '0.0.0.0/0'],
    ['255.255.255.255/1', {}, '128.0.0.0/1'],
    ['FD00:10:244:0001:0:0:0:7/64', {}, 'fd00:10:244:1::/64'],
    ['::ffff:10.1.0.0/112', {}, '::ffff:a01:0/112'],
    ['::ffff:10.1.0.0/112', hexOnly, undefined],
    ['fe80::1%eth0/64', {}, undefined],
    ['fe80::1%eth0/64', zoned, 'fe80::/64'],
    ['10.0.0.0/33', {}, undefined],
    ['fd00::/129', {}, undefined],
    ['10.0.0.0', {}, undefined],
    ['10.0.0.0/', {}, undefined],
    ['10.0.0.0/8/8', {}, undefined],
    ['/8', {}, undefined],
    ['', {}, undefined],
  ];
  for (const [text, syntax, canonical] of cases) {
    it(`${JSON.stringify(text)} with ${JSON.stringify(syntax)} → ${String(canonical)}`, () => {
      const cidr = parseCidr(text, syntax);
      assert.equal(cidr === undefined ? undefined : formatCidr(cidr), canonical);
      assert.equal(canonicalCidr(text, syntax), canonical ?? text);
    });
  }

  it('parses to family, network and prefix', () => {
    assert.deepEqual(parseCidr('10.244.1.7/24'), { family: 'IPv4', network: 0x0af40100n, prefix: 24 });
    assert.deepEqual(parseCidr('fd00::1/8'), {
      family: 'IPv6',
      network: 0xfd000000000000000000000000000000n,
      prefix: 8,
    });
  });
});

describe('cidrOf, firstAddress and lastAddress', () => {
  const cases: [address: string, prefix: number, first: string, last: string][] = [
    ['10.244.1.7', 24, '10.244.1.0', '10.244.1.255'],
    ['10.244.1.7', 32, '10.244.1.7', '10.244.1.7'],
    ['10.244.1.7', 0, '0.0.0.0', '255.255.255.255'],
    ['fd00:10:244:1::9', 64, 'fd00:10:244:1::', 'fd00:10:244:1:ffff:ffff:ffff:ffff'],
    ['fd00::9', 128, 'fd00::9', 'fd00::9'],
    ['fd00::9', 0, '::', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ];
  for (const [address, prefix, first, last] of cases) {
    it(`${address}/${prefix}: ${first} to ${last}`, () => {
      const cidr = cidrOf(ip(address), prefix);
      assert.equal(cidr.prefix, prefix);
      assert.equal(formatIp(firstAddress(cidr)), first);
      assert.equal(formatIp(lastAddress(cidr)), last);
    });
  }
});

describe('cidrContains', () => {
  const cases: [cidr: string, address: string, want: boolean][] = [
    ['10.244.0.0/16', '10.244.0.0', true],
    ['10.244.0.0/16', '10.244.255.255', true],
    ['10.244.0.0/16', '10.245.0.0', false],
    ['10.244.0.0/16', '10.243.255.255', false],
    ['10.244.0.0/16', '::ffff:10.244.3.4', true], // IPv4-mapped counts as IPv4, as Go's IPNet.Contains
    ['10.244.0.0/16', '::10.244.3.4', false], // IPv4-compatible does not
    ['fd00:10:244::/56', 'fd00:10:244:ff:ffff:ffff:ffff:ffff', true],
    ['fd00:10:244::/56', 'fd00:10:244:100::', false],
    ['::ffff:0:0/96', '::ffff:10.0.0.1', false], // the mapped address is IPv4 by then
    ['::/0', '10.0.0.1', false], // families never mix otherwise
    ['0.0.0.0/0', 'fd00::1', false],
    ['0.0.0.0/0', '255.255.255.255', true],
  ];
  for (const [net, address, want] of cases) {
    it(`${net} ∋ ${address}: ${String(want)}`, () => {
      const cidr = parseCidr(net);
      assert.ok(cidr, `${net} is a CIDR`);
      assert.equal(cidrContains(cidr, ip(address)), want);
    });
  }
});
