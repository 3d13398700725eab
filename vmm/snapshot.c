/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot and restore of the whole VM (docs/snapshots.md). A snapshot is written into a
 * directory the caller made (empty, beside where it will be renamed to): `state.fdt`, the
 * machine's state as a device tree (snap_fdt.c), and `memory`, the RAM as a sparse file of
 * exactly its size. Disks are not copied: each writable disk's top layer is frozen where it
 * lies and the VM goes on over a new empty layer the caller names. Everything written is
 * fsynced before the reply; the caller adds meta.yaml and its MAC and renames the directory
 * into place, so a snapshot that exists is whole.
 *
 * restore.c reads it back.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
#include "virtio/virtio.h"
#include "vmm.h"

#define SNAP_PAUSE_MS 2000

/* ---- writing ---- */

static int snap_write_memory(const struct guest_mem *mem, int fd, uint64_t *written,
			     uint8_t sha256[32])
{
	int err = mem_copy_to_fd(mem, fd, written, sha256);

	if (!err && fsync(fd) < 0)
		err = -errno;
	return err;
}

/* Write a fork's frozen RAM (mem_freeze: the memory files, not the running guest's mapping)
 * as the snapshot's `memory`. */
static int snap_write_frozen(struct vm *vm, int dirfd, uint64_t *written, uint8_t sha256[32],
			     char *msg, size_t msg_len)
{
	struct guest_mem frozen = vm->mem;
	uint8_t *area;
	int fd, err;

	/* A second, read-only view of the same files: map them like the guest's RAM, at an
	 * address of our own. */
	area = mmap(NULL, frozen.ram_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		    -1, 0);
	if (area == MAP_FAILED) {
		err = -errno;
		snprintf(msg, msg_len, "cannot map the frozen memory: %s", strerror(errno));
		return err;
	}
	frozen.base = area;
	err = mem_map_frozen_view(&frozen);
	fd = err ? -1
		 : openat(dirfd, SNAP_MEMORY_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (!err)
		err = fd < 0 ? -errno : snap_write_memory(&frozen, fd, written, sha256);
	if (!err && fsync(dirfd) < 0)
		err = -errno;
	if (err)
		snprintf(msg, msg_len, "writing the memory file: %s", strerror(-err));
	if (fd >= 0)
		close(fd);
	munmap(area, frozen.ram_len);
	return err;
}

/* The root node's properties: what a restore needs before it can make the VM. */
static void snap_save_machine(struct vm *vm, struct snap_writer *w, bool touched_hint)
{
	uint8_t *touched = NULL;
	size_t len = 0;

	snapw_u32(w, "format", SNAP_FORMAT_VERSION);
	snapw_prop(w, "arch", SNAP_ARCH, sizeof(SNAP_ARCH));
	snapw_u64(w, "ram-bytes", vm->mem.ram_len);
	snapw_u32(w, "ncpus", vm->ncpus);
	snapw_u32(w, "cpuid-nonce", vm->cpuid_nonce);
	snapw_prop(w, "cpuid", vm->cpuid->entries, vm->cpuid->nent * sizeof(vm->cpuid->entries[0]));
	snapw_u32(w, "nvirtio", vm->nvirtio);
	/* What a restore will likely touch first (docs/snapshots.md, "touched-pages"): taken
	 * before the memory is written, whose reads would map every page. A hint only: a VM
	 * that cannot tell (a fresh one, a lazy restore's) has none, nor a fork's (it restores
	 * on this host, and the scan would lengthen its pause). */
	if (touched_hint && mem_touched_pages(&vm->mem, &touched, &len) == 0)
		snapw_prop(w, "touched-pages", touched, len);
	free(touched);
}

/* Every device, then the VM's and the vCPUs' KVM state. The devices were quiesced, so
 * nothing raises an interrupt between the irqchip's save and the vCPUs'. */
static int snap_save_all(struct vm *vm, struct snap_writer *w, bool touched_hint)
{
	int err;

	snap_save_machine(vm, w, touched_hint);
	serial_save(vm->serial, w);
	for (unsigned i = 0; i < vm->nvirtio; i++)
		virtio_mmio_save(vm->virtio[i], i, w);
	if ((err = vm_save_state(vm, w)) < 0)
		return err;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if ((err = vcpu_save_state(&vm->vcpus[i], w)) < 0)
			return err;
	return 0;
}

static int snap_write_file(int dirfd, const char *name, const void *buf, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600), err;

	if (fd < 0)
		return -errno;
	err = mem_pwrite_full(fd, buf, len, 0);
	if (!err && fsync(fd) < 0)
		err = -errno;
	close(fd);
	return err;
}

/* Freeze each writable disk onto the new top the caller named for it. */
static int snap_freeze_disks(struct vm *vm, const struct snapshot_req *req, char *msg,
			     size_t msg_len)
{
	unsigned disk = 0;

	for (unsigned i = 0; i < vm->nvirtio; i++) {
		struct disk_error derr = {""};
		int err;

		if (!blk_is_writable(vm->virtio[i]))
			continue;
		if (disk >= req->ntops || !req->new_tops[disk] || !req->new_tops[disk][0]) {
			snprintf(msg, msg_len, "writable disk %u needs a new top layer", disk);
			return -EINVAL;
		}
		err = blk_freeze(vm->virtio[i], req->new_tops[disk], &derr);
		if (err < 0) {
			snprintf(msg, msg_len, "freezing disk %u: %s", disk,
				 derr.msg[0] ? derr.msg : strerror(-err));
			return err;
		}
		disk++;
	}
	return 0;
}

int vm_snapshot(struct vm *vm, const struct snapshot_req *req, struct snapshot_stats *st, char *msg,
		size_t msg_len)
{
	uint64_t t0 = vmm_now_ns(), t_paused;
	bool was_paused = vcpu_paused(vm);
	struct snap_writer w;
	const void *state;
	size_t state_len;
	int dirfd = -1, memfd = -1, err;

	memset(st, 0, sizeof(*st));
	msg[0] = '\0';
	/* A lazy restore's RAM is whole first: the memfd has holes where the pager has not put
	 * pages in yet (it does within seconds; the caller asks again). Not waited for here:
	 * this is the I/O thread, which takes the pager's word. */
	if (__atomic_load_n(&vm->mem.filling, __ATOMIC_ACQUIRE)) {
		snprintf(msg, msg_len, "its memory is still arriving from its pager: try again");
		return -EAGAIN;
	}
	dirfd = req->dir_fd >= 0 ? fcntl(req->dir_fd, F_DUPFD_CLOEXEC, 0)
				 : open(req->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		err = -errno;
		snprintf(msg, msg_len, "%s: %s", req->dir, strerror(errno));
		return err;
	}
	if ((err = snapw_init(&w)) < 0) {
		close(dirfd);
		return err;
	}
	/* The guest's stall starts with the kick, not once every vCPU is parked. */
	t_paused = vmm_now_ns();
	if (!was_paused && (err = vcpu_pause_all(vm, SNAP_PAUSE_MS)) < 0) {
		snprintf(msg, msg_len, "cannot pause the vCPUs: %s", strerror(-err));
		goto out;
	}
	for (unsigned i = 0; i < vm->nvirtio; i++) {
		if ((err = virtio_mmio_quiesce(vm->virtio[i])) < 0) {
			snprintf(msg, msg_len, "virtio device %u cannot finish its I/O: %s", i,
				 strerror(-err));
			goto out_resume;
		}
	}
	if ((err = snap_save_all(vm, &w, !req->live)) < 0 ||
	    (err = snapw_finish(&w, &state, &state_len)) < 0) {
		snprintf(msg, msg_len, "cannot save the machine's state: %s", strerror(-err));
		goto out_resume;
	}
	if (req->live) {
		/* A fork: RAM is not written while the guest waits. The memfd becomes the
		 * snapshot's memory as it is, and the guest goes on over private copies. */
		if ((err = mem_freeze(&vm->mem)) < 0) {
			snprintf(msg, msg_len, "cannot freeze the guest's memory: %s",
				 strerror(-err));
			if (err == -ENOTRECOVERABLE)
				vm_request_stop(vm, VM_EXIT_VMM_ERROR, "guest memory lost: %s",
						msg);
			goto out_resume;
		}
		if ((err = mem_frozen_paths(&vm->mem, st->memory_path, sizeof(st->memory_path))) <
		    0) {
			snprintf(msg, msg_len, "too many memory files to name");
			goto out_resume;
		}
	} else {
		memfd = openat(dirfd, SNAP_MEMORY_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			       0600);
		if (memfd < 0 || (err = snap_write_memory(&vm->mem, memfd, &st->memory_bytes,
							  st->memory_sha256)) < 0) {
			err = memfd < 0 ? -errno : err;
			snprintf(msg, msg_len, "writing %s/%s: %s", req->dir, SNAP_MEMORY_FILE,
				 strerror(-err));
			goto out_resume;
		}
		/* Our only fd to the file, closed before the reply: sandboxctl seals the
		 * snapshot only once no process has it open for writing (a read lease). */
		close(memfd);
		memfd = -1;
		/* the write mapped every page: the next snapshot's touched-pages count from here */
		if (__atomic_load_n(&vm->mem.touched_marked, __ATOMIC_ACQUIRE) &&
		    mem_touched_mark(&vm->mem) < 0)
			log_warn("snapshot: the touched pages still count from before it");
	}
	/* Disks last: a snapshot that failed before this point leaves them as they were. */
	if ((err = snap_freeze_disks(vm, req, msg, msg_len)) < 0)
		goto out_resume;
	if ((err = snap_write_file(dirfd, SNAP_STATE_FILE, state, state_len)) < 0 ||
	    (fsync(dirfd) < 0 && (err = -errno))) {
		snprintf(msg, msg_len, "writing %s/%s: %s", req->dir, SNAP_STATE_FILE,
			 strerror(-err));
		goto out_resume;
	}
	st->state_bytes = state_len;
	err = 0;
out_resume:
	st->pause_ns = vmm_now_ns() - t_paused;
	if (!was_paused && !req->stop)
		vcpu_resume_all(vm);
	/* The durable copy of a fork's memory, from the frozen file, while the guest runs. */
	if (!err && req->live && req->durable)
		err = snap_write_frozen(vm, dirfd, &st->memory_bytes, st->memory_sha256, msg,
					msg_len);
out:
	if (memfd >= 0)
		close(memfd);
	close(dirfd);
	snapw_free(&w);
	st->total_ns = vmm_now_ns() - t0;
	return err;
}
