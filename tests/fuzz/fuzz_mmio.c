/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the virtio-mmio register file (vmm/virtio/mmio.c) with the queues it
 * configures (vmm/virtio/queue.c): the input is a hostile driver. Its first byte is the
 * number of register accesses that follow (8 bytes each); the rest is guest RAM (64 KiB), where
 * the rings and descriptors the driver points at are attacker data too. The device behind the
 * transport is a recording fake (two queues of at most 64, an 8-byte config space in a global
 * of its own, so ASan sees an access past it) that, on every notify, pops, checks and pushes
 * every chain of the queue, as a real device would.
 *
 * An access: kind (bit 0 write, bit 1 the happy path first: status, features, queue set-up),
 * width code (1, 2, 4 or 8 bytes), a register offset (the whole 4 KiB window) and a value.
 * What must hold whatever the order: the device is activated only after FEATURES_OK with
 * features it was offered, notified only for its queues while DRIVER_OK and not NEEDS_RESET,
 * configured queues lie inside RAM, every segment handed out is inside RAM, the identity
 * registers never change.
 *
 * Built and run by tests/fuzz/run.sh mmio; seeds in tests/fuzz/corpus/mmio/.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>

#include "fake_driver.h"
#include "fake_vm.h"
#include "virtio/queue.h"
#include "virtio/virtio.h"

#define FUZZ_RAM_LEN   (64u << 10)
#define FUZZ_OP_LEN    8u
#define FUZZ_FEATURE   (1ull << 5)
#define FUZZ_QUEUE_MAX 64u
#define FUZZ_OFFERED                                                                               \
	(FUZZ_FEATURE | (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_EVENT_IDX) |         \
	 (1ull << VIRTIO_RING_F_INDIRECT_DESC))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_mmio: %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static uint8_t fuzz_config[8];
static struct virtio_dev *vdev;
static struct fake_driver drv;
static uint8_t *ram;
static struct virtq_chain chain;

static uint64_t fake_features(void *dev)
{
	return FUZZ_FEATURE;
}
static void fake_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	memcpy(data, fuzz_config + off, len);
}
static void fake_config_write(void *dev, uint32_t off, const uint8_t *data, uint32_t len)
{
	memcpy(fuzz_config + off, data, len);
}
static int fake_activate(void *dev, struct virtio_dev *v, uint64_t features)
{
	fuzz_check(v->status & VIRTIO_CONFIG_S_FEATURES_OK);
	fuzz_check(v->status & VIRTIO_CONFIG_S_DRIVER_OK);
	fuzz_check((features & ~FUZZ_OFFERED) == 0 && (features & (1ull << VIRTIO_F_VERSION_1)));
	return 0;
}

/* A device's work: every available chain, checked against RAM, used and given back. */
static void fake_notify(void *dev, unsigned qi)
{
	struct virtq *q;
	int err;

	fuzz_check(qi < 2);
	fuzz_check((vdev->status & VIRTIO_CONFIG_S_DRIVER_OK) &&
		   !(vdev->status & VIRTIO_CONFIG_S_NEEDS_RESET));
	q = &vdev->queues[qi];
	if (!q->ready)
		return;
	for (unsigned round = 0; round < 2 * FUZZ_QUEUE_MAX; round++) {
		uint32_t written = 0;

		if ((err = virtq_pop(q, &chain)) < 0) {
			fuzz_check(err == -EAGAIN || err == -EPROTO);
			if (err == -EPROTO)
				virtio_set_needs_reset(vdev, q->error ? q->error : "bad chain");
			return;
		}
		fuzz_check(chain.nsegs >= 1 && chain.nread <= chain.nsegs);
		for (unsigned i = 0; i < chain.nsegs; i++) {
			const struct virtq_seg *s = &chain.segs[i];
			uint8_t *p = (uint8_t *)s->hva;

			fuzz_check(p >= ram && s->len <= FUZZ_RAM_LEN &&
				   (size_t)(p - ram) <= FUZZ_RAM_LEN - s->len);
			if (i >= chain.nread && s->len) {
				p[0] ^= 1;
				written += 1;
			}
		}
		if (virtq_push(q, chain.head, written) < 0)
			return;
	}
}
static int fake_quiesce(void *dev)
{
	return 0;
}
static void fake_reset(void *dev)
{
}
static void fake_destroy(void *dev)
{
}

static const struct virtio_ops fake_ops = {
	.name = "fuzz",
	.device_id = 42,
	.nqueues = 2,
	.queue_max = FUZZ_QUEUE_MAX,
	.config_len = sizeof(fuzz_config),
	.features = fake_features,
	.config_read = fake_config_read,
	.config_write = fake_config_write,
	.activate = fake_activate,
	.queue_notify = fake_notify,
	.quiesce = fake_quiesce,
	.reset = fake_reset,
	.destroy = fake_destroy,
};

/* The driver's happy path up to DRIVER_OK, with queue `qi`'s rings at `base` in RAM. */
static void fuzz_happy_path(unsigned qi, uint32_t num, uint32_t base)
{
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	/* Not fdrv_setup: it reads the offered features, which would move DeviceFeaturesSel
	 * under the accesses of the input. Whether FEATURES_OK held is the transport's to
	 * judge, in what follows. */
	(void)fdrv_negotiate(&drv, FUZZ_OFFERED);
	fdrv_queue_setup(&drv, qi, num, base, base + 16 * FUZZ_QUEUE_MAX,
			 (base + 16 * FUZZ_QUEUE_MAX + 0x200) & ~3u);
	fdrv_driver_ok(&drv);
}

static void fuzz_access(const uint8_t *op)
{
	static const uint32_t widths[4] = {1, 2, 4, 8};
	uint8_t buf[8];
	uint16_t reg;
	uint32_t val, len = widths[op[1] & 3];

	memcpy(&reg, op + 2, 2);
	memcpy(&val, op + 4, 4);
	reg &= VIRTIO_MMIO_WINDOW - 1;
	if (op[0] & 2)
		fuzz_happy_path(op[1] >> 7, (op[1] >> 2) & 0x1f ? 1u << ((op[1] >> 2) & 7) : 16,
				val % FUZZ_RAM_LEN);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &val, 4);
	virtio_mmio_access(vdev, reg, buf, len, op[0] & 1);
	fuzz_check(fdrv_rd(&drv, VIRTIO_MMIO_MAGIC_VALUE) == 0x74726976 &&
		   fdrv_rd(&drv, VIRTIO_MMIO_VERSION) == 2 &&
		   fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_ID) == 42);
	for (unsigned i = 0; i < 2; i++) {
		const struct virtq *q = &vdev->queues[i];

		fuzz_check(!q->ready || (q->size >= 1 && q->size <= FUZZ_QUEUE_MAX));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vm vm;
	static char cmdline[256];
	size_t nops, ram_off;

	if (size < 1)
		return 0;
	nops = data[0];
	if (size - 1 < nops * FUZZ_OP_LEN)
		nops = (size - 1) / FUZZ_OP_LEN;
	ram_off = 1 + nops * FUZZ_OP_LEN;
	fake_vm_init(&vm);
	ram = calloc(1, FUZZ_RAM_LEN);
	fuzz_check(ram != NULL);
	memcpy(ram, data + ram_off, size - ram_off < FUZZ_RAM_LEN ? size - ram_off : FUZZ_RAM_LEN);
	mem_layout(&vm.mem, ram, FUZZ_RAM_LEN);
	vm.mem.fd = -1;
	strcpy(cmdline, "console=ttyS0");
	memset(fuzz_config, 0, sizeof(fuzz_config));
	fuzz_check(virtio_mmio_add(&vm, &fake_ops, NULL, cmdline, sizeof(cmdline), &vdev) == 0);
	fdrv_init(&drv, &vm, &vm.mem, vdev);
	for (size_t i = 0; i < nops; i++)
		fuzz_access(data + 1 + i * FUZZ_OP_LEN);
	virtio_mmio_destroy(vdev);
	vm.nvirtio = 0;
	free(ram);
	fake_vm_destroy(&vm);
	return 0;
}
