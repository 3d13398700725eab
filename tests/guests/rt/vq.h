/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A polled split virtqueue driver for payload guests (virtio 1.2, 2.7 and 4.2): bring a
 * virtio-mmio device to DRIVER_OK with the features asked for, set up queues of VQ_SIZE in
 * .bss, offer chains, publish them, take used entries back. Interrupts stay off: the used
 * ring is polled. The device works on the VMM's I/O thread while the vCPU runs, so every ring
 * update is ordered with real fences: descriptors and buffers before avail->idx (release),
 * register accesses with full fences on both sides.
 */
#ifndef SANDBOX_GUESTS_RT_VQ_H
#define SANDBOX_GUESTS_RT_VQ_H

#include <stdbool.h>
#include <stdint.h>

#include "rt.h"
#include "virtio_mmio.h"

#define VQ_SIZE 256u

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

struct vq_used {
	uint16_t flags;
	uint16_t idx;
	struct {
		uint32_t id;
		uint32_t len;
	} ring[VQ_SIZE];
	uint16_t avail_event;
};

/* One split queue (identity-mapped guest RAM), and the driver's view of it. */
struct vq {
	struct vq_desc desc[VQ_SIZE] __attribute__((aligned(4096)));
	struct vq_avail avail __attribute__((aligned(64)));
	struct vq_used used __attribute__((aligned(64)));
	uint16_t avail_idx; /* the next avail->idx we publish */
	uint16_t used_seen; /* used entries taken so far */
};

static inline void vio_write(uint64_t base, uint32_t reg, uint32_t val)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint32_t *)(base + reg) = val;
}

static inline uint32_t vio_read(uint64_t base, uint32_t reg)
{
	uint32_t v = *(volatile const uint32_t *)(base + reg);

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return v;
}

static inline void vio_write64(uint64_t base, uint32_t reg_low, uint64_t v)
{
	vio_write(base, reg_low, (uint32_t)v);
	vio_write(base, reg_low + 4, (uint32_t)(v >> 32));
}

/* Reset the device at `base` and take it to FEATURES_OK with `features` (VERSION_1 is
 * bit 32). NULL, or why not. */
static inline const char *vio_init(uint64_t base, uint32_t device_id, uint64_t features)
{
	if (vio_read(base, VIO_MAGIC_VALUE) != VIO_MAGIC ||
	    vio_read(base, VIO_DEVICE_ID) != device_id)
		return "no such device in the virtio-mmio window";
	vio_write(base, VIO_STATUS, 0);
	vio_write(base, VIO_STATUS, VIO_S_ACK);
	vio_write(base, VIO_STATUS, VIO_S_ACK | VIO_S_DRIVER);
	vio_write(base, VIO_DRIVER_FEATURES_SEL, 0);
	vio_write(base, VIO_DRIVER_FEATURES, (uint32_t)features);
	vio_write(base, VIO_DRIVER_FEATURES_SEL, 1);
	vio_write(base, VIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	vio_write(base, VIO_STATUS, VIO_S_ACK | VIO_S_DRIVER | VIO_S_FEAT_OK);
	if (!(vio_read(base, VIO_STATUS) & VIO_S_FEAT_OK))
		return "FEATURES_OK refused";
	return 0;
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

/* Configure queue `qi` on `q` (VQ_SIZE entries, interrupts off). NULL, or why not. */
static inline const char *vio_queue(uint64_t base, unsigned qi, struct vq *q)
{
	vio_write(base, VIO_QUEUE_SEL, qi);
	if (vio_read(base, VIO_QUEUE_NUM_MAX) < VQ_SIZE)
		return "the device's queues are smaller than 256";
	q->avail.flags = AVAIL_F_NO_INTERRUPT;
	vio_write(base, VIO_QUEUE_NUM, VQ_SIZE);
	vio_write64(base, VIO_QUEUE_DESC_LOW, (uint64_t)(uintptr_t)q->desc);
	vio_write64(base, VIO_QUEUE_AVAIL_LOW, (uint64_t)(uintptr_t)&q->avail);
	vio_write64(base, VIO_QUEUE_USED_LOW, (uint64_t)(uintptr_t)&q->used);
	vio_write(base, VIO_QUEUE_READY, 1);
	return 0;
}

/* DRIVER_OK. NULL, or why the device refused. */
static inline const char *vio_driver_ok(uint64_t base)
{
	vio_write(base, VIO_STATUS, VIO_S_ACK | VIO_S_DRIVER | VIO_S_FEAT_OK | VIO_S_DRV_OK);
	if (vio_read(base, VIO_STATUS) & VIO_S_RESET)
		return "the device needs a reset";
	return 0;
}

/* Offer the chain at `head` (not published until vq_publish). */
static inline void vq_offer(struct vq *q, uint16_t head)
{
	q->avail.ring[q->avail_idx++ % VQ_SIZE] = head;
}

/* Publish what vq_offer added: the ring entries (and the buffers) before the index. */
static inline void vq_publish(struct vq *q)
{
	__atomic_store_n(&q->avail.idx, q->avail_idx, __ATOMIC_RELEASE);
}

/* The next used entry's id in *id (its length in *len), or false when there is none. */
static inline bool vq_next_used(struct vq *q, uint16_t *id, uint32_t *len)
{
	if (__atomic_load_n(&q->used.idx, __ATOMIC_ACQUIRE) == q->used_seen)
		return false;
	*id = (uint16_t)q->used.ring[q->used_seen % VQ_SIZE].id;
	if (len)
		*len = q->used.ring[q->used_seen % VQ_SIZE].len;
	q->used_seen++;
	return true;
}

#endif
