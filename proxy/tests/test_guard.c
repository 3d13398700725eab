/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kernel's guard as `sandbox-proxy guard` writes it (proxy/guard.c, netpolicy/guard.c):
 * its refusal holds exactly the addresses the proxy's own decisions call special (the same
 * table, checked over many addresses, not retyped), the uid's chain holds the policy's
 * resolver and allow-cidr, every proxy uid goes through it, and bad input is refused.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

#define UID    1342291695u
#define UID_LO 1342242816u
#define UID_HI 1342308351u

struct range {
	int family;
	uint8_t net[16];
	unsigned prefix;
};

static char *render(const struct netpol_guard *g, int *rc)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert(f);
	*rc = netpol_guard_write(f, g);
	fclose(f);
	return text;
}

/* The refusal's ranges, read back from the script. */
static unsigned refused_ranges(const char *text, struct range *out, unsigned max)
{
	static const char prefix[] = "add rule inet sandbox_guard refuse ";
	unsigned n = 0;

	for (const char *line = text; line && *line; line = strchr(line, '\n'), line += !!line) {
		char fam[8], addr[64];
		unsigned bits;

		if (strncmp(line, prefix, sizeof(prefix) - 1) != 0 ||
		    sscanf(line + sizeof(prefix) - 1, "%7s daddr %63[^/]/%u", fam, addr, &bits) !=
			    3)
			continue;
		cr_assert_lt(n, max);
		out[n].family = strcmp(fam, "ip") == 0 ? AF_INET : AF_INET6;
		cr_assert(strcmp(fam, "ip") == 0 || strcmp(fam, "ip6") == 0, "%s", line);
		cr_assert_eq(inet_pton(out[n].family, addr, out[n].net), 1, "%s", line);
		out[n].prefix = bits;
		n++;
	}
	return n;
}

static bool covered(const struct range *r, unsigned n, int family, const uint8_t *a)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i].family == family && netpol_prefix_eq(a, r[i].net, r[i].prefix))
			return true;
	return false;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* An IPv4 address, often in or next to a special range. */
static void some_v4(uint8_t a[4])
{
	static const uint8_t near[][2] = {{0, 0},    {10, 0},	 {100, 64},  {100, 127}, {100, 128},
					  {127, 0},  {169, 254}, {172, 15},  {172, 16},	 {172, 31},
					  {172, 32}, {192, 0},	 {192, 168}, {198, 17},	 {198, 18},
					  {198, 19}, {198, 20},	 {223, 255}, {224, 0},	 {239, 255},
					  {240, 0},  {255, 255}, {8, 8},     {203, 0}};
	uint32_t r = next();

	for (int i = 0; i < 4; i++)
		a[i] = (uint8_t)(next() >> (i * 3));
	if (r % 3 != 0) {
		memcpy(a, near[r % (sizeof(near) / sizeof(near[0]))], 2);
		if (a[0] == 192 && a[1] == 0 && next() % 2)
			a[2] = 0;
		if (a[0] == 255 && next() % 2)
			memset(a, 255, 4);
	}
}

/* An IPv6 address, often under a special prefix or an embedding of some_v4. */
static void some_v6(uint8_t a[16])
{
	static const uint8_t heads[][4] = {
		{0, 0, 0, 0},	      {0x00, 0x64, 0xff, 0x9b}, {0x20, 0x02, 0, 0},
		{0xfe, 0x80, 0, 0},   {0xfe, 0xc0, 0, 0},	{0xfc, 0x00, 0, 0},
		{0xfd, 0x12, 0, 0},   {0xff, 0x02, 0, 0},	{0x20, 0x01, 0x0d, 0xb8},
		{0x26, 0x06, 0x47, 0}};
	uint32_t r = next();

	for (int i = 0; i < 16; i++)
		a[i] = (uint8_t)next();
	switch (r % 6) {
	case 0: /* random */
		break;
	case 1: /* IPv4-mapped */
		memset(a, 0, 10);
		a[10] = a[11] = 0xff;
		some_v4(a + 12);
		break;
	case 2: /* NAT64 */
		memset(a, 0, 12);
		memcpy(a, heads[1], 4);
		some_v4(a + 12);
		break;
	case 3: /* 6to4 */
		a[0] = 0x20;
		a[1] = 0x02;
		some_v4(a + 2);
		break;
	case 4: /* ::, ::1, IPv4-compatible */
		memset(a, 0, 12);
		if (next() % 2) {
			memset(a + 12, 0, 3);
			a[15] = (uint8_t)(next() % 3);
		}
		break;
	default:
		memcpy(a, heads[r % (sizeof(heads) / sizeof(heads[0]))], 4);
		if (next() % 2)
			a[1] = (uint8_t)((a[1] & 0xc0) | (next() & 0x3f));
	}
}

Test(guard, refusal_is_the_proxys_table)
{
	struct netpol_guard g = {.uid = UID, .uid_lo = UID_LO, .uid_hi = UID_HI};
	static struct range r[256];
	unsigned n;
	int rc;
	char *text = render(&g, &rc);

	cr_assert_eq(rc, 0);
	n = refused_ranges(text, r, 256);
	cr_assert_gt(n, 40, "%u ranges", n);
	for (unsigned i = 0; i < 400000; i++) {
		uint8_t a[16];
		bool v6 = i % 2;

		if (v6)
			some_v6(a);
		else
			some_v4(a);
		cr_assert_eq(covered(r, n, v6 ? AF_INET6 : AF_INET, a),
			     netpol_special_class(a, v6 ? 16 : 4) != NULL,
			     "%s address %02x%02x%02x%02x%02x%02x...%02x%02x%02x%02x: guard %d, "
			     "proxy %s",
			     v6 ? "IPv6" : "IPv4", a[0], a[1], a[2], a[3], a[4], a[5], a[12], a[13],
			     a[14], a[15], covered(r, n, v6 ? AF_INET6 : AF_INET, a),
			     netpol_special_class(a, v6 ? 16 : 4));
	}
	/* The metadata address and loopback, counted by class; the host's own by fib. */
	cr_assert(strstr(text, "refuse ip daddr 169.254.0.0/16 counter name \"link-local\""));
	cr_assert(strstr(text, "refuse ip daddr 127.0.0.0/8 counter name \"loopback\""));
	cr_assert(strstr(text, "refuse ip6 daddr ::1/128 counter name \"loopback\""));
	cr_assert(strstr(text, "refuse fib daddr type local counter name \"host-own\" reject"));
	free(text);
}

Test(guard, uid_chain_and_dispatch)
{
	struct netpol_cidr c[2];
	struct sockaddr_storage res;
	socklen_t len;
	struct netpol_guard g = {.uid = UID, .uid_lo = UID_LO, .uid_hi = UID_HI};
	int rc;
	char *text;

	cr_assert_eq(netpol_cidr_parse("10.9.0.0/24", &c[0]), 0);
	cr_assert_eq(netpol_cidr_parse("::ffff:10.8.0.0/112", &c[1]), 0);
	cr_assert_eq(netpol_hostport_parse("127.0.0.1:5353", 53, &res, &len), 0);
	g.cidrs = c;
	g.ncidrs = 2;
	g.resolver = &res;
	text = render(&g, &rc);
	cr_assert_eq(rc, 0);
	cr_assert(strstr(text,
			 "add rule inet sandbox_guard output meta skuid 1342242816-1342308351 "
			 "jump proxy\n"));
	cr_assert(strstr(text, "proxy meta skuid vmap @proxies\nadd rule inet sandbox_guard proxy "
			       "counter name \"unguarded\" reject"),
		  "a uid without a guard is not refused");
	cr_assert(strstr(text, "flush chain inet sandbox_guard proxy_1342291695\n"),
		  "a stale chain is not replaced");
	cr_assert(strstr(text, "proxy_1342291695 ip daddr 127.0.0.1/32 meta l4proto { tcp, udp } "
			       "th dport 5353 accept\n"));
	cr_assert(strstr(text, "proxy_1342291695 ip daddr 10.9.0.0/24 accept\n"));
	cr_assert(strstr(text, "proxy_1342291695 ip6 daddr ::ffff:10.8.0.0/112 accept\n"));
	cr_assert(strstr(text, "proxy_1342291695 ip daddr 10.8.0.0/16 accept\n"));
	cr_assert(strstr(text, "proxy_1342291695 goto refuse\nadd element inet sandbox_guard "
			       "proxies { 1342291695 : jump proxy_1342291695 }\n"));
	free(text);
}

Test(guard, bad_input_and_removal)
{
	struct netpol_guard g = {.uid = UID_HI + 1, .uid_lo = UID_LO, .uid_hi = UID_HI};
	char buf[512];
	int rc;

	free(render(&g, &rc));
	cr_assert_eq(rc, -EINVAL, "a uid outside the range");
	g = (struct netpol_guard){.uid = UID, .uid_lo = UID_HI, .uid_hi = UID_LO};
	free(render(&g, &rc));
	cr_assert_eq(rc, -EINVAL, "an empty range");
	cr_assert_eq(netpol_guard_remove_text(UID, buf, sizeof(buf)), 0);
	cr_assert(strstr(buf, "delete element inet sandbox_guard proxies { 1342291695 }\n"
			      "delete chain inet sandbox_guard proxy_1342291695\n"),
		  "%s", buf);
	cr_assert_eq(netpol_guard_remove_text(UID, buf, 40), -E2BIG);
}
