// Address arithmetic for the static provider's load balancer pools: the blocks a pool lists, as
// bigint extents (an IPv6 pool may hold 2^64 addresses and more, beyond a JavaScript number), and
// the questions allocation asks of them. No parsing here: pools.ts reads the blocks, with the
// shared IP module (shared/net/ip.ts).

import type { Ip, IpFamily } from '../../shared/net/ip.ts';

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
