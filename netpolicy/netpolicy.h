/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The network policy's grammar, defined once (docs/network.md "Policy"): DNS names, domain
 * patterns, CIDRs and resolver addresses as sandboxctl's command line, job specs and the
 * proxy's policy file and command line all write them, and as the proxy checks the names it
 * sees on the wire; the special address ranges (ranges.c); and the text of the kernel's guard
 * on a jailed proxy's upstream connects (guard.c), written from those ranges. Pure
 * functions: nothing here allocates or decides a connection (the proxy's policy.c decides),
 * and only the guard's writer prints, to the stream it is given.
 */
#ifndef SANDBOX_NETPOLICY_H
#define SANDBOX_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

/* A DNS name as text, with its NUL, without a trailing dot: 253 bytes and the NUL. */
#define NETPOL_NAME_TEXT 254

/* A CIDR, normalised: the address masked to its prefix. */
struct netpol_cidr {
	int family;	  /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order, masked */
	unsigned prefix;
	char text[64]; /* as normalised, "203.0.113.0/24" */
};

/* Normalise a DNS name into `out` (lower case, a trailing dot dropped) and check its syntax:
 * labels of 1-63 bytes of [a-z0-9_-], 253 bytes at most. False on a bad name (or `outlen`
 * too small). `out` may be `name`. */
bool netpol_name_norm(const char *name, char *out, size_t outlen);
/* The same for a domain pattern: a name, or "*." and a name (its subdomains). */
bool netpol_pattern_norm(const char *s, char *out, size_t outlen);
/* True when `name` (normalised) matches `pattern` (normalised: "example.test" or
 * "*.example.test", which matches names below example.test, not example.test itself). */
bool netpol_pattern_match(const char *pattern, const char *name);
/* Parse "ADDR/PREFIX" or a bare address (/32, /128), IPv4 or IPv6, into `c`: 0 or -EINVAL. */
int netpol_cidr_parse(const char *s, struct netpol_cidr *c) __attribute__((warn_unused_result));
/* Parse "IPv4[:PORT]", "[IPv6][:PORT]" or a bare IPv6 into `sa` (port `defport` when
 * absent; a port is 1-65535): 0 or -EINVAL. */
int netpol_hostport_parse(const char *s, uint16_t defport, struct sockaddr_storage *sa,
			  socklen_t *salen) __attribute__((warn_unused_result));

/* ---- ranges.c: the special ranges (docs/network.md "Decisions") ---- */

/* A special range: `prefix` bits of `net` (4 or 16 bytes used, by `family`). An IPv6 range
 * with `v4_at` (a byte offset, never 0) carries an IPv4 address there and takes its class
 * (`what` NULL); else `what` is its class ("loopback", "link-local", ...). */
struct netpol_range {
	int family;
	uint8_t net[16];
	uint8_t prefix;
	uint8_t v4_at;
	const char *what;
};
/* The table for AF_INET or AF_INET6 and its length (*n 0, NULL for another family). IPv6's
 * is in lookup order: the first range that holds an address decides. */
const struct netpol_range *netpol_ranges(int family, size_t *n);
/* The class of the 4- or 16-byte address `addr` ("loopback", ...), NULL when not special. */
const char *netpol_special_class(const uint8_t *addr, unsigned len);
/* True when the first `prefix` bits of `a` and `b` are equal. */
bool netpol_prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix);

/* ---- guard.c: the kernel's guard on jailed proxies' upstream connects ---- */

/* nftables' table in the namespace the proxies connect from (the host's): docs/hardening.md
 * "The proxy's jail". */
#define NETPOL_GUARD_TABLE "inet sandbox_guard"
/* What one proxy's guard lets through before the shared refusal: its policy's resolver
 * (udp and tcp to that address and port) and allow-cidr ranges. Every uid from `uid_lo` to
 * `uid_hi` (every sandbox's proxy, `uid` among them) without a guard is refused everything. */
struct netpol_guard {
	uint32_t uid, uid_lo, uid_hi;
	const struct sockaddr_storage *resolver; /* NULL: none */
	const struct netpol_cidr *cidrs;
	unsigned ncidrs;
};
/* Write the `nft -f` script that loads `g` (the shared table, made or refreshed, and this
 * uid's chain, replacing a stale one) to `out`. 0, or -EINVAL (a uid outside the range, an
 * address of another family) or -EIO (the stream failed). */
int netpol_guard_write(FILE *out, const struct netpol_guard *g) __attribute__((warn_unused_result));
/* The `nft -f` script that removes uid's guard (whether or not it is there) into `out`:
 * 0 or -E2BIG. */
int netpol_guard_remove_text(uint32_t uid, char *out, size_t len)
	__attribute__((warn_unused_result));

#endif
