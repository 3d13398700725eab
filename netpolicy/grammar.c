/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The network policy's grammar (netpolicy.h): what a name, a domain pattern, a CIDR and a
 * resolver address are, for every place that reads one (sandboxctl's command line and job
 * specs, the proxy's policy file and command line, the names the proxy sees on the wire).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

bool netpol_name_norm(const char *name, char *out, size_t outlen)
{
	size_t n = strlen(name), label = 0;

	if (n > 0 && name[n - 1] == '.')
		n--;
	if (n == 0 || n > 253 || n + 1 > outlen)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)tolower((unsigned char)name[i]);

		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if (isalnum(c) || c == '-' || c == '_') {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
		out[i] = (char)c;
	}
	if (label == 0)
		return false;
	out[n] = 0;
	return true;
}

bool netpol_pattern_norm(const char *s, char *out, size_t outlen)
{
	bool wild = strncmp(s, "*.", 2) == 0;

	if (wild && outlen < 3)
		return false;
	if (!netpol_name_norm(wild ? s + 2 : s, out + (wild ? 2 : 0), outlen - (wild ? 2 : 0)))
		return false;
	if (wild)
		memcpy(out, "*.", 2);
	return true;
}

bool netpol_pattern_match(const char *pattern, const char *name)
{
	size_t pl, nl;

	if (strncmp(pattern, "*.", 2) != 0)
		return strcmp(pattern, name) == 0;
	pattern += 1; /* ".example.test" */
	pl = strlen(pattern);
	nl = strlen(name);
	return nl > pl && strcmp(name + nl - pl, pattern) == 0;
}

int netpol_cidr_parse(const char *s, struct netpol_cidr *c)
{
	char host[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t hl = slash ? (size_t)(slash - s) : strlen(s);
	unsigned long prefix;
	char *end;
	unsigned bytes;

	memset(c, 0, sizeof(*c));
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = 0;
	if (inet_pton(AF_INET, host, c->addr) == 1)
		c->family = AF_INET;
	else if (inet_pton(AF_INET6, host, c->addr) == 1)
		c->family = AF_INET6;
	else
		return -EINVAL;
	bytes = c->family == AF_INET ? 4 : 16;
	prefix = bytes * 8;
	if (slash) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		errno = 0;
		prefix = strtoul(slash + 1, &end, 10);
		if (errno || *end || prefix > bytes * 8 || end - (slash + 1) > 3)
			return -EINVAL;
	}
	c->prefix = (unsigned)prefix;
	for (unsigned i = 0; i < bytes; i++) {
		unsigned keep = c->prefix > i * 8 ? c->prefix - i * 8 : 0;

		if (keep < 8)
			c->addr[i] &= (uint8_t)(0xff00u >> keep);
	}
	inet_ntop(c->family, c->addr, host, sizeof(host));
	snprintf(c->text, sizeof(c->text), "%s/%u", host, c->prefix & 0xff);
	return 0;
}

int netpol_hostport_parse(const char *s, uint16_t defport, struct sockaddr_storage *sa,
			  socklen_t *salen)
{
	char host[64];
	const char *port = NULL;
	unsigned long pv = defport;
	struct sockaddr_in *in4 = (struct sockaddr_in *)sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
	size_t hl;

	memset(sa, 0, sizeof(*sa));
	if (s[0] == '[') {
		const char *e = strchr(s, ']');

		if (!e || (e[1] && e[1] != ':'))
			return -EINVAL;
		hl = (size_t)(e - s - 1);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = 0;
		port = e[1] ? e + 2 : NULL;
	} else {
		const char *c = strchr(s, ':');

		if (c && strchr(c + 1, ':'))
			c = NULL; /* a bare IPv6 */
		hl = c ? (size_t)(c - s) : strlen(s);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = 0;
		port = c ? c + 1 : NULL;
	}
	if (port) {
		char *end;

		if (!*port || *port < '0' || *port > '9')
			return -EINVAL;
		errno = 0;
		pv = strtoul(port, &end, 10);
		if (errno || *end || pv == 0 || pv > 65535)
			return -EINVAL;
	}
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)pv);
		*salen = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)pv);
		*salen = sizeof(*in6);
		return 0;
	}
	return -EINVAL;
}

bool netpol_port_parse(const char *s, uint16_t *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9' || strlen(s) > 5)
		return false;
	v = strtoul(s, &end, 10);
	if (*end || v == 0 || v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

bool netpol_bytes_parse(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end || errno || v > INT64_MAX)
		return false;
	*out = v;
	return true;
}

bool netpol_header_name_ok(const char *s)
{
	size_t n = strlen(s);

	/* ASCII only, whatever the locale (isalnum is the locale's) */
	return n > 0 && n <= 128 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			 "!#$%&'*+-.^_`|~") == n;
}
