/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy's decisions (docs/network.md "Decisions"): names against the domain lists, raw
 * addresses against the CIDR lists, the addresses a name resolved to against the special
 * ranges (and the host's own addresses). Building it is policy_build.c's, its text
 * policy_file.c's.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

struct policy *policy_new(void)
{
	return calloc(1, sizeof(struct policy));
}

static void policy_free_cred(struct pol_cred *c)
{
	for (unsigned i = 0; i < c->nheaders; i++) {
		free(c->headers[i].name);
		free(c->headers[i].source);
		if (c->headers[i].value) {
			explicit_bzero(c->headers[i].value, strlen(c->headers[i].value));
			free(c->headers[i].value);
		}
	}
	free(c->headers);
	free(c->host);
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->nallow; i++)
		free(p->allow[i]);
	for (unsigned i = 0; i < p->ndeny; i++)
		free(p->deny[i]);
	for (unsigned i = 0; i < p->ncreds; i++)
		policy_free_cred(&p->creds[i]);
	free(p->allow);
	free(p->deny);
	free(p->cidrs);
	free(p->ports);
	free(p->resolver);
	free(p->ca_file);
	free(p->creds);
	free(p->own);
	free(p);
}

/* ---- names ---- */

int policy_norm_pattern(const char *s, char **out)
{
	char buf[NAME_MAX_TEXT + 2];

	if (!netpol_pattern_norm(s, buf, sizeof(buf)))
		return -EINVAL;
	*out = strdup(buf);
	return *out ? 0 : -ENOMEM;
}

int policy_push_str(char ***list, unsigned *n, char *s)
{
	char **nl;

	for (unsigned i = 0; i < *n; i++) {
		if (strcmp((*list)[i], s) == 0) {
			free(s);
			return 0;
		}
	}
	if (*n >= POL_MAX_LIST) {
		free(s);
		return -E2BIG;
	}
	nl = realloc(*list, (*n + 1) * sizeof(*nl));
	if (!nl) {
		free(s);
		return -ENOMEM;
	}
	nl[(*n)++] = s;
	*list = nl;
	return 0;
}

/* ---- addresses ---- */

/* The raw bytes of an address: 4 or 16, 0 for another family. */
static unsigned policy_addr_bytes(const struct sockaddr *sa, const uint8_t **b)
{
	if (sa->sa_family == AF_INET) {
		*b = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		*b = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		return 16;
	}
	return 0;
}

static bool policy_prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
	unsigned full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, b, full) != 0)
		return false;
	return rest == 0 || ((a[full] ^ b[full]) & (0xff00u >> rest)) == 0;
}

bool policy_cidr_contains(const struct netpol_cidr *c, const struct sockaddr *sa)
{
	const uint8_t *b;
	unsigned n = policy_addr_bytes(sa, &b);
	uint8_t v4[4];

	if (n == 16 && c->family == AF_INET &&
	    policy_prefix_eq(b, (const uint8_t[12]){[10] = 0xff, [11] = 0xff}, 96)) {
		memcpy(v4, b + 12, 4); /* a v4-mapped address is its IPv4 address */
		b = v4;
		n = 4;
	}
	if ((n == 4 && c->family != AF_INET) || (n == 16 && c->family != AF_INET6) || n == 0)
		return false;
	return policy_prefix_eq(b, c->addr, c->prefix);
}

static const char *policy_v4_class(const uint8_t *a)
{
	static const struct {
		uint8_t net[4];
		unsigned prefix;
		const char *what;
	} ranges[] = {
		{{0, 0, 0, 0}, 8, "unspecified"},	 {{10, 0, 0, 0}, 8, "private"},
		{{100, 64, 0, 0}, 10, "CGNAT"},		 {{127, 0, 0, 0}, 8, "loopback"},
		{{169, 254, 0, 0}, 16, "link-local"},	 {{172, 16, 0, 0}, 12, "private"},
		{{192, 0, 0, 0}, 24, "reserved"},	 {{192, 168, 0, 0}, 16, "private"},
		{{198, 18, 0, 0}, 15, "reserved"},	 {{224, 0, 0, 0}, 4, "multicast"},
		{{255, 255, 255, 255}, 32, "broadcast"}, {{240, 0, 0, 0}, 4, "reserved"},
	};

	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		if (policy_prefix_eq(a, ranges[i].net, ranges[i].prefix))
			return ranges[i].what;
	}
	return NULL;
}

static const char *policy_v6_class(const uint8_t *a)
{
	static const uint8_t zero[16], mapped[12] = {[10] = 0xff, [11] = 0xff},
				       nat64[12] = {0x00, 0x64, 0xff, 0x9b};
	static const struct {
		uint8_t net[2];
		unsigned prefix;
		const char *what;
	} ranges[] = {
		{{0xfe, 0x80}, 10, "link-local"},
		{{0xfe, 0xc0}, 10, "private"},
		{{0xfc, 0x00}, 7, "private"},
		{{0xff, 0x00}, 8, "multicast"},
	};

	if (memcmp(a, zero, 15) == 0 && a[15] == 1)
		return "loopback";
	if (memcmp(a, zero, 16) == 0)
		return "unspecified";
	if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
		return policy_v4_class(a + 12) ? policy_v4_class(a + 12) : NULL;
	if (memcmp(a, zero, 12) == 0)
		return "reserved"; /* IPv4-compatible, deprecated */
	if (a[0] == 0x20 && a[1] == 0x02)
		return policy_v4_class(a + 2); /* 6to4 carries an IPv4 address */
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		if (policy_prefix_eq(a, ranges[i].net, ranges[i].prefix))
			return ranges[i].what;
	}
	return NULL;
}

const char *policy_special_class(const struct policy *p, const struct sockaddr *sa)
{
	const uint8_t *b;
	unsigned n = policy_addr_bytes(sa, &b);
	const char *c;

	if (n == 0)
		return "unknown-family";
	c = n == 4 ? policy_v4_class(b) : policy_v6_class(b);
	if (c)
		return c;
	for (unsigned i = 0; p && i < p->nown; i++) {
		const uint8_t *o;
		unsigned on = policy_addr_bytes((const struct sockaddr *)&p->own[i], &o);

		if (on == n && memcmp(o, b, n) == 0)
			return "host's own";
		if (on == 4 && n == 16 &&
		    memcmp(b, (const uint8_t[12]){[10] = 0xff, [11] = 0xff}, 12) == 0 &&
		    memcmp(o, b + 12, 4) == 0)
			return "host's own";
	}
	return NULL;
}

int policy_host_addrs(struct policy *p)
{
	struct ifaddrs *ifa, *i;
	unsigned n = 0;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (i = ifa; i; i = i->ifa_next)
		n++;
	free(p->own);
	p->own = calloc(n ? n : 1, sizeof(*p->own));
	p->nown = 0;
	if (!p->own) {
		freeifaddrs(ifa);
		return -ENOMEM;
	}
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			memcpy(&p->own[p->nown++], i->ifa_addr, sizeof(struct sockaddr_in));
		else if (i->ifa_addr->sa_family == AF_INET6)
			memcpy(&p->own[p->nown++], i->ifa_addr, sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifa);
	return 0;
}

/* ---- decisions ---- */

static bool policy_port_ok(const struct policy *p, uint16_t port)
{
	if (port == 0)
		return true;
	if (p->nports == 0)
		return port == 80 || port == 443;
	for (unsigned i = 0; i < p->nports; i++) {
		if (p->ports[i] == port)
			return true;
	}
	return false;
}

bool policy_check_name(const struct policy *p, const char *name, uint16_t port, char *rule,
		       size_t rulelen)
{
	char n[NAME_MAX_TEXT];

	if (!netpol_name_norm(name, n, sizeof(n))) {
		snprintf(rule, rulelen, "deny (not a valid name)");
		return false;
	}
	for (unsigned i = 0; i < p->ndeny; i++) {
		if (netpol_pattern_match(p->deny[i], n)) {
			snprintf(rule, rulelen, "deny %s", p->deny[i]);
			return false;
		}
	}
	if (!policy_port_ok(p, port)) {
		snprintf(rule, rulelen, "deny port %u", port);
		return false;
	}
	for (unsigned i = 0; i < p->nallow; i++) {
		if (netpol_pattern_match(p->allow[i], n)) {
			snprintf(rule, rulelen, "allow %s", p->allow[i]);
			return true;
		}
	}
	if (p->default_deny) {
		snprintf(rule, rulelen, "deny (not on the allow list)");
		return false;
	}
	snprintf(rule, rulelen, "default allow-public");
	return true;
}

bool policy_check_addr(const struct policy *p, const struct sockaddr *sa, uint16_t port, char *rule,
		       size_t rulelen)
{
	char a[64];

	proxy_addr_text(sa, a, sizeof(a));
	for (unsigned i = 0; i < p->ncidrs; i++) {
		if (!policy_cidr_contains(&p->cidrs[i], sa))
			continue;
		if (!policy_port_ok(p, port)) {
			snprintf(rule, rulelen, "deny port %u", port);
			return false;
		}
		snprintf(rule, rulelen, "allow-cidr %s", p->cidrs[i].text);
		return true;
	}
	snprintf(rule, rulelen, "deny raw address %s (no CIDR rule)", a);
	return false;
}

bool policy_check_resolved(const struct policy *p, const struct sockaddr *sa, char *rule,
			   size_t rulelen)
{
	const char *cls;
	char a[64];

	for (unsigned i = 0; i < p->ncidrs; i++) {
		if (policy_cidr_contains(&p->cidrs[i], sa))
			return true;
	}
	cls = policy_special_class(p, sa);
	if (!cls)
		return true;
	proxy_addr_text(sa, a, sizeof(a));
	snprintf(rule, rulelen, "deny %s address %s", cls, a);
	return false;
}

const struct pol_cred *policy_find_cred(const struct policy *p, const char *name)
{
	char n[NAME_MAX_TEXT];

	if (!netpol_name_norm(name, n, sizeof(n)))
		return NULL;
	for (unsigned i = 0; i < p->ncreds; i++) {
		if (strcmp(p->creds[i].host, n) == 0)
			return &p->creds[i];
	}
	return NULL;
}
