/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/e820.c: the guest's memory map. */
#include <stdint.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_mem.h"
#include "layout.h"
#include "vmm.h"

static void check_entry(const struct e820_entry_host *e, uint64_t addr, uint64_t size,
			uint32_t type)
{
	cr_assert(eq(u64, e->addr, addr));
	cr_assert(eq(u64, e->size, size));
	cr_assert(eq(u32, e->type, type));
}

/* Properties every map must have, whatever the RAM size. */
static void check_map_sane(const struct guest_mem *mem, const struct e820_entry_host *e, unsigned n)
{
	uint64_t ram = 0;

	cr_assert(n >= 1 && n <= E820_MAX, "n = %u", n);
	for (unsigned i = 0; i < n; i++) {
		uint64_t end = e[i].addr + e[i].size;

		cr_assert(gt(u64, e[i].size, 0), "entry %u is empty", i);
		cr_assert(gt(u64, end, e[i].addr), "entry %u wraps", i);
		cr_assert(e[i].type == E820_RAM_TYPE || e[i].type == E820_RESERVED_TYPE);
		/* Sorted, no overlaps. */
		if (i > 0)
			cr_assert(ge(u64, e[i].addr, e[i - 1].addr + e[i - 1].size),
				  "entry %u overlaps or precedes entry %u", i, i - 1);
		/* Nothing in the MMIO hole. */
		cr_assert(end <= MMIO_HOLE_GPA || e[i].addr >= MMIO_HOLE_END_GPA,
			  "entry %u [%#llx, %#llx) touches the MMIO hole", i,
			  (unsigned long long)e[i].addr, (unsigned long long)end);
		if (e[i].type != E820_RAM_TYPE)
			continue;
		/* Every RAM entry is really RAM, and none covers the VGA/BIOS area. */
		cr_assert(not(zero(ptr, mem_gpa_to_hva(mem, e[i].addr, e[i].size))),
			  "RAM entry %u is not guest RAM", i);
		cr_assert(end <= LOWMEM_END_GPA || e[i].addr >= KERNEL_GPA,
			  "RAM entry %u covers 640 KiB - 1 MiB", i);
		/* The MP table is not offered as RAM. */
		cr_assert(end <= MPTABLE_GPA || e[i].addr >= LOWMEM_END_GPA);
		ram += e[i].size;
	}
	cr_assert(le(u64, ram, mem->ram_len));
}

Test(e820, map_128mib)
{
	struct guest_mem mem;
	struct e820_entry_host e[E820_MAX];
	unsigned n;

	fake_mem_create(&mem, 128 * MIB, 0);
	n = e820_build(&mem, e);
	cr_assert(eq(u32, n, 3));
	check_entry(&e[0], 0, 0x9fc00, E820_RAM_TYPE);
	check_entry(&e[1], EBDA_GPA, 0x400, E820_RESERVED_TYPE);
	check_entry(&e[2], 1 * MIB, 127 * MIB, E820_RAM_TYPE);
	check_map_sane(&mem, e, n);
	fake_mem_destroy(&mem);
}

Test(e820, map_5gib)
{
	struct guest_mem mem;
	struct e820_entry_host e[E820_MAX];
	unsigned n;

	fake_mem_create(&mem, 5 * GIB, 0);
	n = e820_build(&mem, e);
	cr_assert(eq(u32, n, 4));
	check_entry(&e[0], 0, 0x9fc00, E820_RAM_TYPE);
	check_entry(&e[1], EBDA_GPA, 0x400, E820_RESERVED_TYPE);
	check_entry(&e[2], 1 * MIB, 3 * GIB - 1 * MIB, E820_RAM_TYPE);
	check_entry(&e[3], 4 * GIB, 2 * GIB, E820_RAM_TYPE);
	check_map_sane(&mem, e, n);
	fake_mem_destroy(&mem);
}

Test(e820, sane_for_every_supported_size)
{
	static const uint64_t sizes[] = {
		MEM_MIN_MIB * MIB,   /* the smallest guest */
		100 * MIB + 4 * KIB, /* not a whole number of MiB */
		1 * GIB,
		3 * GIB - 4 * KIB, /* just below the hole */
		3 * GIB,	   /* exactly up to the hole: no high region */
		3 * GIB + 4 * KIB, /* one page above 4 GiB */
		4 * GIB,
		MEM_MAX_MIB * MIB, /* the largest guest */
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct guest_mem mem;
		struct e820_entry_host e[E820_MAX];
		uint64_t ram = 0;
		unsigned n;

		fake_mem_create(&mem, sizes[i], 0);
		n = e820_build(&mem, e);
		check_map_sane(&mem, e, n);
		/* All RAM but the first MiB's holes is offered: the EBDA and 640 KiB - 1 MiB. */
		for (unsigned j = 0; j < n; j++)
			if (e[j].type == E820_RAM_TYPE)
				ram += e[j].size;
		cr_assert(eq(u64, ram, sizes[i] - (KERNEL_GPA - EBDA_GPA)), "size %#llx",
			  (unsigned long long)sizes[i]);
		cr_assert(eq(u32, n, sizes[i] > MMIO_HOLE_GPA ? 4 : 3));
		cr_assert(eq(u64, e[n - 1].addr + e[n - 1].size, mem_top(&mem)));
		fake_mem_destroy(&mem);
	}
}
