/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake virtio driver on the host side, for the device tests and fuzzers: it reads and writes
 * a device's virtio-mmio registers (vmm/virtio/mmio.c), lays out split rings in fake guest RAM,
 * posts buffers, takes what the device used and serves the VM's event loop. One copy for
 * test_virtio_{blk,net,vsock,mmio}, test_virtq and fuzz_{mmio,vsock}.
 *
 * It is the driver's side only: what a device must do is checked by the tests, so nothing here
 * asserts (the fuzzers have no criterion); functions say what they saw and the caller judges.
 * It is not a well-behaved driver either: fdrv_negotiate writes the features it is given, and a
 * test may poke any ring field itself (test_virtq does, on purpose). No interrupts: a test reads
 * the used ring when it chooses to.
 */
#ifndef SANDBOX_TEST_FAKE_DRIVER_H
#define SANDBOX_TEST_FAKE_DRIVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>

#include "virtio/virtio.h"
#include "vmm.h"

/* Queues one fake driver keeps track of: virtio-vsock has three, the most of our devices. */
#define FDRV_QUEUES_MAX 4u

/* Where fdrv_setup puts queue `q`: 16 KiB per queue from 64 KiB up, the avail ring 4 KiB and
 * the used ring 8 KiB above the descriptor table, which holds a queue of 256 entries (the
 * devices' QueueNumMax). Tests keep their buffers clear of [64 KiB, 128 KiB). */
#define FDRV_DESC_GPA(q)  (0x10000u + (q)*0x4000u)
#define FDRV_AVAIL_GPA(q) (FDRV_DESC_GPA(q) + 0x1000u)
#define FDRV_USED_GPA(q)  (FDRV_DESC_GPA(q) + 0x2000u)

/* One queue as the driver sees it. */
struct fdrv_queue {
	gpa_t desc_gpa, avail_gpa, used_gpa;
	unsigned size;
	uint16_t avail_idx; /* free-running: chains added (fdrv_add), published or not */
	uint16_t used_seen; /* the used entries fdrv_next_used has taken */
};

/* The vm and vdev are NULL for rings alone (test_virtq drives a bare struct virtq). */
struct fake_driver {
	struct vm *vm;		 /* whose event loop fdrv_pump serves */
	struct guest_mem *mem;	 /* where the rings and buffers are */
	struct virtio_dev *vdev; /* whose registers fdrv_rd and fdrv_wr reach */
	struct fdrv_queue q[FDRV_QUEUES_MAX];
};

/* A driver for `vdev` in `vm`, its rings in `mem`, with no queue placed yet. */
static inline void fdrv_init(struct fake_driver *drv, struct vm *vm, struct guest_mem *mem,
			     struct virtio_dev *vdev)
{
	memset(drv, 0, sizeof(*drv));
	drv->vm = vm;
	drv->mem = mem;
	drv->vdev = vdev;
}

/* Read a 32-bit register (0 when the transport refuses the access). */
static inline uint32_t fdrv_rd(struct fake_driver *drv, uint64_t reg)
{
	uint32_t v = 0;

	virtio_mmio_access(drv->vdev, reg, (uint8_t *)&v, 4, false);
	return v;
}

/* Write a 32-bit register. A QueueNotify write is served inside the call, as without a vCPU. */
static inline void fdrv_wr(struct fake_driver *drv, uint64_t reg, uint32_t v)
{
	virtio_mmio_access(drv->vdev, reg, (uint8_t *)&v, 4, true);
}

/* Kick queue `q`. */
static inline void fdrv_kick(struct fake_driver *drv, unsigned q)
{
	fdrv_wr(drv, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

/* Whether the device has given up (DEVICE_NEEDS_RESET in its status). */
static inline bool fdrv_needs_reset(struct fake_driver *drv)
{
	return (fdrv_rd(drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET) != 0;
}

/* The 64 feature bits the device offers (it leaves DeviceFeaturesSel at 1). */
static inline uint64_t fdrv_offered(struct fake_driver *drv)
{
	uint64_t f;

	fdrv_wr(drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	f = fdrv_rd(drv, VIRTIO_MMIO_DEVICE_FEATURES);
	fdrv_wr(drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	return f | (uint64_t)fdrv_rd(drv, VIRTIO_MMIO_DEVICE_FEATURES) << 32;
}

/* Status ACKNOWLEDGE | DRIVER, driver features `features` exactly as given (offered or not),
 * then FEATURES_OK. Whether the device kept FEATURES_OK, that is took the features. */
static inline bool fdrv_negotiate(struct fake_driver *drv, uint64_t features)
{
	fdrv_wr(drv, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	fdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	fdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fdrv_wr(drv, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	fdrv_wr(drv, VIRTIO_MMIO_STATUS,
		fdrv_rd(drv, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_FEATURES_OK);
	return (fdrv_rd(drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK) != 0;
}

/* Record that queue `q` (of `size` entries) has its rings at these addresses, and start its
 * indexes from 0, as after a reset; no register is written. */
static inline void fdrv_queue_place(struct fake_driver *drv, unsigned q, unsigned size,
				    gpa_t desc_gpa, gpa_t avail_gpa, gpa_t used_gpa)
{
	if (q >= FDRV_QUEUES_MAX) {
		fprintf(stderr, "fake driver: queue %u of at most %u\n", q, FDRV_QUEUES_MAX);
		abort();
	}
	drv->q[q] = (struct fdrv_queue){
		.desc_gpa = desc_gpa, .avail_gpa = avail_gpa, .used_gpa = used_gpa, .size = size};
}

/* Place queue `q` and tell the device: QueueSel, QueueNum, the three ring addresses (low
 * halves only), QueueReady. */
static inline void fdrv_queue_setup(struct fake_driver *drv, unsigned q, unsigned size,
				    gpa_t desc_gpa, gpa_t avail_gpa, gpa_t used_gpa)
{
	fdrv_queue_place(drv, q, size, desc_gpa, avail_gpa, used_gpa);
	fdrv_wr(drv, VIRTIO_MMIO_QUEUE_SEL, q);
	fdrv_wr(drv, VIRTIO_MMIO_QUEUE_NUM, size);
	fdrv_wr(drv, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc_gpa);
	fdrv_wr(drv, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail_gpa);
	fdrv_wr(drv, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used_gpa);
	fdrv_wr(drv, VIRTIO_MMIO_QUEUE_READY, 1);
}

/*
 * A driver's set-up short of DRIVER_OK: negotiate what the device offers of `want` (read
 * before ACKNOWLEDGE: the transport offers the same whatever the status), then queues
 * 0 .. nqueues-1 of `size` entries each at FDRV_DESC_GPA(q) and on. Whether FEATURES_OK held
 * (the queues are set up either way). The caller posts its first buffers, if any, and then
 * calls fdrv_driver_ok, as Linux fills a queue before the device goes live.
 */
static inline bool fdrv_setup(struct fake_driver *drv, uint64_t want, unsigned nqueues,
			      unsigned size)
{
	bool ok = fdrv_negotiate(drv, fdrv_offered(drv) & want);

	for (unsigned q = 0; q < nqueues; q++)
		fdrv_queue_setup(drv, q, size, FDRV_DESC_GPA(q), FDRV_AVAIL_GPA(q),
				 FDRV_USED_GPA(q));
	return ok;
}

/* Add DRIVER_OK to the status: the device goes live. */
static inline void fdrv_driver_ok(struct fake_driver *drv)
{
	fdrv_wr(drv, VIRTIO_MMIO_STATUS,
		fdrv_rd(drv, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
}

/* The host address of guest range [gpa, gpa+len). A range outside RAM is the test's own bug:
 * it says so and aborts (criterion reports the test as crashed, libFuzzer keeps the input). */
static inline void *fdrv_hva(struct fake_driver *drv, gpa_t gpa, uint64_t len)
{
	void *p = mem_gpa_to_hva(drv->mem, gpa, len);

	if (!p) {
		fprintf(stderr, "fake driver: gpa 0x%llx+%llu is not RAM\n",
			(unsigned long long)gpa, (unsigned long long)len);
		abort();
	}
	return p;
}

/* Queue `q`'s descriptor table, avail ring and used ring (used_event and avail_event
 * included), in RAM. */
static inline struct vring_desc *fdrv_desc(struct fake_driver *drv, unsigned q)
{
	return fdrv_hva(drv, drv->q[q].desc_gpa, 16ull * drv->q[q].size);
}

static inline struct vring_avail *fdrv_avail(struct fake_driver *drv, unsigned q)
{
	return fdrv_hva(drv, drv->q[q].avail_gpa, 6 + 2ull * drv->q[q].size);
}

static inline struct vring_used *fdrv_used(struct fake_driver *drv, unsigned q)
{
	return fdrv_hva(drv, drv->q[q].used_gpa, 6 + 8ull * drv->q[q].size);
}

/* Put the chain at descriptor `head` in queue `q`'s avail ring, not yet published. */
static inline void fdrv_add(struct fake_driver *drv, unsigned q, uint16_t head)
{
	struct fdrv_queue *fq = &drv->q[q];

	fdrv_avail(drv, q)->ring[fq->avail_idx % fq->size] = head;
	fq->avail_idx++;
}

/* Publish every chain added so far: avail->idx moves to the driver's index. */
static inline void fdrv_publish(struct fake_driver *drv, unsigned q)
{
	/* Release: the ring entries (and the descriptors they name) are written before the
	 * index that hands them over, or the device could pop an entry not yet there. The
	 * device here runs on this thread (inside the kick, or in fdrv_pump), so at run time
	 * the fence only keeps the compiler from moving those writes past the index; it says
	 * what a driver on another CPU must do (virtio 1.2, 2.7.13). */
	atomic_thread_fence(memory_order_release);
	fdrv_avail(drv, q)->idx = drv->q[q].avail_idx;
}

/* Add the chain at `head` and publish it. */
static inline void fdrv_offer(struct fake_driver *drv, unsigned q, uint16_t head)
{
	fdrv_add(drv, q, head);
	fdrv_publish(drv, q);
}

/* Make descriptor `head` of queue `q` one buffer [gpa, gpa+len) with `flags`
 * (VRING_DESC_F_WRITE for one the device fills) and offer it. */
static inline void fdrv_post(struct fake_driver *drv, unsigned q, uint16_t head, uint64_t gpa,
			     uint32_t len, uint16_t flags)
{
	fdrv_desc(drv, q)[head] = (struct vring_desc){.addr = gpa, .len = len, .flags = flags};
	fdrv_offer(drv, q, head);
}

/* The next entry the device put in queue `q`'s used ring since the last call: its chain's head
 * in *id and the bytes written in *len. False when there is none. */
static inline bool fdrv_next_used(struct fake_driver *drv, unsigned q, uint32_t *id, uint32_t *len)
{
	struct fdrv_queue *fq = &drv->q[q];
	struct vring_used *used = fdrv_used(drv, q);
	struct vring_used_elem e;

	if (used->idx == fq->used_seen)
		return false;
	/* Acquire: the entry is read after the index that says it is there (the device
	 * writes the entry, then the index). As in fdrv_publish, the device runs on this
	 * thread, and the fence keeps the compiler from reading the entry early. */
	atomic_thread_fence(memory_order_acquire);
	e = used->ring[fq->used_seen++ % fq->size];
	*id = e.id;
	*len = e.len;
	return true;
}

/* Serve the VM's event loop, without waiting, until it has nothing left to do: true, or false
 * when it was still busy after `max_passes` passes. */
static inline bool fdrv_pump(struct fake_driver *drv, unsigned max_passes)
{
	for (unsigned i = 0; i < max_passes; i++)
		if (evloop_run_once(&drv->vm->loop, 0) <= 0)
			return true;
	return false;
}

#endif
