/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One intercepted connection of a credentialed host: TLS from the guest ended with the CA's
 * leaf, each HTTP/1.1 request checked (http1.c), its Host held to the SNI's name, the rule's
 * headers put in place of the guest's, and sent on over a verified TLS connection. The I/O,
 * every wait bounded by idle_ms, is mitm_io.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "mitm_conn.h"

/* ---- one request and its response ---- */

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 417:
		return "Expectation Failed";
	case 421:
		return "Misdirected Request";
	case 501:
		return "Not Implemented";
	default:
		return "Bad Gateway";
	}
}

/* Answer the guest with an error of ours (unless a response has begun) and close after it. */
static void conn_reply(struct mitm_conn *c, int status, const char *why)
{
	char buf[320];
	int n;

	if (c->replied)
		return;
	c->replied = true;
	/* why is one of our constant reasons: never a header value */
	n = snprintf(buf, sizeof(buf),
		     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\nsandbox-proxy: %s\n",
		     status, status_text(status), strlen(why) + 15, why);
	if (n > 0 && (size_t)n < sizeof(buf))
		(void)!mitm_end_write(c, &c->guest, buf, (size_t)n);
}

/*
 * Buffer a whole head from e: 0 with *head_len, 1 when e ended cleanly before its first byte
 * (allowed only when may_end), else -errno (the reason kept).
 */
static int conn_read_head(struct mitm_conn *c, struct mitm_end *e, bool may_end, size_t *head_len)
{
	unsigned crlf = 0;

	for (;;) {
		const char *reason = "";
		int r;

		/* empty lines before a request line are tolerated, a few */
		while (mitm_end_avail(e) >= 2 && e->in[e->off] == '\r' &&
		       e->in[e->off + 1] == '\n') {
			if (++crlf > MITM_LEADING_CRLF)
				return mitm_conn_fail(c, -EPROTO, "%s: empty lines", e->who);
			e->off += 2;
		}
		r = http1_head_find(e->in + e->off, mitm_end_avail(e), HTTP1_HEAD_MAX, head_len,
				    &reason);
		if (r == 0)
			return 0;
		if (r != -EAGAIN)
			return mitm_conn_fail(c, r, "%s: %s", e->who, reason);
		r = mitm_end_fill(c, e);
		if (r > 0)
			continue;
		if ((r == 0 || r == -EPIPE) && may_end && mitm_end_avail(e) == 0 && crlf == 0)
			return 1;
		if (r == 0 || r == -EPIPE)
			return mitm_conn_fail(c, -ECONNRESET, "%s closed in the middle of a head",
					      e->who);
		return r;
	}
}

static bool rule_names(const struct mitm_rule *rule, const struct http1_field *f)
{
	for (unsigned i = 0; rule && i < rule->nheaders; i++)
		if (http1_field_is(f, rule->headers[i].name))
			return true;
	return false;
}

/*
 * A request head as it goes upstream: the request line as received, the guest's fields but
 * those the rule names (and Expect, answered here), then the rule's. Allocated; the caller
 * cleanses and frees it (it holds the credentials).
 */
static int conn_build_request(struct mitm_conn *c, const char *head, char **out, size_t *out_len)
{
	const struct http1_head *h = &c->req;
	const char *eol = memchr(head, '\n', HTTP1_LINE_MAX + 2);
	size_t cap = 0, len = 0, line = (size_t)(eol - head) + 1;
	char *buf;

	cap = line + 2;
	for (unsigned i = 0; i < h->nfields; i++)
		cap += h->fields[i].name_len + h->fields[i].value_len + 4;
	for (unsigned i = 0; c->rule && i < c->rule->nheaders; i++)
		cap += strlen(c->rule->headers[i].name) + strlen(c->rule->headers[i].value) + 4;
	buf = malloc(cap);
	if (!buf)
		return mitm_conn_fail(c, -ENOMEM, "out of memory");
#define PUT(p, n)                                                                                  \
	do {                                                                                       \
		memcpy(buf + len, (p), (n));                                                       \
		len += (n);                                                                        \
	} while (0)
	PUT(head, line);
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http1_field *f = &h->fields[i];

		if (rule_names(c->rule, f) || http1_field_is(f, "expect"))
			continue;
		PUT(f->name, f->name_len);
		PUT(": ", 2);
		PUT(f->value, f->value_len);
		PUT("\r\n", 2);
	}
	for (unsigned i = 0; c->rule && i < c->rule->nheaders; i++) {
		const struct mitm_header *rh = &c->rule->headers[i];

		PUT(rh->name, strlen(rh->name));
		PUT(": ", 2);
		PUT(rh->value, strlen(rh->value));
		PUT("\r\n", 2);
	}
	PUT("\r\n", 2);
#undef PUT
	*out = buf;
	*out_len = len;
	return 0;
}

/* The verified TLS connection upstream, opened for the first request that passed its checks. */
static int conn_up_connect(struct mitm_conn *c)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	struct mitm_end *e = &c->up;
	long verify;
	BIO *bio;
	int err;

	e->ssl = SSL_new(c->up_ctx);
	bio = mitm_bio_new(&e->bio);
	if (!e->ssl || !bio) {
		BIO_free(bio);
		return mitm_conn_fail(c, -ENOMEM, "out of memory");
	}
	SSL_set_bio(e->ssl, bio, bio);
	if (!SSL_set_tlsext_host_name(e->ssl, c->name) || !SSL_set1_host(e->ssl, c->name) ||
	    SSL_set_alpn_protos(e->ssl, alpn, sizeof(alpn) - 1) != 0)
		return mitm_conn_fail(c, -ENOMEM, "upstream: cannot set the name");
	SSL_set_verify(e->ssl, SSL_VERIFY_PEER, NULL);
	SSL_set_connect_state(e->ssl);
	err = mitm_end_handshake(c, e);
	verify = SSL_get_verify_result(e->ssl);
	if (verify != X509_V_OK) {
		c->stats->error[0] = '\0';
		return mitm_conn_fail(c, -EPROTO, "upstream certificate: %s",
				      X509_verify_cert_error_string(verify));
	}
	if (err)
		return err;
	c->up_ready = true;
	return 0;
}

/* The response to the request just sent, relayed. 1: the connection goes on; 0: it ends. */
static int conn_response(struct mitm_conn *c, bool head_request)
{
	struct http1_head *h = &c->resp;
	size_t hl;
	int err;

	for (unsigned interim = 0;; interim++) {
		const char *reason = "";

		if ((err = conn_read_head(c, &c->up, false, &hl))) {
			/* on a later request, a silent close lets the guest's client retry it */
			if (c->stats->requests == 1 && !c->replied)
				conn_reply(c, 502, "no response from upstream");
			return err < 0 ? err : -ECONNRESET;
		}
		if (http1_parse_response(c->up.in + c->up.off, hl, h, &reason)) {
			conn_reply(c, 502, "malformed response");
			return mitm_conn_fail(c, -EPROTO, "upstream: %s", reason);
		}
		if (h->status == 101) {
			conn_reply(c, 502, "upgrade refused");
			return mitm_conn_fail(c, -EPROTO, "upstream switched protocols");
		}
		if (h->status >= 200)
			break;
		if (interim >= MITM_INTERIM_MAX) {
			conn_reply(c, 502, "malformed response");
			return mitm_conn_fail(c, -EPROTO, "upstream: too many interim responses");
		}
		/* 1xx: passed on, then the next head */
		c->replied = true;
		if ((err = mitm_end_write(c, &c->guest, c->up.in + c->up.off, hl)))
			return err;
		c->up.off += hl;
	}
	c->replied = true;
	if ((err = mitm_end_write(c, &c->guest, c->up.in + c->up.off, hl)))
		return err;
	c->up.off += hl;
	if (head_request || h->status == 204 || h->status == 304)
		return h->close ? 0 : 1;
	if (h->chunked)
		err = mitm_relay_chunked(c, &c->up, &c->guest);
	else if (h->content_length >= 0)
		err = mitm_relay_length(c, &c->up, &c->guest, (uint64_t)h->content_length);
	else
		return mitm_relay_until_close(c);
	if (err)
		return err;
	return h->close ? 0 : 1;
}

/* One request of the guest and its response. 1: another may follow; 0: done; -errno. */
static int conn_exchange(struct mitm_conn *c)
{
	struct http1_head *h = &c->req;
	const char *reason = "";
	char *out = NULL;
	size_t hl, out_len = 0;
	int status, err;
	bool more;

	c->replied = false;
	err = conn_read_head(c, &c->guest, true, &hl);
	if (err == 1)
		return 0;
	if (err) {
		if (err == -EPROTO)
			conn_reply(c, 400, "malformed request");
		return err;
	}
	if (http1_parse_request(c->guest.in + c->guest.off, hl, h, &status, &reason)) {
		conn_reply(c, status, reason);
		return mitm_conn_fail(c, -EPROTO, "guest: %s", reason);
	}
	/* Before anything goes upstream, and before the credentials are anywhere near it. */
	if (!http1_host_matches(h->host, h->host_len, c->name)) {
		conn_reply(c, 421, "Host differs from the TLS server name");
		return mitm_conn_fail(c, -EACCES, "Host differs from the TLS server name");
	}
	c->stats->requests++;
	more = !h->close && c->stats->requests < MITM_REQUESTS_MAX;
	if (!c->up_ready && (err = conn_up_connect(c))) {
		conn_reply(c, 502, "upstream TLS failed");
		return err;
	}
	if ((err = conn_build_request(c, c->guest.in + c->guest.off, &out, &out_len)))
		return err;
	err = mitm_end_write(c, &c->up, out, out_len);
	OPENSSL_cleanse(out, out_len);
	free(out);
	if (err)
		return err;
	bool head_request = h->method_len == 4 && memcmp(h->method, "HEAD", 4) == 0;
	bool body = h->chunked || h->content_length > 0;
	c->guest.off += hl; /* h points into the buffer: done with it from here */
	if (body && h->expect_continue &&
	    (err = mitm_end_write(c, &c->guest, "HTTP/1.1 100 Continue\r\n\r\n", 25)))
		return err;
	if (h->chunked)
		err = mitm_relay_chunked(c, &c->guest, &c->up);
	else if (h->content_length > 0)
		err = mitm_relay_length(c, &c->guest, &c->up, (uint64_t)h->content_length);
	if (err) {
		if (err == -EPROTO)
			conn_reply(c, 400, "malformed body");
		return err;
	}
	err = conn_response(c, head_request);
	if (err <= 0)
		return err;
	return more ? 1 : 0;
}

/* ---- the connection ---- */

static bool rule_header_ok(const struct mitm_header *rh)
{
	static const char *const framing[] = {"host",	    "content-length", "transfer-encoding",
					      "connection", "upgrade",	      "expect",
					      "te",	    "trailer"};
	size_t n = rh->name ? strlen(rh->name) : 0;

	if (n == 0 || n > 256 || !rh->value || strlen(rh->value) > HTTP1_LINE_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)rh->name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch)))
			return false;
	}
	/* a CR, LF or NUL in a credential would let it write a second header */
	for (const char *v = rh->value; *v; v++)
		if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f)
			return false;
	for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++)
		if (strcasecmp(rh->name, framing[i]) == 0)
			return false;
	return true;
}

/* The rule must be usable and be for this name (exactly, or as "*.parent"). */
static int conn_check_rule(struct mitm_conn *c)
{
	const struct mitm_rule *r = c->rule;
	size_t nl = strlen(c->name);

	if (!r)
		return 0;
	if (r->nheaders > 64 || (r->nheaders && !r->headers))
		return mitm_conn_fail(c, -EINVAL, "credential rule: too many headers");
	for (unsigned i = 0; i < r->nheaders; i++)
		if (!rule_header_ok(&r->headers[i]))
			return mitm_conn_fail(c, -EINVAL, "credential rule: header %u unusable", i);
	if (!r->host)
		return 0;
	if (strncmp(r->host, "*.", 2) == 0) {
		size_t pl = strlen(r->host + 1);

		if (nl > pl && strcasecmp(c->name + nl - pl, r->host + 1) == 0)
			return 0;
	} else if (http1_host_matches(r->host, strlen(r->host), c->name)) {
		return 0;
	}
	return mitm_conn_fail(c, -EINVAL, "credential rule is for another host");
}

static int end_set_nonblock(struct mitm_conn *c, struct mitm_end *e)
{
	e->fd_flags = fcntl(e->fd, F_GETFL);
	if (e->fd_flags < 0 || fcntl(e->fd, F_SETFL, e->fd_flags | O_NONBLOCK) < 0) {
		e->fd_flags = -1;
		return mitm_conn_fail(c, -errno, "%s socket: %s", e->who, strerror(errno));
	}
	return 0;
}

static int conn_guest_accept(struct mitm_conn *c, struct mitm_ca *ca)
{
	struct mitm_end *e = &c->guest;
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	const char *sni;
	BIO *bio;
	int err;

	if ((err = mitm_ca_leaf(ca, c->name, &cert, &key)))
		return mitm_conn_fail(c, err, "no certificate for this name");
	e->ssl = SSL_new(mitm_ca_guest_ctx(ca));
	bio = mitm_bio_new(&e->bio);
	if (!e->ssl || !bio || SSL_use_certificate(e->ssl, cert) != 1 ||
	    SSL_use_PrivateKey(e->ssl, key) != 1) {
		BIO_free(bio);
		err = mitm_conn_fail(c, -ENOMEM, "out of memory");
		goto out;
	}
	SSL_set_bio(e->ssl, bio, bio);
	SSL_set_accept_state(e->ssl);
	if ((err = mitm_end_handshake(c, e)))
		goto out;
	/* the SNI OpenSSL read must be the one the caller's parser read */
	sni = SSL_get_servername(e->ssl, TLSEXT_NAMETYPE_host_name);
	if (sni && !http1_host_matches(sni, strlen(sni), c->name)) {
		err = mitm_conn_fail(c, -EACCES, "TLS server name differs from the checked one");
		goto out;
	}
	c->guest_clean = true;
out:
	X509_free(cert);
	EVP_PKEY_free(key);
	return err;
}

/* One close_notify attempt, not waited for: the peer may be gone already. */
static void end_close(struct mitm_end *e, bool clean)
{
	if (!e->ssl)
		return;
	if (clean && SSL_is_init_finished(e->ssl)) {
		ERR_clear_error();
		(void)SSL_shutdown(e->ssl);
	}
	SSL_free(e->ssl);
	e->ssl = NULL;
}

int mitm_serve(struct mitm_ca *ca, SSL_CTX *upstream, int client_fd, const void *peek, size_t npeek,
	       const char *name, const struct mitm_rule *rule, int upstream_fd, unsigned idle_ms,
	       _Atomic int64_t *budget, struct mitm_stats *stats)
{
	struct mitm_conn *c;
	int err;

	memset(stats, 0, sizeof(*stats));
	if (!ca || !upstream || client_fd < 0 || upstream_fd < 0 || !name || (npeek && !peek) ||
	    idle_ms == 0 || idle_ms > INT_MAX) {
		snprintf(stats->error, sizeof(stats->error), "bad arguments");
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(stats->error, sizeof(stats->error), "out of memory");
		return -ENOMEM;
	}
	c->name = name;
	c->rule = rule;
	c->up_ctx = upstream;
	c->idle_ms = idle_ms;
	c->stats = stats;
	c->guest.who = "guest";
	c->guest.fd = c->guest.bio.fd = client_fd;
	c->guest.bio.peek = peek;
	c->guest.bio.npeek = npeek;
	c->guest.fd_flags = -1;
	c->up.who = "upstream";
	c->up.fd = c->up.bio.fd = upstream_fd;
	c->up.bio.budget = budget;
	c->up.bio.bytes_in = &stats->bytes_down;
	c->up.bio.bytes_out = &stats->bytes_up;
	c->up.fd_flags = -1;

	if ((err = conn_check_rule(c)) || (err = end_set_nonblock(c, &c->guest)) ||
	    (err = end_set_nonblock(c, &c->up)) || (err = conn_guest_accept(c, ca)))
		goto out;
	while ((err = conn_exchange(c)) == 1)
		;
out:
	/* a guest that sent garbage or timed out gets no close_notify: the TCP close says it */
	end_close(&c->guest, c->guest_clean && (err == 0 || c->replied));
	end_close(&c->up, c->up_ready && err == 0);
	if (c->replied || err == 0)
		shutdown(client_fd, SHUT_WR);
	if (c->guest.fd_flags >= 0)
		(void)fcntl(client_fd, F_SETFL, c->guest.fd_flags);
	if (c->up.fd_flags >= 0)
		(void)fcntl(upstream_fd, F_SETFL, c->up.fd_flags);
	/* the buffers held request heads, credentials among them once sent */
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
	return err;
}

SSL_CTX *mitm_upstream_ctx(const char *ca_file, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	unsigned long e;

	if (!ctx) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		snprintf(err, errlen, "cannot require TLS 1.2");
		goto fail;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (ca_file ? SSL_CTX_load_verify_file(ctx, ca_file) != 1
		    : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		e = ERR_peek_last_error();
		snprintf(err, errlen, "%s: no certificates loaded (%s)",
			 ca_file ? ca_file : "default trust store",
			 e ? ERR_reason_error_string(e) : "unknown error");
		goto fail;
	}
	ERR_clear_error();
	return ctx;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}
