import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertPublicHost, classifyAddress, guardedLookup, isPrivateAddress, PrivateUpstreamError } from '#core/gateway';

/** Non-public IPv4 ranges (IANA special-purpose registry), written out here rather than read from the code under test. */
const PRIVATE_V4: [string, number][] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];
/** Non-public IPv6 ranges, whatever the rest of the address. */
const PRIVATE_V6: [string, number][] = [
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['2001::', 32],
  ['2001:db8::', 32],
  ['2001:2::', 48],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['4000::', 2],
  ['8000::', 1],
];

const v4ToInt = (a: string) => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
const intToV4 = (n: number) => [24, 16, 8, 0].map((s) => (n >>> s) & 0xff).join('.');
const v4InRange = ([net, bits]: [string, number]) =>
  fc.integer({ min: 0, max: 2 ** (32 - bits) - 1 }).map((offset) => intToV4(v4ToInt(net) + offset));
const anyV4 = fc.integer({ min: 0, max: 2 ** 32 - 1 }).map(intToV4);
const hextet = fc.integer({ min: 0, max: 0xffff });
const v6FromBig = (n: bigint) => Array.from({ length: 8 }, (_, i) => ((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(':');
const v6ToBig = (a: string) => {
  const [head = '', tail = ''] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const parts = a.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  return parts.reduce((n, p) => (n << 16n) | BigInt(parseInt(p, 16)), 0n);
};
const v6InRange = ([net, bits]: [string, number]) =>
  fc.bigInt({ min: 0n, max: 2n ** BigInt(128 - bits) - 1n }).map((offset) => v6FromBig(v6ToBig(net) + offset));
const hex32 = (v4: string) => {
  const n = v4ToInt(v4);
  return `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
};
/** Every IPv6 form that carries `v4` to the IPv4 host (through the host's stack, a NAT64 gateway or a 6to4 relay). */
const embeddings = (v4: string, subnet: number, iface: number) => [
  `::ffff:${v4}`,
  `::ffff:${hex32(v4)}`,
  `::ffff:0:${hex32(v4)}`,
  `::${v4}`,
  `::${hex32(v4)}`,
  `64:ff9b::${v4}`,
  `64:ff9b::${hex32(v4)}`,
  `2002:${hex32(v4)}:${subnet.toString(16)}::${iface.toString(16)}`,
];

describe('address classification (the SSRF guard of the proxy and of webhooks)', () => {
  it('refuses the IPv6 forms that were accepted as webhook URLs in production (finding 13)', async () => {
    for (const a of ['::127.0.0.1', '::ffff:0:7f00:1', '2002:7f00:1::']) {
      expect(isPrivateAddress(a), a).toBe(true);
      await expect(assertPublicHost(`[${a}]`), a).rejects.toMatchObject({ code: 'private_upstream' });
      // As a URL writes them (the webhook check and the proxy both get the URL's hostname).
      await expect(assertPublicHost(new URL(`https://[${a}]/hook`).hostname), a).rejects.toMatchObject({ code: 'private_upstream' });
    }
  });

  it('classifies by range: a table of each kind', () => {
    const table: [string, boolean, string][] = [
      ['8.8.8.8', true, 'unicast'],
      ['172.32.0.1', true, 'unicast'],
      ['2606:4700:4700::1111', true, 'unicast'],
      ['::ffff:8.8.8.8', true, 'unicast'],
      ['2002:808:808::1', true, 'unicast'],
      ['64:ff9b::8.8.8.8', true, 'unicast'],
      ['127.0.0.1', false, 'loopback'],
      ['10.1.2.3', false, 'private'],
      ['169.254.169.254', false, 'linkLocal'],
      ['100.64.0.1', false, 'carrierGradeNat'],
      ['198.18.0.1', false, 'reserved'],
      ['192.0.2.1', false, 'reserved'],
      ['255.255.255.255', false, 'broadcast'],
      ['224.0.0.1', false, 'multicast'],
      ['0.0.0.0', false, 'unspecified'],
      ['::', false, 'unspecified'],
      ['::1', false, 'loopback'],
      ['fd00::1', false, 'uniqueLocal'],
      ['fe80::1%eth0', false, 'linkLocal'],
      ['ff02::1', false, 'multicast'],
      ['2001:db8::1', false, 'reserved'],
      ['2001:0:4136:e378:8000:63bf:3fff:fdd2', false, 'teredo'],
      ['64:ff9b:1::a00:1', false, 'rfc6052'],
      ['2001:2::1', false, 'benchmarking'],
      ['4000::1', false, 'unallocated'],
      ['::ffff:169.254.169.254', false, 'ipv4Mapped:linkLocal'],
      ['::ffff:0:a00:1', false, 'rfc6145:private'],
      ['::7f00:1', false, 'ipv4Compatible:loopback'],
      ['::10.0.0.1', false, 'ipv4Compatible:private'],
      ['64:ff9b::a9fe:a9fe', false, 'rfc6052:linkLocal'],
      ['2002:a9fe:a9fe::', false, '6to4:linkLocal'],
      ['2002:6440:1::1', false, '6to4:carrierGradeNat'],
      ['localhost', false, 'invalid'],
      ['0x7f.1', false, 'invalid'],
      ['', false, 'invalid'],
    ];
    for (const [address, isPublic, range] of table) expect(classifyAddress(address), address).toEqual({ public: isPublic, range });
  });

  it('refuses every address of every non-public IPv4 range', () => {
    for (const range of PRIVATE_V4) {
      fc.assert(
        fc.property(v4InRange(range), (a) => isPrivateAddress(a)),
        { numRuns: 200 },
      );
    }
  });

  it('refuses every address of every non-public IPv6 range', () => {
    for (const range of PRIVATE_V6) {
      fc.assert(
        fc.property(v6InRange(range), (a) => isPrivateAddress(a)),
        { numRuns: 200 },
      );
    }
  });

  it('judges an IPv6 address that carries an IPv4 one as that IPv4 address, in every form', () => {
    const check = (v4: string, subnet: number, iface: number) => {
      const verdict = isPrivateAddress(v4);
      for (const form of embeddings(v4, subnet, iface)) expect(isPrivateAddress(form), `${form} (carries ${v4})`).toBe(verdict);
    };
    fc.assert(fc.property(anyV4, hextet, hextet, check), { numRuns: 2000 });
    for (const range of PRIVATE_V4) fc.assert(fc.property(v4InRange(range), hextet, hextet, check), { numRuns: 100 });
  });

  it('the connect-time lookup refuses a name that resolves to loopback', async () => {
    const error = await new Promise<unknown>((resolve) => guardedLookup('localhost', {}, (err) => resolve(err)));
    expect(error).toBeInstanceOf(PrivateUpstreamError);
  });
});
