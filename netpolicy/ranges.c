/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The special address ranges (docs/network.md "Decisions"): loopback, private, link-local
 * (169.254.169.254, the metadata address, among them), CGNAT, multicast, reserved, and the
 * IPv6 forms that carry an IPv4 address. Defined once, as data: the proxy's decisions look
 * an address up here (policy_special_class), and the kernel's guard on the proxy's upstream
 * connects is written from the same table (guard.c), so the two cannot drift apart. What a
 * policy's allow-cidr lets through, and the host's own addresses, are decided by the callers.
 */
#include <string.h>
#include <sys/socket.h>

#include "netpolicy.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static const struct netpol_range v4_ranges[] = {
	{AF_INET, {0, 0, 0, 0}, 8, 0, "unspecified"},
	{AF_INET, {10, 0, 0, 0}, 8, 0, "private"},
	{AF_INET, {100, 64, 0, 0}, 10, 0, "CGNAT"},
	{AF_INET, {127, 0, 0, 0}, 8, 0, "loopback"},
	{AF_INET, {169, 254, 0, 0}, 16, 0, "link-local"},
	{AF_INET, {172, 16, 0, 0}, 12, 0, "private"},
	{AF_INET, {192, 0, 0, 0}, 24, 0, "reserved"},
	{AF_INET, {192, 168, 0, 0}, 16, 0, "private"},
	{AF_INET, {198, 18, 0, 0}, 15, 0, "reserved"},
	{AF_INET, {224, 0, 0, 0}, 4, 0, "multicast"},
	{AF_INET, {255, 255, 255, 255}, 32, 0, "broadcast"},
	{AF_INET, {240, 0, 0, 0}, 4, 0, "reserved"},
};

/* In order: the first that holds an address decides. An embedding (v4_at) decides by the
 * IPv4 address it carries: special when that one is, else not special at all. */
static const struct netpol_range v6_ranges[] = {
	{AF_INET6, {[15] = 1}, 128, 0, "loopback"},
	{AF_INET6, {0}, 128, 0, "unspecified"},
	{AF_INET6, {[10] = 0xff, [11] = 0xff}, 96, 12, NULL}, /* IPv4-mapped */
	{AF_INET6, {0x00, 0x64, 0xff, 0x9b}, 96, 12, NULL},   /* NAT64 */
	{AF_INET6, {0}, 96, 0, "reserved"},		      /* IPv4-compatible */
	{AF_INET6, {0x20, 0x02}, 16, 2, NULL},		      /* 6to4 */
	{AF_INET6, {0xfe, 0x80}, 10, 0, "link-local"},
	{AF_INET6, {0xfe, 0xc0}, 10, 0, "private"},
	{AF_INET6, {0xfc, 0x00}, 7, 0, "private"},
	{AF_INET6, {0xff, 0x00}, 8, 0, "multicast"},
};

const struct netpol_range *netpol_ranges(int family, size_t *n)
{
	if (family == AF_INET) {
		*n = ARRAY_SIZE(v4_ranges);
		return v4_ranges;
	}
	*n = family == AF_INET6 ? ARRAY_SIZE(v6_ranges) : 0;
	return family == AF_INET6 ? v6_ranges : NULL;
}

bool netpol_prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, b, full) != 0)
		return false;
	return rest == 0 || ((a[full] ^ b[full]) & (0xff00u >> rest)) == 0;
}

static const char *netpol_v4_class(const uint8_t *a)
{
	for (size_t i = 0; i < ARRAY_SIZE(v4_ranges); i++) {
		if (netpol_prefix_eq(a, v4_ranges[i].net, v4_ranges[i].prefix))
			return v4_ranges[i].what;
	}
	return NULL;
}

const char *netpol_special_class(const uint8_t *addr, unsigned len)
{
	if (len == 4)
		return netpol_v4_class(addr);
	if (len != 16)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(v6_ranges); i++) {
		const struct netpol_range *r = &v6_ranges[i];

		if (netpol_prefix_eq(addr, r->net, r->prefix))
			return r->v4_at ? netpol_v4_class(addr + r->v4_at) : r->what;
	}
	return NULL;
}
