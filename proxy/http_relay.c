/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plain HTTP after the decision: the destination was decided by the first request's Host, so
 * every later request on the connection must name the same host, or a keep-alive connection
 * to an allowed name would carry requests for any other name served from the same address.
 * The guest's bytes are read request by request with the interception's strict parser
 * (http1.c): a head, then its body framed by Content-Length or chunked. A request for another
 * host, an absolute-form target, an upgrade or anything the parser refuses ends the
 * connection there, before a byte of it goes upstream. Chunked bodies are re-encoded and their
 * trailers dropped (hr_chunked): what goes upstream is only what was parsed. Responses are
 * copied back as they come, by a second thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http1.h"
#include "proxy.h"

#define HR_BUF		(HTTP1_HEAD_MAX + 4096)
#define HR_TRAILERS_MAX 64
#define HR_DOWN_BUF	(128u << 10)
#define HR_SPLICE_PIPE	(1u << 20) /* asked of the pipe; the kernel may give less */
#define HR_GATE_HTTP_OK 1	   /* hr_run's `gate`: the first bytes decide, HTTP allowed */
#define HR_GATE_NO_HTTP 2	   /* ... HTTP refused (a credentialed host) */

struct hr {
	int gfd, ufd;
	unsigned idle_ms;
	_Atomic int64_t *budget;
	char *buf; /* guest bytes not yet sent upstream */
	size_t len;
	uint64_t *up;
	const char *why;
	int status; /* the answer to a refused request: 400, 403, 417, 501 */
};

/* Wait for `ev` on `fd` up to `ms`: 0, -ETIMEDOUT, or -errno. */
static int hr_wait(int fd, short ev, unsigned ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;

	do
		r = poll(&p, 1, (int)ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == 0 ? -ETIMEDOUT : 0;
}

/* More guest bytes: the count read, 0 at EOF, -E2BIG when the buffer is full, -errno. */
static int hr_fill(struct hr *h)
{
	ssize_t n;
	int err;

	if (h->len == HR_BUF)
		return -E2BIG;
	for (;;) {
		n = recv(h->gfd, h->buf + h->len, HR_BUF - h->len, MSG_DONTWAIT);
		if (n >= 0)
			break;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if ((err = hr_wait(h->gfd, POLLIN, h->idle_ms)) < 0)
			return err;
	}
	h->len += (size_t)n;
	return (int)n;
}

/* Send `n` bytes upstream, charged to the egress budget. */
static int hr_send(struct hr *h, const char *p, size_t n)
{
	int err;

	if (h->budget && atomic_fetch_sub(h->budget, (int64_t)n) - (int64_t)n < 0) {
		h->why = "egress budget exhausted";
		return -EDQUOT;
	}
	while (n) {
		ssize_t k = send(h->ufd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k < 0) {
			if (errno != EAGAIN && errno != EINTR)
				return -errno;
			if ((err = hr_wait(h->ufd, POLLOUT, h->idle_ms)) < 0)
				return err;
			continue;
		}
		p += k;
		n -= (size_t)k;
		*h->up += (uint64_t)k;
	}
	return 0;
}

static void hr_consume(struct hr *h, size_t n)
{
	memmove(h->buf, h->buf + n, h->len - n);
	h->len -= n;
}

/* Pass `n` bytes of body through, from the buffer and then the guest. */
static int hr_forward(struct hr *h, uint64_t n)
{
	int err;

	while (n) {
		size_t k;

		if (h->len == 0 && (err = hr_fill(h)) <= 0) {
			h->why = "the request body ended early";
			return err < 0 ? err : -EPROTO;
		}
		k = h->len < n ? h->len : (size_t)n;
		if ((err = hr_send(h, h->buf, k)) < 0)
			return err;
		hr_consume(h, k);
		n -= k;
	}
	return 0;
}

/* The length of the next line with its CRLF, reading more as needed; -EPROTO past `max`. */
static int hr_line(struct hr *h, size_t max, size_t *line_len)
{
	int err;

	for (;;) {
		const char *e = memmem(h->buf, h->len, "\r\n", 2);

		if (e && (size_t)(e - h->buf) <= max) {
			*line_len = (size_t)(e - h->buf) + 2;
			return 0;
		}
		/* No CRLF within max + 2 bytes (or one past max): never a line of ours. */
		if (e || h->len >= max + 2) {
			h->why = "a chunk line too long";
			return -EPROTO;
		}
		if ((err = hr_fill(h)) <= 0) {
			h->why = "the request body ended early";
			return err < 0 ? err : -EPROTO;
		}
	}
}

/*
 * A chunked body, re-encoded on the way as the interception does (mitm_io.c): each chunk's
 * size written afresh (its extensions dropped), its data and CRLF; the last chunk; then the
 * trailer section, each line checked by the rules of a head's fields and dropped, and the
 * final CRLF. A trailer is never passed on: a server that takes a bare LF as a line end, or
 * a trailer as a header, would otherwise read what this parser never saw as a request.
 */
static int hr_chunked(struct hr *h)
{
	char size_line[24];
	const char *reason;
	size_t ll;
	uint64_t size;
	int err;

	for (;;) {
		if ((err = hr_line(h, HTTP1_CHUNK_LINE_MAX, &ll)) < 0)
			return err;
		if (http1_chunk_size(h->buf, ll - 2, &size) < 0) {
			h->why = "a bad chunk size";
			return -EPROTO;
		}
		hr_consume(h, ll);
		snprintf(size_line, sizeof(size_line), "%llx\r\n", (unsigned long long)size);
		if (size == 0)
			break;
		if ((err = hr_send(h, size_line, strlen(size_line))) < 0 ||
		    (err = hr_forward(h, size)) < 0)
			return err;
		if ((err = hr_line(h, 0, &ll)) < 0) {
			h->why = "a chunk without its CRLF";
			return err;
		}
		if ((err = hr_send(h, h->buf, 2)) < 0)
			return err;
		hr_consume(h, 2);
	}
	for (unsigned i = 0; i < HR_TRAILERS_MAX; i++) {
		if ((err = hr_line(h, HTTP1_LINE_MAX, &ll)) < 0)
			return err;
		if (ll == 2) {
			hr_consume(h, ll);
			return hr_send(h, "0\r\n\r\n", 5);
		}
		if (http1_trailer_line(h->buf, ll - 2, &reason) < 0) {
			h->why = reason;
			return -EPROTO;
		}
		hr_consume(h, ll);
	}
	h->why = "too many trailer lines";
	return -EPROTO;
}

/* One request: its head (checked) and its body. 0, 1 at a clean EOF, or -errno. */
static int hr_request(struct hr *h, const char *name)
{
	struct http1_head *hd;
	const char *reason = NULL;
	size_t head_len;
	int err, status;

	while (h->len == 0) {
		if ((err = hr_fill(h)) <= 0)
			return err < 0 ? err : 1;
	}
	while ((err = http1_head_find(h->buf, h->len, HTTP1_HEAD_MAX, &head_len, &reason)) ==
	       -EAGAIN) {
		if ((err = hr_fill(h)) <= 0) {
			h->why = "a request head cut short";
			return err < 0 ? err : -EPROTO;
		}
	}
	if (err < 0) {
		h->why = reason ? reason : "a malformed request head";
		return -EPROTO;
	}
	hd = malloc(sizeof(*hd));
	if (!hd)
		return -ENOMEM;
	if (http1_parse_request(h->buf, head_len, hd, &status, &reason) < 0) {
		h->why = reason ? reason : "a malformed request";
		h->status = status;
		err = -EPROTO;
	} else if (!hd->host || !http1_host_matches(hd->host, hd->host_len, name)) {
		h->why = "a request names another host than the connection's";
		h->status = 403;
		err = -EACCES;
	} else if (hd->upgrade) {
		h->why = "an upgrade";
		err = -EPROTO;
	} else if ((err = hr_send(h, h->buf, head_len)) == 0) {
		bool chunked = hd->chunked;
		int64_t cl = hd->content_length;

		hr_consume(h, head_len);
		if (chunked)
			err = hr_chunked(h);
		else if (cl > 0)
			err = hr_forward(h, (uint64_t)cl);
	}
	free(hd);
	return err;
}

struct hr_down {
	int from, to;
	unsigned idle_ms;
	uint64_t *down;
	atomic_bool refused; /* a refusal is to follow: the guest's side stays open for it */
};

/*
 * Upstream to guest through a pipe with splice(2): the bytes never come up to user space
 * (the throughput of the relay, measured by tools/dev bench net). 1 when the pipe could not
 * be made (hr_downstream then copies), else 0 once either side ended.
 */
static int hr_splice(struct hr_down *d)
{
	int p[2];

	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
		return 1;
	(void)fcntl(p[1], F_SETPIPE_SZ, HR_SPLICE_PIPE);
	for (;;) {
		ssize_t n = splice(d->from, NULL, p[1], NULL, HR_SPLICE_PIPE,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (hr_wait(d->from, POLLIN, d->idle_ms) < 0)
				break;
			continue;
		}
		if (n <= 0)
			break;
		while (n > 0) {
			ssize_t k = splice(p[0], NULL, d->to, NULL, (size_t)n,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

			if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
				if (hr_wait(d->to, POLLOUT, d->idle_ms) < 0)
					goto out;
				continue;
			}
			if (k <= 0)
				goto out;
			n -= k;
			*d->down += (uint64_t)k;
		}
	}
out:
	close(p[0]);
	close(p[1]);
	return 0;
}

/* Upstream to guest, as it comes, until upstream ends (then the guest's write side ends). */
static void *hr_downstream(void *arg)
{
	struct hr_down *d = arg;
	char *buf;

	if (hr_splice(d) == 0) {
		if (!atomic_load(&d->refused))
			shutdown(d->to, SHUT_WR);
		return NULL;
	}
	buf = malloc(HR_DOWN_BUF);

	while (buf) {
		ssize_t n = recv(d->from, buf, HR_DOWN_BUF, MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (hr_wait(d->from, POLLIN, d->idle_ms) < 0)
				break;
			continue;
		}
		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t k = send(d->to, buf + off, (size_t)(n - off),
					 MSG_DONTWAIT | MSG_NOSIGNAL);

			if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
				if (hr_wait(d->to, POLLOUT, d->idle_ms) < 0)
					goto out;
				continue;
			}
			if (k <= 0)
				goto out;
			off += k;
			*d->down += (uint64_t)k;
		}
	}
out:
	free(buf);
	if (!atomic_load(&d->refused))
		shutdown(d->to, SHUT_WR);
	return NULL;
}

/* A short answer to a refused request, best effort (never blocks). */
static void hr_answer(int gfd, int status, const char *why)
{
	char resp[512];
	const char *text = status == 403   ? "Forbidden"
			   : status == 417 ? "Expectation Failed"
			   : status == 501 ? "Not Implemented"
					   : "Bad Request";
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\nsandbox-proxy: %s\n",
			 status, text, strlen("sandbox-proxy: \n") + strlen(why ? why : ""),
			 why ? why : "");

	if (n > 0 && (size_t)n < sizeof(resp))
		(void)!send(gfd, resp, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* The guest's bytes as they come, copied upstream unchanged: 1 at its EOF, or -errno. */
static int hr_copy(struct hr *h)
{
	int err;

	for (;;) {
		if (h->len) {
			if ((err = hr_send(h, h->buf, h->len)) < 0)
				return err;
			h->len = 0;
		}
		if ((err = hr_fill(h)) <= 0)
			return err < 0 ? err : 1;
	}
}

/*
 * The gate of a connection opened before the guest said anything: its first bytes, read as
 * they come (up to CONN_PEEK_MAX, each wait bounded by idle_ms) until sniff_classify decides.
 * An attempt at HTTP goes on request by request; a ClientHello must name `name` when it names
 * anything; bytes that are positively something else are copied raw. 1 at the guest's EOF
 * before a byte, or what hr_copy and hr_request return.
 */
static int hr_gate(struct hr *h, const char *name, bool http_ok)
{
	char sni[NAME_MAX_TEXT];
	enum sniff_kind k = SNIFF_MORE;
	size_t head;
	int n = 0;

	while (k == SNIFF_MORE && h->len < CONN_PEEK_MAX) {
		ssize_t r = recv(h->gfd, h->buf + h->len, CONN_PEEK_MAX - h->len, MSG_DONTWAIT);

		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			if ((n = hr_wait(h->gfd, POLLIN, h->idle_ms)) < 0)
				break;
			continue;
		}
		if (r <= 0)
			break;
		h->len += (size_t)r;
		k = sniff_classify((const uint8_t *)h->buf, h->len, sni, sizeof(sni));
	}
	if (k == SNIFF_MORE && h->len == 0)
		return n < 0 ? n : 1; /* the guest's EOF (or idle) before a byte */
	if (k == SNIFF_MORE && (uint8_t)h->buf[0] == 22)
		k = SNIFF_BAD_TLS;
	switch (k) {
	case SNIFF_HTTP:
		if (!http_ok) {
			h->why = "a credentialed host over plain HTTP";
			h->status = 403;
			return -EACCES;
		}
		while ((n = hr_request(h, name)) == 0)
			;
		return n;
	case SNIFF_TLS:
		if (sni[0] && !http1_host_matches(sni, strlen(sni), name)) {
			h->why = "the SNI names another host than the connection's";
			return -EACCES;
		}
		return hr_copy(h);
	case SNIFF_OTHER:
		return hr_copy(h);
	case SNIFF_BAD_TLS:
		h->why = "malformed TLS ClientHello";
		return -EBADMSG;
	case SNIFF_MORE:
	case SNIFF_BAD_HTTP:
		break;
	}
	(void)sniff_http((const uint8_t *)h->buf, h->len, sni, sizeof(sni), &head, &h->why);
	if (!h->why)
		h->why = h->len < CONN_PEEK_MAX ? "an incomplete head" : "head too large";
	return -EPROTO;
}

/* The relay's two directions: upstream to guest on a second thread, the guest's bytes here. */
static int hr_run(int gfd, int ufd, const void *pre, size_t npre, const char *name, int gate,
		  unsigned idle_ms, _Atomic int64_t *budget, uint64_t *up, uint64_t *down,
		  const char **why)
{
	struct hr h = {.gfd = gfd, .ufd = ufd, .idle_ms = idle_ms, .budget = budget, .up = up};
	struct hr_down d = {.from = ufd, .to = gfd, .idle_ms = idle_ms, .down = down};
	pthread_attr_t attr;
	pthread_t thread;
	int err;

	*up = *down = 0;
	*why = NULL;
	if (npre > HR_BUF)
		return -E2BIG;
	h.buf = malloc(HR_BUF);
	if (!h.buf)
		return -ENOMEM;
	if (npre)
		memcpy(h.buf, pre, npre);
	h.len = npre;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64u << 10);
	err = -pthread_create(&thread, &attr, hr_downstream, &d);
	pthread_attr_destroy(&attr);
	if (err < 0) {
		free(h.buf);
		return err;
	}
	if (gate) {
		err = hr_gate(&h, name, gate == HR_GATE_HTTP_OK);
	} else {
		do
			err = hr_request(&h, name);
		while (err == 0);
	}
	if (err == -EPROTO || err == -EACCES) {
		/* Refused: nothing more goes upstream. The answers to the requests before it
		 * still come back (until upstream closes at our EOF, or idle_ms), then the
		 * refusal's own. */
		atomic_store(&d.refused, true);
		shutdown(ufd, SHUT_WR);
		pthread_join(thread, NULL);
		hr_answer(gfd, h.status ? h.status : 400, h.why);
		shutdown(gfd, SHUT_RDWR);
	} else if (err == 1) {
		/* The guest is done: upstream finishes its answers, then closes. */
		shutdown(ufd, SHUT_WR);
		err = 0;
	} else {
		/* Nothing more either way: the downstream thread wakes and ends. */
		shutdown(ufd, SHUT_RDWR);
		shutdown(gfd, SHUT_RDWR);
	}
	if (err != -EPROTO && err != -EACCES)
		pthread_join(thread, NULL);
	free(h.buf);
	*why = h.why;
	return err == -ECONNRESET || err == -EPIPE ? 0 : err;
}

int http_relay(int gfd, int ufd, const void *pre, size_t npre, const char *name, unsigned idle_ms,
	       _Atomic int64_t *budget, uint64_t *up, uint64_t *down, const char **why)
{
	return hr_run(gfd, ufd, pre, npre, name, 0, idle_ms, budget, up, down, why);
}

int http_relay_gated(int gfd, int ufd, const char *name, bool http_ok, unsigned idle_ms,
		     _Atomic int64_t *budget, uint64_t *up, uint64_t *down, const char **why)
{
	return hr_run(gfd, ufd, NULL, 0, name, http_ok ? HR_GATE_HTTP_OK : HR_GATE_NO_HTTP, idle_ms,
		      budget, up, down, why);
}
