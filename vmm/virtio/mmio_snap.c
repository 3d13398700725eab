/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot and restore of a virtio-mmio device: the transport's register file and each
 * queue's ring addresses and indexes. Devices keep no state a snapshot needs beyond that:
 * virtio-blk is drained before the save (virtio_ops.quiesce) and finds its disk again from
 * the command line, virtio-vsock resets its transport after a restore. A device's config
 * space is saved too, and must read the same on restore: a disk of another size, or another
 * kind of device in the window, is refused rather than shown to a driver that knows better.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "virtio/virtio.h"

/* The transport's registers, little-endian. */
struct snap_virtio_regs {
	uint32_t device_id;
	uint32_t status;
	uint32_t device_features_sel;
	uint32_t driver_features_sel;
	uint64_t driver_features;
	uint32_t queue_sel;
	uint32_t interrupt_status;
	uint32_t config_generation;
	uint32_t nqueues;
};
_Static_assert(sizeof(struct snap_virtio_regs) == 40, "no padding");

/* One queue: what the driver wrote (pending) and what was committed (ring). */
struct snap_virtio_queue {
	uint32_t ready;
	uint32_t size;
	uint64_t desc, avail, used;
	uint16_t last_avail_idx;
	uint16_t used_idx;
	uint32_t event_idx;
	uint32_t pending_num;
	uint32_t reserved;
	uint64_t pending_desc, pending_avail, pending_used;
};
_Static_assert(sizeof(struct snap_virtio_queue) == 72, "no padding");

#define VIRTIO_STATUS_KNOWN                                                                        \
	(VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_DRIVER_OK |        \
	 VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_NEEDS_RESET | VIRTIO_CONFIG_S_FAILED)

int virtio_mmio_quiesce(struct virtio_dev *v)
{
	return v->ops->quiesce(v->dev);
}

void virtio_mmio_save(struct virtio_dev *v, unsigned index, struct snap_writer *w)
{
	struct snap_virtio_regs regs;
	uint8_t config[0x1000];

	pthread_mutex_lock(&v->lock);
	regs = (struct snap_virtio_regs){
		.device_id = htole32(v->ops->device_id),
		.status = htole32(v->status),
		.device_features_sel = htole32(v->device_features_sel),
		.driver_features_sel = htole32(v->driver_features_sel),
		.driver_features = htole64(v->driver_features),
		.queue_sel = htole32(v->queue_sel),
		.interrupt_status = htole32(v->interrupt_status),
		.config_generation = htole32(v->config_generation),
		.nqueues = htole32(v->ops->nqueues),
	};
	v->ops->config_read(v->dev, 0, config, v->ops->config_len);
	snapw_begin_index(w, "virtio", index);
	snapw_prop(w, "regs", &regs, sizeof(regs));
	snapw_prop(w, "config", config, v->ops->config_len);
	for (unsigned i = 0; i < v->ops->nqueues; i++) {
		const struct virtq *q = &v->queues[i];
		const struct virtio_pending_queue *p = &v->pending[i];
		struct snap_virtio_queue sq = {
			.ready = htole32(q->ready),
			.size = htole32(q->size),
			.desc = htole64(q->desc_gpa),
			.avail = htole64(q->avail_gpa),
			.used = htole64(q->used_gpa),
			.last_avail_idx = htole16(q->last_avail_idx),
			.used_idx = htole16(q->used_idx),
			.event_idx = htole32(q->event_idx),
			.pending_num = htole32(p->num),
			.pending_desc = htole64(p->desc),
			.pending_avail = htole64(p->avail),
			.pending_used = htole64(p->used),
		};

		snapw_begin_index(w, "queue", i);
		snapw_prop(w, "ring", &sq, sizeof(sq));
		snapw_end(w);
	}
	snapw_end(w);
	pthread_mutex_unlock(&v->lock);
}

static int virtio_load_queue(struct virtio_dev *v, struct snap_reader *r, int node, unsigned i)
{
	struct snap_virtio_queue sq;
	struct virtq *q = &v->queues[i];
	int qn = snapr_node_index(r, node, "queue", i), err;
	uint32_t size;

	if (qn < 0)
		return qn;
	if ((err = snapr_get(r, qn, "ring", &sq, sizeof(sq))) < 0)
		return err;
	v->pending[i] = (struct virtio_pending_queue){.num = le32toh(sq.pending_num),
						      .desc = le64toh(sq.pending_desc),
						      .avail = le64toh(sq.pending_avail),
						      .used = le64toh(sq.pending_used)};
	virtq_reset(q);
	if (!le32toh(sq.ready))
		return 0;
	size = le32toh(sq.size);
	if (size == 0 || size > v->ops->queue_max)
		return snapr_fail(r, -EBADMSG, "virtio-%s queue %u: size %u, at most %u",
				  v->ops->name, i, size, v->ops->queue_max);
	/* The same checks as the driver's QueueReady: the rings must lie in this RAM. */
	if (virtq_configure(q, size, le64toh(sq.desc), le64toh(sq.avail), le64toh(sq.used)) < 0)
		return snapr_fail(r, -EBADMSG, "virtio-%s queue %u: %s", v->ops->name, i,
				  q->error ? q->error : "bad rings");
	q->last_avail_idx = le16toh(sq.last_avail_idx);
	q->used_idx = le16toh(sq.used_idx);
	virtq_set_event_idx(q, le32toh(sq.event_idx) != 0);
	return 0;
}

int virtio_mmio_load(struct virtio_dev *v, unsigned index, struct snap_reader *r, int parent)
{
	int node = snapr_node_index(r, parent, "virtio", index), err = 0;
	struct snap_virtio_regs regs;
	uint8_t now[0x1000];
	const void *config;
	size_t config_len;
	uint64_t offered;
	uint32_t status;

	if (node < 0)
		return node;
	if ((err = snapr_get(r, node, "regs", &regs, sizeof(regs))) < 0)
		return err;
	if (le32toh(regs.device_id) != v->ops->device_id ||
	    le32toh(regs.nqueues) != v->ops->nqueues)
		return snapr_fail(r, -EBADMSG,
				  "virtio device %u was of type %u with %u queues, this one is "
				  "virtio-%s: give the same devices in the same order",
				  index, le32toh(regs.device_id), le32toh(regs.nqueues),
				  v->ops->name);
	config = snapr_var(r, node, "config", &config_len);
	if (!config)
		return -ENOENT;
	v->ops->config_read(v->dev, 0, now, v->ops->config_len);
	if (config_len != v->ops->config_len || memcmp(config, now, config_len) != 0)
		return snapr_fail(r, -EBADMSG,
				  "virtio device %u (%s): its configuration differs from the "
				  "snapshot's (a disk of another size or kind?)",
				  index, v->ops->name);
	status = le32toh(regs.status);
	offered = v->ops->features(v->dev) | (1ull << VIRTIO_F_VERSION_1) |
		  (1ull << VIRTIO_RING_F_EVENT_IDX) | (1ull << VIRTIO_RING_F_INDIRECT_DESC);
	if ((status & ~(uint32_t)VIRTIO_STATUS_KNOWN) || (le64toh(regs.driver_features) & ~offered))
		return snapr_fail(r, -EBADMSG, "virtio-%s: status %#x or features %#llx unknown",
				  v->ops->name, status,
				  (unsigned long long)le64toh(regs.driver_features));
	pthread_mutex_lock(&v->lock);
	v->status = status;
	v->device_features_sel = le32toh(regs.device_features_sel);
	v->driver_features_sel = le32toh(regs.driver_features_sel);
	v->driver_features = le64toh(regs.driver_features);
	v->queue_sel = le32toh(regs.queue_sel);
	v->interrupt_status = le32toh(regs.interrupt_status) & 3u;
	v->config_generation = le32toh(regs.config_generation);
	for (unsigned i = 0; i < v->ops->nqueues && !err; i++)
		err = virtio_load_queue(v, r, node, i);
	if (!err && (status & VIRTIO_CONFIG_S_DRIVER_OK) &&
	    !(status & VIRTIO_CONFIG_S_NEEDS_RESET) &&
	    v->ops->activate(v->dev, v, v->driver_features) != 0)
		err = snapr_fail(r, -EIO, "virtio-%s: the device could not start", v->ops->name);
	pthread_mutex_unlock(&v->lock);
	return err;
}

void virtio_mmio_kick_all(struct virtio_dev *v)
{
	bool live;

	pthread_mutex_lock(&v->lock);
	live = (v->status & VIRTIO_CONFIG_S_DRIVER_OK) &&
	       !(v->status & VIRTIO_CONFIG_S_NEEDS_RESET);
	pthread_mutex_unlock(&v->lock);
	if (!live)
		return;
	for (unsigned i = 0; i < v->ops->nqueues; i++)
		v->ops->queue_notify(v->dev, i);
}
