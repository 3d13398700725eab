/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy request (netpolicy.h, docs/network.md "The policy request"): the table of the
 * policy options that sandboxctl create's getopt and sandbox-proxy prepare's words are parsed
 * from, the one check of each option's value (with the message prepare prints), and the
 * request file: what sandboxctl hands `sandbox-proxy prepare DIR --request FILE` instead of
 * argv words. It is not the policy: the proxy turns a request into one (policy_build.c).
 *
 * The file is a line format, not YAML: a request holds command-line words, which are bytes
 * (not UTF-8, a newline possible), and the proxy must quote a bad one back byte for byte.
 *
 *   sandbox-policy-request 1
 *   NAME            (deny-all)
 *   NAME SP VALUE   (every other option; in VALUE "\\" is \, "\n" a newline, "\xHH" a byte)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

#define REQUEST_MAGIC "sandbox-policy-request 1"

const struct netpol_option netpol_options[NETPOL_NOPTS] = {
	[NETPOL_POLICY] = {"--policy", true},
	[NETPOL_ALLOW] = {"--allow", true},
	[NETPOL_DENY] = {"--deny", true},
	[NETPOL_ALLOW_CIDR] = {"--allow-cidr", true},
	[NETPOL_ALLOW_PORT] = {"--allow-port", true},
	[NETPOL_CREDENTIAL] = {"--credential", true},
	[NETPOL_EGRESS_BYTES] = {"--egress-bytes", true},
	[NETPOL_RESOLVER] = {"--resolver", true},
	[NETPOL_CA_FILE] = {"--ca-file", true},
	[NETPOL_DENY_ALL] = {"--deny-all", false},
};

int netpol_option_find(const char *flag)
{
	for (int i = 0; i < NETPOL_NOPTS; i++)
		if (strcmp(netpol_options[i].flag, flag) == 0)
			return i;
	return -1;
}

static int request_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int request_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* HOST:HEADER=ENVVAR */
static int value_cred(const char *s, union netpol_value *v, char *err, size_t errlen)
{
	const char *colon = strchr(s, ':'), *eq = colon ? strchr(colon, '=') : NULL;
	char hraw[NETPOL_NAME_TEXT];

	if (!colon || !eq || colon == s || (size_t)(colon - s) >= sizeof(hraw) ||
	    (size_t)(eq - colon - 1) >= sizeof(v->cred.header) || !eq[1])
		return request_errf(err, errlen,
				    "--credential: expected HOST:HEADER=ENVVAR, got '%.80s'", s);
	memcpy(hraw, s, (size_t)(colon - s));
	hraw[colon - s] = 0;
	memcpy(v->cred.header, colon + 1, (size_t)(eq - colon - 1));
	v->cred.header[eq - colon - 1] = 0;
	if (!netpol_name_norm(hraw, v->cred.host, sizeof(v->cred.host)))
		return request_errf(err, errlen, "--credential: bad host '%.80s'", hraw);
	if (!netpol_header_name_ok(v->cred.header))
		return request_errf(err, errlen, "--credential: bad header name '%.80s'",
				    v->cred.header);
	v->cred.var = eq + 1;
	return 0;
}

int netpol_value_parse(enum netpol_opt opt, const char *s, union netpol_value *v, char *err,
		       size_t errlen)
{
	switch (opt) {
	case NETPOL_ALLOW:
	case NETPOL_DENY:
		if (!netpol_pattern_norm(s, v->pattern, sizeof(v->pattern)))
			return request_errf(err, errlen, "%s: bad domain pattern '%.80s'",
					    netpol_options[opt].flag, s);
		return 0;
	case NETPOL_ALLOW_CIDR:
		if (netpol_cidr_parse(s, &v->cidr) < 0)
			return request_errf(err, errlen, "--allow-cidr: bad CIDR '%.80s'", s);
		return 0;
	case NETPOL_ALLOW_PORT:
		if (!netpol_port_parse(s, &v->port))
			return request_errf(err, errlen, "--allow-port: bad port '%.40s'", s);
		return 0;
	case NETPOL_CREDENTIAL:
		return value_cred(s, v, err, errlen);
	case NETPOL_EGRESS_BYTES:
		if (!netpol_bytes_parse(s, &v->bytes))
			return request_errf(err, errlen, "--egress-bytes: bad number '%.40s'", s);
		return 0;
	case NETPOL_RESOLVER:
		/* (the same words for the policy file's resolver: no "--") */
		if (netpol_hostport_parse(s, 53, &v->resolver.sa, &v->resolver.len) < 0)
			return request_errf(err, errlen,
					    "resolver: expected IP[:PORT], got '%.80s'", s);
		return 0;
	case NETPOL_POLICY:
	case NETPOL_CA_FILE:
	case NETPOL_DENY_ALL:
	case NETPOL_NOPTS:
		break;
	}
	return 0;
}

void netpol_request_free(struct netpol_request *r)
{
	for (unsigned i = 0; i < r->nitems; i++)
		free(r->items[i].value);
	free(r->items);
	r->items = NULL;
	r->nitems = 0;
}

/* Append `opt` with `value` (taken; NULL for none). */
static int request_push(struct netpol_request *r, enum netpol_opt opt, char *value)
{
	struct netpol_item *n;

	if ((unsigned)opt >= NETPOL_NOPTS || netpol_options[opt].has_value != (value != NULL)) {
		free(value);
		return -EINVAL;
	}
	n = realloc(r->items, (r->nitems + 1) * sizeof(*n));
	if (!n) {
		free(value);
		return -ENOMEM;
	}
	r->items = n;
	n[r->nitems++] = (struct netpol_item){.opt = opt, .value = value};
	return 0;
}

int netpol_request_add(struct netpol_request *r, enum netpol_opt opt, const char *value)
{
	char *copy = value ? strdup(value) : NULL;

	if (value && !copy)
		return -ENOMEM;
	return request_push(r, opt, copy);
}

int netpol_request_words(struct netpol_request *r, char *const *words, unsigned n, char *err,
			 size_t errlen)
{
	int e;

	/* Every word but --deny-all takes the next one, an unknown one too: a missing value is
	 * a usage error whatever else is wrong. */
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(words[i], netpol_options[NETPOL_DENY_ALL].flag) == 0)
			continue;
		if (i + 1 >= n)
			return request_errf(err, errlen, "an option lacks its value");
		i++;
	}
	for (unsigned i = 0; i < n; i++) {
		int o = netpol_option_find(words[i]);

		if (o < 0) {
			request_errf(err, errlen, "unknown option %.40s", words[i]);
			return -ENOENT;
		}
		e = netpol_request_add(r, (enum netpol_opt)o,
				       netpol_options[o].has_value ? words[++i] : NULL);
		if (e < 0)
			return e;
	}
	return 0;
}

/* ---- the file ---- */

static void request_put_value(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\')
			fputs("\\\\", f);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

int netpol_request_format(const struct netpol_request *r, char **text, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return -ENOMEM;
	fputs(REQUEST_MAGIC "\n", f);
	for (unsigned i = 0; i < r->nitems; i++) {
		fputs(netpol_options[r->items[i].opt].flag + 2, f);
		if (r->items[i].value) {
			fputc(' ', f);
			request_put_value(f, r->items[i].value);
		}
		fputc('\n', f);
	}
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	if (n > NETPOL_REQUEST_MAX) {
		free(buf);
		return -E2BIG;
	}
	*text = buf;
	*len = n;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Undo request_put_value on the `len` bytes at `s` into a new string: 0, -EINVAL (a bad
 * escape, a raw control byte, a NUL), -ENOMEM. */
static int request_get_value(const char *s, size_t len, char **out)
{
	char *v = malloc(len + 1);
	size_t o = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		int hi = -1, lo = -1;

		if (c < 0x20 || c == 0x7f)
			goto bad;
		if (c != '\\') {
			v[o++] = (char)c;
			continue;
		}
		if (++i >= len)
			goto bad;
		if (s[i] == '\\') {
			v[o++] = '\\';
		} else if (s[i] == 'n') {
			v[o++] = '\n';
		} else if (s[i] == 'x' && i + 2 < len && (hi = hexval(s[i + 1])) >= 0 &&
			   (lo = hexval(s[i + 2])) >= 0 && (hi || lo)) {
			v[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			goto bad;
		}
	}
	v[o] = 0;
	*out = v;
	return 0;
bad:
	free(v);
	return -EINVAL;
}

int netpol_request_parse(struct netpol_request *r, const char *path, const char *text, size_t len,
			 char *err, size_t errlen)
{
	size_t ml = strlen(REQUEST_MAGIC), pos;
	unsigned line = 1;
	int e;

	if (len > NETPOL_REQUEST_MAX)
		return request_errf(err, errlen, "%s:1: larger than %u bytes", path,
				    NETPOL_REQUEST_MAX);
	if (len < ml + 1 || memcmp(text, REQUEST_MAGIC "\n", ml + 1) != 0)
		return request_errf(err, errlen, "%s:1: not a policy request (%s)", path,
				    REQUEST_MAGIC);
	for (pos = ml + 1; pos < len;) {
		const char *l = text + pos, *nl = memchr(l, '\n', len - pos), *sp;
		size_t ll, nlen;
		char name[24] = "--", *value = NULL;
		int o;

		line++;
		if (!nl)
			return request_errf(err, errlen, "%s:%u: the last line has no newline",
					    path, line);
		ll = (size_t)(nl - l);
		pos += ll + 1;
		sp = memchr(l, ' ', ll);
		nlen = sp ? (size_t)(sp - l) : ll;
		if (nlen == 0 || nlen + 3 > sizeof(name))
			return request_errf(err, errlen, "%s:%u: no option name", path, line);
		memcpy(name + 2, l, nlen);
		name[nlen + 2] = 0;
		o = memchr(l, 0, nlen) ? -1 : netpol_option_find(name);
		if (o < 0)
			return request_errf(err, errlen, "%s:%u: unknown option '%.24s'", path,
					    line, name + 2);
		if (netpol_options[o].has_value != (sp != NULL))
			return request_errf(err, errlen, "%s:%u: %s %s", path, line, name + 2,
					    sp ? "takes no value" : "lacks its value");
		if (sp && (e = request_get_value(sp + 1, ll - nlen - 1, &value)) < 0) {
			if (e == -EINVAL)
				return request_errf(err, errlen, "%s:%u: %s: a bad byte or escape",
						    path, line, name + 2);
			return e;
		}
		if ((e = request_push(r, (enum netpol_opt)o, value)) < 0)
			return e;
	}
	return 0;
}
