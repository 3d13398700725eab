/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The I/O of an intercepted connection: a socket BIO that replays the peeked ClientHello bytes
 * and charges the egress budget, TLS reads and writes on non-blocking sockets where every wait
 * is a poll bounded by idle_ms (poll only after OpenSSL says WANT_READ/WANT_WRITE, so records it
 * has buffered, SSL_pending's bytes, are always read first), and the relaying of bodies.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
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

static BIO_METHOD *mitm_bio_method;
static pthread_once_t mitm_bio_once = PTHREAD_ONCE_INIT;

/* Record the first failure's reason (later ones are consequences) and return err. */
int mitm_conn_fail(struct mitm_conn *c, int err, const char *fmt, ...)
{
	va_list ap;

	if (c->stats->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(c->stats->error, sizeof(c->stats->error), fmt, ap);
		va_end(ap);
	}
	return err;
}

/* ---- the socket BIO ---- */

/* Take len bytes of the egress budget, or say there are not that many left. */
static bool mbio_budget_take(_Atomic int64_t *budget, int64_t len)
{
	int64_t cur = atomic_load(budget);

	do {
		if (cur < len)
			return false;
	} while (!atomic_compare_exchange_weak(budget, &cur, cur - len));
	return true;
}

static int mbio_write(BIO *b, const char *data, int len)
{
	struct mitm_bio *m = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (m->budget && !mbio_budget_take(m->budget, len)) {
		m->budget_out = true;
		return -1;
	}
	n = send(m->fd, data, (size_t)len, MSG_NOSIGNAL);
	if (m->budget && n < len)
		atomic_fetch_add(m->budget, len - (n > 0 ? n : 0)); /* not sent: given back */
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			BIO_set_retry_write(b);
		return -1;
	}
	if (m->bytes_out)
		*m->bytes_out += (uint64_t)n;
	return (int)n;
}

static int mbio_read(BIO *b, char *buf, int len)
{
	struct mitm_bio *m = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (m->peek_off < m->npeek) {
		size_t k = m->npeek - m->peek_off;

		if (k > (size_t)len)
			k = (size_t)len;
		memcpy(buf, m->peek + m->peek_off, k);
		m->peek_off += k;
		return (int)k;
	}
	n = recv(m->fd, buf, (size_t)len, 0);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			BIO_set_retry_read(b);
		return -1;
	}
	if (m->bytes_in)
		*m->bytes_in += (uint64_t)n;
	return (int)n;
}

static long mbio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int mbio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void mbio_method_init(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "mitm socket");

	if (m && BIO_meth_set_write(m, mbio_write) && BIO_meth_set_read(m, mbio_read) &&
	    BIO_meth_set_ctrl(m, mbio_ctrl) && BIO_meth_set_create(m, mbio_create)) {
		mitm_bio_method = m;
		return;
	}
	BIO_meth_free(m);
}

BIO *mitm_bio_new(struct mitm_bio *m)
{
	BIO *b;

	pthread_once(&mitm_bio_once, mbio_method_init);
	if (!mitm_bio_method || !(b = BIO_new(mitm_bio_method)))
		return NULL;
	BIO_set_data(b, m);
	return b;
}

/* ---- TLS I/O with every wait bounded ---- */

static int mitm_end_wait(struct mitm_conn *c, struct mitm_end *e, int ssl_err)
{
	struct pollfd p = {.fd = e->fd,
			   .events = ssl_err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
	int r;

	do {
		r = poll(&p, 1, (int)c->idle_ms);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return mitm_conn_fail(c, -errno, "%s: poll: %s", e->who, strerror(errno));
	if (r == 0)
		return mitm_conn_fail(c, -ETIMEDOUT, "idle timeout (%s)", e->who);
	return 0;
}

/* What a failed SSL call means: 1 to retry after waiting, else -errno with the reason kept. */
static int mitm_end_ssl_error(struct mitm_conn *c, struct mitm_end *e, int ret, const char *op)
{
	int se = SSL_get_error(e->ssl, ret);
	unsigned long ossl;
	int err;

	if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE) {
		err = mitm_end_wait(c, e, se);
		return err ? err : 1;
	}
	if (e->bio.budget_out)
		return mitm_conn_fail(c, -EDQUOT, "egress budget exhausted");
	if (se == SSL_ERROR_ZERO_RETURN)
		return mitm_conn_fail(c, -ECONNRESET, "%s closed during %s", e->who, op);
	ossl = ERR_peek_error();
	if (se == SSL_ERROR_SYSCALL || ERR_GET_REASON(ossl) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
		err = errno ? -errno : -ECONNRESET;
		return mitm_conn_fail(c, err, "%s closed during %s", e->who, op);
	}
	return mitm_conn_fail(c, -EPROTO, "%s TLS %s: %s", e->who, op,
			      ossl ? ERR_reason_error_string(ossl) : "error");
}

int mitm_end_handshake(struct mitm_conn *c, struct mitm_end *e)
{
	for (;;) {
		int r, err;

		ERR_clear_error();
		errno = 0;
		r = SSL_do_handshake(e->ssl);
		if (r == 1)
			return 0;
		err = mitm_end_ssl_error(c, e, r, "handshake");
		if (err < 0)
			return err;
	}
}

/*
 * Read into e->in: >0 bytes added, 0 on a clean end (close_notify), -EPIPE on a TCP end without
 * close_notify (the caller decides whether that truncates something), other -errno.
 */
int mitm_end_fill(struct mitm_conn *c, struct mitm_end *e)
{
	if (e->off == e->len) {
		e->off = 0;
		e->len = 0;
	} else if (e->off > 0) {
		memmove(e->in, e->in + e->off, e->len - e->off);
		e->len -= e->off;
		e->off = 0;
	}
	if (e->len == sizeof(e->in))
		return mitm_conn_fail(c, -ENOBUFS, "%s: buffer full", e->who);
	for (;;) {
		int r, se, err;

		ERR_clear_error();
		errno = 0;
		r = SSL_read(e->ssl, e->in + e->len, (int)(sizeof(e->in) - e->len));
		if (r > 0) {
			e->len += (size_t)r;
			return r;
		}
		se = SSL_get_error(e->ssl, r);
		/* a read can write (a TLS 1.3 key update's answer): the budget may stop it */
		if (e->bio.budget_out)
			return mitm_conn_fail(c, -EDQUOT, "egress budget exhausted");
		if (se == SSL_ERROR_ZERO_RETURN)
			return 0;
		if ((se == SSL_ERROR_SYSCALL && errno == 0) ||
		    (se == SSL_ERROR_SSL &&
		     ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING))
			return -EPIPE;
		err = mitm_end_ssl_error(c, e, r, "read");
		if (err < 0)
			return err;
	}
}

int mitm_end_write(struct mitm_conn *c, struct mitm_end *e, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		int k = len > INT_MAX ? INT_MAX : (int)len, r, err;

		ERR_clear_error();
		errno = 0;
		/* a retried SSL_write is given the same arguments, as OpenSSL requires */
		r = SSL_write(e->ssl, p, k);
		if (r > 0) {
			p += r;
			len -= (size_t)r;
			continue;
		}
		err = mitm_end_ssl_error(c, e, r, "write");
		if (err < 0)
			return err;
	}
	return 0;
}

/* Make sure some unread bytes are buffered; EOF in the middle of a message is an error. */
int mitm_end_need(struct mitm_conn *c, struct mitm_end *e, const char *what)
{
	int r;

	if (mitm_end_avail(e) > 0)
		return 0;
	r = mitm_end_fill(c, e);
	if (r > 0)
		return 0;
	if (r == 0 || r == -EPIPE)
		return mitm_conn_fail(c, -ECONNRESET, "%s closed in the middle of %s", e->who,
				      what);
	return r;
}

/* A CRLF-terminated line of at most max bytes, consumed; *line points into e->in. */
int mitm_end_line(struct mitm_conn *c, struct mitm_end *e, size_t max, const char **line,
		  size_t *len, const char *what)
{
	size_t scanned = 0;

	for (;;) {
		const char *p = e->in + e->off;
		const char *lf = memchr(p + scanned, '\n', mitm_end_avail(e) - scanned);
		int err;

		if (lf) {
			size_t n = (size_t)(lf - p);

			if (n == 0 || p[n - 1] != '\r' || n - 1 > max)
				return mitm_conn_fail(c, -EPROTO, "%s: malformed %s", e->who, what);
			*line = p;
			*len = n - 1;
			e->off += n + 1;
			return 0;
		}
		scanned = mitm_end_avail(e);
		if (scanned > max + 1)
			return mitm_conn_fail(c, -EPROTO, "%s: %s too long", e->who, what);
		/* a fill may move the unread bytes to the buffer's start: p is recomputed */
		err = mitm_end_fill(c, e);
		if (err == 0 || err == -EPIPE)
			return mitm_conn_fail(c, -ECONNRESET, "%s closed in the middle of %s",
					      e->who, what);
		if (err < 0)
			return err;
	}
}

/* ---- relaying bodies ---- */

int mitm_relay_length(struct mitm_conn *c, struct mitm_end *from, struct mitm_end *to, uint64_t n)
{
	while (n > 0) {
		size_t k;
		int err;

		if ((err = mitm_end_need(c, from, "a body")))
			return err;
		k = mitm_end_avail(from);
		if (k > n)
			k = (size_t)n;
		if ((err = mitm_end_write(c, to, from->in + from->off, k)))
			return err;
		from->off += k;
		n -= k;
	}
	return 0;
}

/*
 * A chunked body, re-encoded on the way: sizes written afresh, extensions and trailers dropped,
 * so that what the receiver parses is exactly what was checked here.
 */
int mitm_relay_chunked(struct mitm_conn *c, struct mitm_end *from, struct mitm_end *to)
{
	for (;;) {
		char hdr[32];
		const char *line;
		size_t len;
		uint64_t size;
		int err;

		if ((err = mitm_end_line(c, from, HTTP1_CHUNK_LINE_MAX, &line, &len, "chunk size")))
			return err;
		if (http1_chunk_size(line, len, &size))
			return mitm_conn_fail(c, -EPROTO, "%s: bad chunk size", from->who);
		if (size == 0)
			break;
		snprintf(hdr, sizeof(hdr), "%llx\r\n", (unsigned long long)size);
		if ((err = mitm_end_write(c, to, hdr, strlen(hdr))) ||
		    (err = mitm_relay_length(c, from, to, size)))
			return err;
		if ((err = mitm_end_line(c, from, 0, &line, &len, "chunk end")) ||
		    (err = mitm_end_write(c, to, "\r\n", 2)))
			return err;
	}
	/* the trailer section: bounded like a head, then dropped */
	for (unsigned n = 0;; n++) {
		const char *line;
		size_t len;
		int err;

		if (n > HTTP1_REQ_FIELDS_MAX)
			return mitm_conn_fail(c, -EPROTO, "%s: too many trailers", from->who);
		if ((err = mitm_end_line(c, from, HTTP1_LINE_MAX, &line, &len, "trailer")))
			return err;
		if (len == 0)
			break;
	}
	return mitm_end_write(c, to, "0\r\n\r\n", 5);
}

/* Everything until upstream closes; a close without close_notify is passed on as one. */
int mitm_relay_until_close(struct mitm_conn *c)
{
	for (;;) {
		int r, err;

		if (mitm_end_avail(&c->up) > 0) {
			if ((err = mitm_end_write(c, &c->guest, c->up.in + c->up.off,
						  mitm_end_avail(&c->up))))
				return err;
			c->up.off = c->up.len;
		}
		r = mitm_end_fill(c, &c->up);
		if (r == 0)
			return 0;
		if (r == -EPIPE) {
			c->guest_clean = false;
			return 0;
		}
		if (r < 0)
			return r;
	}
}
