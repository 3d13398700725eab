/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-blk (virtio 1.2, section 5.2): one request queue in front of a layered disk
 * (disk.h). A request is a chain: a 16-byte header (type, ioprio, sector) the device reads,
 * the data, and a status byte the device writes last. The guest is hostile: a chain without
 * a readable header or a writable status byte is a protocol error (DEVICE_NEEDS_RESET); a bad
 * sector, length or type is the guest's own I/O error (VIRTIO_BLK_S_IOERR / _UNSUPP).
 *
 * I/O is synchronous for now: requests are served from queue_notify, on the I/O thread when
 * the kick came through the ioeventfd (or on the kicking vCPU without one), under the
 * device's mutex, which also keeps the struct disk to one thread at a time as disk.h asks.
 * TODO(io_uring): DESIGN.md wants reads, writes and flushes submitted to io_uring (liburing,
 * `uring_dep`) from the I/O thread, with the ring's completion eventfd on main_loop's epoll:
 * map each request with disk_map into extents (fd -1 = zeros), submit one readv/writev per
 * extent with the request's segments, push the chain when its last CQE arrives, and serve a
 * FLUSH only after every earlier write completed (IOSQE_IO_DRAIN, then disk_flush, since the
 * overlay's bitmap must follow its data). Writes need disk.c to split copy-up from the data
 * write before they can leave the lock; until then this file stays synchronous.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_blk.h>
#include <linux/virtio_ids.h>

#include "disk.h"
#include "virtio/virtio.h"

#define BLK_SECTOR_LEN	       512u
#define BLK_QUEUE_MAX	       256u
/* Leave room in a chain for the header and the status segments. */
#define BLK_SEG_MAX	       (VIRTQ_CHAIN_MAX - 2u)
#define BLK_HDR_LEN	       sizeof(struct virtio_blk_outhdr)
/* One discard / write-zeroes range per request, of at most this many sectors (1 GiB). */
#define BLK_ZEROES_SECTORS_MAX (1u << 21)

_Static_assert(sizeof(struct virtio_blk_outhdr) == 16, "the request header is 16 bytes");
_Static_assert(sizeof(struct virtio_blk_discard_write_zeroes) == 16, "a range is 16 bytes");

struct blk_dev {
	pthread_mutex_t lock; /* everything below; taken by queue_notify, reset and destroy */
	struct disk *disk;
	bool read_only;
	bool active;		 /* DRIVER_OK and not reset since */
	struct virtio_dev *vdev; /* set by activate */
	uint64_t capacity;	 /* in 512-byte sectors */
	char serial[VIRTIO_BLK_ID_BYTES];
	struct virtio_blk_config config; /* little-endian, as the guest reads it */
	struct log_ratelimit rl;
	struct virtq_chain chain; /* the request being served; too large for the stack */
};

static uint64_t blk_features(void *opaque)
{
	struct blk_dev *b = opaque;
	uint64_t f = (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_BLK_SIZE) |
		     (1ull << VIRTIO_BLK_F_FLUSH);

	if (b->read_only)
		f |= 1ull << VIRTIO_BLK_F_RO;
	else
		f |= (1ull << VIRTIO_BLK_F_DISCARD) | (1ull << VIRTIO_BLK_F_WRITE_ZEROES);
	return f;
}

static void blk_config_read(void *opaque, uint32_t offset, uint8_t *data, uint32_t len)
{
	struct blk_dev *b = opaque;

	/* The transport checked offset + len <= config_len = sizeof(config). */
	memcpy(data, (const uint8_t *)&b->config + offset, len);
}

static void blk_config_write(void *opaque, uint32_t offset, const uint8_t *data, uint32_t len)
{
	/* Nothing is writable: `wce` needs VIRTIO_BLK_F_CONFIG_WCE, which is not offered. */
}

static int blk_activate(void *opaque, struct virtio_dev *vdev, uint64_t features)
{
	struct blk_dev *b = opaque;

	pthread_mutex_lock(&b->lock);
	b->vdev = vdev;
	b->active = true;
	pthread_mutex_unlock(&b->lock);
	return 0;
}

static void blk_reset(void *opaque)
{
	struct blk_dev *b = opaque;

	/* Waits for a request being served: the transport resets the queue right after. */
	pthread_mutex_lock(&b->lock);
	b->active = false;
	pthread_mutex_unlock(&b->lock);
}

static void blk_destroy(void *opaque)
{
	struct blk_dev *b = opaque;
	int err;

	if ((err = disk_flush(b->disk)) < 0)
		log_warn("virtio-blk: flushing the disk at exit: %s", strerror(-err));
	disk_close(b->disk);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

/* Move `len` bytes between the disk at `disk_off` and the chain's data: its readable
 * segments (a write, `to_disk`) or its writable ones (a read), starting `skip` bytes into
 * them. The caller checked that the segments hold skip + len bytes. */
static int blk_transfer(struct blk_dev *b, const struct virtq_chain *c, bool to_disk, uint64_t skip,
			uint64_t len, uint64_t disk_off)
{
	unsigned first = to_disk ? 0 : c->nread, end = to_disk ? c->nread : c->nsegs;
	int err;

	for (unsigned i = first; i < end && len; i++) {
		const struct virtq_seg *s = &c->segs[i];
		uint64_t n;

		if (skip >= s->len) {
			skip -= s->len;
			continue;
		}
		n = s->len - skip;
		if (n > len)
			n = len;
		if (to_disk)
			err = disk_write(b->disk, disk_off, (uint8_t *)s->hva + skip, n);
		else
			err = disk_read(b->disk, disk_off, (uint8_t *)s->hva + skip, n);
		if (err < 0)
			return err;
		disk_off += n;
		len -= n;
		skip = 0;
	}
	return len ? -EIO : 0;
}

/* Is [sector, sector + len bytes) a whole number of sectors inside the disk? */
static bool blk_range_ok(const struct blk_dev *b, uint64_t sector, uint64_t len)
{
	return len % BLK_SECTOR_LEN == 0 && sector <= b->capacity &&
	       len / BLK_SECTOR_LEN <= b->capacity - sector;
}

/* DISCARD and WRITE_ZEROES: one 16-byte range after the header. */
static uint8_t blk_zeroes(struct blk_dev *b, const struct virtq_chain *c, uint32_t type)
{
	struct virtio_blk_discard_write_zeroes r;
	uint64_t sector;
	uint32_t num, flags;
	int err;

	if (b->read_only)
		return VIRTIO_BLK_S_IOERR;
	if (c->read_len != BLK_HDR_LEN + sizeof(r) ||
	    virtq_copy_from_chain(c, BLK_HDR_LEN, &r, sizeof(r)) < 0)
		return VIRTIO_BLK_S_UNSUPP; /* none or more than max_*_seg = 1 ranges */
	sector = le64toh(r.sector);
	num = le32toh(r.num_sectors);
	flags = le32toh(r.flags);
	if (flags & ~(uint32_t)VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP ||
	    (type == VIRTIO_BLK_T_DISCARD && flags))
		return VIRTIO_BLK_S_UNSUPP;
	if (num > BLK_ZEROES_SECTORS_MAX || !blk_range_ok(b, sector, (uint64_t)num * 512))
		return VIRTIO_BLK_S_IOERR;
	/* A discarded range reads as zeros too: the simplest correct answer, and it frees
	 * whole clusters where the filesystem can punch holes. */
	err = disk_write_zeroes(b->disk, sector * BLK_SECTOR_LEN, (uint64_t)num * BLK_SECTOR_LEN);
	return err < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
}

/* Serve one checked chain: returns its status, and in *written the bytes of data written
 * into the chain (the status byte not counted). */
static uint8_t blk_handle_request(struct blk_dev *b, const struct virtq_chain *c,
				  const struct virtio_blk_outhdr *hdr, uint32_t *written)
{
	uint32_t type = le32toh(hdr->type);
	uint64_t sector = le64toh(hdr->sector), len;
	int err = 0;

	*written = 0;
	switch (type) {
	case VIRTIO_BLK_T_IN:
		len = c->write_len - 1; /* everything writable but the status byte */
		/* The used ring counts bytes in 32 bits: a larger read cannot be reported. */
		if (len >= UINT32_MAX || !blk_range_ok(b, sector, len))
			return VIRTIO_BLK_S_IOERR;
		err = blk_transfer(b, c, false, 0, len, sector * BLK_SECTOR_LEN);
		if (err == 0)
			*written = (uint32_t)len;
		break;
	case VIRTIO_BLK_T_OUT:
		len = c->read_len - BLK_HDR_LEN;
		if (b->read_only || !blk_range_ok(b, sector, len))
			return VIRTIO_BLK_S_IOERR;
		err = blk_transfer(b, c, true, BLK_HDR_LEN, len, sector * BLK_SECTOR_LEN);
		break;
	case VIRTIO_BLK_T_FLUSH:
		/* Durable before the status says so: the top layer's data, then its bitmap. */
		err = disk_flush(b->disk);
		break;
	case VIRTIO_BLK_T_GET_ID:
		len = c->write_len - 1;
		if (len > VIRTIO_BLK_ID_BYTES)
			len = VIRTIO_BLK_ID_BYTES;
		if (virtq_copy_to_chain(c, 0, b->serial, len) < 0)
			return VIRTIO_BLK_S_IOERR;
		*written = (uint32_t)len;
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return blk_zeroes(b, c, type);
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
	if (err < 0) {
		if (log_ratelimit_ok(&b->rl, 3))
			log_warn("virtio-blk: request type %u at sector %llu: %s", type,
				 (unsigned long long)sector, strerror(-err));
		*written = 0;
		return VIRTIO_BLK_S_IOERR;
	}
	return VIRTIO_BLK_S_OK;
}

/* Serve every available chain. Returns NULL, or why the guest broke the protocol. Sets
 * *notify when the driver wants an interrupt. Caller holds b->lock. */
static const char *blk_serve_queue(struct blk_dev *b, struct virtq *q, bool *notify)
{
	struct virtq_chain *c = &b->chain;
	uint16_t old_used = q->used_idx;
	const char *why = NULL;

	for (;;) {
		int err;

		while ((err = virtq_pop(q, c)) == 0) {
			struct virtio_blk_outhdr hdr;
			uint32_t written = 0;
			uint8_t status;

			if (virtq_check_chain(c, BLK_HDR_LEN, 1) < 0 ||
			    virtq_copy_from_chain(c, 0, &hdr, sizeof(hdr)) < 0) {
				why = "a request without a 16-byte header or a status byte";
				goto out;
			}
			status = blk_handle_request(b, c, &hdr, &written);
			/* The status byte is the last writable byte of the chain. */
			if (virtq_copy_to_chain(c, c->write_len - 1, &status, 1) < 0 ||
			    virtq_push(q, c->head, written + 1) < 0) {
				why = q->error ? q->error : "cannot return a request";
				goto out;
			}
		}
		if (err != -EAGAIN) {
			why = q->error ? q->error : "bad chain";
			goto out;
		}
		/* With EVENT_IDX, ask for the next kick, then look again: the driver may have
		 * added a chain before it saw our avail_event (the fence is in the helper). */
		if (!q->event_idx)
			break;
		virtq_set_avail_event(q, q->last_avail_idx);
		if (!virtq_has_work(q))
			break;
	}
out:
	*notify = virtq_should_notify(q, old_used);
	return why;
}

static void blk_queue_notify(void *opaque, unsigned qi)
{
	struct blk_dev *b = opaque;
	struct virtio_dev *vdev;
	const char *why = NULL;
	bool notify = false;

	pthread_mutex_lock(&b->lock);
	vdev = b->vdev;
	if (b->active && qi == 0)
		why = blk_serve_queue(b, &vdev->queues[0], &notify);
	pthread_mutex_unlock(&b->lock);
	/* The transport's lock is taken outside ours: a reset holds it while it takes ours. */
	if (notify)
		virtio_notify_used(vdev);
	if (why)
		virtio_set_needs_reset(vdev, why);
}

static const struct virtio_ops blk_ops = {
	.name = "blk",
	.device_id = VIRTIO_ID_BLOCK,
	.nqueues = 1,
	.queue_max = BLK_QUEUE_MAX,
	.config_len = sizeof(struct virtio_blk_config),
	.features = blk_features,
	.config_read = blk_config_read,
	.config_write = blk_config_write,
	.activate = blk_activate,
	.queue_notify = blk_queue_notify,
	.reset = blk_reset,
	.destroy = blk_destroy,
};

int blk_add(struct vm *vm, struct disk *disk, bool read_only, const char *serial, char *cmdline,
	    size_t cmdline_len, struct virtio_dev **out)
{
	struct virtio_blk_config *cfg;
	struct blk_dev *b;
	int err;

	b = calloc(1, sizeof(*b));
	if (!b) {
		disk_close(disk);
		return -ENOMEM;
	}
	pthread_mutex_init(&b->lock, NULL);
	b->disk = disk;
	b->read_only = read_only || disk_read_only(disk);
	/* A partial last sector is not addressable: virtio counts whole 512-byte sectors. */
	b->capacity = disk_size(disk) / BLK_SECTOR_LEN;
	/* Zero-padded, and not NUL-terminated when it is 20 bytes long, as the spec allows. */
	memcpy(b->serial, serial, strnlen(serial, sizeof(b->serial)));
	cfg = &b->config;
	cfg->capacity = htole64(b->capacity);
	cfg->seg_max = htole32(BLK_SEG_MAX);
	cfg->blk_size = htole32(BLK_SECTOR_LEN);
	cfg->num_queues = htole16(1);
	cfg->max_discard_sectors = htole32(BLK_ZEROES_SECTORS_MAX);
	cfg->max_discard_seg = htole32(1);
	cfg->discard_sector_alignment = htole32(disk_cluster_len(disk) / BLK_SECTOR_LEN);
	cfg->max_write_zeroes_sectors = htole32(BLK_ZEROES_SECTORS_MAX);
	cfg->max_write_zeroes_seg = htole32(1);
	cfg->write_zeroes_may_unmap = 1;
	err = virtio_mmio_add(vm, &blk_ops, b, cmdline, cmdline_len, out);
	if (err < 0)
		blk_destroy(b);
	return err;
}
