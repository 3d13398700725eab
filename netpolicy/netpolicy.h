/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The network policy's grammar, defined once (docs/network.md "Policy"): DNS names, domain
 * patterns, CIDRs and resolver addresses as sandboxctl's command line, job specs and the
 * proxy's policy file and command line all write them, and as the proxy checks the names it
 * sees on the wire. Pure functions: nothing here allocates, prints or decides a connection
 * (the proxy's policy.c decides).
 */
#ifndef SANDBOX_NETPOLICY_H
#define SANDBOX_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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

#endif
