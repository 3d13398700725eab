/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Strict HTTP/1.1 head parsing (RFC 9110, RFC 9112) for the interception. Everything the RFCs
 * let a recipient "leniently" accept is refused here instead: bare LF or CR, obsolete line
 * folding, whitespace before a colon, several Content-Length or Host fields, Content-Length with
 * Transfer-Encoding, any coding but "chunked". A proxy that accepts less than the server behind
 * it cannot be made to frame a message differently from it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http1.h"

/* tchar of RFC 9110 section 5.6.2 */
static bool http1_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar, SP and HTAB: no other control character, no CR, no LF, no NUL */
static bool http1_value_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

int http1_head_find(const char *buf, size_t len, size_t max_len, size_t *head_len,
		    const char **reason)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i == 0 || buf[i - 1] != '\r') {
			*reason = "bare LF";
			return -EPROTO;
		}
		if (i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
			if (i + 1 > max_len)
				break;
			*head_len = i + 1;
			return 0;
		}
	}
	if (len >= max_len) {
		*reason = "head too large";
		return -EPROTO;
	}
	return -EAGAIN;
}

bool http1_field_is(const struct http1_field *f, const char *name)
{
	return f->name_len == strlen(name) && strncasecmp(f->name, name, f->name_len) == 0;
}

/* Does the field's name read as one of the fields that frame or route a message once '_' is
 * taken for '-' (as CGI and Rack servers do: Transfer_Encoding becomes HTTP_TRANSFER_ENCODING,
 * the same key as Transfer-Encoding's)? Such a name would mean one thing to us and another to
 * such a server. */
static bool http1_field_underscored(const struct http1_field *f)
{
	static const char *const framing[] = {"content-length",
					      "transfer-encoding",
					      "host",
					      "connection",
					      "upgrade",
					      "expect",
					      "te",
					      "trailer"};

	if (!memchr(f->name, '_', f->name_len))
		return false;
	for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++) {
		size_t n = strlen(framing[i]), k = 0;

		if (n != f->name_len)
			continue;
		while (k < n && (tolower((unsigned char)f->name[k]) == framing[i][k] ||
				 (f->name[k] == '_' && framing[i][k] == '-')))
			k++;
		if (k == n)
			return true;
	}
	return false;
}

static bool http1_value_is(const struct http1_field *f, const char *v)
{
	return f->value_len == strlen(v) && strncasecmp(f->value, v, f->value_len) == 0;
}

/* Does a comma-separated list value hold token `tok` (case-insensitive)? */
static bool http1_list_has(const struct http1_field *f, const char *tok)
{
	size_t n = strlen(tok), i = 0;

	while (i < f->value_len) {
		size_t start, end;

		while (i < f->value_len && (f->value[i] == ' ' || f->value[i] == '\t'))
			i++;
		start = i;
		while (i < f->value_len && f->value[i] != ',')
			i++;
		end = i;
		while (end > start && (f->value[end - 1] == ' ' || f->value[end - 1] == '\t'))
			end--;
		if (end - start == n && strncasecmp(f->value + start, tok, n) == 0)
			return true;
		i++; /* the comma */
	}
	return false;
}

/* A Content-Length value: 1-18 decimal digits, nothing else (no sign, no list). */
static int http1_parse_length(const struct http1_field *f, int64_t *out)
{
	int64_t v = 0;

	if (f->value_len == 0 || f->value_len > HTTP1_CL_DIGITS_MAX)
		return -EPROTO;
	for (size_t i = 0; i < f->value_len; i++) {
		if (f->value[i] < '0' || f->value[i] > '9')
			return -EPROTO;
		v = v * 10 + (f->value[i] - '0');
	}
	*out = v;
	return 0;
}

/* "HTTP/1.0" or "HTTP/1.1" exactly; the minor version or -1 */
static int http1_version(const char *p, size_t len)
{
	if (len != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
		return -1;
	return p[7] - '0';
}

/*
 * One field line [p, eol) without its CRLF, by the rules of a head's fields: a token, a colon
 * with no whitespace before it, a value of field-vchars, SP and HTAB (OWS trimmed into *f), no
 * obsolete line folding. Trailer lines (http1_trailer_line) are held to the same rules.
 */
static int http1_field_line(const char *p, const char *eol, struct http1_field *f,
			    const char **reason)
{
	const char *colon, *v, *ve;

	if ((size_t)(eol - p) > HTTP1_LINE_MAX) {
		*reason = "header line too long";
		return -EPROTO;
	}
	if (p < eol && (*p == ' ' || *p == '\t')) {
		*reason = "obsolete line folding";
		return -EPROTO;
	}
	for (colon = p; colon < eol && http1_tchar((unsigned char)*colon); colon++)
		;
	if (colon == p || colon == eol || *colon != ':') {
		*reason = colon < eol && (*colon == ' ' || *colon == '\t')
				  ? "whitespace before colon"
				  : "malformed header name";
		return -EPROTO;
	}
	for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
		;
	for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
		;
	for (const char *c = v; c < ve; c++) {
		if (!http1_value_char((unsigned char)*c)) {
			*reason = "control character in header";
			return -EPROTO;
		}
	}
	f->name = p;
	f->name_len = (size_t)(colon - p);
	f->value = v;
	f->value_len = (size_t)(ve - v);
	return 0;
}

int http1_trailer_line(const char *line, size_t len, const char **reason)
{
	struct http1_field f;

	return http1_field_line(line, line + len, &f, reason);
}

/*
 * The field lines from `p` to the head's end (the final empty line included), into h->fields,
 * with the framing fields interpreted.
 */
static int http1_parse_fields(const char *p, const char *end, struct http1_head *h,
			      unsigned max_fields, bool request, const char **reason)
{
	unsigned n_cl = 0, n_te = 0, n_host = 0;

	h->content_length = -1;
	for (;;) {
		const char *eol = memchr(p, '\r', (size_t)(end - p));
		struct http1_field *f;

		/* http1_head_find guarantees every LF has its CR; a CR must have its LF */
		if (!eol || eol + 1 >= end || eol[1] != '\n') {
			*reason = "bare CR";
			return -EPROTO;
		}
		if (eol == p)
			break; /* the empty line */
		if (h->nfields >= max_fields) {
			*reason = "too many headers";
			return -EPROTO;
		}
		f = &h->fields[h->nfields];
		if (http1_field_line(p, eol, f, reason))
			return -EPROTO;
		h->nfields++;
		p = eol + 2;

		if (http1_field_underscored(f)) {
			*reason = "a framing field's name with '_'";
			return -EPROTO;
		}
		if (http1_field_is(f, "content-length")) {
			if (++n_cl > 1 || http1_parse_length(f, &h->content_length)) {
				*reason =
					n_cl > 1 ? "several Content-Length" : "bad Content-Length";
				return -EPROTO;
			}
		} else if (http1_field_is(f, "transfer-encoding")) {
			if (++n_te > 1 || !http1_value_is(f, "chunked")) {
				*reason = "Transfer-Encoding other than chunked";
				return -EPROTO;
			}
			h->chunked = true;
		} else if (http1_field_is(f, "connection")) {
			if (http1_list_has(f, "close"))
				h->close = true;
		} else if (http1_field_is(f, "upgrade")) {
			h->upgrade = true;
		} else if (request && http1_field_is(f, "host")) {
			if (++n_host > 1) {
				*reason = "several Host";
				return -EPROTO;
			}
			h->host = f->value;
			h->host_len = f->value_len;
		} else if (request && http1_field_is(f, "expect")) {
			if (!http1_value_is(f, "100-continue")) {
				*reason = "unsupported Expect";
				return -EPROTO;
			}
			h->expect_continue = true;
		}
	}
	if (n_cl && n_te) {
		*reason = "both Content-Length and Transfer-Encoding";
		return -EPROTO;
	}
	return 0;
}

/* An HTTP/1.0 message closes its connection unless it says keep-alive. */
static void http1_default_close(struct http1_head *h)
{
	bool keep = false;

	if (h->minor != 0)
		return;
	for (unsigned i = 0; i < h->nfields; i++)
		if (http1_field_is(&h->fields[i], "connection") &&
		    http1_list_has(&h->fields[i], "keep-alive"))
			keep = true;
	if (!keep)
		h->close = true;
}

/*
 * A request head with its target in origin form ("/path", or "*" for OPTIONS) or, for the
 * explicit proxy (`absolute`), in absolute form "http://authority/path", whose authority names
 * the host and makes Host optional.
 */
static int http1_parse_request_form(const char *head, size_t len, struct http1_head *h, int *status,
				    const char **reason, bool absolute)
{
	const char *end = head + len, *eol, *sp1, *sp2;
	int err;

	memset(h, 0, sizeof(*h));
	*status = 400;
	eol = memchr(head, '\r', len);
	if (!eol || (size_t)(eol - head) > HTTP1_LINE_MAX) {
		*reason = "request line too long";
		return -EPROTO;
	}
	sp1 = memchr(head, ' ', (size_t)(eol - head));
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || sp1 == head || sp1 - head > 32 || sp2 == sp1 + 1) {
		*reason = "malformed request line";
		return -EPROTO;
	}
	for (const char *c = head; c < sp1; c++)
		if (!http1_tchar((unsigned char)*c)) {
			*reason = "malformed method";
			return -EPROTO;
		}
	for (const char *c = sp1 + 1; c < sp2; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
			*reason = "malformed request target";
			return -EPROTO;
		}
	h->method = head;
	h->method_len = (size_t)(sp1 - head);
	h->target = sp1 + 1;
	h->target_len = (size_t)(sp2 - sp1 - 1);
	if (absolute) {
		if (h->target_len <= 7 || strncasecmp(h->target, "http://", 7) != 0) {
			*reason = "request target not an http:// URI";
			return -EPROTO;
		}
	} else if (h->target[0] != '/' &&
		   !(h->target_len == 1 && h->target[0] == '*' && h->method_len == 7 &&
		     memcmp(h->method, "OPTIONS", 7) == 0)) {
		/* origin-form only (and "*" for OPTIONS): an absolute-form target would name a
		 * host too */
		*reason = "request target not in origin form";
		return -EPROTO;
	}
	h->minor = http1_version(sp2 + 1, (size_t)(eol - sp2 - 1));
	if (h->minor < 0) {
		*reason = "unsupported HTTP version";
		return -EPROTO;
	}
	err = http1_parse_fields(eol + 2, end, h, HTTP1_REQ_FIELDS_MAX, true, reason);
	if (err) {
		if (strcmp(*reason, "unsupported Expect") == 0)
			*status = 417;
		return err;
	}
	if (!h->host && !absolute) {
		*reason = "no Host";
		return -EPROTO;
	}
	if (h->chunked && h->minor == 0) {
		*reason = "Transfer-Encoding in HTTP/1.0";
		return -EPROTO;
	}
	/* TRACE echoes the request, the credentials put in it included, back to the guest */
	if ((h->method_len == 5 && memcmp(h->method, "TRACE", 5) == 0) ||
	    (h->method_len == 5 && memcmp(h->method, "TRACK", 5) == 0)) {
		*status = 501;
		*reason = "TRACE refused";
		return -EPROTO;
	}
	if (h->upgrade) {
		*status = 501;
		*reason = "upgrade refused";
		return -EPROTO;
	}
	http1_default_close(h);
	return 0;
}

int http1_parse_request(const char *head, size_t len, struct http1_head *h, int *status,
			const char **reason)
{
	return http1_parse_request_form(head, len, h, status, reason, false);
}

int http1_parse_proxy_request(const char *head, size_t len, struct http1_head *h, int *status,
			      const char **reason)
{
	return http1_parse_request_form(head, len, h, status, reason, true);
}

int http1_parse_response(const char *head, size_t len, struct http1_head *h, const char **reason)
{
	const char *end = head + len, *eol;
	size_t line_len;

	memset(h, 0, sizeof(*h));
	eol = memchr(head, '\r', len);
	if (!eol || (size_t)(eol - head) > HTTP1_LINE_MAX) {
		*reason = "status line too long";
		return -EPROTO;
	}
	line_len = (size_t)(eol - head);
	/* "HTTP/1.1 200" then either the end of the line or SP reason-phrase */
	if (line_len < 12 || (h->minor = http1_version(head, 8)) < 0 || head[8] != ' ' ||
	    (line_len > 12 && head[12] != ' ')) {
		*reason = "malformed status line";
		return -EPROTO;
	}
	for (int i = 9; i < 12; i++) {
		if (head[i] < '0' || head[i] > '9') {
			*reason = "malformed status code";
			return -EPROTO;
		}
		h->status = h->status * 10 + (head[i] - '0');
	}
	if (h->status < 100) {
		*reason = "malformed status code";
		return -EPROTO;
	}
	for (size_t i = 13; i < line_len; i++)
		if (!http1_value_char((unsigned char)head[i])) {
			*reason = "control character in status line";
			return -EPROTO;
		}
	if (http1_parse_fields(eol + 2, end, h, HTTP1_RESP_FIELDS_MAX, false, reason))
		return -EPROTO;
	http1_default_close(h);
	return 0;
}

bool http1_host_matches(const char *value, size_t len, const char *name)
{
	size_t n = len, nlen = strlen(name);

	/* ":port" (digits, at least one) stripped; an IPv6 literal never matches a name */
	for (size_t i = 0; i < len; i++) {
		if (value[i] != ':')
			continue;
		if (i + 1 == len || len - i - 1 > 5)
			return false;
		for (size_t j = i + 1; j < len; j++)
			if (value[j] < '0' || value[j] > '9')
				return false;
		n = i;
		break;
	}
	if (n > 0 && value[n - 1] == '.')
		n--;
	if (nlen > 0 && name[nlen - 1] == '.')
		nlen--;
	return n > 0 && n == nlen && strncasecmp(value, name, n) == 0;
}

int http1_chunk_size(const char *line, size_t len, uint64_t *size)
{
	uint64_t v = 0;
	size_t i = 0;

	for (; i < len; i++) {
		char c = line[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			break;
		/* 2^60 at most: no overflow, and far more than any body the budget allows */
		if (v >> 56)
			return -EPROTO;
		v = v << 4 | d;
	}
	if (i == 0)
		return -EPROTO;
	/* then only chunk extensions (dropped by the caller): ";..." after optional BWS */
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	if (i < len && line[i] != ';')
		return -EPROTO;
	for (; i < len; i++)
		if (!http1_value_char((unsigned char)line[i]))
			return -EPROTO;
	*size = v;
	return 0;
}

/* Fields that describe one hop, not the request: an explicit proxy's client sends them to us. */
static bool http1_hop_field(const struct http1_field *f)
{
	static const char *const hop[] = {"host",	"connection",	       "proxy-connection",
					  "keep-alive", "proxy-authorization", "te",
					  "upgrade"};

	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (http1_field_is(f, hop[i]))
			return true;
	return false;
}

int http1_origin_head(const struct http1_head *h, const char *authority, size_t authority_len,
		      const char *path, size_t path_len, char *out, size_t out_len, size_t *len)
{
	size_t o;
	int n;

	n = snprintf(out, out_len, "%.*s %.*s HTTP/1.%d\r\nHost: %.*s\r\nConnection: close\r\n",
		     (int)h->method_len, h->method, (int)path_len, path, h->minor,
		     (int)authority_len, authority);
	if (n < 0 || (size_t)n >= out_len)
		return -E2BIG;
	o = (size_t)n;
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http1_field *f = &h->fields[i];

		if (http1_hop_field(f))
			continue;
		if (f->name_len + f->value_len + 4 > out_len - o)
			return -E2BIG;
		memcpy(out + o, f->name, f->name_len);
		o += f->name_len;
		memcpy(out + o, ": ", 2);
		memcpy(out + o + 2, f->value, f->value_len);
		o += 2 + f->value_len;
		memcpy(out + o, "\r\n", 2);
		o += 2;
	}
	if (out_len - o < 2)
		return -E2BIG;
	memcpy(out + o, "\r\n", 2);
	*len = o + 2;
	return 0;
}
