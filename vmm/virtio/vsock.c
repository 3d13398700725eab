/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-vsock (virtio 1.2, section 5.10), served in user space: the host has no vhost-vsock.
 * The guest is CID 3, the host CID 2; stream sockets only. Three queues: rx (packets to the
 * guest, in buffers it gives us), tx (its packets to us), event (TRANSPORT_RESET).
 *
 * Host to guest: the VMM listens on a unix socket (`vsock.sock`); a client writes
 * "CONNECT <port>\n", we send the guest OP_REQUEST from a local port counting up from 1024,
 * and on its OP_RESPONSE write "OK <local port>\n" to the client; then raw bytes both ways.
 * An RST closes the client's socket. Guest to host port P: we connect to `vsock.sock_P`, and
 * answer OP_RESPONSE, or OP_RST when nobody listens there.
 *
 * This file is the device: packets from the tx queue are checked and dispatched to their
 * connection (vsock_conn.c); packets for the guest (control packets the connections owe, and
 * data read from their sockets straight into the guest's rx buffers) fill the rx queue.
 * Everything from the guest is hostile: a tx chain without a whole header, or an rx buffer
 * too small for one, is a protocol error (NEEDS_RESET, every connection dropped); a bad
 * packet (wrong CID, type, op or length, more data than its credit, a packet for a
 * connection that does not exist) gets that connection an RST. Neither blocks the I/O thread.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/virtio_ids.h>

#include "virtio/vsock.h"

unsigned vsock_chain_iov(struct vsock_dev *d, unsigned at, const struct virtq_chain *c,
			 bool writable, uint64_t offset, uint64_t len)
{
	unsigned first = writable ? c->nread : 0, end = writable ? c->nsegs : c->nread, n = at;

	for (unsigned i = first; i < end && len; i++) {
		const struct virtq_seg *s = &c->segs[i];
		uint64_t take;

		if (offset >= s->len) {
			offset -= s->len;
			continue;
		}
		take = s->len - offset < len ? s->len - offset : len;
		d->iov[n++] = (struct iovec){(uint8_t *)s->hva + offset, take};
		len -= take;
		offset = 0;
	}
	return n - at;
}

/* The guest broke the virtio protocol: drop its connections, stop serving until a reset. */
static void vsock_fail(struct vsock_dev *d, const char *why)
{
	d->fail = why;
	d->active = false;
	d->rx_held = 0;
	vsock_conn_close_all(d);
}

/* A bad packet (not a broken queue): log it, rate-limited. */
static void vsock_bad_packet(struct vsock_dev *d, const char *why, const struct virtio_vsock_hdr *h)
{
	if (log_ratelimit_ok(&d->rl, 3))
		log_warn("virtio-vsock: %s (op %u type %u, cid %llu port %u to cid %llu port %u, "
			 "len %u)",
			 why, le16toh(h->op), le16toh(h->type),
			 (unsigned long long)le64toh(h->src_cid), le32toh(h->src_port),
			 (unsigned long long)le64toh(h->dst_cid), le32toh(h->dst_port),
			 le32toh(h->len));
}

/* One packet from the guest, its 44-byte header read into `h`. */
static void vsock_handle_tx(struct vsock_dev *d, const struct virtq_chain *chain,
			    const struct virtio_vsock_hdr *h)
{
	uint64_t dst_cid = le64toh(h->dst_cid);
	uint32_t local = le32toh(h->dst_port), peer = le32toh(h->src_port), len = le32toh(h->len);
	uint16_t op = le16toh(h->op);
	struct vsock_conn *c;
	const char *why = NULL;

	if (le64toh(h->src_cid) != VSOCK_GUEST_CID) {
		/* Not from the guest's address: nobody to answer. */
		vsock_bad_packet(d, "packet from a CID not the guest's: dropped", h);
		return;
	}
	c = vsock_conn_find(d, local, peer);
	if (dst_cid != VSOCK_HOST_CID)
		why = "packet to a CID not the host's";
	else if (le16toh(h->type) != VIRTIO_VSOCK_TYPE_STREAM)
		why = "packet of a type not stream";
	else if (len > chain->read_len - VSOCK_HDR_LEN || len > VSOCK_PKT_MAX)
		why = "packet longer than its buffer";
	else if (op == VIRTIO_VSOCK_OP_RW && (!c || c->state != VSOCK_CONNECTED))
		why = "data outside a connection";
	else if (op != VIRTIO_VSOCK_OP_RW && len)
		why = "payload on a control packet";
	if (why) {
		vsock_bad_packet(d, why, h);
		if (c)
			vsock_conn_close(c, true);
		else if (op != VIRTIO_VSOCK_OP_RST)
			vsock_rst_push(d, dst_cid, local, peer);
		return;
	}
	if (!c) {
		/* A request opens a connection; anything else but an RST is answered by one. */
		if (op == VIRTIO_VSOCK_OP_REQUEST)
			vsock_conn_from_guest_request(d, local, peer, le32toh(h->buf_alloc),
						      le32toh(h->fwd_cnt));
		else if (op != VIRTIO_VSOCK_OP_RST)
			vsock_rst_push(d, VSOCK_HOST_CID, local, peer);
		return;
	}
	c->peer_buf_alloc = le32toh(h->buf_alloc);
	c->peer_fwd_cnt = le32toh(h->fwd_cnt);
	switch (op) {
	case VIRTIO_VSOCK_OP_RESPONSE:
		/* Only to our request, and only once it was sent. */
		if (c->state != VSOCK_REQUESTED || (c->ctl & VSOCK_CTL_REQUEST)) {
			vsock_bad_packet(d, "response to no request", h);
			vsock_conn_close(c, true);
			return;
		}
		if (vsock_conn_established(c) < 0)
			return;
		break;
	case VIRTIO_VSOCK_OP_RW:
		if (c->peer_shutdown & VIRTIO_VSOCK_SHUTDOWN_SEND) {
			vsock_bad_packet(d, "data after the guest's SHUTDOWN_SEND", h);
			vsock_conn_close(c, true);
			return;
		}
		if (len && vsock_conn_write(c, chain, VSOCK_HDR_LEN, len) < 0)
			return;
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break; /* the credit fields above were the point */
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->ctl |= VSOCK_CTL_CREDIT;
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (c->state != VSOCK_CONNECTED) {
			vsock_conn_close(c, true);
			return;
		}
		c->peer_shutdown |= le32toh(h->flags) & VSOCK_SHUTDOWN_BOTH;
		break;
	case VIRTIO_VSOCK_OP_RST:
		vsock_conn_close(c, false);
		return;
	default:
		/* A second REQUEST on a connection, an unknown op. */
		vsock_bad_packet(d, "unexpected op", h);
		vsock_conn_close(c, true);
		return;
	}
	vsock_conn_update(c);
}

/* Wake the I/O thread: for work it must do (a vCPU's reset, activation or kick), or to come
 * back to a queue that ran out of budget after serving the rest of the loop. */
static void vsock_kick(struct vsock_dev *d)
{
	uint64_t one = 1;

	if (write(d->kick_fd, &one, sizeof(one)) < 0 && log_ratelimit_ok(&d->rl, 1))
		log_warn("virtio-vsock: cannot wake the I/O thread: %m");
}

/* Pop and serve the packets the guest sent, at most VSOCK_TX_BUDGET of them (a packet of many
 * segments counts one more per 16, as each was walked and translated); with more waiting,
 * kick ourselves so that the event loop comes back after serving the others. */
static void vsock_serve_tx(struct vsock_dev *d)
{
	struct virtq *q = &d->vdev->queues[VSOCK_TX_Q];
	struct virtq_chain *c = &d->chain;
	uint16_t old_used = q->used_idx;
	unsigned done = 0;
	int err = 0;

	for (;; done++) {
		while (done < VSOCK_TX_BUDGET && (err = virtq_pop(q, c)) == 0) {
			struct virtio_vsock_hdr h;

			if (virtq_copy_from_chain(c, 0, &h, sizeof(h)) < 0) {
				vsock_fail(d, "a tx packet without a 44-byte header");
				return;
			}
			vsock_handle_tx(d, c, &h);
			if (virtq_push(q, c->head, 0) < 0) {
				vsock_fail(d, q->error ? q->error : "cannot return a tx buffer");
				return;
			}
			done += 1 + c->nsegs / 16;
		}
		if (done >= VSOCK_TX_BUDGET) {
			if (virtq_has_work(q))
				vsock_kick(d);
			break;
		}
		if (err != -EAGAIN) {
			vsock_fail(d, q->error ? q->error : "bad tx chain");
			return;
		}
		/* With EVENT_IDX, ask for the next kick, then look again (see blk.c); the
		 * loop's done++ keeps a driver flipping avail idx from holding us here. */
		if (!q->event_idx)
			break;
		virtq_set_avail_event(q, q->last_avail_idx);
		if (!virtq_has_work(q))
			break;
	}
	d->irq |= virtq_should_notify(q, old_used);
}

/* The i-th rx chain held (popped, not filled yet). */
static struct virtq_chain *vsock_rx(struct vsock_dev *d, unsigned i)
{
	return &d->rx[(d->rx_first + i) % VSOCK_RX_BATCH];
}

/* Pop one more rx chain into the held ones: 0, -EAGAIN when the guest gave none (we asked to
 * hear of its next), -EPROTO when the queue or the buffer is broken (the device failed). */
static int vsock_rx_pop(struct vsock_dev *d)
{
	struct virtq *q = &d->vdev->queues[VSOCK_RX_Q];
	struct virtq_chain *c = vsock_rx(d, d->rx_held);
	int err = virtq_pop(q, c);

	if (err == -EAGAIN) {
		/* Wait for the guest's next buffers; look once more after asking. */
		virtq_set_avail_event(q, q->last_avail_idx);
		if (!q->event_idx || !virtq_has_work(q))
			return -EAGAIN;
		err = virtq_pop(q, c);
		if (err == -EAGAIN)
			return -EAGAIN;
	}
	if (err < 0) {
		vsock_fail(d, q->error ? q->error : "bad rx chain");
		return -EPROTO;
	}
	if (c->write_len <= VSOCK_HDR_LEN) {
		vsock_fail(d, "an rx buffer with no room past a packet header");
		return -EPROTO;
	}
	d->rx_held++;
	return 0;
}

/* Give the first held rx chain back to the guest with packet header `h` and `len` bytes of
 * payload already in it. -EPROTO when the queue broke (the device failed). */
static int vsock_rx_push(struct vsock_dev *d, const struct virtio_vsock_hdr *h, uint32_t len)
{
	struct virtq *q = &d->vdev->queues[VSOCK_RX_Q];
	struct virtq_chain *c = vsock_rx(d, 0);

	/* Cannot fail: the buffer was checked when popped. */
	if (virtq_copy_to_chain(c, 0, h, sizeof(*h)) < 0 ||
	    virtq_push(q, c->head, (uint32_t)VSOCK_HDR_LEN + len) < 0) {
		vsock_fail(d, q->error ? q->error : "cannot return an rx buffer");
		return -EPROTO;
	}
	d->rx_first = (d->rx_first + 1) % VSOCK_RX_BATCH;
	d->rx_held--;
	return 0;
}

/* Data from c's socket, read straight into as many rx buffers as one read can fill (more are
 * popped as needed, up to VSOCK_RX_BATCH and VSOCK_PKT_MAX bytes), never past the guest's
 * credit: one recvmsg for up to 16 of Linux's 4 KiB buffers. Returns the packets pushed (0:
 * nothing to read after all, or EOF, which owes a shutdown now), -ECONNRESET when the socket
 * broke (c is closed), -EPROTO when the device failed. */
static int vsock_fill_data(struct vsock_dev *d, struct vsock_conn *c)
{
	uint32_t want = vsock_conn_credit(c), room[VSOCK_RX_BATCH], got, len;
	unsigned nchains = 0, niov = 0;
	struct virtio_vsock_hdr h;
	int pushed = 0;
	ssize_t n;

	if (want > VSOCK_PKT_MAX)
		want = VSOCK_PKT_MAX;
	while (want && nchains < VSOCK_RX_BATCH) {
		const struct virtq_chain *rx;

		if (nchains == d->rx_held) {
			int err = vsock_rx_pop(d);

			if (err == -EPROTO)
				return err;
			if (err < 0)
				break;
		}
		rx = vsock_rx(d, nchains);
		/* A guest buffer of many pieces waits for the next read. */
		if (nchains && niov + (rx->nsegs - rx->nread) > VIRTQ_CHAIN_MAX)
			break;
		room[nchains] = rx->write_len - VSOCK_HDR_LEN < want
					? (uint32_t)(rx->write_len - VSOCK_HDR_LEN)
					: want;
		niov += vsock_chain_iov(d, niov, rx, true, VSOCK_HDR_LEN, room[nchains]);
		want -= room[nchains++];
	}
	n = vsock_conn_read(c, d->iov, niov);
	if (n < 0 && n != -EPIPE) {
		vsock_conn_close(c, true);
		return -ECONNRESET;
	}
	for (got = n > 0 ? (uint32_t)n : 0; got; got -= len) {
		len = got < room[pushed] ? got : room[pushed];
		c->tx_cnt += len;
		vsock_conn_hdr(c, &h, VIRTIO_VSOCK_OP_RW, len, 0);
		if (vsock_rx_push(d, &h, len) < 0)
			return -EPROTO;
		pushed++;
	}
	return pushed;
}

/* Write the next packets for the guest into the held rx chains (at least one is held): an
 * owed RST, or what the first pending connection owes next (request or response, data,
 * shutdown, credit update, in that order). Returns the packets pushed (0 when nothing was:
 * its socket had no data after all, or the connection went away), or -EPROTO when the device
 * failed. */
static int vsock_fill_one(struct vsock_dev *d)
{
	struct virtio_vsock_hdr h;
	struct vsock_conn *c;
	uint32_t shut;
	int n;

	if (d->rst_len) {
		struct vsock_rst *r = &d->rst[d->rst_head];

		h = (struct virtio_vsock_hdr){
			.src_cid = htole64(r->src_cid),
			.dst_cid = htole64(VSOCK_GUEST_CID),
			.src_port = htole32(r->src_port),
			.dst_port = htole32(r->dst_port),
			.type = htole16(VIRTIO_VSOCK_TYPE_STREAM),
			.op = htole16(VIRTIO_VSOCK_OP_RST),
		};
		d->rst_head = (d->rst_head + 1) % VSOCK_RST_MAX;
		d->rst_len--;
		goto out;
	}
	c = vsock_conn_of(d->pending.next, pending);
	vsock_list_del(&c->pending);
	c->queued = false;
	if (vsock_conn_ctl_due(c) & VSOCK_CTL_REQUEST) {
		c->ctl &= ~VSOCK_CTL_REQUEST;
		vsock_conn_hdr(c, &h, VIRTIO_VSOCK_OP_REQUEST, 0, 0);
		goto update;
	}
	if (c->ctl & VSOCK_CTL_RESPONSE) {
		c->ctl &= ~VSOCK_CTL_RESPONSE;
		vsock_conn_hdr(c, &h, VIRTIO_VSOCK_OP_RESPONSE, 0, 0);
		goto update;
	}
	if (vsock_conn_may_read(c) && c->readable && vsock_conn_credit(c) > 0) {
		n = vsock_fill_data(d, c);
		if (n == -ECONNRESET)
			return 0;
		if (n < 0)
			return n;
		if (n > 0) {
			/* Back to the end of the line: connections take turns. */
			vsock_conn_update(c);
			return n;
		}
		/* Nothing to read after all, or EOF (a shutdown is owed now). */
	}
	shut = vsock_conn_shut_due(c);
	if (c->state == VSOCK_CONNECTED && shut != c->shut_sent) {
		c->shut_sent = shut;
		vsock_conn_hdr(c, &h, VIRTIO_VSOCK_OP_SHUTDOWN, 0, shut);
	} else if (c->ctl & VSOCK_CTL_CREDIT) {
		vsock_conn_hdr(c, &h, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 0, 0);
	} else {
		vsock_conn_update(c);
		return 0;
	}
update:
	/* The header is ours already: the connection may close here (and owe an RST). */
	vsock_conn_update(c);
out:
	return vsock_rx_push(d, &h, 0) < 0 ? -EPROTO : 1;
}

/* Give the guest the packets it can take, RSTs first, then the connections in turn, at most
 * VSOCK_RX_BUDGET tries per pass; with more owed, kick ourselves to come back after the rest
 * of the event loop. */
static void vsock_fill_rx(struct vsock_dev *d)
{
	struct virtq *q = &d->vdev->queues[VSOCK_RX_Q];
	uint16_t old_used = q->used_idx;

	for (unsigned done = 0; d->rst_len || !vsock_list_empty(&d->pending); done++) {
		if (done == VSOCK_RX_BUDGET) {
			vsock_kick(d);
			break;
		}
		if (!d->rx_held) {
			int err = vsock_rx_pop(d);

			if (err == -EPROTO)
				return;
			if (err < 0)
				break;
		}
		if (vsock_fill_one(d) < 0)
			return;
	}
	d->irq |= virtq_should_notify(q, old_used);
}

/* Post the TRANSPORT_RESET event when one is owed and the guest gave an event buffer. */
static void vsock_serve_event(struct vsock_dev *d)
{
	struct virtq *q = &d->vdev->queues[VSOCK_EVENT_Q];
	struct virtio_vsock_event ev = {.id = htole32(VIRTIO_VSOCK_EVENT_TRANSPORT_RESET)};
	uint16_t old_used = q->used_idx, avail;
	int err;

	if (!d->event_pending)
		return;
	/* Read before the push: once the event is out, a guest on another vCPU may handle it and
	 * give the buffer back before we look again. */
	avail = virtq_avail_idx(q);
	err = virtq_pop(q, &d->chain);
	if (err == -EAGAIN)
		return;
	if (err < 0 || virtq_copy_to_chain(&d->chain, 0, &ev, sizeof(ev)) < 0 ||
	    virtq_push(q, d->chain.head, sizeof(ev)) < 0) {
		vsock_fail(d, q->error ? q->error : "an event buffer smaller than an event");
		return;
	}
	d->event_pending = false;
	d->reset_avail_idx = avail;
	d->irq |= virtq_should_notify(q, old_used);
}

/*
 * After a TRANSPORT_RESET, let the host clients' requests that waited go to the guest once it
 * has handled the event: it gave the event buffer back (Linux's event work and our payloads
 * forget their connections first), or VSOCK_RESET_ACK_MS passed. Sent earlier, a request can
 * reach a guest that has not looked at its event queue yet (a vCPU resumes wherever the
 * snapshot paused it, e.g. in the middle of serving rx; Linux serves rx and events in
 * separate work items): the guest accepts, the client reads "OK", then the guest handles the
 * reset and drops that new connection with the old ones.
 */
static void vsock_reset_ack_check(struct vsock_dev *d)
{
	struct vsock_link *l;
	unsigned waited = 0;

	if (!d->reset_unacked)
		return;
	if (d->event_pending ||
	    virtq_avail_idx(&d->vdev->queues[VSOCK_EVENT_Q]) == d->reset_avail_idx) {
		if (vmm_now_ns() / 1000000u < d->reset_ack_deadline_ms)
			return;
		if (log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-vsock: the guest has not handled the transport reset "
				 "(its event buffer did not come back) in %u ms: host connections "
				 "go ahead",
				 VSOCK_RESET_ACK_MS);
	}
	d->reset_unacked = false;
	for (l = d->conns.next; l != &d->conns;) {
		struct vsock_conn *c = vsock_conn_of(l, all);

		l = l->next;
		if (c->ctl & VSOCK_CTL_REQUEST) {
			waited++;
			vsock_conn_update(c); /* onto dev->pending */
		}
	}
	log_debug("virtio-vsock: the transport reset is behind: %u host connection(s) waited "
		  "for it",
		  waited);
}

void vsock_run(struct vsock_dev *d)
{
	if (d->reset_pending) {
		d->reset_pending = false;
		vsock_conn_close_all(d);
	}
	if (!d->active)
		return;
	vsock_serve_tx(d);
	if (d->active)
		vsock_serve_event(d);
	if (d->active) {
		vsock_reset_ack_check(d);
		vsock_fill_rx(d);
	}
}

void vsock_unlock(struct vsock_dev *d)
{
	struct virtio_dev *vdev = d->vdev;
	const char *fail = d->fail;
	bool irq = d->irq;

	d->fail = NULL;
	d->irq = false;
	pthread_mutex_unlock(&d->lock);
	if (irq)
		virtio_notify_used(vdev);
	if (fail)
		virtio_set_needs_reset(vdev, fail);
}

/* kick_fd: a reset, an activation or an MMIO kick for the I/O thread. */
static void vsock_kick_event(struct ev_source *src, uint32_t events)
{
	struct vsock_dev *d = src->opaque;
	uint64_t count;

	if (read(d->kick_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		log_debug("virtio-vsock: reading the kick eventfd: %m");
	pthread_mutex_lock(&d->lock);
	vsock_run(d);
	vsock_unlock(d);
}

static uint64_t vsock_features(void *opaque)
{
	/* Stream sockets only: without F_STREAM and F_SEQPACKET that is what the driver
	 * assumes (virtio 1.2, 5.10.3). */
	return 0;
}

static void vsock_config_read(void *opaque, uint32_t offset, uint8_t *data, uint32_t len)
{
	struct vsock_dev *d = opaque;

	/* The transport checked offset + len <= config_len = sizeof(config). */
	memcpy(data, (const uint8_t *)&d->config + offset, len);
}

static void vsock_config_write(void *opaque, uint32_t offset, const uint8_t *data, uint32_t len)
{
	/* guest_cid is read-only. */
}

static int vsock_activate(void *opaque, struct virtio_dev *vdev, uint64_t features)
{
	struct vsock_dev *d = opaque;

	pthread_mutex_lock(&d->lock);
	d->active = true;
	pthread_mutex_unlock(&d->lock);
	/* Clients may have connected before the driver was up: their requests can go now. */
	vsock_kick(d);
	return 0;
}

/*
 * Before a snapshot: give back the rx chains popped ahead of data (rx_held). They are the
 * last ones popped and nothing was written into them, so stepping last_avail_idx back over
 * them returns them to the avail ring, where a restored device (and this one) finds them
 * again; otherwise a restored guest would have lost those buffers for good. Packets are
 * copied synchronously, so nothing else is in flight; connections are reset after a
 * restore (vsock_transport_reset).
 */
static int vsock_quiesce(void *opaque)
{
	struct vsock_dev *d = opaque;

	pthread_mutex_lock(&d->lock);
	if (d->active && d->rx_held) {
		d->vdev->queues[VSOCK_RX_Q].last_avail_idx -= (uint16_t)d->rx_held;
		d->rx_held = 0;
		d->rx_first = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

static void vsock_reset(void *opaque)
{
	struct vsock_dev *d = opaque;

	/* The transport resets the queues when we return: forget the held rx buffer now, and
	 * leave closing sockets (the event loop's business) to the I/O thread. */
	pthread_mutex_lock(&d->lock);
	d->active = false;
	d->rx_held = 0;
	d->event_pending = false;
	d->reset_unacked = false; /* a driver set up anew has no connections to forget */
	d->reset_pending = true;
	pthread_mutex_unlock(&d->lock);
	vsock_kick(d);
}

static void vsock_queue_notify(void *opaque, unsigned qi)
{
	struct vsock_dev *d = opaque;

	/* Through the ioeventfd (or in a test without vCPUs) we are on the I/O thread; an MMIO
	 * exit on a vCPU hands the work over instead, since sockets are the I/O thread's. */
	if (d->vdev->notify_fd < 0 && d->vm->vm_fd >= 0) {
		vsock_kick(d);
		return;
	}
	pthread_mutex_lock(&d->lock);
	vsock_run(d);
	vsock_unlock(d);
}

static void vsock_destroy(void *opaque)
{
	struct vsock_dev *d = opaque;
	struct evloop *loop = &d->vm->loop;

	vsock_conn_close_all(d);
	evloop_del(loop, &d->listen_src);
	evloop_del(loop, &d->kick_src);
	evloop_del(loop, &d->timer_src);
	if (d->timer_fd >= 0)
		close(d->timer_fd);
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		if (jail_path(d->path))
			unlink(jail_path(d->path));
	}
	if (d->kick_fd >= 0)
		close(d->kick_fd);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static const struct virtio_ops vsock_ops = {
	.name = "vsock",
	.device_id = VIRTIO_ID_VSOCK,
	.nqueues = VSOCK_NQUEUES,
	.queue_max = VSOCK_QUEUE_MAX,
	.config_len = sizeof(struct virtio_vsock_config),
	.features = vsock_features,
	.config_read = vsock_config_read,
	.config_write = vsock_config_write,
	.activate = vsock_activate,
	.queue_notify = vsock_queue_notify,
	.quiesce = vsock_quiesce,
	.reset = vsock_reset,
	.destroy = vsock_destroy,
};

int vsock_transport_reset(struct virtio_dev *vdev)
{
	struct vsock_dev *d = vdev->dev;

	if (vdev->ops != &vsock_ops)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	vsock_conn_close_all(d);
	d->event_pending = true;
	d->reset_unacked = true;
	d->reset_ack_deadline_ms = vmm_now_ns() / 1000000u + VSOCK_RESET_ACK_MS;
	vsock_run(d);
	vsock_unlock(d);
	return 0;
}

/* Listen on `path`, replacing a stale socket left there (never another kind of file, nor a
 * socket somebody still listens on: -EADDRINUSE). */
static int vsock_listen(struct vsock_dev *d, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path) || strlen(path) >= sizeof(d->path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	strcpy(d->path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN) {
			close(fd);
			return -EADDRINUSE;
		}
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	d->listen_fd = fd;
	return 0;
}

/* One fd per connection: make room for VSOCK_CONN_MAX of them besides the VMM's own, as far
 * as the hard limit allows (the usual soft limit, 1024, is less than that). Short of it the
 * listener backs off at EMFILE (evloop_accept_backoff) and the guest's requests get RST. */
static void vsock_raise_fd_limit(void)
{
	rlim_t want = VSOCK_CONN_MAX + VSOCK_FDS_SPARE;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < want)
		log_warn("virtio-vsock: at most %llu fds (RLIMIT_NOFILE): fewer than %u "
			 "connections may fit",
			 (unsigned long long)rl.rlim_cur, VSOCK_CONN_MAX);
}

int vsock_add(struct vm *vm, const char *uds_path, char *cmdline, size_t cmdline_len,
	      struct virtio_dev **out)
{
	struct vsock_dev *d;
	int err;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	d->vm = vm;
	d->listen_fd = -1;
	d->listen_src.fd = d->kick_src.fd = d->timer_src.fd = -1;
	d->next_port = VSOCK_PORT_FIRST;
	vsock_raise_fd_limit();
	d->config.guest_cid = htole64(VSOCK_GUEST_CID);
	vsock_list_init(&d->conns);
	vsock_list_init(&d->pending);
	d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	d->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->kick_fd < 0 || d->timer_fd < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = vsock_listen(d, uds_path)) < 0)
		goto fail;
	if ((err = evloop_add(&vm->loop, &d->kick_src, d->kick_fd, EPOLLIN, vsock_kick_event, d)) <
		    0 ||
	    (err = evloop_add(&vm->loop, &d->listen_src, d->listen_fd, EPOLLIN,
			      vsock_conn_listen_event, d)) < 0 ||
	    (err = evloop_add(&vm->loop, &d->timer_src, d->timer_fd, EPOLLIN,
			      vsock_conn_timer_event, d)) < 0)
		goto fail;
	err = virtio_mmio_add(vm, &vsock_ops, d, cmdline, cmdline_len, out);
	if (err < 0)
		goto fail;
	d->vdev = *out;
	return 0;
fail:
	vsock_destroy(d);
	return err;
}
