/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A registry's WWW-Authenticate challenges (RFC 7235 section 4.1, the Docker token auth spec)
 * parsed for a pull (oci.h): `Bearer realm="...",service="...",scope="..."` or `Basic
 * realm="..."`, several challenges in one value or in several headers joined by ", ". The value
 * is the registry's, hostile: each parameter is bounded by its field (-E2BIG past it), a
 * parameter given twice in one challenge is refused, quoted strings are unescaped and hold no
 * control byte (they end up in a URL), and nothing here is a message's text but what went
 * wrong and where. Not the realm's checks (its scheme, its host): the pull makes them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "oci.h"

/* RFC 7230's tchar. */
static bool tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

struct wa {
	const char *s;
	size_t len, pos;
	struct oci_msg *m;
};

static void skip_ows(struct wa *p)
{
	while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'))
		p->pos++;
}

/* A token at pos: its start and length (0: none). */
static size_t token(struct wa *p, size_t *start)
{
	*start = p->pos;
	while (p->pos < p->len && tchar(p->s[p->pos]))
		p->pos++;
	return p->pos - *start;
}

/* A parameter's value (a token or a quoted string) into out (NULL: dropped). */
static int value(struct wa *p, char *out, size_t out_len, const char *name)
{
	size_t n = 0, start;

	if (p->pos < p->len && p->s[p->pos] != '"') {
		size_t tl = token(p, &start);

		if (!tl)
			return oci_fail(p->m, -EBADMSG,
					"WWW-Authenticate: no value for %s at byte %zu", name,
					p->pos);
		if (out && tl >= out_len)
			return oci_fail(p->m, -E2BIG, "WWW-Authenticate: %s longer than %zu bytes",
					name, out_len - 1);
		if (out) {
			memcpy(out, p->s + start, tl);
			out[tl] = '\0';
		}
		return 0;
	}
	for (p->pos++; p->pos < p->len; p->pos++) {
		unsigned char c = (unsigned char)p->s[p->pos];

		if (c == '"') {
			p->pos++;
			if (out)
				out[n] = '\0';
			return 0;
		}
		if (c == '\\') {
			if (++p->pos == p->len)
				break;
			c = (unsigned char)p->s[p->pos];
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return oci_fail(p->m, -EBADMSG,
					"WWW-Authenticate: a control byte in %s at byte %zu", name,
					p->pos);
		if (out) {
			if (n + 1 >= out_len)
				return oci_fail(p->m, -E2BIG,
						"WWW-Authenticate: %s longer than %zu bytes", name,
						out_len - 1);
			out[n++] = (char)c;
		}
	}
	return oci_fail(p->m, -EBADMSG, "WWW-Authenticate: an unterminated quoted string in %s",
			name);
}

/* The parameters of one challenge, up to the next challenge's scheme or the end. */
static int params(struct wa *p, struct oci_challenge *c, bool keep)
{
	bool seen[3] = {false, false, false};

	for (;;) {
		size_t save, start, nl;
		char name[16];
		char *out = NULL;
		size_t out_len = 0;
		int idx = -1, err;

		skip_ows(p);
		while (p->pos < p->len && p->s[p->pos] == ',') { /* empty list elements */
			p->pos++;
			skip_ows(p);
		}
		if (p->pos == p->len)
			return 0;
		save = p->pos;
		if (!(nl = token(p, &start)))
			return oci_fail(
				p->m, -EBADMSG, "WWW-Authenticate: unexpected '%c' at byte %zu",
				p->s[p->pos] >= 0x20 && p->s[p->pos] < 0x7f ? p->s[p->pos] : '?',
				p->pos);
		skip_ows(p);
		if (p->pos == p->len || p->s[p->pos] != '=') {
			p->pos = save; /* the next challenge's scheme */
			return 0;
		}
		p->pos++;
		skip_ows(p);
		snprintf(name, sizeof(name), "%.*s", (int)(nl < 15 ? nl : 15), p->s + start);
		if (nl == 5 && strncasecmp(p->s + start, "realm", 5) == 0)
			idx = 0, out = c->realm, out_len = sizeof(c->realm);
		else if (nl == 7 && strncasecmp(p->s + start, "service", 7) == 0)
			idx = 1, out = c->service, out_len = sizeof(c->service);
		else if (nl == 5 && strncasecmp(p->s + start, "scope", 5) == 0)
			idx = 2, out = c->scope, out_len = sizeof(c->scope);
		if (idx >= 0 && seen[idx])
			return oci_fail(p->m, -EBADMSG, "WWW-Authenticate: %s given twice", name);
		if (idx >= 0)
			seen[idx] = true;
		if ((err = value(p, keep ? out : NULL, out_len, name)) < 0)
			return err;
		skip_ows(p);
		if (p->pos < p->len && p->s[p->pos] != ',')
			return oci_fail(p->m, -EBADMSG,
					"WWW-Authenticate: ',' expected after %s at byte %zu", name,
					p->pos);
	}
}

int oci_www_auth_parse(const char *v, size_t len, struct oci_challenge *c, struct oci_msg *m)
{
	struct wa p = {.s = v, .len = len, .m = m};
	struct oci_challenge tmp;
	char first[32] = "";
	int err;

	memset(c, 0, sizeof(*c));
	if (memchr(v, '\0', len))
		return oci_fail(m, -EBADMSG, "WWW-Authenticate: a NUL byte");
	for (;;) {
		size_t start, nl;
		enum oci_auth_scheme s = OCI_AUTH_NONE;

		skip_ows(&p);
		while (p.pos < p.len && p.s[p.pos] == ',') {
			p.pos++;
			skip_ows(&p);
		}
		if (p.pos == p.len)
			break;
		if (!(nl = token(&p, &start)))
			return oci_fail(m, -EBADMSG, "WWW-Authenticate: no scheme at byte %zu",
					p.pos);
		if (nl == 6 && strncasecmp(v + start, "Bearer", 6) == 0)
			s = OCI_AUTH_BEARER;
		else if (nl == 5 && strncasecmp(v + start, "Basic", 5) == 0)
			s = OCI_AUTH_BASIC;
		if (!first[0])
			snprintf(first, sizeof(first), "%.*s", (int)(nl < 31 ? nl : 31), v + start);
		if (p.pos < p.len && p.s[p.pos] != ' ' && p.s[p.pos] != '\t' && p.s[p.pos] != ',')
			return oci_fail(m, -EBADMSG, "WWW-Authenticate: a bad scheme at byte %zu",
					start);
		/* the first Bearer wins; else the first Basic */
		bool keep = s != OCI_AUTH_NONE &&
			    (c->scheme == OCI_AUTH_NONE ||
			     (c->scheme == OCI_AUTH_BASIC && s == OCI_AUTH_BEARER));

		memset(&tmp, 0, sizeof(tmp));
		if ((err = params(&p, &tmp, keep)) < 0)
			return err;
		if (keep) {
			*c = tmp;
			c->scheme = s;
		}
	}
	if (c->scheme == OCI_AUTH_NONE)
		return oci_fail(m, -ENOTSUP,
				"WWW-Authenticate: %s%s: neither Bearer nor Basic (the schemes a "
				"registry's pull takes)",
				first[0] ? "the scheme " : "no challenge", first);
	if (c->scheme == OCI_AUTH_BEARER && !c->realm[0])
		return oci_fail(m, -EBADMSG, "WWW-Authenticate: Bearer without a realm");
	return 0;
}
