/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client side of the guest agent (wire/proto.h): connect to the sandbox's vsock.sock,
 * ask the VMM for guest port 52 (`CONNECT 52\n`, answered `OK <port>\n`), exchange HELLO,
 * then frames. Every frame from the guest goes through the shared decoder, which checks its
 * header before a byte of payload is buffered.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto.h"
#include "client.h"

#define RBUF_LEN (256u << 10)

static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	uint64_t now = now_ms();
	int n;

	if (now >= deadline)
		return -ETIMEDOUT;
	n = poll(&pfd, 1, (int)(deadline - now));
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

/* Read the VMM's one-line answer to CONNECT, a byte at a time so no frame byte is taken. */
static int read_connect_reply(int fd, uint64_t deadline)
{
	char line[64];
	size_t n = 0;
	int err;

	while (n < sizeof(line) - 1) {
		ssize_t r;

		if ((err = wait_fd(fd, POLLIN, deadline)) < 0)
			return err;
		r = recv(fd, line + n, 1, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ECONNREFUSED; /* no listener in the guest yet */
		if (line[n] == '\n') {
			line[n] = '\0';
			return strncmp(line, "OK ", 3) == 0 ? 0 : -ECONNREFUSED;
		}
		n++;
	}
	return -EPROTO;
}

int agent_send(struct agent_conn *c, uint16_t type, uint64_t id, const void *payload, uint32_t len)
{
	uint8_t hdr[PROTO_HDR_LEN];
	struct proto_hdr h = {.len = len, .type = type, .id = id};
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};

	if (len > PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	proto_hdr_encode(&h, hdr);
	while (msg.msg_iovlen) {
		ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* A guest that stops reading must not hang us: no progress for this long
			 * is an error. */
			struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
			int r = poll(&pfd, 1,
				     c->send_stall_ms > 0 ? c->send_stall_ms : AGENT_SEND_STALL_MS);

			if (r == 0)
				return -ETIMEDOUT;
			if (r < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		if (n < 0)
			return -errno;
		while (msg.msg_iovlen && (size_t)n >= msg.msg_iov[0].iov_len) {
			n -= (ssize_t)msg.msg_iov[0].iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov[0].iov_base = (uint8_t *)msg.msg_iov[0].iov_base + n;
			msg.msg_iov[0].iov_len -= (size_t)n;
		}
	}
	return 0;
}

bool agent_buffered(const struct agent_conn *c)
{
	size_t have = c->rlen - c->roff;
	struct proto_hdr h;

	if (!have)
		return false;
	if (c->in_dec || have < PROTO_HDR_LEN)
		return true;
	/* The start of a frame waiting in rbuf for its rest is not a frame yet. */
	proto_hdr_decode(c->rbuf + c->roff, &h);
	return have >= PROTO_HDR_LEN + (size_t)h.len || PROTO_HDR_LEN + (size_t)h.len > RBUF_LEN;
}

/*
 * A whole frame at the start of rbuf[roff, rlen), handed out in place: 1 with *f pointing
 * into rbuf, 0 when it is not all there yet (its start is moved to the front of rbuf when
 * the rest fits behind it), -EPROTO for a bad header. A frame that arrives in pieces, or is
 * larger than rbuf, goes through the decoder instead (-EAGAIN). Most frames are whole in one
 * recv: this saves copying every payload byte once more.
 */
static int agent_frame_in_place(struct agent_conn *c, struct proto_frame *f)
{
	size_t have = c->rlen - c->roff;
	const char *why;

	if (c->in_dec || have < PROTO_HDR_LEN)
		return -EAGAIN;
	proto_hdr_decode(c->rbuf + c->roff, &f->hdr);
	if (proto_hdr_check(&f->hdr, &why) < 0)
		return -EPROTO;
	if (have >= PROTO_HDR_LEN + (size_t)f->hdr.len) {
		f->payload = c->rbuf + c->roff + PROTO_HDR_LEN;
		c->roff += PROTO_HDR_LEN + (size_t)f->hdr.len;
		return 1;
	}
	if (PROTO_HDR_LEN + (size_t)f->hdr.len > RBUF_LEN)
		return -EAGAIN;
	memmove(c->rbuf, c->rbuf + c->roff, have);
	c->roff = 0;
	c->rlen = have;
	return 0;
}

int agent_recv(struct agent_conn *c, int timeout_ms, struct proto_frame *f)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
	int r;

	for (;;) {
		size_t used = 0;
		ssize_t n;

		if (c->roff < c->rlen) {
			r = agent_frame_in_place(c, f);
			if (r == 1 || r == -EPROTO)
				return r;
			if (r == -EAGAIN) {
				r = proto_decoder_feed(c->dec, c->rbuf + c->roff, c->rlen - c->roff,
						       &used, f);
				c->roff += used;
				if (r < 0)
					return -EPROTO;
				c->in_dec = r == 0;
				if (r == 1)
					return 1;
			}
		}
		if (c->roff == c->rlen)
			c->roff = c->rlen = 0;
		n = recv(c->fd, c->rbuf + c->rlen, RBUF_LEN - c->rlen, MSG_DONTWAIT);
		if (n > 0) {
			c->rlen += (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if (timeout_ms == 0)
			return 0;
		r = wait_fd(c->fd, POLLIN, deadline);
		if (r == -ETIMEDOUT)
			return 0;
		if (r < 0)
			return r;
	}
}

int agent_conn_release(struct agent_conn *c)
{
	int fd = -EPROTO;

	if (c->rlen == c->roff && !c->in_dec) {
		fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			fd = -errno;
	}
	agent_close(c);
	return fd;
}

void agent_close(struct agent_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->dec)
		proto_decoder_free(c->dec);
	free(c->dec);
	free(c->rbuf);
	c->dec = NULL;
	c->rbuf = NULL;
}

int agent_connect(const struct sandbox *sb, unsigned timeout_ms, struct agent_conn *c)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int err;

	c->fd = -1;
	c->dec = NULL;
	c->rbuf = NULL;
	if ((err = sandbox_path(sb, "vsock.sock", path, sizeof(path))) < 0)
		return err;
	return agent_connect_path(path, timeout_ms, c);
}

int agent_conn_init(struct agent_conn *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->next_id = 1;
	c->fd = fd;
	c->dec = malloc(sizeof(struct proto_decoder));
	c->rbuf = malloc(RBUF_LEN);
	if (!c->dec || !c->rbuf) {
		free(c->dec);
		free(c->rbuf);
		c->dec = NULL;
		c->rbuf = NULL;
		return -ENOMEM;
	}
	proto_decoder_init(c->dec);
	return 0;
}

int agent_connect_path(const char *vsock_path, unsigned timeout_ms, struct agent_conn *c)
{
	static const char connect_line[] = "CONNECT 52\n";
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	uint64_t deadline = now_ms() + timeout_ms;
	uint8_t hello[sizeof(struct proto_hello)];
	struct proto_frame f;
	int err, r;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (strlen(vsock_path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, vsock_path, strlen(vsock_path) + 1);
	if ((err = agent_conn_init(c, -1)) < 0)
		return err;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = write_all(c->fd, connect_line, sizeof(connect_line) - 1)) < 0 ||
	    (err = read_connect_reply(c->fd, deadline)) < 0)
		goto fail;
	proto_put_le32(hello + offsetof(struct proto_hello, version), PROTO_VERSION);
	proto_put_le32(hello + offsetof(struct proto_hello, max_payload), PROTO_MAX_PAYLOAD);
	if ((err = agent_send(c, PROTO_MSG_HELLO, 0, hello, sizeof(hello))) < 0)
		goto fail;
	r = agent_recv(c, (int)(deadline > now_ms() ? deadline - now_ms() : 0), &f);
	if (r <= 0) {
		err = r == 0 ? -ETIMEDOUT : r;
		goto fail;
	}
	if (f.hdr.type != PROTO_MSG_HELLO ||
	    proto_get_le32(f.payload + offsetof(struct proto_hello, version)) != PROTO_VERSION) {
		err = -EPROTO;
		goto fail;
	}
	return 0;
fail:
	agent_close(c);
	return err;
}

int agent_call(struct agent_conn *c, uint16_t type, const void *payload, uint32_t len,
	       int timeout_ms, int (*on_frame)(void *arg, const struct proto_frame *f), void *arg,
	       struct proto_frame *final)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
	uint64_t id = ++c->next_id; /* as every caller takes one: never a number twice */
	int err, r;

	if ((err = agent_send(c, type, id, payload, len)) < 0)
		return err;
	for (;;) {
		uint64_t now = now_ms(), left = deadline > now ? deadline - now : 0;
		int wait = deadline == UINT64_MAX ? -1 : left > INT_MAX ? INT_MAX : (int)left;

		/* Checked before each frame: a guest streaming frames of other ids (or unasked
		 * ones of this call) never lets a receive wait, so the deadline is ours to see. */
		if (deadline != UINT64_MAX && left == 0)
			return -ETIMEDOUT;
		r = agent_recv(c, wait, final);
		if (r <= 0)
			return r == 0 ? -ETIMEDOUT : r;
		if (final->hdr.id != id)
			continue;
		if (proto_msg_is_final(final->hdr.type))
			return 0;
		if (on_frame && (err = on_frame(arg, final)) < 0)
			return err;
	}
}

int agent_ping(const struct sandbox *sb, unsigned timeout_ms, uint64_t *uptime_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;
	struct agent_conn c;
	struct proto_frame f;
	int err;

	if ((err = agent_connect(sb, timeout_ms, &c)) < 0)
		return err;
	err = agent_call(&c, PROTO_MSG_PING, NULL, 0,
			 (int)(deadline > now_ms() ? deadline - now_ms() : 0), NULL, NULL, &f);
	if (err < 0)
		goto out;
	if (f.hdr.type != PROTO_MSG_PONG) {
		err = -EPROTO;
		goto out;
	}
	if (uptime_ms)
		*uptime_ms = proto_get_le64(f.payload);
out:
	agent_close(&c);
	return err;
}

const char *agent_error_text(const struct proto_frame *f, char *out, size_t len)
{
	uint32_t e = f->hdr.len >= sizeof(struct proto_error) ? proto_get_le32(f->payload) : 0;
	size_t n = f->hdr.len > sizeof(struct proto_error) ? f->hdr.len - sizeof(struct proto_error)
							   : 0;

	if (!len)
		return out;
	/* the message is guest text: printable only, and a NUL in it ends it */
	if (n > len - 1)
		n = len - 1;
	memcpy(out, f->payload + sizeof(struct proto_error), n);
	out[n] = '\0';
	n = strlen(out);
	printable(out, n, false);
	if (!n)
		snprintf(out, len, "%s", strerror((int)e));
	return out;
}
