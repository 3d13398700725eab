/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The strict HTTP/1.1 head parser of the proxy (http1.c): requests from a hostile guest on
 * every path plain HTTP takes (sniff.c, http_relay.c, the explicit proxy in conn.c) and in the
 * interception, and responses from a hostile server, refused at the first thing that two
 * parsers could read two ways (RFC 9112 section 11.2). Pure functions on a buffer; nothing
 * here does I/O.
 */
#ifndef SANDBOX_PROXY_HTTP1_H
#define SANDBOX_PROXY_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP1_HEAD_MAX	      (64 * 1024) /* a whole head, CRLFs included */
#define HTTP1_LINE_MAX	      (16 * 1024) /* one line without its CRLF */
#define HTTP1_REQ_FIELDS_MAX  100
#define HTTP1_RESP_FIELDS_MAX 256
#define HTTP1_CHUNK_LINE_MAX  4096
#define HTTP1_CL_DIGITS_MAX   18 /* < 2^63: no overflow in int64_t */

struct http1_field {
	const char *name, *value; /* into the head, not NUL-terminated; value without OWS */
	size_t name_len, value_len;
};

/* A parsed head; every pointer points into the buffer it was parsed from. */
struct http1_head {
	const char *method, *target; /* requests */
	size_t method_len, target_len;
	int minor;  /* HTTP/1.<minor>: 0 or 1 */
	int status; /* responses */
	struct http1_field fields[HTTP1_RESP_FIELDS_MAX];
	unsigned nfields;
	int64_t content_length; /* -1 when absent */
	bool chunked;		/* Transfer-Encoding: chunked */
	bool close;		/* the connection ends after this message */
	bool expect_continue;	/* Expect: 100-continue (requests) */
	bool upgrade;		/* an Upgrade field */
	const char *host;	/* the Host field's value (requests) */
	size_t host_len;
};

/*
 * Look for the end of a head in buf[0..len): 0 with *head_len (the CRLFCRLF included), -EAGAIN
 * when more bytes are needed, -EPROTO for a bare LF (*reason says so) or a head longer than
 * max_len.
 */
int http1_head_find(const char *buf, size_t len, size_t max_len, size_t *head_len,
		    const char **reason) __attribute__((warn_unused_result));

/*
 * Parse a request head (from http1_head_find). 0, or -EPROTO with *status the answer to give
 * (400, 417 or 501) and *reason a short constant string naming no header value.
 */
int http1_parse_request(const char *head, size_t len, struct http1_head *h, int *status,
			const char **reason) __attribute__((warn_unused_result));

/*
 * Parse an explicit proxy's request head, its target in absolute form "http://authority/..."
 * (h->target is the whole URI; Host is optional, the URI names the host); the rest as
 * http1_parse_request.
 */
int http1_parse_proxy_request(const char *head, size_t len, struct http1_head *h, int *status,
			      const char **reason) __attribute__((warn_unused_result));

/* Parse a response head: 0 or -EPROTO with *reason. */
int http1_parse_response(const char *head, size_t len, struct http1_head *h, const char **reason)
	__attribute__((warn_unused_result));

/* Does a Host value name `name` (port stripped, case-insensitive, trailing dot ignored)? */
bool http1_host_matches(const char *value, size_t len, const char *name);

/* The size of a chunk-size line without its CRLF ("1a;ext"): 0 or -EPROTO (bad hex, overflow). */
int http1_chunk_size(const char *line, size_t len, uint64_t *size)
	__attribute__((warn_unused_result));

/*
 * Check one trailer field line of a chunked body (without its CRLF) by the rules of a head's
 * field lines: 0, or -EPROTO with *reason (obsolete folding, a bare CR or LF, a malformed
 * name, a control character). The caller drops the line either way.
 */
int http1_trailer_line(const char *line, size_t len, const char **reason)
	__attribute__((warn_unused_result));

/*
 * Write a parsed absolute-form request head (http1_parse_proxy_request) into out[0, out_len)
 * in origin form, for the server: "METHOD path HTTP/1.x", Host from the URI's authority,
 * Connection: close, then the guest's fields but the hop-by-hop ones (Host, Connection,
 * Proxy-Connection, Keep-Alive, Proxy-Authorization, TE, Upgrade), each as "name: value".
 * 0 with *len, or -E2BIG when it does not fit.
 */
int http1_origin_head(const struct http1_head *h, const char *authority, size_t authority_len,
		      const char *path, size_t path_len, char *out, size_t out_len, size_t *len)
	__attribute__((warn_unused_result));

/* Is the field's name `name` (case-insensitive)? */
bool http1_field_is(const struct http1_field *f, const char *name);

#endif
