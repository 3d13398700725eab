/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-vsock connections (see vsock.h): the table keyed by (local port, peer port), the
 * host's unix sockets on the VM's event loop, the "CONNECT <port>\n" handshake, the guest's
 * bytes waiting for a slow socket, credit, shutdown and reset. Every socket is non-blocking
 * and served on the I/O thread; nothing here waits.
 *
 * epoll interest follows what a connection can do now: EPOLLIN only while the guest has
 * credit for more and we have not already seen the socket readable, EPOLLOUT only while
 * guest bytes wait in `buf`. Readiness seen but not served (no rx buffer yet) is kept in
 * `readable` and on dev->pending instead, so a level-triggered fd never spins the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "virtio/vsock.h"

static unsigned vsock_hash(uint32_t local_port, uint32_t peer_port)
{
	uint32_t h = local_port * 0x9e3779b1u ^ peer_port * 0x85ebca6bu;

	return (h ^ (h >> 16)) % VSOCK_HASH_LEN;
}

struct vsock_conn *vsock_conn_find(struct vsock_dev *d, uint32_t local_port, uint32_t peer_port)
{
	struct vsock_conn *c = d->hash[vsock_hash(local_port, peer_port)];

	while (c && (c->local_port != local_port || c->peer_port != peer_port))
		c = c->hash_next;
	return c;
}

static void vsock_conn_hash_insert(struct vsock_conn *c)
{
	struct vsock_conn **b = &c->dev->hash[vsock_hash(c->local_port, c->peer_port)];

	c->hash_next = *b;
	*b = c;
	c->hashed = true;
}

static void vsock_conn_hash_remove(struct vsock_conn *c)
{
	struct vsock_conn **p = &c->dev->hash[vsock_hash(c->local_port, c->peer_port)];

	if (!c->hashed)
		return;
	while (*p != c)
		p = &(*p)->hash_next;
	*p = c->hash_next;
	c->hashed = false;
}

void vsock_rst_push(struct vsock_dev *d, uint64_t src_cid, uint32_t src_port, uint32_t dst_port)
{
	if (d->rst_len == VSOCK_RST_MAX) {
		if (log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-vsock: %u RSTs wait for rx buffers; dropping one",
				 VSOCK_RST_MAX);
		return;
	}
	d->rst[(d->rst_head + d->rst_len++) % VSOCK_RST_MAX] =
		(struct vsock_rst){.src_cid = src_cid, .src_port = src_port, .dst_port = dst_port};
}

static void vsock_conn_event(struct ev_source *src, uint32_t events);

/* Tick every second (or stop) while deadlines are (not) pending. */
static void vsock_timer_set(struct vsock_dev *d, bool on)
{
	struct itimerspec its = {0};

	if (on == d->timer_armed || d->timer_fd < 0)
		return;
	if (on)
		its.it_value.tv_sec = its.it_interval.tv_sec = 1;
	if (timerfd_settime(d->timer_fd, 0, &its, NULL) < 0) {
		if (log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-vsock: handshake timer: %m");
		return;
	}
	d->timer_armed = on;
}

void vsock_conn_expire(struct vsock_dev *d, uint64_t now_ms)
{
	struct vsock_link *l = d->conns.next;
	bool pending = false;

	while (l != &d->conns) {
		struct vsock_conn *c = vsock_conn_of(l, all);

		l = l->next;
		if (c->state == VSOCK_CONNECTED) {
			if (!c->close_deadline_ms)
				continue;
			if (now_ms < c->close_deadline_ms) {
				pending = true;
				continue;
			}
			if (log_ratelimit_ok(&d->rl, 3))
				log_warn("virtio-vsock: guest port %u did not close a connection "
					 "the host finished %u ms ago: reset",
					 c->peer_port, VSOCK_CLOSE_MS);
			vsock_conn_close(c, true);
			continue;
		}
		if (now_ms < c->handshake_deadline_ms) {
			pending = true;
			continue;
		}
		log_debug("virtio-vsock: %s to guest port %u: no answer in %u ms, closed",
			  c->state == VSOCK_LINE ? "a client without a CONNECT line"
						 : "a connection",
			  c->peer_port, VSOCK_HANDSHAKE_MS);
		vsock_conn_close(c, true);
	}
	vsock_timer_set(d, pending);
}

void vsock_conn_timer_event(struct ev_source *src, uint32_t events)
{
	struct vsock_dev *d = src->opaque;
	uint64_t ticks;

	if (read(d->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		log_debug("virtio-vsock: reading the timer: %m");
	pthread_mutex_lock(&d->lock);
	vsock_conn_expire(d, vmm_now_ns() / 1000000u);
	vsock_run(d);
	vsock_unlock(d);
}

/* A new connection on socket `fd` (closed on failure), or NULL. */
static struct vsock_conn *vsock_conn_new(struct vsock_dev *d, int fd, enum vsock_state state)
{
	struct vsock_conn *c;

	if (d->nconns >= VSOCK_CONN_MAX) {
		if (log_ratelimit_ok(&d->conn_rl, 1))
			log_warn(
				"virtio-vsock: %u connections open, the most a VM has: refusing %s",
				VSOCK_CONN_MAX,
				state == VSOCK_LINE ? "a host client" : "the guest's connection");
		close(fd);
		return NULL;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return NULL;
	}
	c->dev = d;
	c->fd = fd;
	c->state = state;
	c->src.fd = -1;
	if (state != VSOCK_CONNECTED) {
		c->handshake_deadline_ms = vmm_now_ns() / 1000000u + VSOCK_HANDSHAKE_MS;
		vsock_timer_set(d, true);
	}
	vsock_list_init(&c->pending);
	vsock_list_add_tail(&d->conns, &c->all);
	d->nconns++;
	return c;
}

void vsock_conn_close(struct vsock_conn *c, bool rst)
{
	struct vsock_dev *d = c->dev;

	/* Only a connection the guest knows of gets an RST: not a client still writing its
	 * CONNECT line, nor one whose OP_REQUEST is not sent yet. */
	if (rst && c->state != VSOCK_LINE && !(c->ctl & VSOCK_CTL_REQUEST))
		vsock_rst_push(d, VSOCK_HOST_CID, c->local_port, c->peer_port);
	evloop_del(&d->vm->loop, &c->src);
	close(c->fd);
	vsock_conn_hash_remove(c);
	if (c->queued)
		vsock_list_del(&c->pending);
	vsock_list_del(&c->all);
	d->nconns--;
	if (c->buf)
		d->buf_total -= VSOCK_BUF_LEN;
	free(c->buf);
	free(c);
}

void vsock_conn_close_all(struct vsock_dev *d)
{
	while (!vsock_list_empty(&d->conns))
		vsock_conn_close(vsock_conn_of(d->conns.next, all), false);
	d->rst_len = 0;
}

uint32_t vsock_conn_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	/* A guest claiming to have forwarded more than we sent only starves itself. */
	return in_flight >= c->peer_buf_alloc ? 0 : c->peer_buf_alloc - in_flight;
}

void vsock_conn_hdr(struct vsock_conn *c, struct virtio_vsock_hdr *h, uint16_t op, uint32_t len,
		    uint32_t flags)
{
	*h = (struct virtio_vsock_hdr){
		.src_cid = htole64(VSOCK_HOST_CID),
		.dst_cid = htole64(VSOCK_GUEST_CID),
		.src_port = htole32(c->local_port),
		.dst_port = htole32(c->peer_port),
		.len = htole32(len),
		.type = htole16(VIRTIO_VSOCK_TYPE_STREAM),
		.op = htole16(op),
		.flags = htole32(flags),
		.buf_alloc = htole32(VSOCK_BUF_LEN),
		.fwd_cnt = htole32(c->fwd_cnt),
	};
	c->fwd_cnt_sent = c->fwd_cnt;
	c->ctl &= ~VSOCK_CTL_CREDIT;
}

ssize_t vsock_conn_read(struct vsock_conn *c, struct iovec *iov, unsigned niov)
{
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = niov};
	ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT);

	if (n > 0)
		return n;
	if (n == 0) {
		c->host_eof = true;
		return -EPIPE;
	}
	if (errno == EAGAIN || errno == EINTR) {
		c->readable = false;
		return 0;
	}
	return -errno;
}

unsigned vsock_conn_ctl_due(const struct vsock_conn *c)
{
	return c->dev->reset_unacked ? c->ctl & ~VSOCK_CTL_REQUEST : c->ctl;
}

bool vsock_conn_may_read(const struct vsock_conn *c)
{
	return c->state == VSOCK_CONNECTED && !c->host_eof &&
	       !(c->peer_shutdown & VIRTIO_VSOCK_SHUTDOWN_RCV);
}

uint32_t vsock_conn_shut_due(const struct vsock_conn *c)
{
	return (c->host_eof ? VIRTIO_VSOCK_SHUTDOWN_SEND : 0) |
	       (c->host_hup ? VIRTIO_VSOCK_SHUTDOWN_RCV : 0);
}

/* Write the waiting guest bytes to the socket. -ECONNRESET when the socket broke (the
 * connection is closed with an RST). */
static int vsock_conn_flush(struct vsock_conn *c)
{
	uint32_t first = VSOCK_BUF_LEN - c->buf_head;
	struct iovec iov[2];
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
	ssize_t n;

	/* Nothing waits (and c->buf may not exist yet: no pointer is formed from it). */
	if (!c->buf_used)
		return 0;
	iov[0] = (struct iovec){c->buf + c->buf_head, c->buf_used < first ? c->buf_used : first};
	iov[1] = (struct iovec){c->buf, c->buf_used < first ? 0 : c->buf_used - first};
	n = sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		vsock_conn_close(c, true);
		return -ECONNRESET;
	}
	c->buf_head = (uint32_t)((c->buf_head + (size_t)n) % VSOCK_BUF_LEN);
	c->buf_used -= (uint32_t)n;
	c->fwd_cnt += (uint32_t)n;
	return 0;
}

int vsock_conn_write(struct vsock_conn *c, const struct virtq_chain *chain, uint64_t offset,
		     uint32_t len)
{
	struct vsock_dev *d = c->dev;
	uint32_t sent = 0, tail, first;

	if (len > VSOCK_BUF_LEN - c->buf_used) {
		if (log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-vsock: guest port %u sent %u bytes beyond its credit: "
				 "reset",
				 c->peer_port, len - (VSOCK_BUF_LEN - c->buf_used));
		vsock_conn_close(c, true);
		return -ECONNRESET;
	}
	c->rx_cnt += len;
	/* Straight from guest RAM to the socket when nothing waits before these bytes. */
	if (!c->buf_used) {
		unsigned niov = vsock_chain_iov(d, 0, chain, false, offset, len);
		struct msghdr msg = {.msg_iov = d->iov, .msg_iovlen = niov};
		ssize_t n = sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			vsock_conn_close(c, true);
			return -ECONNRESET;
		}
		sent = n > 0 ? (uint32_t)n : 0;
		c->fwd_cnt += sent;
	}
	if (sent == len)
		return 0;
	if (!c->buf) {
		if (d->buf_total > VSOCK_BUF_TOTAL - VSOCK_BUF_LEN) {
			if (log_ratelimit_ok(&d->rl, 3))
				log_warn("virtio-vsock: %u MiB wait for slow clients already: "
					 "resetting guest port %u",
					 VSOCK_BUF_TOTAL >> 20, c->peer_port);
			vsock_conn_close(c, true);
			return -ECONNRESET;
		}
		if (!(c->buf = malloc(VSOCK_BUF_LEN))) {
			vsock_conn_close(c, true);
			return -ECONNRESET;
		}
		d->buf_total += VSOCK_BUF_LEN;
	}
	/* The rest goes to the ring, in at most two pieces; credit guarantees the room. */
	len -= sent;
	offset += sent;
	tail = (c->buf_head + c->buf_used) % VSOCK_BUF_LEN;
	first = VSOCK_BUF_LEN - tail < len ? VSOCK_BUF_LEN - tail : len;
	if (virtq_copy_from_chain(chain, offset, c->buf + tail, first) < 0 ||
	    virtq_copy_from_chain(chain, offset + first, c->buf, len - first) < 0) {
		vsock_conn_close(c, true); /* cannot happen: the caller checked the length */
		return -ECONNRESET;
	}
	c->buf_used += len;
	return 0;
}

/* Register, change or drop the socket's epoll interest. */
static int vsock_conn_set_events(struct vsock_conn *c, uint32_t events)
{
	struct evloop *loop = &c->dev->vm->loop;
	int err = 0;

	/* epoll reports EPOLLHUP even to a socket waiting for nothing: once it was seen, a
	 * socket that waits for nothing leaves the set, or the loop would spin on it. */
	if (!events && c->host_hup) {
		evloop_del(loop, &c->src);
		return 0;
	}
	if (!c->src.added)
		err = evloop_add(loop, &c->src, c->fd, events, vsock_conn_event, c);
	else if (events != c->events)
		err = evloop_mod(loop, &c->src, events);
	if (err == 0)
		c->events = events;
	return err;
}

int vsock_conn_update(struct vsock_conn *c)
{
	struct vsock_dev *d = c->dev;
	uint32_t events = 0;
	bool owes;

	if (c->state == VSOCK_CONNECTED) {
		/* The guest sends no more: once its bytes are out, so does the socket. */
		if ((c->peer_shutdown & VIRTIO_VSOCK_SHUTDOWN_SEND) && !c->buf_used &&
		    !c->wr_shut) {
			shutdown(c->fd, SHUT_WR);
			c->wr_shut = true;
		}
		/* The guest closed both ways and everything it sent is delivered: answer with
		 * the RST that ends the connection (what Linux's host side does too). */
		if (c->peer_shutdown == VSOCK_SHUTDOWN_BOTH && !c->buf_used) {
			vsock_conn_close(c, true);
			return -ECONNRESET;
		}
		/* The host side is done and the guest heard it: the guest has VSOCK_CLOSE_MS to
		 * close the connection before we do. */
		if (c->shut_sent == VSOCK_SHUTDOWN_BOTH && !c->close_deadline_ms) {
			c->close_deadline_ms = vmm_now_ns() / 1000000u + VSOCK_CLOSE_MS;
			vsock_timer_set(d, true);
		}
		/* Tell the guest about freed space once it may be running short of credit. */
		if (c->fwd_cnt != c->fwd_cnt_sent &&
		    c->rx_cnt - c->fwd_cnt_sent >= VSOCK_BUF_LEN / 2)
			c->ctl |= VSOCK_CTL_CREDIT;
	}
	owes = vsock_conn_ctl_due(c) ||
	       (c->state == VSOCK_CONNECTED && vsock_conn_shut_due(c) != c->shut_sent) ||
	       (vsock_conn_may_read(c) && c->readable && vsock_conn_credit(c) > 0);
	if (owes && !c->queued)
		vsock_list_add_tail(&d->pending, &c->pending);
	else if (!owes && c->queued)
		vsock_list_del(&c->pending);
	c->queued = owes;

	if (c->state == VSOCK_LINE)
		events = EPOLLIN;
	if (vsock_conn_may_read(c) && !c->readable && vsock_conn_credit(c) > 0)
		events |= EPOLLIN;
	if (c->buf_used)
		events |= EPOLLOUT;
	if (vsock_conn_set_events(c, events) < 0) {
		vsock_conn_close(c, true);
		return -ECONNRESET;
	}
	return 0;
}

/* A free local port for a connection to guest port `peer_port`, counting up. */
static int vsock_conn_alloc_port(struct vsock_dev *d, uint32_t peer_port, uint32_t *port)
{
	/* At most VSOCK_CONN_MAX ports are taken: this many tries find a free one. */
	for (unsigned i = 0; i <= VSOCK_CONN_MAX; i++) {
		uint32_t p = d->next_port;

		d->next_port = p >= VSOCK_PORT_LAST ? VSOCK_PORT_FIRST : p + 1;
		if (!vsock_conn_find(d, p, peer_port)) {
			*port = p;
			return 0;
		}
	}
	return -EADDRINUSE;
}

/* Parse "CONNECT <port>" (the newline already cut off). */
static bool vsock_parse_connect(const char *line, uint32_t *port)
{
	const char *p = line + strlen("CONNECT ");
	uint64_t v = 0;

	if (strncmp(line, "CONNECT ", strlen("CONNECT ")) != 0 || !*p)
		return false;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || (v = v * 10 + (uint64_t)(*p - '0')) > VSOCK_PORT_LAST)
			return false;
	}
	*port = (uint32_t)v;
	return true;
}

/* Read the client's CONNECT line, without taking a byte past its newline (the client may
 * send data right behind it). Returns -ECONNRESET when the connection was closed. */
static int vsock_conn_read_line(struct vsock_conn *c)
{
	char peek[VSOCK_LINE_MAX], *nl;
	size_t room = VSOCK_LINE_MAX - c->line_len, take;
	uint32_t port;
	ssize_t n;

	n = recv(c->fd, peek, room, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		goto bad;
	nl = memchr(peek, '\n', (size_t)n);
	take = nl ? (size_t)(nl - peek) + 1 : (size_t)n;
	if (recv(c->fd, c->line + c->line_len, take, MSG_DONTWAIT) != (ssize_t)take)
		goto bad;
	c->line_len += (uint8_t)take;
	if (!nl) {
		if (c->line_len == VSOCK_LINE_MAX)
			goto bad;
		return 0;
	}
	c->line[c->line_len - 1] = '\0';
	if (!vsock_parse_connect(c->line, &port) ||
	    vsock_conn_alloc_port(c->dev, port, &c->local_port) < 0)
		goto bad;
	c->peer_port = port;
	c->state = VSOCK_REQUESTED;
	c->ctl |= VSOCK_CTL_REQUEST;
	vsock_conn_hash_insert(c);
	log_debug("virtio-vsock: host port %u connecting to guest port %u", c->local_port, port);
	return vsock_conn_update(c);
bad:
	vsock_conn_close(c, false);
	return -ECONNRESET;
}

/* A connection's socket is ready. */
static void vsock_conn_event(struct ev_source *src, uint32_t events)
{
	struct vsock_conn *c = src->opaque;
	struct vsock_dev *d = c->dev;

	pthread_mutex_lock(&d->lock);
	if (events & (EPOLLHUP | EPOLLERR))
		c->host_hup = true;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		c->readable = true;
	if (c->state == VSOCK_LINE) {
		if (vsock_conn_read_line(c) < 0)
			goto out;
	} else if (vsock_conn_flush(c) < 0 || vsock_conn_update(c) < 0) {
		goto out;
	}
out:
	vsock_run(d);
	vsock_unlock(d);
}

void vsock_conn_listen_event(struct ev_source *src, uint32_t events)
{
	struct vsock_dev *d = src->opaque;

	pthread_mutex_lock(&d->lock);
	/* A bounded batch, so a flood of clients cannot hold the I/O thread. */
	for (unsigned i = 0; i < 16; i++) {
		int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct vsock_conn *c;

		if (fd < 0) {
			int err = errno;

			/* At the fd limit the client stays in the backlog and the listener
			 * readable: rest a while rather than spin. */
			if (evloop_accept_backoff(&d->vm->loop, src, err)) {
				if (log_ratelimit_ok(&d->rl, 1))
					log_warn("virtio-vsock: cannot accept on %s (%s): trying "
						 "again in %u ms",
						 d->path, strerror(err), EVLOOP_ACCEPT_BACKOFF_MS);
			} else if (err != EAGAIN && err != EINTR && log_ratelimit_ok(&d->rl, 3)) {
				log_warn("virtio-vsock: accept on %s: %s", d->path, strerror(err));
			}
			break;
		}
		c = vsock_conn_new(d, fd, VSOCK_LINE);
		if (!c)
			continue; /* refused (and logged) */
		if (vsock_conn_update(c) < 0)
			continue;
	}
	vsock_unlock(d);
}

void vsock_conn_from_guest_request(struct vsock_dev *d, uint32_t local_port, uint32_t peer_port,
				   uint32_t buf_alloc, uint32_t fwd_cnt)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *base = jail_path(d->path); /* the host's sockets, as the jail sees them */
	struct vsock_conn *c;
	int n, fd;

	if (!base)
		goto refuse;
	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", base, local_port);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		goto refuse;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto refuse;
	/* A unix connect completes at once or fails (EAGAIN: the backlog is full). */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		log_debug("virtio-vsock: guest port %u to host port %u: %s: %m", peer_port,
			  local_port, sa.sun_path);
		close(fd);
		goto refuse;
	}
	c = vsock_conn_new(d, fd, VSOCK_CONNECTED);
	if (!c)
		goto refuse;
	c->local_port = local_port;
	c->peer_port = peer_port;
	c->peer_buf_alloc = buf_alloc;
	c->peer_fwd_cnt = fwd_cnt;
	c->ctl = VSOCK_CTL_RESPONSE;
	c->readable = true;
	vsock_conn_hash_insert(c);
	vsock_conn_update(c);
	return;
refuse:
	vsock_rst_push(d, VSOCK_HOST_CID, local_port, peer_port);
}

int vsock_conn_established(struct vsock_conn *c)
{
	char ok[24];
	int n = snprintf(ok, sizeof(ok), "OK %u\n", c->local_port);

	/* The client's socket is fresh and this is the first thing we write: it fits. */
	if (send(c->fd, ok, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n) {
		vsock_conn_close(c, true);
		return -ECONNRESET;
	}
	c->state = VSOCK_CONNECTED;
	c->handshake_deadline_ms = 0;
	c->readable = true; /* the client may have sent data behind its CONNECT line */
	return 0;
}
