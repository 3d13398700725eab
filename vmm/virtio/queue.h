/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Split virtqueues (virtio 1.2, section 2.7), device side and device-independent: take the
 * next chain the driver made available, check it, hand it to the device as host segments, and
 * return it through the used ring. The rings live in guest RAM, which the guest may rewrite
 * at any moment from another vCPU, so everything read from it is read once and checked.
 *
 * Errors: every function that can fail returns 0 or -errno. -EPROTO always means "the guest
 * broke the virtio protocol" (the device then sets DEVICE_NEEDS_RESET and logs q->error,
 * rate-limited); -EAGAIN from virtq_pop means "nothing to do"; -EINVAL is a bug of the caller.
 */
#ifndef SANDBOX_VIRTIO_QUEUE_H
#define SANDBOX_VIRTIO_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm.h"

#define VIRTQ_SIZE_MAX	32768u /* the largest queue size virtio allows */
/* The most segments one chain may have, indirect or not (IOV_MAX, and QEMU's limit too).
 * Devices advertise a seg_max that leaves room for their header and status segments. */
#define VIRTQ_CHAIN_MAX 1024u

/* One buffer of a chain, already translated: [hva, hva+len) is guest RAM. */
struct virtq_seg {
	void *hva;
	uint32_t len;
	bool write; /* device-writable (VRING_DESC_F_WRITE); otherwise device-readable */
};

/* A descriptor chain as virtq_pop found it. The device-readable segments come first:
 * segs[0, nread) are readable, segs[nread, nsegs) writable. */
struct virtq_chain {
	uint16_t head; /* the id to give back to virtq_push */
	unsigned nsegs;
	unsigned nread;
	uint64_t read_len;  /* bytes in the readable segments */
	uint64_t write_len; /* bytes in the writable segments */
	struct virtq_seg segs[VIRTQ_CHAIN_MAX];
};

/* One split virtqueue. The transport owns it; one thread at a time uses it. For a restore,
 * virtq_configure the queue and then set last_avail_idx and used_idx from the snapshot. */
struct virtq {
	const struct guest_mem *mem;
	uint16_t size;		 /* entries, a power of 2; 0 while not configured */
	bool ready;		 /* configured: the ring addresses below are valid */
	bool event_idx;		 /* VIRTIO_F_EVENT_IDX was negotiated */
	bool broken;		 /* the guest broke the protocol; only virtq_reset clears it */
	const char *error;	 /* why the last -EPROTO happened, for the device's log */
	gpa_t desc_gpa;		 /* descriptor table: 16 * size bytes, 16-byte aligned */
	gpa_t avail_gpa;	 /* available ring: 6 + 2 * size bytes, 2-byte aligned */
	gpa_t used_gpa;		 /* used ring: 6 + 8 * size bytes, 4-byte aligned */
	uint16_t last_avail_idx; /* free-running index of the next avail entry to pop */
	uint16_t used_idx;	 /* free-running; the used->idx we last published */
	/* Host addresses of the three rings, translated once by virtq_configure. */
	uint8_t *desc_hva;
	uint8_t *avail_hva;
	uint8_t *used_hva;
};

/* Attach `q` to guest RAM and leave it reset (not ready). */
void virtq_init(struct virtq *q, const struct guest_mem *mem);
/* Forget the rings, indexes, negotiated EVENT_IDX and any error: the state after a device
 * reset. The guest_mem stays attached. */
void virtq_reset(struct virtq *q);
/* Say whether VIRTIO_F_EVENT_IDX was negotiated (used_event / avail_event are used). */
void virtq_set_event_idx(struct virtq *q, bool on);
/* Enable the queue with the driver's size and ring addresses: size a power of 2 no larger
 * than VIRTQ_SIZE_MAX, each ring aligned (desc 16, avail 2, used 4) and wholly inside one RAM
 * region. Indexes restart at 0. -EPROTO (q->error says why) leaves the queue not ready. */
int virtq_configure(struct virtq *q, unsigned size, gpa_t desc_gpa, gpa_t avail_gpa,
		    gpa_t used_gpa) __must_check;

/* True when the driver has made a chain available that virtq_pop has not taken yet (or has
 * moved avail->idx so far that virtq_pop will report a protocol error). */
bool virtq_has_work(const struct virtq *q);
/* The driver's avail->idx as it is now (read with acquire: what the driver did before it
 * moved the index happened before the caller's next steps). For a device that watches the
 * driver give buffers back; nothing is popped. 0 when the queue is not ready. */
uint16_t virtq_avail_idx(const struct virtq *q);
/* Take the next available chain: walk it (direct descriptors, then at most one indirect
 * table), translate every buffer with mem_gpa_to_hva and fill `chain`. -EAGAIN when nothing
 * is available or the queue is not ready. -EPROTO when the guest broke the protocol: avail
 * idx more than `size` ahead, a head or next index out of range, a loop or a chain longer
 * than the queue, more than VIRTQ_CHAIN_MAX segments, a buffer or table not wholly in one RAM
 * region, a zero-length buffer, a readable buffer after a writable one, an indirect table
 * that is nested, chained (NEXT), empty, not a multiple of 16 bytes or larger
 * than VIRTQ_CHAIN_MAX entries. The queue is then broken: every later call returns -EPROTO
 * until virtq_reset. */
int virtq_pop(struct virtq *q, struct virtq_chain *chain) __must_check;
/* Return chain `head` through the used ring with `written_len` bytes written into its
 * writable segments: the element first, then used->idx (released). -EINVAL when `head` is out
 * of range or no chain is outstanding; -EPROTO on a broken queue. */
int virtq_push(struct virtq *q, uint16_t head, uint32_t written_len) __must_check;
/* Return `n` chains at once: their elements, then one used->idx update, so that the driver
 * sees all of them or none (a frame spread over several rx buffers). -EINVAL when a head is
 * out of range or fewer than `n` chains are outstanding (nothing is pushed then); -EPROTO on
 * a broken queue. */
int virtq_push_many(struct virtq *q, const uint16_t *heads, const uint32_t *lens,
		    unsigned n) __must_check;
/* After pushing chains starting from used index `old_used_idx`, whether the driver wants a
 * used-buffer notification: VRING_AVAIL_F_NO_INTERRUPT, or with EVENT_IDX whether used_event
 * was crossed. False when nothing was pushed. */
bool virtq_should_notify(const struct virtq *q, uint16_t old_used_idx);
/* With EVENT_IDX: ask the driver to notify us once avail->idx passes `avail_idx` (write
 * avail_event in the used ring). Usually called with q->last_avail_idx before the device
 * sleeps; check virtq_has_work afterwards, since the driver may have added work meanwhile. */
void virtq_set_avail_event(struct virtq *q, uint16_t avail_idx);

/* -EPROTO unless the chain has at least `read_len` readable and `write_len` writable bytes
 * (a device's minimum request: a header to read, a status byte to write). */
int virtq_check_chain(const struct virtq_chain *chain, uint64_t read_len,
		      uint64_t write_len) __must_check;
/* Copy `len` bytes from the readable segments, starting `offset` bytes into them, to `dst`.
 * -EPROTO when the readable segments are shorter than offset + len. */
int virtq_copy_from_chain(const struct virtq_chain *chain, uint64_t offset, void *dst,
			  uint64_t len) __must_check;
/* Copy `len` bytes from `src` into the writable segments, starting `offset` bytes into them.
 * -EPROTO when the writable segments are shorter than offset + len. */
int virtq_copy_to_chain(const struct virtq_chain *chain, uint64_t offset, const void *src,
			uint64_t len) __must_check;

#endif
