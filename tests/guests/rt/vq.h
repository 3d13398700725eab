/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one split virtqueue driver of the payload guests (virtio 1.2, 2.7 and 4.2): bring a
 * virtio-mmio device to DRIVER_OK with the features asked for, set up queues in .bss, offer
 * chains, publish and kick them, take used entries back: trusting the device (vq_next_used),
 * or checking every entry for the guests that must survive a buggy or restored one
 * (vq_take_used). Interrupts stay off: the used ring is polled. It breaks no rule itself:
 * virtio_hostile.c writes its bad descriptors and indices straight into struct vq.
 *
 * The queue size is the includer's: `#define VQ_SIZE 16` before including, 256 without. A
 * plain decimal number, so that a refusal can name it; each guest is one translation unit,
 * so it has one size.
 *
 * The device works on the VMM's I/O thread while the vCPU runs, so every ring update is
 * ordered with real fences: descriptors and buffers before avail->idx (release), used->idx
 * before the entries it publishes (acquire), register accesses with full fences on both sides.
 */
#ifndef SANDBOX_GUESTS_RT_VQ_H
#define SANDBOX_GUESTS_RT_VQ_H

#include <stdbool.h>
#include <stdint.h>

#include "rt.h"
#include "virtio_mmio.h"

#ifndef VQ_SIZE
#define VQ_SIZE 256
#endif
_Static_assert(VQ_SIZE > 0 && (VQ_SIZE & (VQ_SIZE - 1)) == 0 && VQ_SIZE <= 32768,
	       "VQ_SIZE: a power of two up to 32768 (virtio 1.2, 2.7)");

#define VQ_STR_(x) #x
#define VQ_STR(x)  VQ_STR_(x)

/* Words of the busy bitmap: one bit per descriptor. */
#define VQ_BUSY_WORDS ((VQ_SIZE + 63) / 64)

/* Feature bits the drivers here ask for (virtio 1.2, 6). */
#define VIO_F_INDIRECT_DESC 28
#define VIO_F_VERSION_1	    32

/* What vq_take_used found wrong. */
#define VQ_USED_BAD    (-1) /* an entry that is not ours: skipped */
#define VQ_USED_BROKEN (-2) /* used->idx ahead of what we offered: nothing taken */

struct vq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};
_Static_assert(sizeof(struct vq_desc) == 16, "descriptor layout");

struct vq_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[VQ_SIZE];
	uint16_t used_event;
};

struct vq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct vq_used {
	uint16_t flags;
	uint16_t idx;
	struct vq_used_elem ring[VQ_SIZE];
	uint16_t avail_event;
};

/*
 * One split queue (identity-mapped guest RAM), and the driver's view of it. The spec wants
 * the table 16-aligned, avail 2 and used 4: the table starts a page of its own (as every
 * queue here always had), and used its own cache line, away from the avail ring we write.
 */
struct vq {
	struct vq_desc desc[VQ_SIZE] __attribute__((aligned(4096)));
	struct vq_avail avail __attribute__((aligned(64)));
	struct vq_used used __attribute__((aligned(64)));
	uint16_t avail_idx;	      /* the next avail->idx we publish */
	uint16_t used_seen;	      /* used entries taken so far */
	uint16_t kicked_idx;	      /* avail_idx at the last vq_kick */
	uint64_t busy[VQ_BUSY_WORDS]; /* bit i: the chain at head i is the device's */
};

/* Write a 32-bit register of the device at `base`: one MMIO exit. */
static inline void vio_write(uint64_t base, uint32_t reg, uint32_t val)
{
	/* Full fence: every ring and buffer store is visible to the I/O thread before the
	 * device hears of it (a QueueNotify it serves at once would find a stale ring). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint32_t *)(base + reg) = val;
}

/* Read a 32-bit register of the device at `base`: one MMIO exit. */
static inline uint32_t vio_read(uint64_t base, uint32_t reg)
{
	uint32_t v = *(volatile const uint32_t *)(base + reg);

	/* Full fence: nothing after the read (a ring load, say) is done before it, so what the
	 * register says, e.g. NEEDS_RESET, covers what we look at next. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return v;
}

/* Write a 64-bit value (a ring's address) into a LOW/HIGH register pair. */
static inline void vio_write64(uint64_t base, uint32_t reg_low, uint64_t v)
{
	vio_write(base, reg_low, (uint32_t)v);
	vio_write(base, reg_low + 4, (uint32_t)(v >> 32));
}

/* The device's offered features, both words. */
static inline uint64_t vio_features(uint64_t base)
{
	uint64_t lo, hi;

	vio_write(base, VIO_DEVICE_FEATURES_SEL, 0);
	lo = vio_read(base, VIO_DEVICE_FEATURES);
	vio_write(base, VIO_DEVICE_FEATURES_SEL, 1);
	hi = vio_read(base, VIO_DEVICE_FEATURES);
	return lo | hi << 32;
}

/*
 * Reset the virtio-mmio v2 device at `base` (checking it is `device_id`) and take it to
 * FEATURES_OK with `features` (1ull << VIO_F_VERSION_1 at least), each of which it must offer.
 * NULL, or why not.
 */
static inline const char *vio_init(uint64_t base, uint32_t device_id, uint64_t features)
{
	const uint32_t feat_ok = VIO_S_ACK | VIO_S_DRIVER | VIO_S_FEAT_OK;

	if (vio_read(base, VIO_MAGIC_VALUE) != VIO_MAGIC || vio_read(base, VIO_VERSION) != 2 ||
	    vio_read(base, VIO_DEVICE_ID) != device_id)
		return "no such device in the virtio-mmio window";
	vio_write(base, VIO_STATUS, 0);
	if (vio_read(base, VIO_STATUS) != 0)
		return "status after reset is not 0";
	vio_write(base, VIO_STATUS, VIO_S_ACK);
	vio_write(base, VIO_STATUS, VIO_S_ACK | VIO_S_DRIVER);
	if ((vio_features(base) & features) != features)
		return "the device does not offer every feature asked for";
	vio_write(base, VIO_DRIVER_FEATURES_SEL, 0);
	vio_write(base, VIO_DRIVER_FEATURES, (uint32_t)features);
	vio_write(base, VIO_DRIVER_FEATURES_SEL, 1);
	vio_write(base, VIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	vio_write(base, VIO_STATUS, feat_ok);
	if (vio_read(base, VIO_STATUS) != feat_ok)
		return "FEATURES_OK did not stick";
	return 0;
}

/*
 * Configure queue `qi` with VQ_SIZE entries at the rings given and write QueueReady 1; whether
 * it became ready is the caller's to see (virtio_hostile.c gives rings outside RAM on
 * purpose). NULL, or why not.
 */
static inline const char *vio_queue_at(uint64_t base, unsigned qi, uint64_t desc_gpa,
				       uint64_t avail_gpa, uint64_t used_gpa)
{
	vio_write(base, VIO_QUEUE_SEL, qi);
	if (vio_read(base, VIO_QUEUE_NUM_MAX) < VQ_SIZE)
		return "the device's queues are smaller than " VQ_STR(VQ_SIZE);
	if (vio_read(base, VIO_QUEUE_READY) != 0)
		return "the queue is ready before it was set up";
	vio_write(base, VIO_QUEUE_NUM, VQ_SIZE);
	vio_write64(base, VIO_QUEUE_DESC_LOW, desc_gpa);
	vio_write64(base, VIO_QUEUE_AVAIL_LOW, avail_gpa);
	vio_write64(base, VIO_QUEUE_USED_LOW, used_gpa);
	vio_write(base, VIO_QUEUE_READY, 1);
	return 0;
}

/* Configure queue `qi` on `q`, emptied first (interrupts off). NULL, or why not. */
static inline const char *vio_queue(uint64_t base, unsigned qi, struct vq *q)
{
	const char *why;

	memset(q, 0, sizeof(*q));
	q->avail.flags = AVAIL_F_NO_INTERRUPT; /* IF is 0 anyway: none would be taken */
	why = vio_queue_at(base, qi, (uint64_t)(uintptr_t)q->desc, (uint64_t)(uintptr_t)&q->avail,
			   (uint64_t)(uintptr_t)&q->used);
	if (!why && vio_read(base, VIO_QUEUE_READY) != 1)
		why = "the queue did not become ready";
	return why;
}

/* DRIVER_OK. NULL, or why the device refused. */
static inline const char *vio_driver_ok(uint64_t base)
{
	const uint32_t ok = VIO_S_ACK | VIO_S_DRIVER | VIO_S_FEAT_OK | VIO_S_DRV_OK;

	vio_write(base, VIO_STATUS, ok);
	if (vio_read(base, VIO_STATUS) != ok)
		return "DRIVER_OK not accepted";
	return 0;
}

/* Whether the chain at head `id` is the device's (offered, not yet taken back). */
static inline bool vq_busy(const struct vq *q, uint32_t id)
{
	return id < VQ_SIZE && ((q->busy[id / 64] >> (id % 64)) & 1);
}

/* Offer the chain at `head` (not published until vq_publish). */
static inline void vq_offer(struct vq *q, uint16_t head)
{
	if (head < VQ_SIZE)
		q->busy[head / 64] |= 1ull << (head % 64);
	q->avail.ring[q->avail_idx++ % VQ_SIZE] = head;
}

/* Publish what vq_offer added. */
static inline void vq_publish(struct vq *q)
{
	/* Release: the descriptors, the buffers and the ring entries are visible before the
	 * index that offers them (the I/O thread may look at any time, not only when kicked). */
	__atomic_store_n(&q->avail.idx, q->avail_idx, __ATOMIC_RELEASE);
}

/* Offer and publish `len` bytes at `buf` as a one-element chain at descriptor `id`
 * (DESC_F_WRITE in `flags` for a buffer the device fills). */
static inline void vq_post(struct vq *q, uint16_t id, const void *buf, uint32_t len, uint16_t flags)
{
	q->desc[id] =
		(struct vq_desc){.addr = (uint64_t)(uintptr_t)buf, .len = len, .flags = flags};
	vq_offer(q, id);
	vq_publish(q);
}

/* The lowest descriptor no offered chain starts at, or -1: the free buffer of a queue of
 * one-element chains (vq_post). */
static inline int vq_free_id(const struct vq *q)
{
	/* The bits of the last word that are descriptors (VQ_SIZE < 64, or all 64). */
	const uint64_t last = VQ_SIZE >= 64 ? ~0ull : (1ull << (VQ_SIZE % 64)) - 1;

	for (unsigned w = 0; w < VQ_BUSY_WORDS; w++) {
		uint64_t free = ~q->busy[w] & (w + 1 == VQ_BUSY_WORDS ? last : ~0ull);

		if (free)
			return (int)(w * 64 + (unsigned)__builtin_ctzll(free));
	}
	return -1;
}

/* Notify the device of queue `qi` (an MMIO exit). */
static inline void vq_notify(uint64_t base, unsigned qi)
{
	vio_write(base, VIO_QUEUE_NOTIFY, qi);
}

/* Publish what was offered and notify the device of queue `qi` on `q`, unless nothing was
 * offered since the last vq_kick: a notify is an MMIO exit. */
static inline void vq_kick(uint64_t base, unsigned qi, struct vq *q)
{
	vq_publish(q);
	if (q->kicked_idx == q->avail_idx)
		return;
	q->kicked_idx = q->avail_idx;
	vq_notify(base, qi);
}

/* The next used entry's id in *id (its length in *len), or false when there is none. Trusts
 * the device: for guests that test something else. */
static inline bool vq_next_used(struct vq *q, uint16_t *id, uint32_t *len)
{
	/* Acquire: the entry is read only after the index that publishes it. */
	if (__atomic_load_n(&q->used.idx, __ATOMIC_ACQUIRE) == q->used_seen)
		return false;
	*id = (uint16_t)q->used.ring[q->used_seen % VQ_SIZE].id;
	if (len)
		*len = q->used.ring[q->used_seen % VQ_SIZE].len;
	q->used_seen++;
	if (*id < VQ_SIZE)
		q->busy[*id / 64] &= ~(1ull << (*id % 64));
	return true;
}

/*
 * The next used entry, checked, for guests that must survive a buggy or restored device:
 * 1 with the head of a chain that was the device's in *id (its length in *len), 0 when none
 * waits; VQ_USED_BAD for an entry out of range or not the device's (skipped; its id in *id),
 * VQ_USED_BROKEN when used->idx claims more than we offered (nothing taken: the ring cannot
 * be trusted any more). On either *why says what, to be followed by the id (BAD) or the
 * queue's index (BROKEN) in the guest's warning.
 */
static inline int vq_take_used(struct vq *q, uint32_t *id, uint32_t *len, const char **why)
{
	/* Acquire: the entry is read only after the index that publishes it. */
	uint16_t used_idx = __atomic_load_n(&q->used.idx, __ATOMIC_ACQUIRE);
	struct vq_used_elem e;

	if (used_idx == q->used_seen)
		return 0;
	if ((uint16_t)(used_idx - q->used_seen) > (uint16_t)(q->avail_idx - q->used_seen)) {
		*why = "used idx ahead of avail idx on queue";
		return VQ_USED_BROKEN;
	}
	e = q->used.ring[q->used_seen++ % VQ_SIZE];
	*id = e.id;
	*len = e.len;
	if (!vq_busy(q, e.id)) {
		*why = "used id not ours:";
		return VQ_USED_BAD;
	}
	q->busy[e.id / 64] &= ~(1ull << (e.id % 64));
	return 1;
}

#endif
