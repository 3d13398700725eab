/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An image reference for a pull (oci.h): [http://|https://]host[:port]/repo[:tag][@sha256:HEX],
 * by the grammar of the distribution spec and Docker's reference package: the repository's
 * components lowercase alphanumerics joined by '.', '_', "__" or dashes, at most 255 bytes; a
 * tag [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; a first component with no '.' or ':' that is not
 * "localhost" names Docker Hub (registry-1.docker.io, "library/" before a lone component).
 * Each part lands in a URL path or a header: the grammar is what keeps it from meaning more
 * there (no '/', '?', '#', '%', space or control byte beyond what the grammar has).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One repository component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static bool repo_component(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
		return false;
	while (i < n) {
		if (lower_alnum(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '.' || (s[i] == '_' && s[i + 1] != '_'))
			i++;
		else if (s[i] == '_' && s[i + 1] == '_')
			i += 2;
		else if (s[i] == '-')
			while (i < n && s[i] == '-')
				i++;
		else
			return false;
		if (i >= n || !lower_alnum(s[i]))
			return false;
	}
	return true;
}

static bool valid_repo(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > 255)
		return false;
	for (const char *c = s;;) {
		const char *slash = strchr(c, '/');
		size_t n = slash ? (size_t)(slash - c) : strlen(c);

		if (!repo_component(c, n))
			return false;
		if (!slash)
			return true;
		c = slash + 1;
	}
}

static bool valid_tag(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > 128)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool w = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '_';

		if (!w && (i == 0 || (c != '.' && c != '-')))
			return false;
	}
	return true;
}

/* host[:port]: a DNS name or an IPv4 address (letters, digits, '.', '-'), or [IPv6]. */
static bool valid_host(const char *s)
{
	const char *port = NULL;
	size_t hl;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		char v6[64];
		struct in6_addr a;

		if (!end || (size_t)(end - s - 1) >= sizeof(v6))
			return false;
		memcpy(v6, s + 1, (size_t)(end - s - 1));
		v6[end - s - 1] = '\0';
		if (inet_pton(AF_INET6, v6, &a) != 1)
			return false;
		if (end[1] == '\0')
			return true;
		if (end[1] != ':')
			return false;
		port = end + 2;
	} else {
		port = strchr(s, ':');
		hl = port ? (size_t)(port - s) : strlen(s);
		if (hl == 0 || hl > 253 || s[0] == '-' || s[0] == '.')
			return false;
		for (size_t i = 0; i < hl; i++)
			if (!(lower_alnum(s[i]) || (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '.' ||
			      s[i] == '-'))
				return false;
		if (port)
			port++;
	}
	if (port) {
		uint64_t v = 0;

		if (!*port || strlen(port) > 5)
			return false;
		for (const char *c = port; *c; c++) {
			if (*c < '0' || *c > '9')
				return false;
			v = v * 10 + (uint64_t)(*c - '0');
		}
		if (v == 0 || v > 65535)
			return false;
	}
	return true;
}

bool oci_host_loopback(const char *host)
{
	char h[300];
	struct in_addr a4;
	struct in6_addr a6;
	size_t n;

	if (host[0] == '[') {
		const char *end = strchr(host, ']');

		if (!end || (size_t)(end - host - 1) >= sizeof(h))
			return false;
		memcpy(h, host + 1, (size_t)(end - host - 1));
		h[end - host - 1] = '\0';
		return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
	}
	n = strcspn(host, ":");
	if (n >= sizeof(h))
		return false;
	memcpy(h, host, n);
	h[n] = '\0';
	if (strcasecmp(h, "localhost") == 0)
		return true;
	return inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

int oci_ref_parse(const char *text, bool insecure, struct oci_ref *r, struct oci_msg *m)
{
	char buf[OCI_REF_MAX + 1], *s = buf, *at, *slash, *colon;
	int scheme = 0; /* 0: none given, 1: http, 2: https */

	memset(r, 0, sizeof(*r));
	if (strlen(text) > OCI_REF_MAX)
		return oci_fail(m, -EINVAL, "a reference longer than %u bytes", OCI_REF_MAX);
	snprintf(buf, sizeof(buf), "%s", text);
	if (strncmp(s, "http://", 7) == 0)
		scheme = 1, s += 7;
	else if (strncmp(s, "https://", 8) == 0)
		scheme = 2, s += 8;
	if ((at = strchr(s, '@'))) {
		*at = '\0';
		if (!oci_valid_digest(at + 1))
			return oci_fail(
				m, -EINVAL,
				"the reference's digest is not sha256: and 64 lowercase hex "
				"digits");
		snprintf(r->digest, sizeof(r->digest), "%s", at + 1);
	}
	slash = strchr(s, '/');
	if (slash && (memchr(s, '.', (size_t)(slash - s)) || memchr(s, ':', (size_t)(slash - s)) ||
		      (slash - s == 9 && strncmp(s, "localhost", 9) == 0) || s[0] == '[')) {
		*slash = '\0';
		if (!valid_host(s))
			return oci_fail(m, -EINVAL, "the reference's host is not host[:port]");
		snprintf(r->host, sizeof(r->host), "%s", s);
		s = slash + 1;
	} else {
		if (scheme)
			return oci_fail(m, -EINVAL, "a scheme without a registry host");
		snprintf(r->host, sizeof(r->host), "registry-1.docker.io");
	}
	if (strcmp(r->host, "docker.io") == 0 || strcmp(r->host, "index.docker.io") == 0)
		snprintf(r->host, sizeof(r->host), "registry-1.docker.io");
	slash = strrchr(s, '/');
	colon = strrchr(s, ':');
	if (colon && (!slash || colon > slash)) {
		*colon = '\0';
		if (!valid_tag(colon + 1))
			return oci_fail(
				m, -EINVAL,
				"the reference's tag is not [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
		snprintf(r->tag, sizeof(r->tag), "%s", colon + 1);
	}
	if (strcmp(r->host, "registry-1.docker.io") == 0 && !strchr(s, '/')) {
		if (strlen(s) + 8 >= sizeof(r->repo))
			return oci_fail(m, -EINVAL, "the reference's repository is too long");
		snprintf(r->repo, sizeof(r->repo), "library/%s", s);
	} else {
		snprintf(r->repo, sizeof(r->repo), "%.255s", s);
		if (strlen(s) > 255)
			return oci_fail(m, -EINVAL, "the reference's repository is too long");
	}
	if (!valid_repo(r->repo))
		return oci_fail(m, -EINVAL,
				"the reference's repository is not lowercase components "
				"([a-z0-9] joined by '.', '_', '__' or '-') joined by '/'");
	if (!r->tag[0] && !r->digest[0])
		snprintf(r->tag, sizeof(r->tag), "latest");
	r->loopback = oci_host_loopback(r->host);
	r->https = scheme == 2 || (scheme == 0 && !r->loopback && !insecure);
	if (!r->https && !r->loopback && !insecure)
		return oci_fail(
			m, -EPERM,
			"http:// to %s, which is not on loopback: its traffic (a password, a "
			"token) would be readable on the way (--insecure allows it)",
			r->host);
	return 0;
}
