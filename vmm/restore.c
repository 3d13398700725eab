/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Restore of a VM from a snapshot's directory (docs/snapshots.md): the state file is hostile
 * input, read whole, checked as a device tree and then field by field by each loader; the
 * VM is made with the snapshot's RAM (its memory file mapped privately) and vCPU count, and
 * its devices, created from the command line in the same order as at the snapshot, get
 * their state back. tests/fuzz/fuzz_snapstate.c drives everything here but the files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "virtio/virtio.h"
#include "vmm.h"

int snap_image_open(const char *dir, struct snap_image *img)
{
	char path[4096];
	int fd;

	memset(img, 0, sizeof(*img));
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, SNAP_STATE_FILE) >= sizeof(path))
		return snapr_fail(&img->r, -ENAMETOOLONG, "%s: path too long", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return snapr_fail(&img->r, -errno, "%s: %s", path, strerror(errno));
	return snap_image_read(fd, path, img);
}

int snap_image_read(int fd, const char *name, struct snap_image *img)
{
	struct stat stt;
	int err;
	ssize_t n;

	memset(img, 0, sizeof(*img));
	if (fstat(fd, &stt) < 0 || !S_ISREG(stt.st_mode) || stt.st_size < 64 ||
	    (uint64_t)stt.st_size > SNAP_STATE_MAX) {
		close(fd);
		return snapr_fail(&img->r, -EBADMSG, "%s: not a state file (%lld bytes)", name,
				  (long long)stt.st_size);
	}
	img->len = (size_t)stt.st_size;
	img->buf = malloc(img->len);
	if (!img->buf) {
		close(fd);
		return -ENOMEM;
	}
	/* Read once, whole: what is parsed and loaded is this copy, whatever the file does
	 * after (a memfd sandboxctl sealed cannot change; a path could be replaced). */
	n = pread(fd, img->buf, img->len, 0);
	close(fd);
	if (n != (ssize_t)img->len) {
		err = n < 0 ? -errno : -EIO;
		return snapr_fail(&img->r, err, "%s: cannot read it", name);
	}
	return snap_image_parse(img);
}

int snap_image_parse(struct snap_image *img)
{
	const char *arch;
	size_t arch_len;
	uint32_t format;
	int err, root = 0;

	if ((err = snapr_open(&img->r, img->buf, img->len)) < 0)
		return err;
	if ((err = snapr_u32(&img->r, root, "format", &format)) < 0)
		return err;
	if (format != SNAP_FORMAT_VERSION)
		return snapr_fail(&img->r, -EPROTONOSUPPORT,
				  "state format %u, this VMM reads format %u: made by %s VMM",
				  format, SNAP_FORMAT_VERSION,
				  format > SNAP_FORMAT_VERSION ? "a newer" : "an older");
	arch = snapr_var(&img->r, root, "arch", &arch_len);
	if (!arch)
		return -ENOENT;
	if (arch_len != sizeof(SNAP_ARCH) || memcmp(arch, SNAP_ARCH, arch_len) != 0)
		return snapr_fail(&img->r, -EBADMSG, "not an x86_64 snapshot");
	if ((err = snapr_u64(&img->r, root, "ram-bytes", &img->ram_len)) < 0 ||
	    (err = snapr_u32(&img->r, root, "ncpus", &img->ncpus)) < 0 ||
	    (err = snapr_u32(&img->r, root, "cpuid-nonce", &img->cpuid_nonce)) < 0 ||
	    (err = snapr_u32_max(&img->r, root, "nvirtio", VIRTIO_MMIO_MAX, &img->nvirtio)) < 0)
		return err;
	if (img->ncpus < 1 || img->ncpus > VCPU_MAX)
		return snapr_fail(&img->r, -EBADMSG, "%u vCPUs: from 1 to %u", img->ncpus,
				  VCPU_MAX);
	if (img->ram_len < (MEM_MIN_MIB << 20) || img->ram_len > (MEM_MAX_MIB << 20) ||
	    img->ram_len % (1u << 20))
		return snapr_fail(&img->r, -EBADMSG, "%llu bytes of RAM: not a size we boot",
				  (unsigned long long)img->ram_len);
	return 0;
}

void snap_image_close(struct snap_image *img)
{
	free(img->buf);
	img->buf = NULL;
}

/*
 * The snapshot's CPUID must be this host's, entry for entry: a guest that saw a feature must
 * not wake up on a CPU without it. Compared as vCPU 0 sees them: the host's table carries
 * the APIC id of whichever host CPU answered KVM_GET_SUPPORTED_CPUID, which cpuid_filter
 * replaces.
 */
static int snap_check_cpuid(struct vm *vm, struct snap_image *img)
{
	size_t len, n = vm->cpuid->nent * sizeof(vm->cpuid->entries[0]);
	const void *saved = snapr_var(&img->r, 0, "cpuid", &len);
	struct kvm_cpuid_entry2 *a = NULL, *b = NULL;
	int err = 0;

	if (!saved)
		return -ENOENT;
	if (len != n)
		goto differs;
	a = malloc(n);
	b = malloc(n);
	if (!a || !b) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(a, saved, n);
	memcpy(b, vm->cpuid->entries, n);
	cpuid_filter(a, vm->cpuid->nent, 0, img->ncpus);
	cpuid_filter(b, vm->cpuid->nent, 0, img->ncpus);
	if (memcmp(a, b, n) == 0)
		goto out;
differs:
	err = snapr_fail(&img->r, -EXDEV,
			 "the snapshot was made on a CPU with other features (its CPUID differs "
			 "from this host's)");
out:
	free(a);
	free(b);
	return err;
}

int vm_restore_cpuid(struct vm *vm, struct snap_image *img)
{
	vm->cpuid_nonce = img->cpuid_nonce;
	if (cpuid_add_vmm_leaves(vm->cpuid->entries, &vm->cpuid->nent, vm->cpuid->nent,
				 img->cpuid_nonce) < 0)
		return snapr_fail(&img->r, -ENOSPC, "cannot set the VMM's CPUID leaves");
	return 0;
}

int vm_restore_vcpus(struct vm *vm, struct snap_image *img)
{
	int err;

	if ((err = vm_restore_cpuid(vm, img)) < 0)
		return err;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if ((err = vcpu_create_restored(vm, i)) < 0)
			return snapr_fail(&img->r, err, "cannot create vcpu%u", i);
	return 0;
}

int vm_restore(struct vm *vm, struct snap_image *img)
{
	int err;

	if ((err = snap_check_cpuid(vm, img)) < 0)
		return err;
	if (vm->nvirtio != img->nvirtio)
		return snapr_fail(&img->r, -EBADMSG,
				  "the snapshot has %u virtio devices, the command line gives %u",
				  img->nvirtio, vm->nvirtio);
	if ((err = vm_load_state(vm, &img->r, 0)) < 0 ||
	    (err = serial_load(vm->serial, &img->r, 0)) < 0)
		return err;
	for (unsigned i = 0; i < vm->nvirtio; i++)
		if ((err = virtio_mmio_load(vm->virtio[i], i, &img->r, 0)) < 0)
			return err;
	for (unsigned i = 0; i < vm->ncpus; i++) {
		if (vm->vcpus[i].fd < 0)
			return snapr_fail(&img->r, -EBADF, "vcpu%u was not created", i);
		if ((err = vcpu_load_state(&vm->vcpus[i], &img->r, 0)) < 0)
			return err;
	}
	return 0;
}

void vm_restore_devices_resume(struct vm *vm)
{
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		if (vsock_transport_reset(vm->virtio[i]) == 0)
			continue; /* a vsock device: its connections are gone */
		virtio_mmio_kick_all(vm->virtio[i]);
	}
}
