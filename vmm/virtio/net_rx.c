/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-net's receive path: frames read from the tap into the guest's rx buffers.
 *
 * A frame is read whole into d->frame (one read returns one frame with its 12-byte header;
 * a read that fills the buffer past NET_HDR_LEN + NET_FRAME_MAX was an oversize frame, and
 * is dropped), then copied into rx chains. With VIRTIO_NET_F_MRG_RXBUF it is spread over as
 * many chains as it needs and num_buffers in the first chain's header says how many;
 * without, it goes into one chain, which must hold it (a frame larger than the chain is
 * dropped and the chain stays the guest's). The chains of one frame are returned together
 * (virtq_push_many): the driver never sees half a frame.
 *
 * The tap is read only while the guest has rx buffers: when the avail ring is empty the frame
 * (if one was read already) waits in d->frame, rx_wait is set and EPOLLIN goes off until the
 * guest kicks rx; frames meanwhile queue in the tap, which drops them when its queue is full,
 * as a wire would. The guest is hostile: an rx chain with a device-readable buffer, or one
 * smaller than the header, is a protocol error (DEVICE_NEEDS_RESET).
 */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "virtio/net.h"

/* Pop the next rx chain into `c`, checked: 0, -EAGAIN when the guest gave none (we asked to
 * hear of its next ones), -EPROTO when the device failed. */
static int net_rx_pop(struct net_dev *d, struct virtq *q, struct virtq_chain *c)
{
	int err = virtq_pop(q, c);

	if (err == -EAGAIN) {
		/* Ask for a kick at the next buffer, then look once more: the driver may have
		 * added one before it saw avail_event (the fence is in the helper). */
		virtq_set_avail_event(q, q->last_avail_idx);
		if (!virtq_has_work(q))
			return -EAGAIN;
		err = virtq_pop(q, c);
		if (err == -EAGAIN)
			return -EAGAIN;
	}
	if (err < 0) {
		net_fail(d, q->error ? q->error : "bad rx chain");
		return -EPROTO;
	}
	if (c->nread || c->write_len < NET_HDR_LEN) {
		net_fail(d, "an rx chain that is not one device-writable buffer of at least 12 "
			    "bytes");
		return -EPROTO;
	}
	return 0;
}

/* Copy bytes [off, off + len) of the frame into the writable segments of `c`. Cannot fail:
 * the caller took len from c->write_len. */
static void net_rx_copy(struct net_dev *d, const struct virtq_chain *c, uint32_t off, uint32_t len)
{
	if (virtq_copy_to_chain(c, 0, d->frame + off, len) < 0 && log_ratelimit_ok(&d->rl, 1))
		log_warn("virtio-net: an rx copy did not fit its chain");
}

/*
 * Put the waiting frame into rx chains. 0 when it went to the guest (or was dropped: no
 * chain of a driver without mergeable buffers can hold it), -EAGAIN when the guest has too
 * few buffers (the chains popped for it are stepped back into the avail ring, untouched as
 * far as the driver can tell, and the frame keeps waiting), -EPROTO when the device failed.
 */
static int net_rx_deliver(struct net_dev *d, struct virtq *q)
{
	struct virtio_net_hdr_v1 *hdr = (struct virtio_net_hdr_v1 *)d->frame;
	uint32_t off = 0, len = d->frame_len;
	unsigned n = 0;
	uint16_t nbuf;
	int err;

	/* The tap leaves num_buffers as it was: without mergeable buffers it is 1. */
	hdr->num_buffers = htole16(1);
	while (off < len) {
		struct virtq_chain *c = n ? &d->chain : &d->chain0;
		uint32_t take;

		/* virtq_pop refuses more chains outstanding than the queue holds; heads[] and
		 * lens[] are as large as the largest queue, and this keeps them so whatever
		 * virtq_pop does. */
		if (n == q->size || n == NET_QUEUE_MAX) {
			q->last_avail_idx -= (uint16_t)n;
			d->rx_dropped++;
			return 0;
		}
		if ((err = net_rx_pop(d, q, c)) == -EAGAIN) {
			q->last_avail_idx -= (uint16_t)n;
			if (n == q->size) {
				/* Every buffer the queue holds is too little: never deliverable. */
				d->rx_dropped++;
				if (log_ratelimit_ok(&d->rl, 3))
					log_warn("virtio-net: an rx frame of %u bytes is larger "
						 "than "
						 "all the rx buffers together: dropped",
						 len - (uint32_t)NET_HDR_LEN);
				return 0;
			}
			d->rx_wait = true;
			return -EAGAIN;
		}
		if (err < 0)
			return err;
		take = c->write_len < len - off ? (uint32_t)c->write_len : len - off;
		if (!d->mrg && take < len) {
			/* Not ours to split: the chain goes back, the frame is lost. */
			q->last_avail_idx--;
			d->rx_dropped++;
			if (log_ratelimit_ok(&d->rl, 3))
				log_warn("virtio-net: an rx frame of %u bytes does not fit a "
					 "%llu-byte "
					 "buffer: dropped",
					 len - (uint32_t)NET_HDR_LEN,
					 (unsigned long long)c->write_len);
			return 0;
		}
		net_rx_copy(d, c, off, take);
		d->heads[n] = c->head;
		d->lens[n] = take;
		n++;
		off += take;
	}
	if (n > 1) {
		/* Only now is the number of buffers known: it goes into the first chain's header
		 * (the chain is at least a header long). */
		nbuf = htole16((uint16_t)n);
		if (virtq_copy_to_chain(&d->chain0, offsetof(struct virtio_net_hdr_v1, num_buffers),
					&nbuf, sizeof(nbuf)) < 0) {
			net_fail(d, "an rx chain shorter than its header");
			return -EPROTO;
		}
	}
	if (virtq_push_many(q, d->heads, d->lens, n) < 0) {
		net_fail(d, q->error ? q->error : "cannot return rx buffers");
		return -EPROTO;
	}
	d->rx_frames++;
	return 0;
}

/* Read the next frame from the tap into d->frame. 1 when one is there, 0 when the tap has
 * none (or the frame was dropped: the caller tries again within its budget), -1 to stop. */
static int net_rx_read(struct net_dev *d)
{
	ssize_t n;

	do
		n = read(d->tap_fd, d->frame, sizeof(d->frame));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno != EAGAIN && log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-net: reading the tap: %m");
		return -1;
	}
	if (n == 0) {
		/* Only a socket backend ends; a tap has no end of file. */
		log_warn("virtio-net: the backend hung up: the link is dead");
		d->dead = true;
		return -1;
	}
	if ((size_t)n < NET_HDR_LEN || (size_t)n > NET_HDR_LEN + NET_FRAME_MAX) {
		d->rx_dropped++;
		if (log_ratelimit_ok(&d->rl, 3))
			log_warn("virtio-net: an rx frame of %zd bytes with its header (%zu to "
				 "%zu): "
				 "dropped",
				 n, NET_HDR_LEN, NET_HDR_LEN + NET_FRAME_MAX);
		return 0;
	}
	d->frame_len = (uint32_t)n;
	return 1;
}

void net_serve_rx(struct net_dev *d)
{
	struct virtq *q = &d->vdev->queues[NET_RX_Q];
	uint16_t old_used = q->used_idx;

	for (unsigned done = 0; done < NET_RX_BUDGET && !d->rx_wait && !d->dead; done++) {
		int err;

		if (!d->frame_len) {
			/* No buffer, no read: the frame would only wait here instead of in the
			 * tap, and we would poll a tap we cannot drain. */
			if (!virtq_has_work(q)) {
				virtq_set_avail_event(q, q->last_avail_idx);
				if (!virtq_has_work(q)) {
					d->rx_wait = true;
					break;
				}
			}
			err = net_rx_read(d);
			if (err < 0)
				break;
			if (err == 0)
				continue;
		}
		err = net_rx_deliver(d, q);
		if (err == -EPROTO)
			return;
		if (err == -EAGAIN)
			break;
		d->frame_len = 0;
	}
	d->irq |= virtq_should_notify(q, old_used);
}
