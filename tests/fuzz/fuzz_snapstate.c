/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the snapshot's state loader (vmm/restore.c, snap_fdt.c, snap_cpu.c,
 * the devices' loaders): the input is a state.fdt file, hostile. There is no MAC to pass
 * here (sandboxctl checks it; the VMM's loader must survive any file anyway). The input is
 * parsed (snap_image_parse), then loaded into a VM made for it: RAM of the size it asks for
 * (at most FUZZ_RAM_MAX, mapped without reserve), its vCPUs, the UART and one fake virtio
 * device per window it names (a vsock-like one first, then blk-like ones), and a CPUID table
 * equal to the one it carries, so the loaders past the CPUID check are reached too.
 *
 * KVM is not needed: ioctl() is wrapped (-Wl,--wrap=ioctl) to accept everything (every MSR
 * too) and to say XSAVE is there, so every KVM_SET_* of a loader "succeeds" and the loader goes on
 * to its next field. What is checked is ours: bounds, lengths, counts, ring addresses in RAM.
 *
 * Built and run by tests/fuzz/run.sh snapstate. The seeds in tests/fuzz/corpus/snapstate/ were
 * made by the VMM's own writer (snap_fdt.c) for a 1-vCPU VM with one vsock-like device:
 * full-restore loads to the end (CPUID with the VMM's leaves, the irqchips' ids, the device's
 * id, queues and config as the fuzz VM has them); cpuid-without-vmm-leaves stops at the CPUID
 * check, where the only seed of this target used to stop; running-device has the device
 * past DRIVER_OK with its three queues ready in RAM (their rings checked, the device activated).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "virtio/virtio.h"
#include "vmm.h"

#define FUZZ_RAM_MAX (256ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int __wrap_ioctl(int fd, unsigned long req, ...);

/* Every KVM call succeeds; KVM_CHECK_EXTENSION says XSAVE and XCRS are there (not XSAVE2,
 * so the XSAVE area is struct kvm_xsave's 4 KiB). */
int __wrap_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	long arg;

	va_start(ap, req);
	arg = va_arg(ap, long);
	va_end(ap);
	if (req == KVM_CHECK_EXTENSION)
		return arg == KVM_CAP_XSAVE || arg == KVM_CAP_XCRS;
	if (req == KVM_SET_MSRS)
		return (int)((struct kvm_msrs *)arg)->nmsrs; /* all of them taken */
	return 0;
}

struct fake_dev {
	uint8_t config[8];
};

static uint64_t fake_features(void *dev)
{
	return 0;
}
static void fake_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	memcpy(data, ((struct fake_dev *)dev)->config + off, len);
}
static void fake_config_write(void *dev, uint32_t off, const uint8_t *data, uint32_t len)
{
}
static int fake_activate(void *dev, struct virtio_dev *vdev, uint64_t features)
{
	return 0;
}
static void fake_notify(void *dev, unsigned q)
{
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

#define FAKE_OPS(n, id, q)                                                                         \
	static const struct virtio_ops n = {                                                       \
		.name = #n,                                                                        \
		.device_id = id,                                                                   \
		.nqueues = q,                                                                      \
		.queue_max = 256,                                                                  \
		.config_len = 8,                                                                   \
		.features = fake_features,                                                         \
		.config_read = fake_config_read,                                                   \
		.config_write = fake_config_write,                                                 \
		.activate = fake_activate,                                                         \
		.queue_notify = fake_notify,                                                       \
		.quiesce = fake_quiesce,                                                           \
		.reset = fake_reset,                                                               \
		.destroy = fake_destroy,                                                           \
	}
FAKE_OPS(fake_vsock, 19, 3);
FAKE_OPS(fake_blk, 2, 1);

static struct fake_dev devs[VIRTIO_MMIO_MAX];
static struct vm vm;
static char cmdline[1024];

/* A VM shaped like the image: RAM, vCPU slots, UART, devices, CPUID. */
static int fuzz_vm(struct snap_image *img, void **ram)
{
	size_t cpuid_len;
	const void *cpuid = snapr_var(&img->r, 0, "cpuid", &cpuid_len);

	memset(&vm, 0, sizeof(vm));
	vm.vm_fd = vm.kvm_fd = -1;
	vm.mem.fd = -1;
	vm.loop.epoll_fd = -1;
	vm.ncpus = img->ncpus;
	if (img->ram_len > FUZZ_RAM_MAX || !cpuid || cpuid_len % sizeof(struct kvm_cpuid_entry2) ||
	    cpuid_len / sizeof(struct kvm_cpuid_entry2) > 256)
		return -1;
	*ram = mmap(NULL, img->ram_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (*ram == MAP_FAILED)
		return -1;
	mem_layout(&vm.mem, *ram, img->ram_len);
	vm.cpuid = calloc(1, sizeof(*vm.cpuid) + 256 * sizeof(struct kvm_cpuid_entry2));
	if (!vm.cpuid)
		return -1;
	vm.cpuid->nent = (uint32_t)(cpuid_len / sizeof(struct kvm_cpuid_entry2));
	memcpy(vm.cpuid->entries, cpuid, cpuid_len);
	for (unsigned i = 0; i < vm.ncpus; i++)
		vm.vcpus[i] = (struct vcpu){.vm = &vm, .index = i, .fd = 1000 + (int)i};
	if (serial_create(&vm, -1, &vm.serial) < 0)
		return -1;
	cmdline[0] = '\0';
	devs[0].config[0] = 3; /* the vsock-like one reads as a guest CID of 3, as vsock.c's */
	for (unsigned i = 0; i < img->nvirtio; i++) {
		struct virtio_dev *v;

		if (virtio_mmio_add(&vm, i == 0 ? &fake_vsock : &fake_blk, &devs[i], cmdline,
				    sizeof(cmdline), &v) < 0)
			return -1;
	}
	return 0;
}

static void fuzz_vm_free(void *ram, uint64_t ram_len)
{
	for (unsigned i = 0; i < vm.nvirtio; i++)
		virtio_mmio_destroy(vm.virtio[i]);
	if (vm.serial)
		serial_destroy(vm.serial);
	free(vm.cpuid);
	if (ram && ram != MAP_FAILED)
		munmap(ram, ram_len);
	memset(&vm, 0, sizeof(vm));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap_image img = {0};
	void *ram = NULL;

	if (size < 64 || size > (1u << 20))
		return 0;
	img.buf = malloc(size);
	if (!img.buf)
		return 0;
	memcpy(img.buf, data, size);
	img.len = size;
	if (snap_image_parse(&img) == 0) {
		/* The VMM's leaves as sandbox-vmm adds them before its jail (vm_restore_vcpus). */
		if (fuzz_vm(&img, &ram) == 0 && vm_restore_cpuid(&vm, &img) == 0)
			(void)vm_restore(&vm, &img);
		fuzz_vm_free(ram, img.ram_len);
	}
	snap_image_close(&img);
	return 0;
}
