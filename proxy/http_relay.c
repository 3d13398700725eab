/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Plain HTTP after the decision: the destination was decided by the first request's Host, so
 * every later request on the connection must name the same host, or a keep-alive connection
 * to an allowed name would carry requests for any other name served from the same address.
 * The guest's bytes are read request by request with the interception's strict parser
 * (http1.c): a head, then its body framed by Content-Length or chunked. A request for another
 * host, an absolute-form target, an upgrade or anything the parser refuses ends the
 * connection there, before a byte of it goes upstream. Responses are copied back as they come,
 * by a second thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
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

struct hr {
	int gfd, ufd;
	unsigned idle_ms;
	_Atomic int64_t *budget;
	char *buf; /* guest bytes not yet sent upstream */
	size_t len;
	uint64_t *up;
	const char *why;
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

/* A chunked body: each chunk's size line, data and CRLF, the last chunk and the trailers. */
static int hr_chunked(struct hr *h)
{
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
		if ((err = hr_send(h, h->buf, ll)) < 0)
			return err;
		hr_consume(h, ll);
		if (size == 0)
			break;
		if ((err = hr_forward(h, size)) < 0)
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
		if ((err = hr_send(h, h->buf, ll)) < 0)
			return err;
		hr_consume(h, ll);
		if (ll == 2)
			return 0;
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
		err = -EPROTO;
	} else if (!hd->host || !http1_host_matches(hd->host, hd->host_len, name)) {
		h->why = "a later request on the connection names another host";
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
	shutdown(d->to, SHUT_WR);
	return NULL;
}

int http_relay(int gfd, int ufd, const void *pre, size_t npre, const char *name, unsigned idle_ms,
	       _Atomic int64_t *budget, uint64_t *up, uint64_t *down, const char **why)
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
	do
		err = hr_request(&h, name);
	while (err == 0);
	if (err == 1) {
		/* The guest is done asking: upstream finishes its answers, then closes. */
		shutdown(ufd, SHUT_WR);
		err = 0;
	} else {
		/* Nothing more either way: the downstream thread wakes and ends. */
		shutdown(ufd, SHUT_RDWR);
		shutdown(gfd, SHUT_RDWR);
	}
	pthread_join(thread, NULL);
	free(h.buf);
	*why = h.why;
	return err == -ECONNRESET || err == -EPIPE ? 0 : err;
}
