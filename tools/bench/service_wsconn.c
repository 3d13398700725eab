/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service benchmark's WebSocket client (service_wsconn.h): the upgrade, masked frames out,
 * unmasked frames in (RFC 6455 sections 4 and 5), pings answered. It does not check
 * Sec-WebSocket-Accept: its peer is the sandboxd under test, on loopback.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/select.h>
#include <sys/time.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "service_wsconn.h"

#define WSC_HEAD_MAX	  8192			/* the server's upgrade answer, all its headers */
#define WSC_REQ_MAX	  (WSC_PATH_MAX + 1024) /* our upgrade request */
#define WSC_SEND_MAX	  (64u << 10)		/* a frame we send: JSON of a few hundred bytes */
#define WSC_CONTROL_MAX	  125			/* a control frame's payload (RFC 6455 5.5) */
#define WSC_FRAGMENTS_MAX 1024			/* continuation frames joined into one message */

int wsc_parse_url(const char *url, struct wsc_url *u)
{
	const char *p, *slash, *colon;
	char port[8];
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
	unsigned long v;
	char *end;

	memset(u, 0, sizeof(*u));
	if (strncmp(url, "http://", 7) != 0)
		return -EINVAL;
	p = url + 7;
	slash = strchr(p, '/');
	if (!slash)
		slash = p + strlen(p);
	colon = memchr(p, ':', (size_t)(slash - p));
	if (!colon || colon == p || slash - colon - 1 <= 0 ||
	    slash - colon - 1 >= (long)sizeof(port))
		return -EINVAL;
	if ((size_t)(colon - p) > WSC_HOST_MAX || strlen(slash) > WSC_PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(u->host, p, (size_t)(colon - p));
	memcpy(port, colon + 1, (size_t)(slash - colon - 1));
	port[slash - colon - 1] = '\0';
	errno = 0;
	v = strtoul(port, &end, 10);
	if (errno || *end || v == 0 || v > 65535)
		return -EINVAL;
	u->port = (unsigned)v;
	snprintf(u->path, sizeof(u->path), "%s", *slash ? slash : "/");
	if (getaddrinfo(u->host, port, &hints, &res) != 0 || !res)
		return -EHOSTUNREACH;
	memcpy(&u->addr, res->ai_addr, res->ai_addrlen);
	u->addr_len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* All of len bytes out; -errno (-ETIME past SO_SNDTIMEO). */
static int wsc_write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIME : -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Exactly len bytes in; -EPIPE at the end of the stream, -ETIME past SO_RCVTIMEO. */
static int wsc_read_all(int fd, void *data, size_t len)
{
	uint8_t *p = data;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIME : -errno;
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The server's answer to the upgrade, up to its blank line and no further (peeked first, so
 * the frames behind it stay in the socket): 0 if it is a 101. */
static int wsc_read_upgrade(int fd)
{
	char head[WSC_HEAD_MAX + 1];
	size_t have = 0;

	for (;;) {
		ssize_t n = recv(fd, head, WSC_HEAD_MAX, MSG_PEEK);
		char *end;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIME : -errno;
		if (n == 0)
			return -EPIPE;
		head[n] = '\0';
		end = strstr(head, "\r\n\r\n");
		if (end) {
			size_t take = (size_t)(end + 4 - head);
			int err = wsc_read_all(fd, head, take);

			if (err < 0)
				return err;
			head[take] = '\0';
			break;
		}
		if ((size_t)n >= WSC_HEAD_MAX)
			return -EMSGSIZE;
		if ((size_t)n == have) {
			/* nothing new since the last peek: wait for more without spinning */
			struct timeval tv = {0, 1000};

			select(0, NULL, NULL, NULL, &tv);
		}
		have = (size_t)n;
	}
	if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
		fprintf(stderr, "service-ws: upgrade refused: %.*s\n", (int)strcspn(head, "\r\n"),
			head);
		return -EPROTO;
	}
	return 0;
}

int wsc_set_timeout(int fd, int timeout_ms)
{
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

int wsc_open(const struct wsc_url *u, const char *suffix, const char *key, int timeout_ms, int *fd)
{
	uint8_t nonce[16];
	char nonce64[32], req[WSC_REQ_MAX];
	int s, one = 1, err, n;

	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
		return -EIO;
	EVP_EncodeBlock((unsigned char *)nonce64, nonce, sizeof(nonce)); /* 24 characters */
	n = snprintf(req, sizeof(req),
		     "GET %s%s HTTP/1.1\r\nHost: %s:%u\r\nUpgrade: websocket\r\n"
		     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
		     "X-Api-Key: %s\r\n\r\n",
		     u->path, suffix, u->host, u->port, nonce64, key);
	if (n < 0 || (size_t)n >= sizeof(req))
		return -ENAMETOOLONG;
	s = socket(u->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if ((err = wsc_set_timeout(s, timeout_ms)) < 0)
		goto fail;
	if (setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
		err = -errno;
		goto fail;
	}
	/* (connect honours SO_SNDTIMEO: EINPROGRESS past it) */
	if (connect(s, (const struct sockaddr *)&u->addr, u->addr_len) < 0) {
		err = errno == EINPROGRESS ? -ETIME : -errno;
		goto fail;
	}
	if ((err = wsc_write_all(s, req, (size_t)n)) < 0 || (err = wsc_read_upgrade(s)) < 0)
		goto fail;
	*fd = s;
	return 0;
fail:
	close(s);
	return err;
}

int wsc_send(int fd, int opcode, const void *data, size_t len)
{
	uint8_t frame[14 + WSC_SEND_MAX], mask[4];
	const uint8_t *in = data;
	size_t h = 0;

	if (len > WSC_SEND_MAX)
		return -EMSGSIZE;
	if (getrandom(mask, sizeof(mask), 0) != sizeof(mask))
		return -EIO;
	frame[h++] = (uint8_t)(0x80 | (opcode & 0xf));
	if (len < 126) {
		frame[h++] = (uint8_t)(0x80 | len);
	} else {
		frame[h++] = 0x80 | 126;
		frame[h++] = (uint8_t)(len >> 8);
		frame[h++] = (uint8_t)len;
	}
	memcpy(frame + h, mask, 4);
	h += 4;
	for (size_t i = 0; i < len; i++)
		frame[h + i] = in[i] ^ mask[i & 3];
	return wsc_write_all(fd, frame, h + len);
}

/* One frame's head: its FIN bit, opcode and payload length. */
static int wsc_read_head(int fd, bool *fin, int *opcode, uint64_t *plen)
{
	uint8_t h[8];
	int err;

	if ((err = wsc_read_all(fd, h, 2)) < 0)
		return err;
	if (h[1] & 0x80 || h[0] & 0x70)
		return -EPROTO; /* a server never masks; no extension was agreed */
	*fin = h[0] & 0x80;
	*opcode = h[0] & 0xf;
	*plen = h[1] & 0x7f;
	if (*plen == 126) {
		if ((err = wsc_read_all(fd, h, 2)) < 0)
			return err;
		*plen = (uint64_t)h[0] << 8 | h[1];
	} else if (*plen == 127) {
		if ((err = wsc_read_all(fd, h, 8)) < 0)
			return err;
		*plen = 0;
		for (int i = 0; i < 8; i++)
			*plen = *plen << 8 | h[i];
	}
	return 0;
}

int wsc_recv(int fd, char *buf, size_t cap, size_t *len, unsigned *close_code)
{
	unsigned fragments = 0;
	int msg_op = -1, err;

	*len = 0;
	for (;;) {
		bool fin;
		int op;
		uint64_t plen;

		if ((err = wsc_read_head(fd, &fin, &op, &plen)) < 0)
			return err;
		if (op & 0x8) { /* control: whole, short, between fragments too */
			uint8_t ctl[WSC_CONTROL_MAX];

			if (!fin || plen > WSC_CONTROL_MAX)
				return -EPROTO;
			if ((err = wsc_read_all(fd, ctl, (size_t)plen)) < 0)
				return err;
			if (op == WSC_OP_PING && (err = wsc_send(fd, WSC_OP_PONG, ctl, plen)) < 0)
				return err;
			if (op == WSC_OP_CLOSE) {
				*close_code = plen >= 2 ? (unsigned)ctl[0] << 8 | ctl[1] : 1005;
				return -EPIPE;
			}
			continue;
		}
		if ((op == 0) != (msg_op >= 0) || ++fragments > WSC_FRAGMENTS_MAX)
			return -EPROTO; /* a continuation with no message, or a message within one
					 */
		if (msg_op < 0)
			msg_op = op;
		if (plen >= cap - *len)
			return -EMSGSIZE;
		if ((err = wsc_read_all(fd, buf + *len, (size_t)plen)) < 0)
			return err;
		*len += (size_t)plen;
		if (fin) {
			buf[*len] = '\0';
			return msg_op;
		}
	}
}

void wsc_close(int fd)
{
	uint8_t code[2] = {1000 >> 8, 1000 & 0xff};
	char sink[4096];
	size_t len;
	unsigned close_code;

	if (wsc_send(fd, WSC_OP_CLOSE, code, sizeof(code)) == 0) {
		/* until its close, the end, an error or the socket's timeout; a few messages at
		 * most (the exit frame was the last one the server had to send) */
		for (int i = 0; i < 64; i++)
			if (wsc_recv(fd, sink, sizeof(sink), &len, &close_code) < 0)
				break;
	}
	close(fd);
}
