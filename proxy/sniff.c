/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a connection's first bytes say about where it goes: the SNI of a TLS ClientHello (which
 * may span several records and reads) or the Host of an HTTP/1.x request head. Anything that
 * could be an attempt at HTTP is held to the interception's strict parser (http1.c) and refused
 * when it does not parse; only bytes that are positively neither are "other", which a caller
 * may relay raw (docs/network.md "Decisions", plain HTTP). The bytes are the guest's: every
 * length is checked against what was received before it is used, and a ClientHello is capped
 * at 16 KiB.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http1.h"
#include "proxy.h"

/* tchar of RFC 9110 section 5.6.2: what a method is made of */
#define SNIFF_TCHARS "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

#define SNIFF_HELLO_MAX CONN_PEEK_MAX

static unsigned sniff_get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

#define SNIFF_EXT_ECH 0xfe0du /* encrypted_client_hello */

/* The SNI in a whole ClientHello body (after the 4-byte handshake header). */
static enum sniff_kind sniff_hello(const uint8_t *h, size_t len, char *name, size_t namelen)
{
	size_t off = 2 + 32, l;

	name[0] = 0;
	if (off + 1 > len)
		return SNIFF_BAD_TLS;
	off += 1 + h[off]; /* session id */
	if (off + 2 > len)
		return SNIFF_BAD_TLS;
	l = sniff_get16(h + off);
	if (l == 0 || l % 2)
		return SNIFF_BAD_TLS;
	off += 2 + l; /* cipher suites */
	if (off + 1 > len)
		return SNIFF_BAD_TLS;
	off += 1 + h[off]; /* compression methods */
	if (off == len)
		return SNIFF_TLS; /* no extensions, no SNI */
	if (off + 2 > len || off + 2 + sniff_get16(h + off) != len)
		return SNIFF_BAD_TLS;
	off += 2;
	while (off < len) {
		unsigned type, elen;

		if (off + 4 > len)
			return SNIFF_BAD_TLS;
		type = sniff_get16(h + off);
		elen = sniff_get16(h + off + 2);
		off += 4;
		if (off + elen > len)
			return SNIFF_BAD_TLS;
		/* Encrypted ClientHello: the SNI we read would be only the outer "public name",
		 * and the host the TLS really reaches another one. Refused (GREASE ECH too: it
		 * cannot be told apart). */
		if (type == SNIFF_EXT_ECH)
			return SNIFF_BAD_TLS;
		if (type == 0) {
			const uint8_t *e = h + off;
			size_t list, nl;

			if (name[0] || elen < 5)
				return SNIFF_BAD_TLS; /* two SNI extensions, or a short one */
			list = sniff_get16(e);
			nl = sniff_get16(e + 3);
			if (list + 2 != elen || e[2] != 0 || 5 + nl > elen || nl == 0 ||
			    nl >= NAME_MAX_TEXT || nl >= namelen)
				return SNIFF_BAD_TLS;
			memcpy(name, e + 5, nl);
			name[nl] = 0;
			if (memchr(name, 0, nl) || !netpol_name_norm(name, name, namelen))
				return SNIFF_BAD_TLS;
		}
		off += elen;
	}
	return SNIFF_TLS;
}

enum sniff_kind sniff_tls(const uint8_t *buf, size_t len, char *name, size_t namelen)
{
	uint8_t hs[SNIFF_HELLO_MAX];
	size_t have = 0, off = 0, need = 0;

	if (len < 1 || buf[0] != 22)
		return SNIFF_OTHER;
	/* Gather the handshake bytes of consecutive handshake records. */
	for (;;) {
		size_t rl;

		if (off + 5 > len)
			return SNIFF_MORE;
		if (buf[off] != 22 || buf[off + 1] != 3 || buf[off + 2] > 4)
			return SNIFF_BAD_TLS;
		rl = sniff_get16(buf + off + 3);
		if (rl == 0 || rl > 16384)
			return SNIFF_BAD_TLS;
		if (off + 5 + rl > len) {
			/* Take what has come of this record: enough to check the length. */
			rl = len - off - 5;
			if (have + rl > sizeof(hs))
				return SNIFF_BAD_TLS;
			memcpy(hs + have, buf + off + 5, rl);
			have += rl;
			if (have >= 4 &&
			    (hs[0] != 1 ||
			     4 + ((size_t)hs[1] << 16 | sniff_get16(hs + 2)) > sizeof(hs)))
				return SNIFF_BAD_TLS;
			return SNIFF_MORE;
		}
		if (have + rl > sizeof(hs))
			return SNIFF_BAD_TLS;
		memcpy(hs + have, buf + off + 5, rl);
		have += rl;
		off += 5 + rl;
		if (have >= 4) {
			if (hs[0] != 1)
				return SNIFF_BAD_TLS;
			need = 4 + ((size_t)hs[1] << 16 | sniff_get16(hs + 2));
			if (need > sizeof(hs) || need < 4 + 38)
				return SNIFF_BAD_TLS;
			if (have >= need)
				return sniff_hello(hs + 4, need - 4, name, namelen);
		}
	}
}

int sniff_split_hostport(const char *s, size_t len, char *host, size_t hostlen, uint16_t defport,
			 uint16_t *port)
{
	const char *colon = NULL, *h = s;
	size_t hl = len;

	if (len > 0 && s[0] == '[') {
		const char *e = memchr(s, ']', len);

		if (!e)
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(e - s - 1);
		if ((size_t)(e - s) + 1 < len) {
			if (e[1] != ':')
				return -EINVAL;
			colon = e + 1;
		}
	} else {
		colon = memchr(s, ':', len);
		if (colon) {
			if (memchr(colon + 1, ':', len - (size_t)(colon - s) - 1))
				return -EINVAL;
			hl = (size_t)(colon - s);
		}
	}
	if (hl == 0 || hl >= hostlen)
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = 0;
	*port = defport;
	if (colon) {
		size_t pl = len - (size_t)(colon + 1 - s);
		unsigned v = 0;

		if (pl == 0 || pl > 5)
			return -EINVAL;
		for (size_t i = 0; i < pl; i++) {
			if (!isdigit((unsigned char)colon[1 + i]))
				return -EINVAL;
			v = v * 10 + (unsigned)(colon[1 + i] - '0');
		}
		if (v == 0 || v > 65535)
			return -EINVAL;
		*port = (uint16_t)v;
	}
	return 0;
}

/* True when `host` is a name (normalised in place) or an IP literal. */
static bool sniff_host_ok(char *host, size_t len)
{
	struct in6_addr a;

	if (inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1)
		return true;
	return netpol_name_norm(host, host, len);
}

int sniff_request_line(const uint8_t *buf, size_t len, char *method, size_t mlen, char *target,
		       size_t tlen)
{
	const char *s = (const char *)buf, *eol = memchr(s, '\n', len), *sp1, *sp2;
	size_t ll;

	if (!eol)
		return -EAGAIN;
	ll = (size_t)(eol - s);
	if (ll > 0 && s[ll - 1] == '\r')
		ll--;
	sp1 = memchr(s, ' ', ll);
	if (!sp1 || sp1 == s || (size_t)(sp1 - s) >= mlen)
		return -EINVAL;
	sp2 = memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - s));
	if (!sp2 || sp2 == sp1 + 1 || (size_t)(sp2 - sp1 - 1) >= tlen)
		return -EINVAL;
	if (ll - (size_t)(sp2 + 1 - s) != 8 ||
	    (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0))
		return -EINVAL;
	for (const char *c = s; c < sp1; c++) {
		if (!isupper((unsigned char)*c))
			return -EINVAL;
	}
	for (const char *c = sp1 + 1; c < sp2; c++) {
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return -EINVAL;
	}
	memcpy(method, s, (size_t)(sp1 - s));
	method[sp1 - s] = 0;
	memcpy(target, sp1 + 1, (size_t)(sp2 - sp1 - 1));
	target[sp2 - sp1 - 1] = 0;
	return 0;
}

/*
 * Could these first bytes be an attempt at an HTTP/1.x request, however malformed? A lenient
 * server skips empty lines before a request line, takes any case of a method, a tab for a
 * space and a bare LF for a line end, answers HTTP/0.9 (a request line without a version,
 * whatever its method) and picks the site of an absolute URI over any Host; one behind a
 * PROXY-protocol listener drops that header and reads the request after it. So the test is
 * wide: a PROXY-protocol header (v1's "PROXY ", v2's signature); else after any CR, LF, SP or
 * HTAB, a token (tchar, any case) then SP or HTAB, then a target that is a path ("/"), "*" or
 * an absolute URI (a scheme, "://"), or a first line that names an HTTP version ("HTTP/",
 * any case). SNIFF_HTTP when they could be (the strict parser decides), SNIFF_OTHER when they
 * are positively something else (a first line without any of these, a byte no request line
 * starts with: a binary protocol, an SSH banner, SMTP, Redis' and memcached's text commands),
 * SNIFF_MORE while undecided.
 */
static enum sniff_kind sniff_http_attempt(const uint8_t *buf, size_t len)
{
	static const uint8_t proxy_v2[] = "\r\n\r\n\0\r\nQUIT\n";
	size_t i = 0, tok, n = len < 6 ? len : 6;

	if (memcmp(buf, proxy_v2, len < 12 ? len : 12) == 0)
		return len < 12 ? SNIFF_MORE : SNIFF_HTTP;
	if (strncasecmp((const char *)buf, "PROXY ", n) == 0)
		return n < 6 ? SNIFF_MORE : SNIFF_HTTP;
	while (i < len && (buf[i] == '\r' || buf[i] == '\n' || buf[i] == ' ' || buf[i] == '\t'))
		i++;
	for (tok = i; i < len && buf[i] && strchr(SNIFF_TCHARS, buf[i]); i++)
		;
	if (i == len)
		return SNIFF_MORE;
	if (i == tok || (buf[i] != ' ' && buf[i] != '\t'))
		return SNIFF_OTHER;
	while (i < len && (buf[i] == ' ' || buf[i] == '\t'))
		i++;
	if (i == len)
		return SNIFF_MORE;
	if (buf[i] == '/' || buf[i] == '*')
		return SNIFF_HTTP; /* origin form, HTTP/0.9's "GET /path", OPTIONS * */
	if (isalpha(buf[i])) {
		size_t j = i + 1;

		while (j < len &&
		       (isalnum(buf[j]) || buf[j] == '+' || buf[j] == '-' || buf[j] == '.'))
			j++;
		if (j + 3 > len && memcmp(buf + j, "://", len - j) == 0)
			return SNIFF_MORE;
		if (j + 3 <= len && memcmp(buf + j, "://", 3) == 0)
			return SNIFF_HTTP; /* an absolute URI: any scheme, as servers take it */
	}
	for (; i < len && buf[i] != '\n'; i++) {
		if (i + 5 <= len && strncasecmp((const char *)buf + i, "HTTP/", 5) == 0)
			return SNIFF_HTTP;
	}
	return i == len ? SNIFF_MORE : SNIFF_OTHER;
}

enum sniff_kind sniff_http(const uint8_t *buf, size_t len, char *name, size_t namelen,
			   size_t *head_len, const char **why)
{
	struct http1_head *h;
	const char *reason = NULL;
	enum sniff_kind k;
	int status;
	uint16_t port;

	*why = NULL;
	k = sniff_http_attempt(buf, len);
	if (k != SNIFF_HTTP)
		return k;
	if (http1_head_find((const char *)buf, len, CONN_PEEK_MAX, head_len, &reason) < 0) {
		if (!reason)
			return SNIFF_MORE;
		*why = reason;
		return SNIFF_BAD_HTTP;
	}
	h = malloc(sizeof(*h));
	if (!h) {
		*why = "out of memory";
		return SNIFF_BAD_HTTP;
	}
	k = SNIFF_BAD_HTTP;
	if (http1_parse_request((const char *)buf, *head_len, h, &status, &reason) < 0)
		*why = reason;
	else if (h->host_len >= namelen ||
		 sniff_split_hostport(h->host, h->host_len, name, namelen, 80, &port) < 0 ||
		 !sniff_host_ok(name, namelen))
		*why = "a Host that is no name or address";
	else
		k = SNIFF_HTTP;
	free(h);
	if (k != SNIFF_HTTP)
		name[0] = 0;
	return k;
}

enum sniff_kind sniff_classify(const uint8_t *buf, size_t len, char *name, size_t namelen)
{
	size_t head;
	const char *why;
	enum sniff_kind k;

	name[0] = 0;
	if (len == 0)
		return SNIFF_MORE;
	if (buf[0] == 22)
		return sniff_tls(buf, len, name, namelen);
	k = sniff_http(buf, len, name, namelen, &head, &why);
	/* A head (or an undecided start) that fills the buffer is refused, never relayed. */
	if (k == SNIFF_MORE && len >= CONN_PEEK_MAX)
		return SNIFF_BAD_HTTP;
	return k;
}
