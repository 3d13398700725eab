/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Guest RAM: one memfd holding all of it, mapped once in the VMM. The guest sees it as up to
 * two regions: [0, min(ram, 3 GiB)) and, for larger guests, the rest from 4 GiB. A later
 * snapshot writes the memfd out; a restore maps the snapshot file privately instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "layout.h"
#include "vmm.h"

void mem_layout(struct guest_mem *mem, uint8_t *base, uint64_t ram_len)
{
	uint64_t low = ram_len < MMIO_HOLE_GPA ? ram_len : MMIO_HOLE_GPA;

	memset(mem->regions, 0, sizeof(mem->regions));
	mem->base = base;
	mem->ram_len = ram_len;
	mem->regions[0] = (struct mem_region){.gpa = 0, .len = low, .hva = base, .fd_offset = 0};
	mem->nregions = 1;
	if (ram_len > low) {
		mem->regions[1] = (struct mem_region){.gpa = MMIO_HOLE_END_GPA,
						      .len = ram_len - low,
						      .hva = base + low,
						      .fd_offset = low};
		mem->nregions = 2;
	}
}

/*
 * Map `len` bytes of `fd` shared, at a 2 MiB-aligned address: a huge page of the file can only
 * be mapped as one where the address and the file offset agree modulo 2 MiB, and KVM maps
 * guest-physical 2 MiB pages only where the host address is aligned the same way.
 * MAP_NORESERVE: a 64 GiB guest that touches 100 MiB costs 100 MiB.
 */
void *mem_map_aligned(int fd, uint64_t len, int share)
{
	const uint64_t align = 2ull << 20;
	uint8_t *area, *base;
	uintptr_t a;

	if (len > UINT64_MAX - align)
		return (errno = EINVAL), MAP_FAILED;
	area = mmap(NULL, len + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		    0);
	if (area == MAP_FAILED)
		return MAP_FAILED;
	a = ((uintptr_t)area + align - 1) & ~(uintptr_t)(align - 1);
	base = mmap((void *)a, len, PROT_READ | PROT_WRITE, share | MAP_NORESERVE | MAP_FIXED, fd,
		    0);
	if (base == MAP_FAILED) {
		int e = errno;

		munmap(area, len + align);
		errno = e;
		return MAP_FAILED;
	}
	/* Give back the unused head and tail of the reservation. */
	if (base > area)
		munmap(area, (size_t)(base - area));
	if (area + len + align > base + len)
		munmap(base + len, (size_t)(area + len + align - (base + len)));
	return base;
}

/* Say (with -v) whether the host gives shared memory huge pages at all. */
static void mem_log_thp(void)
{
	static const char path[] = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";
	char buf[128] = "";
	int fd;
	ssize_t n;

	if (!log_enabled(LOG_DEBUG))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0 && strstr(buf, "[never]"))
		log_debug("guest RAM gets no huge pages: %s is 'never' (set it to 'advise' for "
			  "faster boots)",
			  path);
}

int mem_create(struct guest_mem *mem, uint64_t ram_len)
{
	void *base;
	int fd, err;

	fd = memfd_create("guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)ram_len) < 0) {
		err = -errno;
		goto out_close;
	}
	base = mem_map_aligned(fd, ram_len, MAP_SHARED);
	if (base == MAP_FAILED) {
		err = -errno;
		goto out_close;
	}
	/* Guest RAM never belongs in a core dump of the VMM, nor in a fork of it. */
	madvise(base, ram_len, MADV_DONTDUMP);
	madvise(base, ram_len, MADV_DONTFORK);
	/*
	 * Transparent huge pages where the host allows them for shared memory
	 * (/sys/kernel/mm/transparent_hugepage/shmem_enabled: advise, within_size or always):
	 * KVM then maps guest RAM with 2 MiB pages, and a booting guest takes one fault per
	 * 2 MiB instead of one per 4 KiB (docs/vmm.md, "Guest memory").
	 */
	madvise(base, ram_len, MADV_HUGEPAGE);
	mem_log_thp();
	mem_layout(mem, base, ram_len);
	mem->fd = fd;
	return 0;
out_close:
	close(fd);
	return err;
}

void mem_destroy(struct guest_mem *mem)
{
	mem_pager_close(mem);
	if (mem->base && mem->fd >= 0)
		munmap(mem->base, mem->ram_len);
	if (mem->fd >= 0)
		close(mem->fd);
	for (unsigned i = 0; i < mem->ndeltas; i++)
		close(mem->deltas[i]);
	mem->ndeltas = 0;
	mem->base = NULL;
	mem->fd = -1;
}

void *mem_gpa_to_hva(const struct guest_mem *mem, gpa_t gpa, uint64_t len)
{
	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct mem_region *r = &mem->regions[i];

		/* Written so that nothing can overflow: gpa >= r->gpa is checked first. */
		if (gpa < r->gpa || gpa - r->gpa >= r->len)
			continue;
		if (len > r->len - (gpa - r->gpa))
			return NULL;
		return r->hva + (gpa - r->gpa);
	}
	return NULL;
}

gpa_t mem_low_end(const struct guest_mem *mem)
{
	return mem->regions[0].len;
}

gpa_t mem_top(const struct guest_mem *mem)
{
	const struct mem_region *r = &mem->regions[mem->nregions - 1];

	return r->gpa + r->len;
}

/* Pre-fault [p, p+len) for writing; best effort (older kernels lack MADV_POPULATE_WRITE). */
static void mem_populate(void *p, uint64_t len)
{
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)4095;

	madvise((void *)start, len + ((uintptr_t)p - start), MADV_POPULATE_WRITE);
}

int mem_write(const struct guest_mem *mem, gpa_t gpa, const void *src, uint64_t len)
{
	void *dst = mem_gpa_to_hva(mem, gpa, len);

	if (!dst)
		return -EFAULT;
	/* Allocate the destination pages in one call rather than one fault per page: loading a
	 * kernel and initrd took ~130 ms in the emulated host, where every fault is expensive. */
	if (len >= (64u << 10))
		mem_populate(dst, len);
	memcpy(dst, src, len);
	return 0;
}
