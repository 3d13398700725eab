/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio-blk (virtio 1.2, section 5.2): one request queue in front of a layered disk
 * (disk.h), with reads and writes on io_uring. A request is a chain: a 16-byte header (type,
 * ioprio, sector) the device reads, the data, and a status byte the device writes last. The
 * guest is hostile: a chain without a readable header or a writable status byte is a protocol
 * error (DEVICE_NEEDS_RESET); a bad sector, length or type is the guest's own I/O error
 * (VIRTIO_BLK_S_IOERR / _UNSUPP).
 *
 * Up to `depth` requests are in flight. A read is mapped with disk_map into extents, one per
 * run of clusters in one layer file: zeros are filled at once, every other extent is one
 * IORING_OP_READV straight into guest RAM. A write is prepared by disk_write_begin (copy-up of
 * partly written clusters, synchronous and only on a cluster's first write) and is then one
 * IORING_OP_WRITEV into the top layer. Completions arrive on the ring's eventfd, on the I/O
 * thread's event loop, and return each request when its last operation is done. A FLUSH is a
 * barrier: nothing more is taken from the queue until every earlier request has completed,
 * then disk_flush runs (fdatasync of the top's data, its bitmap, fdatasync) and only then does
 * the guest hear the flush completed. Without io_uring (a kernel or a seccomp filter that
 * refuses it) the same operations run synchronously with preadv/pwritev.
 *
 * One pass takes at most BLK_BUDGET units of work from the queue, a request costing one
 * unit plus one per BLK_BUDGET_UNIT_LEN bytes its chain spans and one per 16 of its
 * segments (each was walked and translated): a guest that keeps the queue
 * full of requests that complete at once (GET_ID, an unsupported type, a read of a hole or
 * of the page cache) would otherwise keep the I/O thread in the loop for ever, away from the
 * API socket, the other devices, the timeout and signals. When work is left the device kicks
 * its own eventfd (kick_fd) and the event loop comes back to it after serving everything
 * else that is ready. A read or write longer than BLK_INLINE_MAX goes to io_uring's workers
 * (IOSQE_ASYNC): one 64 MiB read of cached data, copied inside io_uring_submit, held the I/O
 * thread for tens of milliseconds.
 *
 * Threads: requests start from queue_notify (the I/O thread, or the kicking vCPU without
 * ioeventfd) and complete on the I/O thread; b->lock keeps the ring, the slots and the struct
 * disk to one thread at a time.
 */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <liburing.h>
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
/* A read's extents beyond this many, or iovecs beyond BLK_REQ_IOV_MAX, are served
 * synchronously: a read that fragmented is rare, and must still work. */
#define BLK_REQ_OPS_MAX	       32u
#define BLK_REQ_IOV_MAX	       (2u * VIRTQ_CHAIN_MAX)
/* Work taken from the queue per pass of the event loop: 64 small requests (as virtio-net's 64
 * frames), or about 4 MiB of data, or about 1024 segments. */
#define BLK_BUDGET	       64u
#define BLK_BUDGET_UNIT_LEN    (64u * 1024)
/* Operations longer than this are copied by io_uring's worker threads, not inline in
 * io_uring_submit on the I/O thread. Above Linux's default largest request (1.25 MiB), so a
 * guest's usual reads still complete inside the submit. */
#define BLK_INLINE_MAX	       (2u * 1024 * 1024)
/* io_uring worker threads of each kind (file I/O, and unbounded work): what a guest's long or
 * uncached requests may keep busy on the host besides the I/O thread. The workers belong to
 * the submitting thread, the I/O thread, so the cap is the VMM's, whatever the disks. */
#define BLK_IOWQ_WORKERS       2u

_Static_assert(sizeof(struct virtio_blk_outhdr) == 16, "the request header is 16 bytes");
_Static_assert(sizeof(struct virtio_blk_discard_write_zeroes) == 16, "a range is 16 bytes");
_Static_assert(BLK_DEPTH_MAX <= BLK_QUEUE_MAX, "no more requests in flight than a queue holds");

struct blk_req;

/* One readv or writev of a request: a file range and the guest buffers it fills or drains. */
struct blk_op {
	struct blk_req *req;
	int fd;
	bool write;
	uint64_t file_offset;
	uint64_t len;
	struct iovec *iov; /* into req->iov; advanced by a partial completion */
	unsigned niov;
};

/* A request slot: from virtq_pop until its status is written and the chain pushed. */
struct blk_req {
	bool busy;
	bool holds_write; /* disk_write_begin succeeded: disk_write_end is owed */
	uint64_t gen;	  /* the device's generation when it started: a reset orphans it */
	unsigned refs;	  /* operations in flight, + 1 while the request is being started */
	int err;	  /* the first failed operation's -errno */
	uint32_t written; /* bytes of data written into the chain (reads) */
	uint8_t status;	  /* for requests that complete without operations */
	unsigned nops, niov;
	struct blk_op ops[BLK_REQ_OPS_MAX];
	struct iovec iov[BLK_REQ_IOV_MAX];
	struct virtq_chain chain;
};

struct blk_dev {
	pthread_mutex_t lock; /* everything below; taken by queue_notify, completions, reset */
	struct vm *vm;
	struct disk *disk;
	bool read_only;
	bool active;		 /* DRIVER_OK and not reset since */
	struct virtio_dev *vdev; /* set by activate */
	uint64_t capacity;	 /* in 512-byte sectors */
	char serial[VIRTIO_BLK_ID_BYTES];
	struct virtio_blk_config config; /* little-endian, as the guest reads it */
	struct log_ratelimit rl;
	uint64_t gen;		   /* + 1 at every reset */
	unsigned depth;		   /* slots */
	unsigned inflight;	   /* busy slots */
	struct blk_req *flush_req; /* a FLUSH waiting for the requests before it */
	struct blk_req *reqs;
	bool ring_ok; /* io_uring is set up; otherwise operations are synchronous */
	unsigned sq_pending;
	struct io_uring ring;
	int ring_fd; /* eventfd registered with the ring: completions to reap */
	struct ev_source ring_src;
	int kick_fd; /* eventfd: a pass ran out of budget with requests left */
	struct ev_source kick_src;
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

/* ---- Operations ---- */

/* Point iov[0, *n) at `len` bytes of the chain's segments [first, end), starting `skip`
 * bytes into them. False when more than `max` iovecs would be needed. */
static bool blk_build_iov(const struct virtq_chain *c, unsigned first, unsigned end, uint64_t skip,
			  uint64_t len, struct iovec *iov, unsigned max, unsigned *n)
{
	unsigned k = 0;

	for (unsigned i = first; i < end && len; i++) {
		const struct virtq_seg *s = &c->segs[i];
		uint64_t take;

		if (skip >= s->len) {
			skip -= s->len;
			continue;
		}
		take = s->len - skip;
		if (take > len)
			take = len;
		if (k == max)
			return false;
		iov[k++] = (struct iovec){(uint8_t *)s->hva + skip, take};
		len -= take;
		skip = 0;
	}
	*n = k;
	return len == 0;
}

/* Drop the first `done` bytes of op's iovecs. */
static void blk_op_advance(struct blk_op *op, uint64_t done)
{
	op->file_offset += done;
	op->len -= done;
	while (done && op->niov) {
		if (done < op->iov->iov_len) {
			op->iov->iov_base = (uint8_t *)op->iov->iov_base + done;
			op->iov->iov_len -= done;
			return;
		}
		done -= op->iov->iov_len;
		op->iov++;
		op->niov--;
	}
}

/* Finish `op` with preadv/pwritev: the whole of it without io_uring, or what a short
 * completion left. A layer file ends where its last written cluster does, and what lies
 * beyond its end reads as zeros, as a hole would. */
static int blk_op_sync(struct blk_op *op)
{
	while (op->len) {
		ssize_t n;

		if (op->write)
			n = pwritev(op->fd, op->iov, (int)op->niov, (off_t)op->file_offset);
		else
			n = preadv(op->fd, op->iov, (int)op->niov, (off_t)op->file_offset);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			if (op->write)
				return -EIO;
			for (unsigned i = 0; i < op->niov; i++)
				memset(op->iov[i].iov_base, 0, op->iov[i].iov_len);
			return 0;
		}
		blk_op_advance(op, (uint64_t)n);
	}
	return 0;
}

static void blk_req_put(struct blk_dev *b, struct blk_req *r);

/* An operation ended with `res` (bytes, or -errno) from io_uring. */
static void blk_op_done(struct blk_dev *b, struct blk_op *op, int res)
{
	struct blk_req *r = op->req;

	if (res == -EAGAIN || res == -EINTR)
		res = 0; /* nothing done: finish synchronously */
	if (res >= 0) {
		blk_op_advance(op, (uint64_t)res);
		res = blk_op_sync(op);
	}
	if (res < 0 && !r->err)
		r->err = res;
	blk_req_put(b, r);
}

/* Queue `op` on the ring, or run it now when there is no ring or no room in it. */
static void blk_op_start(struct blk_dev *b, struct blk_op *op)
{
	struct io_uring_sqe *sqe = NULL;

	op->req->refs++;
	if (b->ring_ok) {
		sqe = io_uring_get_sqe(&b->ring);
		if (!sqe && io_uring_submit(&b->ring) >= 0) {
			b->sq_pending = 0;
			sqe = io_uring_get_sqe(&b->ring);
		}
	}
	if (!sqe) {
		int res = blk_op_sync(op);

		if (res < 0 && !op->req->err)
			op->req->err = res;
		blk_req_put(b, op->req);
		return;
	}
	/* The iovecs live in the request until the completion: the kernel may read them late. */
	if (op->write)
		io_uring_prep_writev(sqe, op->fd, op->iov, op->niov, op->file_offset);
	else
		io_uring_prep_readv(sqe, op->fd, op->iov, op->niov, op->file_offset);
	if (op->len > BLK_INLINE_MAX)
		io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	io_uring_sqe_set_data(sqe, op);
	b->sq_pending++;
}

/* Call fn(arg, p, n, at) for each piece [p, p + n) of `len` bytes of the chain's segments
 * [first, end), from `skip` bytes in; `at` counts from the start of the range. Stops at the
 * first error. */
static int blk_chain_each(const struct virtq_chain *c, unsigned first, unsigned end, uint64_t skip,
			  uint64_t len, int (*fn)(void *arg, uint8_t *p, uint64_t n, uint64_t at),
			  void *arg)
{
	uint64_t at = 0;

	for (unsigned i = first; i < end && at < len; i++) {
		const struct virtq_seg *s = &c->segs[i];
		uint64_t take;
		int err;

		if (skip >= s->len) {
			skip -= s->len;
			continue;
		}
		take = s->len - skip;
		if (take > len - at)
			take = len - at;
		if ((err = fn(arg, (uint8_t *)s->hva + skip, take, at)) < 0)
			return err;
		at += take;
		skip = 0;
	}
	return at == len ? 0 : -EIO;
}

static int blk_zero_piece(void *arg, uint8_t *p, uint64_t n, uint64_t at)
{
	memset(p, 0, n);
	return 0;
}

/* A synchronous operation one segment at a time (arg: the whole operation). */
static int blk_sync_piece(void *arg, uint8_t *p, uint64_t n, uint64_t at)
{
	const struct blk_op *whole = arg;
	struct iovec iov = {p, n};
	struct blk_op op = {.fd = whole->fd,
			    .write = whole->write,
			    .file_offset = whole->file_offset + at,
			    .len = n,
			    .iov = &iov,
			    .niov = 1};

	return blk_op_sync(&op);
}

/* Start a readv or writev of `len` bytes at `file_offset` of `fd`, between the file and the
 * chain's segments [first, end) from `skip` bytes in. Runs it synchronously, a segment at a
 * time, when the request has no room left for another operation or its iovecs. */
static void blk_req_add_op(struct blk_dev *b, struct blk_req *r, bool write, int fd,
			   uint64_t file_offset, unsigned first, unsigned end, uint64_t skip,
			   uint64_t len)
{
	struct blk_op *op = &r->ops[r->nops < BLK_REQ_OPS_MAX ? r->nops : 0];
	struct blk_op whole = {.fd = fd, .write = write, .file_offset = file_offset, .len = len};
	unsigned n;
	int err;

	if (r->nops < BLK_REQ_OPS_MAX &&
	    blk_build_iov(&r->chain, first, end, skip, len, &r->iov[r->niov],
			  BLK_REQ_IOV_MAX - r->niov, &n)) {
		whole.req = r;
		whole.iov = &r->iov[r->niov];
		whole.niov = n;
		*op = whole;
		r->niov += n;
		r->nops++;
		blk_op_start(b, op);
		return;
	}
	err = blk_chain_each(&r->chain, first, end, skip, len, blk_sync_piece, &whole);
	if (err < 0 && !r->err)
		r->err = err;
}

/* ---- Requests ---- */

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

/* Return `r` to the driver: the status byte, then the used ring. */
static void blk_req_complete(struct blk_dev *b, struct blk_req *r)
{
	struct virtq *q;
	uint8_t status = r->status;

	if (r->holds_write)
		disk_write_end(b->disk, r->err);
	if (r->err) {
		if (log_ratelimit_ok(&b->rl, 3))
			log_warn("virtio-blk: a request failed: %s", strerror(-r->err));
		status = VIRTIO_BLK_S_IOERR;
		r->written = 0;
	}
	r->busy = false;
	b->inflight--;
	/* A reset since the request started: the queue it came from is gone. */
	if (r->gen != b->gen || !b->active)
		return;
	q = &b->vdev->queues[0];
	/* The status byte is the last writable byte of the chain. */
	if (virtq_copy_to_chain(&r->chain, r->chain.write_len - 1, &status, 1) < 0 ||
	    virtq_push(q, r->chain.head, r->written + 1) < 0) {
		/* Only a broken queue refuses; the caller's virtq state says why. */
		if (log_ratelimit_ok(&b->rl, 3))
			log_warn("virtio-blk: cannot return a request: %s",
				 q->error ? q->error : "queue broken");
	}
}

static void blk_req_put(struct blk_dev *b, struct blk_req *r)
{
	if (--r->refs == 0)
		blk_req_complete(b, r);
}

/* READ: zeros at once, one readv per extent of the map. */
static void blk_req_read(struct blk_dev *b, struct blk_req *r, uint64_t sector, uint64_t len)
{
	const struct virtq_chain *c = &r->chain;
	uint64_t disk_off = sector * BLK_SECTOR_LEN, done = 0;

	while (done < len) {
		struct disk_extent ext[8];
		unsigned n;
		int err = disk_map(b->disk, disk_off + done, len - done, ext, 8, &n);

		/* a lazy layer's clusters in first (a lazy restore's: its pager) */
		if (err == 0)
			err = disk_fetch_extents(b->disk, ext, n);
		if (err < 0 || n == 0) {
			r->err = err < 0 ? err : -EIO;
			return;
		}
		for (unsigned i = 0; i < n; i++) {
			if (ext[i].fd < 0)
				err = blk_chain_each(c, c->nread, c->nsegs, done, ext[i].len,
						     blk_zero_piece, NULL);
			else
				blk_req_add_op(b, r, false, ext[i].fd, ext[i].file_offset, c->nread,
					       c->nsegs, done, ext[i].len);
			if (err < 0 && !r->err)
				r->err = err;
			done += ext[i].len;
		}
	}
}

/* WRITE: disk_write_begin, then one writev into the top layer. */
static void blk_req_write(struct blk_dev *b, struct blk_req *r, uint64_t sector, uint64_t len)
{
	uint64_t file_offset;
	int fd, err;

	if (!len)
		return;
	err = disk_write_begin(b->disk, sector * BLK_SECTOR_LEN, len, &fd, &file_offset);
	if (err < 0) {
		r->err = err;
		return;
	}
	r->holds_write = true;
	blk_req_add_op(b, r, true, fd, file_offset, 0, r->chain.nread, BLK_HDR_LEN, len);
}

/* FLUSH, once it is the only request in flight. */
static void blk_req_flush(struct blk_dev *b, struct blk_req *r)
{
	int err = disk_flush(b->disk);

	if (err < 0 && !r->err)
		r->err = err;
}

/* Start the checked chain in slot `r`: it completes now, or when its operations do. */
static void blk_req_start(struct blk_dev *b, struct blk_req *r, const struct virtio_blk_outhdr *hdr)
{
	const struct virtq_chain *c = &r->chain;
	uint32_t type = le32toh(hdr->type);
	uint64_t sector = le64toh(hdr->sector), len;

	r->refs = 1; /* dropped at the end of this function */
	r->status = VIRTIO_BLK_S_OK;
	switch (type) {
	case VIRTIO_BLK_T_IN:
		len = c->write_len - 1; /* everything writable but the status byte */
		/* The used ring counts bytes in 32 bits: a larger read cannot be reported. */
		if (len >= UINT32_MAX || !blk_range_ok(b, sector, len)) {
			r->status = VIRTIO_BLK_S_IOERR;
			break;
		}
		r->written = (uint32_t)len;
		blk_req_read(b, r, sector, len);
		break;
	case VIRTIO_BLK_T_OUT:
		len = c->read_len - BLK_HDR_LEN;
		if (b->read_only || !blk_range_ok(b, sector, len)) {
			r->status = VIRTIO_BLK_S_IOERR;
			break;
		}
		blk_req_write(b, r, sector, len);
		break;
	case VIRTIO_BLK_T_FLUSH:
		/* A barrier: serve_queue takes nothing more until the flush is done, and the
		 * flush waits for every request before it (disk_flush refuses to run while a
		 * write is in flight). */
		if (b->inflight > 1) {
			b->flush_req = r;
			return; /* keeps its reference until blk_flush_ready */
		}
		blk_req_flush(b, r);
		break;
	case VIRTIO_BLK_T_GET_ID:
		len = c->write_len - 1;
		if (len > VIRTIO_BLK_ID_BYTES)
			len = VIRTIO_BLK_ID_BYTES;
		if (virtq_copy_to_chain(c, 0, b->serial, len) < 0)
			r->status = VIRTIO_BLK_S_IOERR;
		else
			r->written = (uint32_t)len;
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		r->status = blk_zeroes(b, c, type);
		break;
	default:
		r->status = VIRTIO_BLK_S_UNSUPP;
		break;
	}
	blk_req_put(b, r);
}

/* A FLUSH waits for the requests before it; run it once it is alone. */
static void blk_flush_ready(struct blk_dev *b)
{
	struct blk_req *r = b->flush_req;

	if (!r || b->inflight > 1)
		return;
	b->flush_req = NULL;
	blk_req_flush(b, r);
	blk_req_put(b, r);
}

static struct blk_req *blk_free_slot(struct blk_dev *b)
{
	for (unsigned i = 0; i < b->depth; i++)
		if (!b->reqs[i].busy)
			return &b->reqs[i];
	return NULL;
}

/* What starting the request in chain `c` costs of a pass's budget. */
static unsigned blk_req_cost(const struct virtq_chain *c)
{
	uint64_t units = 1 + (c->read_len + c->write_len) / BLK_BUDGET_UNIT_LEN + c->nsegs / 16;

	return units < BLK_BUDGET ? (unsigned)units : BLK_BUDGET;
}

/* Start every available chain there is a slot for, unless a flush holds the queue, until
 * *budget is spent (each request costs blk_req_cost, each look at an avail index that moved
 * under us one). Returns NULL, or why the guest broke the protocol. Caller holds b->lock. */
static const char *blk_serve_queue(struct blk_dev *b, struct virtq *q, unsigned *budget)
{
	for (;;) {
		struct virtio_blk_outhdr hdr;
		struct blk_req *r;
		int err;

		if (!*budget)
			return NULL; /* blk_run kicks us again when work is left */
		if (b->flush_req || !(r = blk_free_slot(b)))
			return NULL; /* completions call us again */
		err = virtq_pop(q, &r->chain);
		if (err == -EAGAIN) {
			/* With EVENT_IDX, ask for the next kick, then look again: the driver may
			 * have added a chain before it saw our avail_event (the fence is in the
			 * helper). */
			if (!q->event_idx)
				return NULL;
			virtq_set_avail_event(q, q->last_avail_idx);
			if (!virtq_has_work(q))
				return NULL;
			(*budget)--; /* a driver flipping avail idx cannot keep us here */
			continue;
		}
		if (err < 0)
			return q->error ? q->error : "bad chain";
		if (virtq_check_chain(&r->chain, BLK_HDR_LEN, 1) < 0 ||
		    virtq_copy_from_chain(&r->chain, 0, &hdr, sizeof(hdr)) < 0)
			return "a request without a 16-byte header or a status byte";
		r->busy = true;
		r->holds_write = false;
		r->gen = b->gen;
		r->err = 0;
		r->written = 0;
		r->nops = r->niov = 0;
		b->inflight++;
		*budget -= *budget < blk_req_cost(&r->chain) ? *budget : blk_req_cost(&r->chain);
		blk_req_start(b, r, &hdr);
	}
}

/* Come back to the queue after the event loop has served the others (from any thread). */
static void blk_kick(struct blk_dev *b)
{
	if (b->kick_fd >= 0 && write(b->kick_fd, &(uint64_t){1}, 8) < 0 &&
	    log_ratelimit_ok(&b->rl, 1))
		log_warn("virtio-blk: cannot wake the I/O thread: %m");
}

/* One completion from the ring: release its slot, then finish its operation. */
static void blk_cqe_done(struct blk_dev *b, struct io_uring_cqe *cqe)
{
	struct blk_op *op = io_uring_cqe_get_data(cqe);
	int res = cqe->res;

	io_uring_cqe_seen(&b->ring, cqe);
	if (op) /* not blk_cancel_all's own */
		blk_op_done(b, op, res);
}

/* Reap what completed, start what is available, submit. Caller holds b->lock; returns why
 * the guest broke the protocol, or NULL, and sets *notify when the driver wants an
 * interrupt. */
static const char *blk_run(struct blk_dev *b, bool *notify)
{
	struct virtq *q = b->active ? &b->vdev->queues[0] : NULL;
	uint16_t old_used = q ? q->used_idx : 0;
	struct io_uring_cqe *cqe;
	const char *why = NULL;
	unsigned budget = BLK_BUDGET;

	for (;;) {
		while (b->ring_ok && io_uring_peek_cqe(&b->ring, &cqe) == 0)
			blk_cqe_done(b, cqe);
		blk_flush_ready(b);
		if (q && !q->broken && !why)
			why = blk_serve_queue(b, q, &budget);
		if (b->ring_ok && b->sq_pending) {
			int err = io_uring_submit(&b->ring);

			if (err >= 0)
				b->sq_pending = 0;
			else if (log_ratelimit_ok(&b->rl, 3))
				log_warn("virtio-blk: io_uring_submit: %s", strerror(-err));
		}
		/* Reads from the page cache complete inside io_uring_submit: return them now,
		 * in this interrupt, rather than after another trip through the event loop. */
		if (!b->ring_ok || !io_uring_cq_ready(&b->ring))
			break;
	}
	/* Out of budget with requests left (and slots for them): next pass. */
	if (!budget && q && !q->broken && !why && !b->flush_req && blk_free_slot(b) &&
	    virtq_has_work(q))
		blk_kick(b);
	*notify = q && virtq_should_notify(q, old_used);
	if (!why && q && q->broken)
		why = q->error ? q->error : "cannot return a request";
	return why;
}

/* Interrupt and NEEDS_RESET go through the transport, whose lock is taken outside ours: a
 * reset holds it while it takes ours. */
static void blk_report(struct blk_dev *b, bool notify, const char *why)
{
	if (notify)
		virtio_notify_used(b->vdev);
	if (why)
		virtio_set_needs_reset(b->vdev, why);
}

static void blk_queue_notify(void *opaque, unsigned qi)
{
	struct blk_dev *b = opaque;
	const char *why = NULL;
	bool notify = false;

	pthread_mutex_lock(&b->lock);
	if (b->active && qi == 0)
		why = blk_run(b, &notify);
	pthread_mutex_unlock(&b->lock);
	blk_report(b, notify, why);
}

/* The I/O thread: the ring's eventfd says completions are waiting. */
static void blk_ring_ready(struct ev_source *src, uint32_t events)
{
	struct blk_dev *b = src->opaque;
	const char *why;
	bool notify;
	uint64_t v;

	if (read(b->ring_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("virtio-blk: reading the ring's eventfd: %m");
	pthread_mutex_lock(&b->lock);
	why = blk_run(b, &notify);
	pthread_mutex_unlock(&b->lock);
	if (notify || why)
		blk_report(b, notify, why);
}

/* The I/O thread: kick_fd, a pass that ran out of budget. */
static void blk_kick_event(struct ev_source *src, uint32_t events)
{
	struct blk_dev *b = src->opaque;
	const char *why;
	bool notify;
	uint64_t v;

	if (read(b->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("virtio-blk: reading the kick eventfd: %m");
	pthread_mutex_lock(&b->lock);
	why = blk_run(b, &notify);
	pthread_mutex_unlock(&b->lock);
	if (notify || why)
		blk_report(b, notify, why);
}

/* Wait for every operation in flight (their buffers are guest RAM the caller is about to
 * drop or reuse). Caller holds b->lock. */
static void blk_drain(struct blk_dev *b)
{
	struct io_uring_cqe *cqe;

	while (b->ring_ok && b->inflight > (b->flush_req ? 1u : 0u)) {
		if (b->sq_pending) {
			if (io_uring_submit(&b->ring) >= 0)
				b->sq_pending = 0;
		}
		if (io_uring_wait_cqe(&b->ring, &cqe) < 0)
			break;
		blk_cqe_done(b, cqe);
	}
}

/* At the end: cancel the operations still queued for io_uring's workers (they complete with
 * -ECANCELED, those running finish), so that blk_drain does not wait for a hostile guest's
 * gigabytes of reads before the VMM may exit. Caller holds b->lock. */
static void blk_cancel_all(struct blk_dev *b)
{
	struct io_uring_sqe *sqe;

	if (!b->ring_ok || !b->inflight)
		return;
	sqe = io_uring_get_sqe(&b->ring);
	if (!sqe && io_uring_submit(&b->ring) >= 0) {
		b->sq_pending = 0;
		sqe = io_uring_get_sqe(&b->ring);
	}
	if (!sqe)
		return;
	io_uring_prep_cancel(sqe, NULL, IORING_ASYNC_CANCEL_ANY);
	io_uring_sqe_set_data(sqe, NULL);
	b->sq_pending++;
}

static const struct virtio_ops blk_ops;

/* Before a snapshot: finish every request in flight, a waiting FLUSH too, so that the ring
 * holds no half-done request and the disk's top layer no pending write; new requests stay
 * in the avail ring (the vCPUs are paused) for the restored device to find. */
static int blk_quiesce(void *opaque)
{
	struct blk_dev *b = opaque;
	struct virtq *q;
	uint16_t old_used;
	bool notify;
	int err;

	pthread_mutex_lock(&b->lock);
	q = b->active ? &b->vdev->queues[0] : NULL;
	old_used = q ? q->used_idx : 0;
	for (unsigned pass = 0; pass < 2; pass++) {
		blk_drain(b);
		blk_flush_ready(b);
	}
	err = b->inflight ? -EBUSY : disk_flush(b->disk);
	notify = q && virtq_should_notify(q, old_used);
	pthread_mutex_unlock(&b->lock);
	if (notify)
		virtio_notify_used(b->vdev);
	return err;
}

int blk_freeze(struct virtio_dev *vdev, const char *new_top, struct disk_error *derr)
{
	struct blk_dev *b = vdev->dev;
	int err;

	if (vdev->ops != &blk_ops)
		return -EINVAL;
	pthread_mutex_lock(&b->lock);
	err = b->inflight ? -EBUSY : disk_snapshot(b->disk, new_top, derr);
	pthread_mutex_unlock(&b->lock);
	return err;
}

bool blk_is_writable(const struct virtio_dev *vdev)
{
	const struct blk_dev *b = vdev->dev;

	return vdev->ops == &blk_ops && !b->read_only;
}

static void blk_reset(void *opaque)
{
	struct blk_dev *b = opaque;

	/* The transport resets the queue right after: nothing may be pushed to it from now
	 * on. Operations in flight finish into guest RAM and are dropped (their gen is old). */
	pthread_mutex_lock(&b->lock);
	b->active = false;
	b->gen++;
	if (b->flush_req) {
		struct blk_req *r = b->flush_req;

		b->flush_req = NULL;
		blk_req_put(b, r);
	}
	pthread_mutex_unlock(&b->lock);
}

static void blk_destroy(void *opaque)
{
	struct blk_dev *b = opaque;
	int err;

	pthread_mutex_lock(&b->lock);
	b->active = false;
	b->gen++;
	blk_cancel_all(b);
	blk_drain(b);
	if (b->flush_req) {
		struct blk_req *r = b->flush_req;

		b->flush_req = NULL;
		blk_req_put(b, r);
	}
	pthread_mutex_unlock(&b->lock);
	if (b->ring_fd >= 0) {
		evloop_del(&b->vm->loop, &b->ring_src);
		close(b->ring_fd);
	}
	if (b->ring_ok)
		io_uring_queue_exit(&b->ring);
	if (b->kick_fd >= 0) {
		evloop_del(&b->vm->loop, &b->kick_src);
		close(b->kick_fd);
	}
	if ((err = disk_flush(b->disk)) < 0)
		log_warn("virtio-blk: flushing the disk at exit: %s", strerror(-err));
	disk_close(b->disk);
	pthread_mutex_destroy(&b->lock);
	free(b->reqs);
	free(b);
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
	.quiesce = blk_quiesce,
	.reset = blk_reset,
	.destroy = blk_destroy,
};

/* The ring and its eventfd on the VM's event loop; false (and synchronous I/O) when this
 * kernel refuses io_uring. */
static bool blk_ring_setup(struct blk_dev *b)
{
	/* Disabled until uring_restrict has limited it to what we submit (seccomp.c). */
	int err = io_uring_queue_init(2 * b->depth, &b->ring, IORING_SETUP_R_DISABLED);

	/* A kernel before 5.10: no restrictions either. Jailed, seccomp cannot see what a ring
	 * runs (IORING_OP_OPENAT, _CONNECT, ...): no ring at all then. */
	if (err == -EINVAL && !b->vm->seccomp)
		err = io_uring_queue_init(2 * b->depth, &b->ring, 0);
	if (err < 0) {
		log_warn("virtio-blk: no io_uring (%s): disk I/O is synchronous", strerror(-err));
		return false;
	}
	b->ring_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->ring_fd < 0 || io_uring_register_eventfd(&b->ring, b->ring_fd) < 0 ||
	    evloop_add(&b->vm->loop, &b->ring_src, b->ring_fd, EPOLLIN, blk_ring_ready, b) < 0) {
		log_warn("virtio-blk: cannot wait for io_uring completions (%m): disk I/O is "
			 "synchronous");
		if (b->ring_fd >= 0)
			close(b->ring_fd);
		b->ring_fd = -1;
		io_uring_queue_exit(&b->ring);
		return false;
	}
	unsigned workers[2] = {BLK_IOWQ_WORKERS, BLK_IOWQ_WORKERS};

	/* Without the cap (a kernel before 5.15) the kernel's own applies: 4 per CPU. */
	if ((err = io_uring_register_iowq_max_workers(&b->ring, workers)) < 0)
		log_debug("virtio-blk: io_uring workers not capped: %s", strerror(-err));
	if ((err = uring_restrict(&b->ring)) < 0) {
		log_warn("virtio-blk: cannot restrict io_uring (%s): disk I/O is synchronous",
			 strerror(-err));
		evloop_del(&b->vm->loop, &b->ring_src);
		close(b->ring_fd);
		b->ring_fd = -1;
		io_uring_queue_exit(&b->ring);
		return false;
	}
	return true;
}

int blk_add(struct vm *vm, struct disk *disk, const struct blk_options *opt, char *cmdline,
	    size_t cmdline_len, struct virtio_dev **out)
{
	struct virtio_blk_config *cfg;
	struct blk_dev *b;
	int err;

	b = calloc(1, sizeof(*b));
	if (!b || opt->depth < 1 || opt->depth > BLK_DEPTH_MAX) {
		free(b);
		disk_close(disk);
		return b ? -EINVAL : -ENOMEM;
	}
	pthread_mutex_init(&b->lock, NULL);
	b->vm = vm;
	b->disk = disk;
	b->ring_fd = -1;
	b->kick_fd = -1;
	b->depth = opt->depth;
	b->reqs = calloc(b->depth, sizeof(*b->reqs));
	if (!b->reqs) {
		blk_destroy(b);
		return -ENOMEM;
	}
	b->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->kick_fd < 0 || (err = evloop_add(&vm->loop, &b->kick_src, b->kick_fd, EPOLLIN,
						blk_kick_event, b)) < 0) {
		err = b->kick_fd < 0 ? -errno : err;
		blk_destroy(b);
		return err;
	}
	b->ring_ok = blk_ring_setup(b);
	b->read_only = opt->read_only || disk_read_only(disk);
	/* A partial last sector is not addressable: virtio counts whole 512-byte sectors. */
	b->capacity = disk_size(disk) / BLK_SECTOR_LEN;
	/* Zero-padded, and not NUL-terminated when it is 20 bytes long, as the spec allows. */
	memcpy(b->serial, opt->serial, strnlen(opt->serial, sizeof(b->serial)));
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
