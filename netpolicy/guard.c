/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The text of the kernel's guard on jailed proxies' upstream connects (docs/hardening.md
 * "The proxy's jail"): nftables rules in the namespace the proxies connect from (the host's),
 * outside any proxy, refusing what the proxy's own decisions refuse, so that a proxy taken
 * over through a memory bug still cannot reach the host's 127.0.0.1 services or the metadata
 * address. One table, NETPOL_GUARD_TABLE:
 *
 *   output   (hook output) a socket of a proxy uid (meta skuid, the whole range) goes to proxy
 *   proxy    tcp in the reply direction passes (a port forwarder answering a connection made
 *            to it: it shares the uid and cannot listen itself); then the verdict map
 *            `proxies` sends each guarded uid to its own chain; a uid without one is refused
 *            everything (fail closed), counted in "unguarded"
 *   proxy_N  the policy's resolver (udp and tcp to its address and port) and allow-cidr
 *            ranges pass; then goto refuse
 *   refuse   the special ranges (ranges.c, the table the proxy decides by) and the host's own
 *            addresses (fib daddr type local) are rejected, each counted by its class; the
 *            rest passes (the proxy decides names and ports itself)
 *
 * The script is one nft transaction: the shared chains are made or flushed and written again,
 * this uid's chain replaced, so a stale guard of the same uid never survives a start and two
 * sandboxes starting at once each leave a whole table. Chain names are made from the uid only.
 * Nothing here runs nft: the client does (client/proxy_client.c).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "netpolicy.h"

#define T      NETPOL_GUARD_TABLE
#define REJECT "reject with icmpx admin-prohibited"

static const uint8_t v4_mapped[12] = {[10] = 0xff, [11] = 0xff};

/* A class as a counter's name: lower case, [a-z0-9-] ("CGNAT" is "cgnat"). */
static void guard_counter_name(const char *what, char *out, size_t len)
{
	size_t o = 0;

	for (; *what && o + 1 < len; what++)
		out[o++] =
			isalnum((unsigned char)*what) ? (char)tolower((unsigned char)*what) : '-';
	out[o] = '\0';
}

/* "ip daddr A/P" or "ip6 daddr A/P" for `prefix` bits of `addr` (4 or 16 bytes). */
static int guard_daddr(FILE *out, int family, const uint8_t *addr, unsigned prefix)
{
	char text[INET6_ADDRSTRLEN];

	if ((family != AF_INET && family != AF_INET6) ||
	    prefix > (family == AF_INET ? 32u : 128u) ||
	    !inet_ntop(family, addr, text, sizeof(text)))
		return -EINVAL;
	return fprintf(out, "%s daddr %s/%u", family == AF_INET ? "ip" : "ip6", text, prefix) < 0
		       ? -EIO
		       : 0;
}

/* One refusal: `prefix` bits of `addr`, counted as `what`. */
static int guard_refuse_one(FILE *out, int family, const uint8_t *addr, unsigned prefix,
			    const char *what)
{
	char counter[32];
	int e;

	guard_counter_name(what, counter, sizeof(counter));
	if (fprintf(out, "add rule " T " refuse ") < 0)
		return -EIO;
	if ((e = guard_daddr(out, family, addr, prefix)) < 0)
		return e;
	return fprintf(out, " counter name \"%s\" " REJECT "\n", counter) < 0 ? -EIO : 0;
}

/* The counters: each class of the table once, and the guard's own two. */
static int guard_write_counters(FILE *out)
{
	const int families[] = {AF_INET, AF_INET6};
	char seen[16][32], name[32];
	unsigned nseen = 0;

	for (size_t f = 0; f < 2; f++) {
		size_t n;
		const struct netpol_range *r = netpol_ranges(families[f], &n);

		for (size_t i = 0; i < n; i++) {
			bool dup = false;

			if (!r[i].what)
				continue;
			guard_counter_name(r[i].what, name, sizeof(name));
			for (unsigned k = 0; k < nseen && !dup; k++)
				dup = strcmp(seen[k], name) == 0;
			if (dup)
				continue;
			if (nseen >= sizeof(seen) / sizeof(seen[0]))
				return -E2BIG;
			memcpy(seen[nseen++], name, sizeof(name));
			if (fprintf(out, "add counter " T " %s\n", name) < 0)
				return -EIO;
		}
	}
	return fprintf(out, "add counter " T " host-own\nadd counter " T " unguarded\n") < 0 ? -EIO
											     : 0;
}

/* The shared refusal: every range of the table, IPv4 then IPv6 in its lookup order (an
 * embedding as one range for each special IPv4 range it can carry), the host's own
 * addresses, then the rest passes. */
static int guard_write_refuse(FILE *out)
{
	size_t n4, n6;
	const struct netpol_range *v4 = netpol_ranges(AF_INET, &n4),
				  *v6 = netpol_ranges(AF_INET6, &n6);
	int e;

	if (fprintf(out, "add chain " T " refuse\nflush chain " T " refuse\n") < 0)
		return -EIO;
	for (size_t i = 0; i < n4; i++)
		if ((e = guard_refuse_one(out, AF_INET, v4[i].net, v4[i].prefix, v4[i].what)) < 0)
			return e;
	for (size_t i = 0; i < n6; i++) {
		if (!v6[i].v4_at) {
			if ((e = guard_refuse_one(out, AF_INET6, v6[i].net, v6[i].prefix,
						  v6[i].what)) < 0)
				return e;
			continue;
		}
		for (size_t k = 0; k < n4; k++) {
			uint8_t a[16] = {0};

			if (v6[i].v4_at > 12)
				return -EINVAL;
			memcpy(a, v6[i].net, v6[i].v4_at);
			memcpy(a + v6[i].v4_at, v4[k].net, 4);
			if ((e = guard_refuse_one(out, AF_INET6, a, v6[i].v4_at * 8u + v4[k].prefix,
						  v4[k].what)) < 0)
				return e;
		}
	}
	if (fprintf(out, "add rule " T
			 " refuse fib daddr type local counter name \"host-own\" " REJECT "\n"
			 "add rule " T " refuse accept\n") < 0)
		return -EIO;
	return 0;
}

/* The base chain and the dispatch by uid, failing closed. */
static int guard_write_dispatch(FILE *out, uint32_t lo, uint32_t hi)
{
	return fprintf(out,
		       "add map " T " proxies { type uid : verdict; }\n"
		       "add chain " T " proxy\n"
		       "flush chain " T " proxy\n"
		       "add rule " T " proxy meta l4proto tcp ct direction reply accept\n"
		       "add rule " T " proxy meta skuid vmap @proxies\n"
		       "add rule " T " proxy counter name \"unguarded\" " REJECT "\n"
		       "add chain " T " output { type filter hook output priority filter; "
		       "policy accept; }\n"
		       "flush chain " T " output\n"
		       "add rule " T " output meta skuid %u-%u jump proxy\n",
		       lo, hi) < 0
		       ? -EIO
		       : 0;
}

/* "ip daddr A" (or ip6) of a resolver, an IPv4-mapped one as the IPv4 address its packets
 * carry; its port in *port. */
static int guard_resolver_daddr(FILE *out, const struct sockaddr_storage *sa, uint16_t *port)
{
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		*port = ntohs(in->sin_port);
		return guard_daddr(out, AF_INET, (const uint8_t *)&in->sin_addr, 32);
	}
	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *b = in6->sin6_addr.s6_addr;

		*port = ntohs(in6->sin6_port);
		if (memcmp(b, v4_mapped, 12) == 0)
			return guard_daddr(out, AF_INET, b + 12, 32);
		return guard_daddr(out, AF_INET6, b, 128);
	}
	return -EINVAL;
}

/* One uid's chain: its resolver and allow-cidr, then the refusal. */
static int guard_write_uid(FILE *out, const struct netpol_guard *g)
{
	int e;

	if (fprintf(out, "add chain " T " proxy_%u\nflush chain " T " proxy_%u\n", g->uid, g->uid) <
	    0)
		return -EIO;
	if (g->resolver) {
		uint16_t port = 0;

		if (fprintf(out, "add rule " T " proxy_%u ", g->uid) < 0)
			return -EIO;
		if ((e = guard_resolver_daddr(out, g->resolver, &port)) < 0)
			return e;
		if (port == 0)
			return -EINVAL;
		if (fprintf(out, " meta l4proto { tcp, udp } th dport %u accept\n", port) < 0)
			return -EIO;
	}
	for (unsigned i = 0; i < g->ncidrs; i++) {
		const struct netpol_cidr *c = &g->cidrs[i];

		if (fprintf(out, "add rule " T " proxy_%u ", g->uid) < 0)
			return -EIO;
		if ((e = guard_daddr(out, c->family, c->addr, c->prefix)) < 0)
			return e;
		if (fprintf(out, " accept\n") < 0)
			return -EIO;
		/* An IPv4-mapped range: a socket connecting there sends IPv4 packets. */
		if (c->family == AF_INET6 && c->prefix >= 96 &&
		    memcmp(c->addr, v4_mapped, 12) == 0) {
			if (fprintf(out, "add rule " T " proxy_%u ", g->uid) < 0)
				return -EIO;
			if ((e = guard_daddr(out, AF_INET, c->addr + 12, c->prefix - 96)) < 0)
				return e;
			if (fprintf(out, " accept\n") < 0)
				return -EIO;
		}
	}
	return fprintf(out,
		       "add rule " T " proxy_%u goto refuse\n"
		       "add element " T " proxies { %u : jump proxy_%u }\n",
		       g->uid, g->uid, g->uid) < 0
		       ? -EIO
		       : 0;
}

int netpol_guard_write(FILE *out, const struct netpol_guard *g)
{
	int e;

	if (g->uid_lo > g->uid_hi || g->uid < g->uid_lo || g->uid > g->uid_hi ||
	    (!g->cidrs && g->ncidrs))
		return -EINVAL;
	if (fprintf(out, "add table " T "\n") < 0)
		return -EIO;
	if ((e = guard_write_counters(out)) < 0 || (e = guard_write_refuse(out)) < 0 ||
	    (e = guard_write_dispatch(out, g->uid_lo, g->uid_hi)) < 0 ||
	    (e = guard_write_uid(out, g)) < 0)
		return e;
	return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}

int netpol_guard_remove_text(uint32_t uid, char *out, size_t len)
{
	/* Made first (a no-op when there), so that the deletions hold whatever is left: nft
	 * 1.0.6 has no "destroy". One transaction, the element before the chain it jumps to. */
	int n = snprintf(out, len,
			 "add table " T "\n"
			 "add map " T " proxies { type uid : verdict; }\n"
			 "add chain " T " proxy_%u\n"
			 "add element " T " proxies { %u : jump proxy_%u }\n"
			 "delete element " T " proxies { %u }\n"
			 "delete chain " T " proxy_%u\n",
			 uid, uid, uid, uid, uid);

	return n < 0 || (size_t)n >= len ? -E2BIG : 0;
}
