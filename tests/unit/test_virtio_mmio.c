/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/virtio/mmio.c: the register file, negotiation, queue set-up and misbehaving drivers. */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>

#include "fake_driver.h"
#include "fake_mem.h"
#include "fake_vm.h"
#include "virtio/virtio.h"

/* A device that records what the transport tells it. */
struct fake_dev {
	uint8_t config[8];
	unsigned activated, notified, resets, last_queue;
	uint64_t features;
	int activate_ret;
};

static uint64_t fake_features(void *dev)
{
	return 1ull << 5;
}
static void fake_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	memcpy(data, ((struct fake_dev *)dev)->config + off, len);
}
static void fake_config_write(void *dev, uint32_t off, const uint8_t *data, uint32_t len)
{
	memcpy(((struct fake_dev *)dev)->config + off, data, len);
}
static int fake_activate(void *dev, struct virtio_dev *vdev, uint64_t features)
{
	struct fake_dev *f = dev;

	f->activated++;
	f->features = features;
	return f->activate_ret;
}
static void fake_notify(void *dev, unsigned q)
{
	((struct fake_dev *)dev)->notified++;
	((struct fake_dev *)dev)->last_queue = q;
}
static int fake_quiesce(void *dev)
{
	return 0;
}
static void fake_reset(void *dev)
{
	((struct fake_dev *)dev)->resets++;
}
static void fake_destroy(void *dev)
{
}

static const struct virtio_ops fake_ops = {
	.name = "fake",
	.device_id = 42,
	.nqueues = 2,
	.queue_max = 64,
	.config_len = 8,
	.features = fake_features,
	.config_read = fake_config_read,
	.config_write = fake_config_write,
	.activate = fake_activate,
	.queue_notify = fake_notify,
	.quiesce = fake_quiesce,
	.reset = fake_reset,
	.destroy = fake_destroy,
};

static struct vm vm;
static struct fake_dev dev;
static struct virtio_dev *vdev;
static struct fake_driver drv;
static char cmdline[256];

static void setup(void)
{
	fake_vm_init(&vm);
	fake_mem_create(&vm.mem, 64 * MIB, 0);
	memset(&dev, 0, sizeof(dev));
	strcpy(cmdline, "console=ttyS0");
	cr_assert(
		eq(int, virtio_mmio_add(&vm, &fake_ops, &dev, cmdline, sizeof(cmdline), &vdev), 0));
	fdrv_init(&drv, &vm, &vm.mem, vdev);
}

static void teardown(void)
{
	virtio_mmio_destroy(vdev);
	fake_mem_destroy(&vm.mem);
	fake_vm_destroy(&vm);
}

TestSuite(virtio_mmio, .init = setup, .fini = teardown);

Test(virtio_mmio, identity_and_cmdline)
{
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_VERSION), 2));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_ID), 42));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_QUEUE_NUM_MAX), 64));
	cr_assert(eq(str, cmdline, "console=ttyS0 virtio_mmio.device=4K@0xd0000000:5"));
	/* The window is on the MMIO bus at its base. */
	uint32_t magic = 0;
	cr_assert(bus_access(&vm.mmio, 0xd0000000, (uint8_t *)&magic, 4, false));
	cr_assert(eq(u32, magic, 0x74726976));
}

Test(virtio_mmio, features_offered)
{
	fdrv_wr(&drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_FEATURES) & (1u << 5), 1u << 5));
	fdrv_wr(&drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_FEATURES) & 1u, 1u),
		  "VERSION_1 (bit 32)");
	fdrv_wr(&drv, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 7);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_DEVICE_FEATURES), 0));
}

Test(virtio_mmio, legacy_driver_refused)
{
	fdrv_negotiate(&drv, 1ull << 5); /* no VERSION_1 */
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK, 0));
}

Test(virtio_mmio, unoffered_feature_refused)
{
	fdrv_negotiate(&drv, (1ull << VIRTIO_F_VERSION_1) | (1ull << 7));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK, 0));
}

Test(virtio_mmio, happy_path_activates_and_notifies)
{
	fdrv_negotiate(&drv, (1ull << VIRTIO_F_VERSION_1) | (1ull << 5));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK,
		     VIRTIO_CONFIG_S_FEATURES_OK));
	fdrv_queue_setup(&drv, 0, 16, 0x10000, 0x11000, 0x12000);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_QUEUE_READY), 1));
	cr_assert(vdev->queues[0].ready);
	cr_assert(eq(u64, vdev->queues[0].desc_gpa, 0x10000));
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS,
		fdrv_rd(&drv, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
	cr_assert(eq(u32, dev.activated, 1));
	cr_assert(eq(u64, dev.features, (1ull << VIRTIO_F_VERSION_1) | (1ull << 5)));
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	cr_assert(eq(u32, dev.notified, 1));
	cr_assert(eq(u32, dev.last_queue, 1));
	/* A notify for a queue that does not exist is dropped. */
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_NOTIFY, 9);
	cr_assert(eq(u32, dev.notified, 1));
	/* Interrupt status and its acknowledgement. */
	virtio_notify_used(vdev);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_INTERRUPT_STATUS), 1));
	fdrv_wr(&drv, VIRTIO_MMIO_INTERRUPT_ACK, 1);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_INTERRUPT_STATUS), 0));
}

Test(virtio_mmio, notify_before_driver_ok_is_ignored)
{
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	cr_assert(eq(u32, dev.notified, 0));
}

Test(virtio_mmio, bad_queue_setups_need_reset)
{
	fdrv_negotiate(&drv, (1ull << VIRTIO_F_VERSION_1));
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_SEL, 0);
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_NUM, 128); /* above QueueNumMax */
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_READY, 1);
	cr_assert(not(vdev->queues[0].ready));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET,
		     VIRTIO_CONFIG_S_NEEDS_RESET),
		  "marked before DRIVER_OK too");
	/* The driver cannot go on to DRIVER_OK without resetting. */
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS,
		VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK |
			VIRTIO_CONFIG_S_DRIVER_OK);
	cr_assert(eq(u32, dev.activated, 0));
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	fdrv_negotiate(&drv, (1ull << VIRTIO_F_VERSION_1));
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_SEL, 0);
	/* Rings outside guest RAM. */
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_NUM, 16);
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_DESC_HIGH, 0x10);
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_READY, 1);
	cr_assert(not(vdev->queues[0].ready));
}

Test(virtio_mmio, late_queue_writes_and_driver_ok_failures_set_needs_reset)
{
	fdrv_negotiate(&drv, (1ull << VIRTIO_F_VERSION_1));
	fdrv_queue_setup(&drv, 0, 16, 0x10000, 0x11000, 0x12000);
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS,
		fdrv_rd(&drv, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
	/* Moving a live ring is out of sequence. */
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x20000);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET,
		     VIRTIO_CONFIG_S_NEEDS_RESET));
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_INTERRUPT_STATUS) & 2, 2), "config interrupt");
	cr_assert(eq(u64, vdev->queues[0].desc_gpa, 0x10000), "the ring did not move");
	/* A device in NEEDS_RESET serves nothing until the driver resets it. */
	fdrv_wr(&drv, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	cr_assert(eq(u32, dev.notified, 0));
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, 0);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS), 0));
	cr_assert(eq(u32, dev.resets, 1));
	cr_assert(not(vdev->queues[0].ready));
}

Test(virtio_mmio, activate_failure_needs_reset)
{
	dev.activate_ret = -1;
	fdrv_negotiate(&drv, (1ull << VIRTIO_F_VERSION_1));
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS,
		fdrv_rd(&drv, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET,
		     VIRTIO_CONFIG_S_NEEDS_RESET));
}

Test(virtio_mmio, config_space_bounds)
{
	uint8_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];

	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG, buf, 8, true);
	cr_assert(eq(int, memcmp(dev.config, buf, 8), 0));
	/* Straddling the end of the config space: refused, reads as zero, device untouched. */
	memset(out, 0xaa, sizeof(out));
	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG + 6, out, 4, false);
	cr_assert(eq(u8, out[0], 0));
	virtio_mmio_access(vdev, VIRTIO_MMIO_CONFIG + 0xe00, buf, 1, true);
	cr_assert(eq(u8, dev.config[0], 1));
}

Test(virtio_mmio, unaligned_register_access_ignored)
{
	uint16_t half = 0xffff;

	virtio_mmio_access(vdev, VIRTIO_MMIO_STATUS, (uint8_t *)&half, 2, true);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS), 0));
	virtio_mmio_access(vdev, VIRTIO_MMIO_STATUS + 1, (uint8_t *)&half, 2, false);
	cr_assert(eq(u16, half, 0));
}

Test(virtio_mmio, status_bits_cannot_be_cleared)
{
	fdrv_negotiate(&drv, (1ull << VIRTIO_F_VERSION_1));
	fdrv_wr(&drv, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	cr_assert(eq(u32, fdrv_rd(&drv, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK,
		     VIRTIO_CONFIG_S_FEATURES_OK));
}

Test(virtio_mmio_reg, ops_with_a_hole_refused)
{
	struct virtio_ops holey = fake_ops;
	struct virtio_dev *v;
	char cl[64] = "";

	fake_vm_init(&vm);
	holey.reset = NULL;
	cr_assert(eq(int, virtio_mmio_add(&vm, &holey, &dev, cl, sizeof(cl), &v), -EINVAL));
	holey = fake_ops;
	holey.queue_max = 48; /* not a power of 2 */
	cr_assert(eq(int, virtio_mmio_add(&vm, &holey, &dev, cl, sizeof(cl), &v), -EINVAL));
	cr_assert(eq(u32, vm.nvirtio, 0));
	cr_assert(eq(str, cl, ""));
	fake_vm_destroy(&vm);
}

Test(virtio_mmio_reg, device_words_go_before_init_arguments)
{
	static const struct {
		const char *before, *after;
	} cases[] = {
		{"", "virtio_mmio.device=4K@0xd0000000:5"},
		{"quiet -- --direct /dev/vda",
		 "quiet virtio_mmio.device=4K@0xd0000000:5 -- --direct /dev/vda"},
		{"-- a", "virtio_mmio.device=4K@0xd0000000:5 -- a"},
		{"quiet --", "quiet virtio_mmio.device=4K@0xd0000000:5 --"},
		/* Not a separator: inside quotes, or part of a word. */
		{"x=\"a -- b\" --y", "x=\"a -- b\" --y virtio_mmio.device=4K@0xd0000000:5"},
	};
	struct virtio_dev *v;
	char cl[128];

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fake_vm_init(&vm);
		strcpy(cl, cases[i].before);
		cr_assert(eq(int, virtio_mmio_add(&vm, &fake_ops, &dev, cl, sizeof(cl), &v), 0));
		cr_assert(eq(str, cl, (char *)cases[i].after));
		virtio_mmio_destroy(v);
		fake_vm_destroy(&vm);
	}
	/* One byte short: refused, and the command line is left as it was. */
	fake_vm_init(&vm);
	strcpy(cl, "quiet -- a");
	cr_assert(eq(int, virtio_mmio_add(&vm, &fake_ops, &dev, cl, 10 + 35, &v), -E2BIG));
	cr_assert(eq(str, cl, "quiet -- a"));
	fake_vm_destroy(&vm);
}
