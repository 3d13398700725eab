/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy's decisions (docs/network.md "Decisions"): names against the domain lists, raw
 * addresses against the CIDR lists, the addresses a name resolved to against the special
 * ranges (and the host's own addresses). Building it is policy_build.c's, its text
 * policy_file.c's; the special ranges are netpolicy/ranges.c's, shared with the kernel's
 * guard on the jailed proxy's connects (netpolicy/guard.c).
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

bool policy_cidr_contains(const struct netpol_cidr *c, const struct sockaddr *sa)
{
	const uint8_t *b;
	unsigned n = policy_addr_bytes(sa, &b);
	uint8_t v4[4];

	if (n == 16 && c->family == AF_INET &&
	    netpol_prefix_eq(b, (const uint8_t[12]){[10] = 0xff, [11] = 0xff}, 96)) {
		memcpy(v4, b + 12, 4); /* a v4-mapped address is its IPv4 address */
		b = v4;
		n = 4;
	}
	if ((n == 4 && c->family != AF_INET) || (n == 16 && c->family != AF_INET6) || n == 0)
		return false;
	return netpol_prefix_eq(b, c->addr, c->prefix);
}

const char *policy_special_class(const struct policy *p, const struct sockaddr *sa)
{
	const uint8_t *b;
	unsigned n = policy_addr_bytes(sa, &b);
	const char *c;

	if (n == 0)
		return "unknown-family";
	c = netpol_special_class(b, n); /* the table the kernel's guard is written from */
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
