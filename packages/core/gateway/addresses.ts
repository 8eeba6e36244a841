import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The one classification of addresses the platform connects to on a caller's behalf: the proxy's
 * upstreams and webhook endpoints (both through `assertPublicHost` and `guardedLookup`).
 *
 * Only ipaddr.js's `unicast` range is public. An IPv6 address that carries an IPv4 address inside
 * it is judged by that IPv4 address, since the packet ends up there (through the host's own stack,
 * a NAT64 gateway or a 6to4 relay): IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
 * `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, 6to4 `2002:AABB:CCDD::/48` and the NAT64
 * well-known prefix `64:ff9b::a.b.c.d`. Tunnels whose embedded address cannot be read with certainty
 * (Teredo 2001::/32, local-use NAT64 64:ff9b:1::/48, whose prefix length is the operator's choice) are
 * refused whole, as is any IPv6 address outside 2000::/3, the only space IANA allocates for global
 * unicast.
 */
export type AddressVerdict = { public: true; range: 'unicast' } | { public: false; range: string };

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.IPv6.parseCIDR('2002::/16');

const v4FromParts = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);

/** The IPv4 address an IPv6 address carries, and the form that carries it, for the forms whose packets end up there. */
function embeddedIPv4(address: ipaddr.IPv6): { form: string; v4: ipaddr.IPv4 } | null {
  const p = address.parts;
  const range = address.range();
  if (range === 'ipv4Mapped' || range === 'rfc6145') return { form: range, v4: v4FromParts(p[6]!, p[7]!) };
  if (address.match(NAT64_WELL_KNOWN)) return { form: 'rfc6052', v4: v4FromParts(p[6]!, p[7]!) };
  if (address.match(SIX_TO_FOUR)) return { form: '6to4', v4: v4FromParts(p[1]!, p[2]!) };
  // `::` and `::1` are the unspecified and loopback addresses, not IPv4-compatible ones.
  if (address.match(IPV4_COMPATIBLE) && range !== 'unspecified' && range !== 'loopback')
    return { form: 'ipv4Compatible', v4: v4FromParts(p[6]!, p[7]!) };
  return null;
}

/** Whether an address is public, and its range as ipaddr.js names it ("6to4:loopback" for a tunnelled one). */
export function classifyAddress(address: string): AddressVerdict {
  // Node's own parser first: ipaddr.js also takes forms such as "0x7f.1" that are no address here.
  if (isIP(address) === 0) return { public: false, range: 'invalid' };
  // ipaddr.js reads "::a.b.c.d" as "::ffff:a.b.c.d"; the URL parser writes IPv6 in hex as RFC 5952 does.
  const text = address.includes(':') && address.includes('.') ? new URL(`http://[${address.replace(/%.*$/, '')}]`).hostname.slice(1, -1) : address;
  const parsed = ipaddr.parse(text);
  if (parsed.kind() === 'ipv4') {
    const range = parsed.range();
    return range === 'unicast' ? { public: true, range } : { public: false, range };
  }
  const v6 = parsed as ipaddr.IPv6;
  const inner = embeddedIPv4(v6);
  if (inner) {
    const range = inner.v4.range();
    return range === 'unicast' ? { public: true, range } : { public: false, range: `${inner.form}:${range}` };
  }
  const range = v6.range();
  if (range !== 'unicast') return { public: false, range };
  if (!v6.match(GLOBAL_UNICAST_V6)) return { public: false, range: 'unallocated' };
  return { public: true, range };
}

/** True for every address the platform must not connect to: anything but global unicast (see `classifyAddress`). */
export function isPrivateAddress(address: string): boolean {
  return !classifyAddress(address).public;
}
