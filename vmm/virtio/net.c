/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-net (virtio 1.2, section 5.1) on a tap: one rx and one tx queue, the MAC and link
 * status in the config space, mergeable rx buffers, and the checksum and segmentation
 * offloads the tap accepts (TUNSETOFFLOAD is tried for each at creation; only what it took is
 * offered, and at activation the tap is told what the driver negotiated). There is no
 * control queue: the guest cannot change the MAC, filters or offloads later.
 *
 * This file is the device and its tx path: a tx chain (the 12-byte header, then the frame,
 * all device-readable) goes to the tap with one writev, its header passed through as the
 * tap's vnet header (the host kernel checks it: a bad one is refused and the frame dropped).
 * net_rx.c fills the rx queue. The tap fd is non-blocking and served on the VM's event loop;
 * each direction serves at most a budget of frames per pass, so a flooding guest or peer
 * cannot keep the I/O thread from its other devices.
 *
 * The guest is hostile: a tx chain shorter than the header is a protocol error
 * (DEVICE_NEEDS_RESET); a frame longer than NET_FRAME_MAX, or one the tap refuses, is dropped
 * and logged (rate-limited). Nothing a guest does stops the VMM.
 *
 * The backend may also be a SOCK_SEQPACKET socket whose every message is one frame with its
 * header (a user-space switch, or the unit tests): no offloads are offered then.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/if_tun.h>
#include <linux/virtio_ids.h>

#include "virtio/net.h"

/* Offloads, each a pair of features (the host's and the guest's side of one tap offload)
 * offered when TUNSETOFFLOAD takes its flags together with those of the rows it needs. */
struct net_offload {
	unsigned tun_flags; /* TUN_F_*, with what it depends on */
	uint64_t features;
};

#define NET_BIT(f) (1ull << VIRTIO_NET_F_##f)

static const struct net_offload net_offloads[] = {
	{TUN_F_CSUM, NET_BIT(CSUM) | NET_BIT(GUEST_CSUM)},
	{TUN_F_CSUM | TUN_F_TSO4, NET_BIT(HOST_TSO4) | NET_BIT(GUEST_TSO4)},
	{TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN, NET_BIT(HOST_ECN) | NET_BIT(GUEST_ECN)},
	{TUN_F_CSUM | TUN_F_UFO, NET_BIT(HOST_UFO) | NET_BIT(GUEST_UFO)},
};

/* Features offered whatever the backend. */
#define NET_BASE_FEATURES (NET_BIT(MAC) | NET_BIT(STATUS) | NET_BIT(MRG_RXBUF))

void net_fail(struct net_dev *d, const char *why)
{
	d->fail = why;
	d->active = false;
	d->frame_len = 0;
}

/* Point d->iov at the readable segments of `c`; returns how many. */
static unsigned net_tx_iov(struct net_dev *d, const struct virtq_chain *c)
{
	for (unsigned i = 0; i < c->nread; i++)
		d->iov[i] = (struct iovec){c->segs[i].hva, c->segs[i].len};
	return c->nread;
}

/* Write one tx chain (already checked: a whole header, not oversize) to the tap. 0 when it
 * is done with (written or dropped), -EAGAIN when the tap is full and the chain must wait. */
static int net_tx_one(struct net_dev *d, const struct virtq_chain *c)
{
	unsigned n = net_tx_iov(d, c);
	ssize_t w;

	do
		w = writev(d->tap_fd, d->iov, (int)n);
	while (w < 0 && errno == EINTR);
	if (w < 0 && (errno == EAGAIN || errno == ENOBUFS))
		return -EAGAIN;
	if (w < 0) {
		/* EINVAL: a header the host kernel refuses (bad GSO or checksum offsets); EIO:
		 * the tap is down. Either way the frame is lost, as on a wire. */
		d->tx_dropped++;
		if (log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-net: a tx frame of %llu bytes dropped: %m",
				 (unsigned long long)(c->read_len - NET_HDR_LEN));
		if (errno == ENOTCONN || errno == ECONNREFUSED || errno == EPIPE)
			d->dead = true;
		return 0;
	}
	d->tx_frames++;
	return 0;
}

/* Send what the guest queued on tx, at most NET_TX_BUDGET frames; if more wait, kick
 * ourselves so that the event loop comes back after serving the others. */
static void net_serve_tx(struct net_dev *d)
{
	struct virtq *q = &d->vdev->queues[NET_TX_Q];
	struct virtq_chain *c = &d->chain;
	uint16_t old_used = q->used_idx;
	unsigned done = 0;
	int err;

	while (!d->tx_wait && !d->dead) {
		if (done == NET_TX_BUDGET) {
			if (virtq_has_work(q) && write(d->kick_fd, &(uint64_t){1}, 8) < 0 &&
			    log_ratelimit_ok(&d->rl, 1))
				log_warn("virtio-net: cannot wake the I/O thread: %m");
			break;
		}
		err = virtq_pop(q, c);
		if (err == -EAGAIN) {
			/* With EVENT_IDX, ask for the next kick, then look again (see blk.c). */
			if (!q->event_idx)
				break;
			virtq_set_avail_event(q, q->last_avail_idx);
			if (!virtq_has_work(q))
				break;
			done++; /* a driver flipping avail idx cannot keep us here */
			continue;
		}
		if (err < 0) {
			net_fail(d, q->error ? q->error : "bad tx chain");
			return;
		}
		if (c->read_len < NET_HDR_LEN) {
			net_fail(d, "a tx chain shorter than the 12-byte frame header");
			return;
		}
		if (c->read_len > NET_HDR_LEN + NET_FRAME_MAX) {
			d->tx_dropped++;
			if (log_ratelimit_ok(&d->rl, 3))
				log_warn("virtio-net: a tx frame of %llu bytes (at most %u): "
					 "dropped",
					 (unsigned long long)(c->read_len - NET_HDR_LEN),
					 NET_FRAME_MAX);
		} else if (net_tx_one(d, c) == -EAGAIN) {
			/* The chain was the last popped and nothing was pushed after it: stepping
			 * back returns it to the avail ring, for when the tap takes frames again.
			 */
			q->last_avail_idx--;
			d->tx_wait = true;
			break;
		}
		/* Nothing is written into a tx chain. */
		if (virtq_push(q, c->head, 0) < 0) {
			net_fail(d, q->error ? q->error : "cannot return a tx buffer");
			return;
		}
		done++;
	}
	d->irq |= virtq_should_notify(q, old_used);
}

/* Make tap_src wait for what the device needs now: frames to read unless rx has no buffers,
 * room to write while a tx frame waits. I/O thread only. */
static void net_update_events(struct net_dev *d)
{
	uint32_t want = 0;
	int err;

	if (d->active && !d->dead) {
		if (!d->rx_wait)
			want |= EPOLLIN;
		if (d->tx_wait)
			want |= EPOLLOUT;
	}
	if (d->dead && d->tap_src.added) {
		/* A hung-up socket stays "ready" for epoll whatever it waits for. */
		evloop_del(&d->vm->loop, &d->tap_src);
		return;
	}
	if (want == d->tap_events || !d->tap_src.added)
		return;
	if ((err = evloop_mod(&d->vm->loop, &d->tap_src, want)) < 0) {
		if (log_ratelimit_ok(&d->rl, 1))
			log_warn("virtio-net: cannot change what the tap is polled for: %s",
				 strerror(-err));
		return;
	}
	d->tap_events = want;
}

/* Serve both queues, then re-arm the tap. I/O thread, under d->lock. */
static void net_run(struct net_dev *d)
{
	if (d->active)
		net_serve_tx(d);
	if (d->active && !d->dead)
		net_serve_rx(d);
	net_update_events(d);
}

/* Drop the lock, then tell the transport what happened: its lock is taken before ours (by
 * activate and reset), so it is never called with ours held. */
static void net_unlock(struct net_dev *d)
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

/* The tap is readable (frames for the guest) or writable again (a tx frame waits). */
static void net_tap_event(struct ev_source *src, uint32_t events)
{
	struct net_dev *d = src->opaque;

	pthread_mutex_lock(&d->lock);
	if (events & EPOLLOUT)
		d->tx_wait = false;
	if ((events & (EPOLLHUP | EPOLLERR)) && !(events & EPOLLIN) && !d->dead) {
		/* A socket backend whose peer went away; a tap never hangs up. */
		log_warn("virtio-net: the backend hung up: the link is dead");
		d->dead = true;
	}
	net_run(d);
	net_unlock(d);
}

/* kick_fd: an activation, a reset, a vCPU's kick or our own tx budget ran out. */
static void net_kick_event(struct ev_source *src, uint32_t events)
{
	struct net_dev *d = src->opaque;
	uint64_t count;

	if (read(d->kick_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		log_debug("virtio-net: reading the kick eventfd: %m");
	pthread_mutex_lock(&d->lock);
	net_run(d);
	net_unlock(d);
}

/* Wake the I/O thread (from a vCPU thread, or under the transport's lock). */
static void net_kick(struct net_dev *d)
{
	uint64_t one = 1;

	if (write(d->kick_fd, &one, sizeof(one)) < 0 && log_ratelimit_ok(&d->rl, 1))
		log_warn("virtio-net: cannot wake the I/O thread: %m");
}

static uint64_t net_features(void *opaque)
{
	struct net_dev *d = opaque;

	return d->offered;
}

static void net_config_read(void *opaque, uint32_t offset, uint8_t *data, uint32_t len)
{
	struct net_dev *d = opaque;

	/* The transport checked offset + len <= config_len = sizeof(config). */
	memcpy(data, (const uint8_t *)&d->config + offset, len);
}

static void net_config_write(void *opaque, uint32_t offset, const uint8_t *data, uint32_t len)
{
	/* The MAC is writable only in legacy devices, and the status never: ignored. */
}

/* The tap offloads (TUN_F_*) matching the guest's side of `features`: what the tap may send
 * us is what the driver said it can take. A driver that took a feature without the one it
 * depends on (TSO without GUEST_CSUM) gets neither. */
static unsigned net_tun_offloads(uint64_t features)
{
	unsigned f = 0;

	if (!(features & NET_BIT(GUEST_CSUM)))
		return 0;
	f |= TUN_F_CSUM;
	if (features & NET_BIT(GUEST_TSO4))
		f |= TUN_F_TSO4;
	if ((features & NET_BIT(GUEST_ECN)) && (f & TUN_F_TSO4))
		f |= TUN_F_TSO_ECN;
	if (features & NET_BIT(GUEST_UFO))
		f |= TUN_F_UFO;
	return f;
}

/* DRIVER_OK (a vCPU, under the transport's lock; or a restore): set the tap's offloads from
 * the negotiated features and let the I/O thread start reading it. */
static int net_activate(void *opaque, struct virtio_dev *vdev, uint64_t features)
{
	struct net_dev *d = opaque;
	unsigned off = net_tun_offloads(features & d->offered);

	if (d->is_tap && ioctl(d->tap_fd, TUNSETOFFLOAD, off) < 0) {
		if (log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-net: the tap refused offloads %#x: %m", off);
		return -EIO;
	}
	pthread_mutex_lock(&d->lock);
	d->mrg = features & NET_BIT(MRG_RXBUF);
	d->active = true;
	d->rx_wait = d->tx_wait = false;
	d->frame_len = 0;
	pthread_mutex_unlock(&d->lock);
	net_kick(d);
	return 0;
}

static void net_queue_notify(void *opaque, unsigned qi)
{
	struct net_dev *d = opaque;

	pthread_mutex_lock(&d->lock);
	/* The guest gave rx buffers (or kicked rx anyway): read the tap again. */
	if (qi == NET_RX_Q)
		d->rx_wait = false;
	/* Through the ioeventfd (or in a test without vCPUs) we are on the I/O thread; an MMIO
	 * exit on a vCPU hands the work over, since the tap's epoll events are the I/O
	 * thread's. */
	if (d->vdev->notify_fd < 0 && d->vm->vm_fd >= 0) {
		pthread_mutex_unlock(&d->lock);
		net_kick(d);
		return;
	}
	net_run(d);
	net_unlock(d);
}

/*
 * Before a snapshot (vCPUs paused, I/O thread): nothing is half done in the rings. A tx
 * chain is written and returned in one step (or, when the tap is full, stepped back into
 * the avail ring); an rx frame's chains are all returned at once when the frame is
 * complete, and a frame still waiting for buffers lives in d->frame, not in guest RAM. The
 * snapshot holds the rings as they are; a restored device finds the avail entries again.
 */
static int net_quiesce(void *opaque)
{
	return 0;
}

static void net_reset(void *opaque)
{
	struct net_dev *d = opaque;

	/* The transport resets the queues when we return: forget the frame that waited for
	 * them, and let the I/O thread stop polling the tap. */
	pthread_mutex_lock(&d->lock);
	d->active = false;
	d->mrg = false;
	d->frame_len = 0;
	d->rx_wait = d->tx_wait = false;
	pthread_mutex_unlock(&d->lock);
	if (d->is_tap && ioctl(d->tap_fd, TUNSETOFFLOAD, 0u) < 0)
		log_debug("virtio-net: clearing the tap's offloads: %m");
	net_kick(d);
}

static void net_destroy(void *opaque)
{
	struct net_dev *d = opaque;
	struct evloop *loop = &d->vm->loop;

	if (d->rx_frames || d->tx_frames)
		log_debug("virtio-net: rx %llu frames (%llu dropped), tx %llu (%llu dropped)",
			  (unsigned long long)d->rx_frames, (unsigned long long)d->rx_dropped,
			  (unsigned long long)d->tx_frames, (unsigned long long)d->tx_dropped);
	evloop_del(loop, &d->tap_src);
	evloop_del(loop, &d->kick_src);
	if (d->tap_fd >= 0)
		close(d->tap_fd);
	if (d->kick_fd >= 0)
		close(d->kick_fd);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static const struct virtio_ops net_ops = {
	.name = "net",
	.device_id = VIRTIO_ID_NET,
	.nqueues = NET_NQUEUES,
	.queue_max = NET_QUEUE_MAX,
	.config_len = sizeof(struct net_config),
	.features = net_features,
	.config_read = net_config_read,
	.config_write = net_config_write,
	.activate = net_activate,
	.queue_notify = net_queue_notify,
	.quiesce = net_quiesce,
	.reset = net_reset,
	.destroy = net_destroy,
};

/* Set the backend up: a tap gets the 12-byte header and is asked offload by offload what it
 * takes; a SOCK_SEQPACKET socket is taken as it is. -ENOTTY for anything else. */
static int net_backend_setup(struct net_dev *d)
{
	int hdr_len = (int)NET_HDR_LEN, type = 0;
	socklen_t type_len = sizeof(type);
	struct stat st;

	d->offered = NET_BASE_FEATURES;
	if (ioctl(d->tap_fd, TUNSETVNETHDRSZ, &hdr_len) == 0) {
		d->is_tap = true;
		for (unsigned i = 0; i < sizeof(net_offloads) / sizeof(net_offloads[0]); i++)
			if (ioctl(d->tap_fd, TUNSETOFFLOAD, net_offloads[i].tun_flags) == 0)
				d->offered |= net_offloads[i].features;
		/* Nothing until the driver says what it takes. */
		if (ioctl(d->tap_fd, TUNSETOFFLOAD, 0u) < 0)
			return -errno;
		return 0;
	}
	if (fstat(d->tap_fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    getsockopt(d->tap_fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 &&
	    type == SOCK_SEQPACKET)
		return 0;
	return -ENOTTY;
}

int net_add(struct vm *vm, int tap_fd, const uint8_t mac[6], char *cmdline, size_t cmdline_len,
	    struct virtio_dev **out)
{
	struct net_dev *d;
	int flags, err;

	d = calloc(1, sizeof(*d));
	if (!d) {
		close(tap_fd);
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->vm = vm;
	d->tap_fd = tap_fd;
	vm->tap_fd = tap_fd;
	d->tap_src.fd = d->kick_src.fd = -1;
	memcpy(d->config.mac, mac, 6);
	d->config.status = htole16(VIRTIO_NET_S_LINK_UP);
	d->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->kick_fd < 0) {
		err = -errno;
		goto fail;
	}
	if ((err = net_backend_setup(d)) < 0)
		goto fail;
	flags = fcntl(tap_fd, F_GETFL);
	if (flags < 0 || fcntl(tap_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		err = -errno;
		goto fail;
	}
	/* The tap waits for no event until the driver is up (net_update_events). */
	if ((err = evloop_add(&vm->loop, &d->kick_src, d->kick_fd, EPOLLIN, net_kick_event, d)) <
		    0 ||
	    (err = evloop_add(&vm->loop, &d->tap_src, tap_fd, 0, net_tap_event, d)) < 0)
		goto fail;
	err = virtio_mmio_add(vm, &net_ops, d, cmdline, cmdline_len, out);
	if (err < 0)
		goto fail;
	d->vdev = *out;
	return 0;
fail:
	net_destroy(d);
	return err;
}
