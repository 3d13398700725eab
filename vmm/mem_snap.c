/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guest RAM in snapshots and forks (docs/snapshots.md, "Memory").
 *
 * A restored VM maps its snapshot's memory file privately: what the guest only reads stays
 * in the page cache, shared by every VM restored from the file, and what it writes becomes
 * anonymous copies. A fork freezes RAM without copying it: a fresh VM's memfd becomes the
 * frozen file as it is and the VM goes on over a private mapping of it. After that, what the
 * VM wrote are exactly its anonymous pages (/proc/self/pagemap says which), so the next
 * freeze copies only those into a sparse "delta" memfd and maps its data extents over the
 * lower files, for the parent and for the children alike. A chain longer than
 * MEM_DELTAS_MAX + 1 files is compacted into one new memfd (a copy of all of RAM).
 */
#include <endian.h>
#include <errno.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "vmm.h"

#define MEM_PAGE       4096u
#define MEM_SCAN_CHUNK (2u << 20) /* the unit of the sparse scan */
#define MEM_WRITE_MAX  (8u << 20) /* one pwrite */
#define PAGEMAP_BATCH  4096u	  /* entries read at once: 16 MiB of RAM */
#define PM_PRESENT     (1ull << 63)
#define PM_SWAPPED     (1ull << 62)
#define PM_FILE	       (1ull << 61) /* a page of a file (or shared anonymous memory) */

int mem_pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len > MEM_WRITE_MAX ? MEM_WRITE_MAX : len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* Map every data extent of `fd` privately at the same offset over [base, base+len). */
static int mem_map_extents(uint8_t *base, uint64_t len, int fd)
{
	off_t data = 0, hole;

	for (;;) {
		data = lseek(fd, data, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? 0 : -errno;
		if ((uint64_t)data >= len)
			return 0;
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if ((uint64_t)hole > len)
			hole = (off_t)len;
		if (mmap(base + data, (size_t)(hole - data), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED, fd, data) == MAP_FAILED)
			return -errno;
		data = hole;
	}
}

/* (Re)map RAM over mem->fd and its deltas, privately, at mem->base. */
static int mem_map_layers(struct guest_mem *mem)
{
	int err;

	if (mmap(mem->base, mem->ram_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED, mem->fd, 0) == MAP_FAILED)
		return -errno;
	for (unsigned i = 0; i < mem->ndeltas; i++)
		if ((err = mem_map_extents(mem->base, mem->ram_len, mem->deltas[i])) < 0)
			return err;
	madvise(mem->base, mem->ram_len, MADV_DONTDUMP);
	madvise(mem->base, mem->ram_len, MADV_DONTFORK);
	return 0;
}

/* `fd` (taken: closed on failure) when it is a file of exactly `ram_len` bytes; else, with
 * `fd` < 0, `path` opened. */
static int mem_open_checked(int fd, const char *path, uint64_t ram_len)
{
	struct stat st;

	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != ram_len) {
		log_error("%s: %llu bytes, the snapshot's RAM is %llu", path,
			  (unsigned long long)st.st_size, (unsigned long long)ram_len);
		close(fd);
		return -EBADMSG;
	}
	return fd;
}

int mem_open_files(struct guest_mem *mem, const char *const *paths, unsigned npaths, int first_fd,
		   uint64_t ram_len)
{
	void *base;
	int fd, err;

	if (npaths < 1 || npaths > MEM_DELTAS_MAX + 1) {
		if (first_fd >= 0)
			close(first_fd);
		return -EINVAL;
	}
	fd = mem_open_checked(first_fd, paths[0], ram_len);
	if (fd < 0)
		return fd;
	base = mem_map_aligned(fd, ram_len, MAP_PRIVATE);
	if (base == MAP_FAILED) {
		err = -errno;
		close(fd);
		return err;
	}
	mem_layout(mem, base, ram_len);
	mem->fd = fd;
	mem->private_file = true;
	mem->ndeltas = 0;
	for (unsigned i = 1; i < npaths; i++) {
		if ((fd = mem_open_checked(-1, paths[i], ram_len)) < 0) {
			err = fd;
			goto fail;
		}
		mem->deltas[mem->ndeltas++] = fd;
	}
	if ((err = mem_map_layers(mem)) < 0)
		goto fail;
	return 0;
fail:
	mem_destroy(mem);
	return err;
}

/* ---- writing RAM out ---- */

static bool mem_page_is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;

	for (unsigned i = 0; i < MEM_PAGE / 8; i += 4)
		if (w[i] | w[i + 1] | w[i + 2] | w[i + 3])
			return false;
	return true;
}

static bool fd_has_data(int fd, uint64_t off, uint64_t len)
{
	off_t data = lseek(fd, (off_t)off, SEEK_DATA);

	if (data < 0)
		return errno != ENXIO; /* no SEEK_DATA here: assume data */
	return (uint64_t)data < off + len;
}

/*
 * Whether [off, off+len) of RAM may hold anything but zeros: a memory file has data there,
 * or (a private mapping) the guest wrote a page of it since, which makes it anonymous,
 * resident or swapped out: /proc/self/pagemap (`pm`) says so (mincore would miss a page
 * that was swapped out).
 */
static bool chunk_maybe_used(const struct guest_mem *mem, int pm, uint64_t off, uint64_t len)
{
	uint64_t entries[MEM_SCAN_CHUNK / MEM_PAGE], n = (len + MEM_PAGE - 1) / MEM_PAGE;
	uint64_t first = ((uintptr_t)mem->base + off) / MEM_PAGE;

	if (fd_has_data(mem->fd, off, len))
		return true;
	for (unsigned i = 0; i < mem->ndeltas; i++)
		if (fd_has_data(mem->deltas[i], off, len))
			return true;
	if (!mem->private_file)
		return false;
	if (pm < 0 || pread(pm, entries, n * 8, (off_t)(first * 8)) != (ssize_t)(n * 8))
		return true; /* cannot tell: scan it */
	for (uint64_t i = 0; i < n; i++)
		if ((entries[i] & PM_SWAPPED) ||
		    ((entries[i] & PM_PRESENT) && !(entries[i] & PM_FILE)))
			return true;
	return false;
}

/* /proc/self/pagemap, opened once and kept: a jailed VMM has no /proc to open it in. */
static int pagemap_fd = -1;

int mem_pagemap_open(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct caps[2], lowered[2];
	bool have;
	int err = 0;

	if (pagemap_fd >= 0)
		return 0;
	have = syscall(SYS_capget, &h, caps) == 0;
	/* Opened without CAP_SYS_ADMIN in effect: the file then hides physical page frames
	 * for good (the kernel decides at open), which a jailed VMM must never read. */
	memcpy(lowered, caps, sizeof(caps));
	lowered[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
	if (have && syscall(SYS_capset, &h, lowered) < 0)
		return -errno;
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pagemap_fd < 0)
		err = -errno;
	if (have && syscall(SYS_capset, &h, caps) < 0 && !err)
		err = -errno;
	return err;
}

/*
 * The memory file's page digest (wire/api_proto.h, api_snapshot_result): SHA-256 fetched once,
 * before the jail (OpenSSL may read its configuration on first use, which the jail's filters
 * and its empty root would refuse). A digest context made and tried here, so that nothing in
 * the jail is a first use.
 */
static EVP_MD *mem_sha256;

int mem_digest_init(void)
{
	EVP_MD_CTX *ctx;
	uint8_t md[32];
	unsigned len = 0;
	bool ok;

	if (mem_sha256)
		return 0;
	mem_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	ctx = EVP_MD_CTX_new();
	ok = mem_sha256 && ctx && EVP_DigestInit_ex2(ctx, mem_sha256, NULL) &&
	     EVP_DigestUpdate(ctx, md, 0) && EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
	EVP_MD_CTX_free(ctx);
	if (!ok) {
		EVP_MD_free(mem_sha256);
		mem_sha256 = NULL;
		return -ENOSYS;
	}
	return 0;
}

/* One page that is not all zeros into the page digest: its offset, then its bytes. */
static int mem_digest_page(EVP_MD_CTX *ctx, uint64_t off, const uint8_t *page, uint64_t len)
{
	uint64_t le = htole64(off);

	return EVP_DigestUpdate(ctx, &le, sizeof(le)) && EVP_DigestUpdate(ctx, page, len) ? 0
											  : -EIO;
}

int mem_copy_to_fd(const struct guest_mem *mem, int fd, uint64_t *written, uint8_t sha256[32])
{
	uint64_t run_start = 0, run_len = 0;
	EVP_MD_CTX *ctx = NULL;
	unsigned mdlen = 0;
	int err = 0, pm = -1;

	*written = 0;
	if (sha256) {
		ctx = EVP_MD_CTX_new();
		if (!mem_sha256 || !ctx || !EVP_DigestInit_ex2(ctx, mem_sha256, NULL)) {
			EVP_MD_CTX_free(ctx);
			return -ENOSYS; /* mem_digest_init not called, or it failed */
		}
	}
	if (ftruncate(fd, (off_t)mem->ram_len) < 0) {
		err = -errno;
		goto out;
	}
	if (mem->private_file && mem_pagemap_open() == 0)
		pm = pagemap_fd;
	for (uint64_t off = 0; off < mem->ram_len; off += MEM_SCAN_CHUNK) {
		uint64_t len =
			mem->ram_len - off < MEM_SCAN_CHUNK ? mem->ram_len - off : MEM_SCAN_CHUNK;

		if (!chunk_maybe_used(mem, pm, off, len))
			continue;
		for (uint64_t p = off; p < off + len; p += MEM_PAGE) {
			uint64_t plen = off + len - p < MEM_PAGE ? off + len - p : MEM_PAGE;
			bool zero = plen == MEM_PAGE && mem_page_is_zero(mem->base + p);

			/* Hashed as it is written: the VM is paused (or this is a frozen
			 * view, sealed files), so these are the bytes the pwrite below puts
			 * in the file. */
			if (!zero && ctx && (err = mem_digest_page(ctx, p, mem->base + p, plen)))
				goto out;
			if (!zero && run_len && run_start + run_len == p &&
			    run_len < MEM_WRITE_MAX) {
				run_len += plen;
				continue;
			}
			if (run_len) {
				if ((err = mem_pwrite_full(fd, mem->base + run_start, run_len,
							   run_start)))
					goto out;
				*written += run_len;
				run_len = 0;
			}
			if (!zero) {
				run_start = p;
				run_len = plen;
			}
		}
	}
	if (run_len && !(err = mem_pwrite_full(fd, mem->base + run_start, run_len, run_start)))
		*written += run_len;
	if (!err && ctx && (!EVP_DigestFinal_ex(ctx, sha256, &mdlen) || mdlen != 32))
		err = -EIO;
out:
	EVP_MD_CTX_free(ctx);
	return err;
}

/* n /proc/self/pagemap entries of RAM from page `at` on into entries: 0 or -errno. */
static int pagemap_batch(const struct guest_mem *mem, uint64_t at, uint64_t n, uint64_t *entries)
{
	uint64_t first = (uintptr_t)mem->base / MEM_PAGE;
	ssize_t got = pread(pagemap_fd, entries, n * 8, (off_t)((first + at) * 8));

	return got == (ssize_t)(n * 8) ? 0 : got < 0 ? -errno : -EIO;
}

/*
 * The pages the guest wrote since the last freeze, into `fd` (RAM-sized, sparse): those that
 * are anonymous in our private mapping, present or swapped out. Zero pages are written too:
 * a page zeroed since is a change. *written gets the bytes copied.
 */
static int mem_copy_changed(const struct guest_mem *mem, int fd, uint64_t *written)
{
	uint64_t entries[PAGEMAP_BATCH], npages = mem->ram_len / MEM_PAGE;
	uint64_t run_start = 0, run_len = 0;
	int err = 0;

	*written = 0;
	if (ftruncate(fd, (off_t)mem->ram_len) < 0)
		return -errno;
	if ((err = mem_pagemap_open()) < 0)
		return err;
	for (uint64_t at = 0; at < npages && !err; at += PAGEMAP_BATCH) {
		uint64_t n = npages - at < PAGEMAP_BATCH ? npages - at : PAGEMAP_BATCH;

		if ((err = pagemap_batch(mem, at, n, entries)) < 0)
			break;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t e = entries[i], page = (at + i) * MEM_PAGE;
			bool changed = (e & PM_SWAPPED) || ((e & PM_PRESENT) && !(e & PM_FILE));

			if (changed && run_len && run_start + run_len == page &&
			    run_len < MEM_WRITE_MAX) {
				run_len += MEM_PAGE;
				continue;
			}
			if (run_len) {
				if ((err = mem_pwrite_full(fd, mem->base + run_start, run_len,
							   run_start)))
					break;
				*written += run_len;
				run_len = 0;
			}
			if (changed) {
				run_start = page;
				run_len = MEM_PAGE;
			}
		}
	}
	if (!err && run_len) {
		err = mem_pwrite_full(fd, mem->base + run_start, run_len, run_start);
		*written += err ? 0 : run_len;
	}
	return err;
}

/*
 * The pages the guest touched since its RAM was last mapped from memory files (a restore, a
 * freeze): a bit a page of the RAM file, the lowest bit of byte 0 first, set where
 * /proc/self/pagemap has the page in our private mapping (a guest's read or write through
 * KVM maps it here) or swapped out. What a restore of this snapshot will likely touch first
 * (store/snap_touched.c reads it ahead). Only over a private mapping, or a memfd since
 * mem_touched_mark: otherwise a fresh VM's memfd holds every page it ever touched, and a lazy
 * restore's every page it was filled with (-ENOTSUP). *bits (*len bytes) is the caller's.
 */
int mem_touched_pages(const struct guest_mem *mem, uint8_t **bits, size_t *len)
{
	uint64_t *entries, npages = mem->ram_len / MEM_PAGE;
	int err = 0;

	*bits = NULL;
	*len = 0;
	if ((!mem->private_file && !__atomic_load_n(&mem->touched_marked, __ATOMIC_ACQUIRE)) ||
	    mem->ram_len % MEM_PAGE)
		return -ENOTSUP;
	if ((err = mem_pagemap_open()) < 0)
		return err;
	entries = malloc(PAGEMAP_BATCH * sizeof(*entries));
	*bits = calloc((size_t)((npages + 7) / 8), 1);
	if (!entries || !*bits) {
		free(entries);
		free(*bits);
		*bits = NULL;
		return -ENOMEM;
	}
	for (uint64_t at = 0; at < npages; at += PAGEMAP_BATCH) {
		uint64_t n = npages - at < PAGEMAP_BATCH ? npages - at : PAGEMAP_BATCH;

		if ((err = pagemap_batch(mem, at, n, entries)) < 0)
			break;
		for (uint64_t i = 0; i < n; i++)
			if (entries[i] & (PM_PRESENT | PM_SWAPPED))
				(*bits)[(at + i) / 8] |= (uint8_t)(1u << ((at + i) % 8));
	}
	free(entries);
	if (err) {
		free(*bits);
		*bits = NULL;
		return err;
	}
	*len = (size_t)((npages + 7) / 8);
	return 0;
}

int mem_touched_mark(struct guest_mem *mem)
{
	if (mem->private_file || mem->fd < 0)
		return 0; /* counts from its restore; a test's buffer: nothing to count */
	if (__atomic_load_n(&mem->filling, __ATOMIC_ACQUIRE) || mem->uffd >= 0)
		return -EAGAIN; /* a lazy restore's: holes the pager has yet to fill */
	return mem_touched_drop(mem);
}

int mem_touched_drop(struct guest_mem *mem)
{
	if (madvise(mem->base, mem->ram_len, MADV_DONTNEED) < 0)
		return -errno;
	__atomic_store_n(&mem->touched_marked, true, __ATOMIC_RELEASE);
	return 0;
}

/* A frozen memory file never changes again: seal it, so that nobody (a child's VMM holding
 * it through /proc, a bug of ours) can truncate it under the VMs that map it (a SIGBUS for
 * all of them) or write it. Best effort: a memfd made before sealing was allowed stays
 * unsealed. */
static void mem_seal(int fd)
{
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		log_debug("memory file not sealed: %m");
}

int mem_freeze(struct guest_mem *mem)
{
	uint64_t written;
	int fd, err;

	if (!mem->private_file) {
		/* A fresh VM's memfd: it is the frozen file as it is. The same addresses, so
		 * KVM's memory slots stay; its MMU notifier drops the old translations and the
		 * next guest access faults in the new mapping's pages. */
		mem->private_file = true;
		if ((err = mem_map_layers(mem)) < 0) {
			/* MAP_FIXED fails before it unmaps anything: the old shared mapping is
			 * still there and the guest goes on as before. */
			mem->private_file = false;
			return err;
		}
		mem_seal(mem->fd);
		return 0;
	}
	fd = memfd_create("guest-ram-frozen", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (mem->ndeltas < MEM_DELTAS_MAX) {
		uint64_t t0 = vmm_now_ns();

		if ((err = mem_copy_changed(mem, fd, &written)) < 0)
			goto fail;
		log_debug("memory frozen: the changed pages copied in %.1f ms",
			  (double)(vmm_now_ns() - t0) / 1e6);
		mem_seal(fd);
		mem->deltas[mem->ndeltas++] = fd;
		log_debug("memory frozen: %llu KiB changed since the last freeze",
			  (unsigned long long)(written >> 10));
	} else {
		/* Compact: one file with all of RAM replaces the chain. */
		if ((err = mem_copy_to_fd(mem, fd, &written, NULL)) < 0)
			goto fail;
		mem_seal(fd);
		close(mem->fd);
		for (unsigned i = 0; i < mem->ndeltas; i++)
			close(mem->deltas[i]);
		mem->ndeltas = 0;
		mem->fd = fd;
		log_debug("memory frozen: a chain of %u files compacted into one (%llu MiB)",
			  MEM_DELTAS_MAX + 1, (unsigned long long)(written >> 20));
	}
	/* The pages now in files drop out of our anonymous memory as the files are mapped
	 * over them: a failure here leaves a mapping the files do not describe, so the VM must
	 * end (-ENOTRECOVERABLE). */
	{
		uint64_t t0 = vmm_now_ns();

		/* A new delta covers exactly the pages that were anonymous: mapping its extents
		 * over them is enough (and costs what changed). A compacted file replaces all. */
		err = mem->ndeltas ? mem_map_extents(mem->base, mem->ram_len,
						     mem->deltas[mem->ndeltas - 1])
				   : mem_map_layers(mem);
		log_debug("memory frozen: mapped again in %.1f ms",
			  (double)(vmm_now_ns() - t0) / 1e6);
	}
	return err < 0 ? -ENOTRECOVERABLE : 0;
fail:
	close(fd);
	return err;
}

int mem_map_frozen_view(struct guest_mem *view)
{
	return mem_map_layers(view);
}

int mem_frozen_paths(const struct guest_mem *mem, char *out, size_t len)
{
	int n = snprintf(out, len, "/proc/%d/fd/%d", (int)getpid(), mem->fd);

	for (unsigned i = 0; i < mem->ndeltas && n >= 0 && (size_t)n < len; i++)
		n += snprintf(out + n, len - (size_t)n, ",/proc/%d/fd/%d", (int)getpid(),
			      mem->deltas[i]);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
