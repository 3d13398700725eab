/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/pagetable.c: the boot identity map. The tables are read back out of fake guest RAM and
 * walked the way the MMU would, following the guest-physical addresses in the entries.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_mem.h"
#include "layout.h"
#include "vmm.h"

#define P	  0x1ull
#define RW	  0x2ull
#define US	  0x4ull
#define PS	  0x80ull
#define ADDR_MASK 0x000ffffffffff000ull
#define PAGE	  4096ull
#define PML4_GPA  PAGETABLE_GPA
#define PDPT_GPA  (PAGETABLE_GPA + PAGE)
#define PD_GPA(g) (PAGETABLE_GPA + (2 + (g)) * PAGE)

/* The 512 entries of the table at `gpa`, read through the checked helper. */
static const uint64_t *table_at(const struct guest_mem *mem, gpa_t gpa)
{
	const uint64_t *t = mem_gpa_to_hva(mem, gpa, PAGE);

	cr_assert(t != NULL, "table at %#llx is not in RAM", (unsigned long long)gpa);
	return t;
}

/* Translate `va` like the MMU (4-level paging, CR3 = PAGETABLE_GPA). False if not mapped;
 * `user_ok` is whether every level allows CPL 3. */
static bool walk(const struct guest_mem *mem, uint64_t va, uint64_t *pa, bool *user_ok)
{
	uint64_t e;

	*user_ok = true;
	e = table_at(mem, PML4_GPA)[(va >> 39) & 511];
	if (!(e & P))
		return false;
	*user_ok &= !!(e & US);
	cr_assert(eq(u64, e & PS, 0), "PS set in a PML4 entry");
	e = table_at(mem, e & ADDR_MASK)[(va >> 30) & 511];
	if (!(e & P))
		return false;
	*user_ok &= !!(e & US);
	cr_assert(eq(u64, e & PS, 0), "unexpected 1 GiB page");
	e = table_at(mem, e & ADDR_MASK)[(va >> 21) & 511];
	if (!(e & P))
		return false;
	*user_ok &= !!(e & US);
	cr_assert(eq(u64, e & PS, PS), "expected a 2 MiB page");
	*pa = (e & ADDR_MASK & ~0x1fffffull) | (va & 0x1fffffull);
	return true;
}

static void check_identity(const struct guest_mem *mem, uint64_t va, bool user)
{
	uint64_t pa = 0;
	bool user_ok;

	cr_assert(walk(mem, va, &pa, &user_ok), "%#llx is not mapped", (unsigned long long)va);
	cr_assert(eq(u64, pa, va));
	cr_assert(eq(int, user_ok, user), "%#llx: user access %d", (unsigned long long)va, user_ok);
}

static void check_unmapped(const struct guest_mem *mem, uint64_t va)
{
	uint64_t pa;
	bool user_ok;

	cr_assert(not(walk(mem, va, &pa, &user_ok)), "%#llx is mapped", (unsigned long long)va);
}

/* Every entry of the map for `ngib` GiB, exactly. */
static void check_tables(const struct guest_mem *mem, uint64_t ngib, bool user)
{
	const uint64_t flags = P | RW | (user ? US : 0);
	const uint64_t *pml4 = table_at(mem, PML4_GPA);
	const uint64_t *pdpt = table_at(mem, PDPT_GPA);

	cr_assert(eq(u64, pml4[0], PDPT_GPA | flags));
	for (unsigned i = 1; i < 512; i++)
		cr_assert(eq(u64, pml4[i], 0), "PML4[%u]", i);
	for (uint64_t g = 0; g < 512; g++) {
		if (g >= ngib) {
			cr_assert(eq(u64, pdpt[g], 0), "PDPT[%llu]", (unsigned long long)g);
			continue;
		}
		cr_assert(eq(u64, pdpt[g], PD_GPA(g) | flags), "PDPT[%llu]", (unsigned long long)g);
		const uint64_t *pd = table_at(mem, PD_GPA(g));
		for (uint64_t i = 0; i < 512; i++)
			cr_assert(eq(u64, pd[i], (g * GIB + i * 2 * MIB) | flags | PS),
				  "PD %llu [%llu]", (unsigned long long)g, (unsigned long long)i);
	}
}

Test(pagetable, maps_4gib_for_256mib)
{
	struct guest_mem mem;
	gpa_t map_end = 0;

	fake_mem_create(&mem, 256 * MIB, 0);
	cr_assert(eq(int, pagetable_build(&mem, false, &map_end), 0));
	cr_assert(eq(u64, map_end, 4 * GIB));
	check_tables(&mem, 4, false);
	check_identity(&mem, 0, false);
	check_identity(&mem, 0x200000, false);
	check_identity(&mem, 0x1234567, false);
	check_identity(&mem, 256 * MIB - 1, false);
	/* The MMIO hole is mapped too: devices, IOAPIC and LAPIC. */
	check_identity(&mem, VIRTIO_MMIO_GPA + 0x10, false);
	check_identity(&mem, IOAPIC_GPA, false);
	check_identity(&mem, LAPIC_GPA + 0x300, false);
	check_identity(&mem, 4 * GIB - 1, false);
	check_unmapped(&mem, 4 * GIB);
	check_unmapped(&mem, 512 * GIB);
	fake_mem_destroy(&mem);
}

Test(pagetable, user_bit_set_iff_user)
{
	struct guest_mem mem;
	gpa_t map_end = 0;

	fake_mem_create(&mem, 256 * MIB, 0);
	cr_assert(eq(int, pagetable_build(&mem, true, &map_end), 0));
	cr_assert(eq(u64, map_end, 4 * GIB));
	check_tables(&mem, 4, true);
	check_identity(&mem, 0x200000, true);
	check_identity(&mem, KERNEL_GPA + 0x1000, true);

	/* Building again without `user` clears the bit everywhere. */
	cr_assert(eq(int, pagetable_build(&mem, false, &map_end), 0));
	check_tables(&mem, 4, false);
	fake_mem_destroy(&mem);
}

Test(pagetable, maps_all_ram_above_4gib)
{
	struct guest_mem mem;
	gpa_t map_end = 0;

	fake_mem_create(&mem, 5 * GIB, 0);
	cr_assert(eq(int, pagetable_build(&mem, true, &map_end), 0));
	/* RAM ends at 6 GiB (3 GiB below the hole, 2 GiB above 4 GiB). */
	cr_assert(eq(u64, map_end, 6 * GIB));
	check_tables(&mem, 6, true);
	check_identity(&mem, 0, true);
	check_identity(&mem, 0x200000, true);
	check_identity(&mem, 4 * GIB + 12345, true);
	check_identity(&mem, 6 * GIB - 1, true);
	check_unmapped(&mem, 6 * GIB);
	fake_mem_destroy(&mem);
}

Test(pagetable, map_end_rounds_up_to_a_gib)
{
	struct guest_mem mem;
	gpa_t map_end = 0;

	/* 3 GiB + 4 KiB: RAM ends at 4 GiB + 4 KiB, so a fifth GiB is mapped. */
	fake_mem_create(&mem, 3 * GIB + 4 * KIB, 0);
	cr_assert(eq(int, pagetable_build(&mem, false, &map_end), 0));
	cr_assert(eq(u64, map_end, 5 * GIB));
	check_tables(&mem, 5, false);
	check_identity(&mem, 4 * GIB + 4 * KIB - 1, false);
	fake_mem_destroy(&mem);
}

Test(pagetable, writes_only_its_own_pages)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 64 * MIB, 0xa5);
	gpa_t map_end = 0;
	const uint64_t end = PD_GPA(4);

	cr_assert(eq(int, pagetable_build(&mem, false, &map_end), 0));
	cr_assert(fake_mem_all(buf, PAGETABLE_GPA, 0xa5), "below the tables");
	cr_assert(fake_mem_all(buf + end, 64 * MIB - end, 0xa5), "above the tables");
	/* Unused entries of the tables themselves are zeroed, not left as they were. */
	cr_assert(eq(u64, table_at(&mem, PML4_GPA)[511], 0));
	cr_assert(eq(u64, table_at(&mem, PDPT_GPA)[4], 0));
	fake_mem_destroy(&mem);
}

Test(pagetable, largest_guest_fits_the_table_area)
{
	struct guest_mem mem;
	gpa_t map_end = 0;

	fake_mem_create(&mem, MEM_MAX_MIB * MIB, 0);
	cr_assert(eq(int, pagetable_build(&mem, true, &map_end), 0));
	cr_assert(eq(u64, map_end, MEM_MAX_MIB * MIB + 1 * GIB));
	cr_assert(le(u64, PD_GPA(map_end / GIB), PAGETABLE_END_GPA));
	check_identity(&mem, mem_top(&mem) - 1, true);
	check_unmapped(&mem, map_end);
	fake_mem_destroy(&mem);
}

Test(pagetable, too_much_ram_is_refused)
{
	struct guest_mem mem;
	gpa_t map_end = 0x1234;
	/* The area holds 2 + 78 tables: RAM ending at 78 GiB fits, one byte more does not. */
	const uint64_t ngib_max = (PAGETABLE_END_GPA - PAGETABLE_GPA) / PAGE - 2;

	fake_mem_create(&mem, (ngib_max - 1) * GIB, 0);
	cr_assert(eq(int, pagetable_build(&mem, false, &map_end), 0));
	cr_assert(eq(u64, map_end, ngib_max * GIB));
	fake_mem_destroy(&mem);

	fake_mem_create(&mem, (ngib_max - 1) * GIB + 1, 0);
	map_end = 0x1234;
	cr_assert(eq(int, pagetable_build(&mem, false, &map_end), -E2BIG));
	cr_assert(eq(u64, map_end, 0x1234), "map_end written on failure");
	fake_mem_destroy(&mem);
}

Test(pagetable, ram_too_small_for_the_tables)
{
	struct guest_mem mem;
	gpa_t map_end = 0;

	/* RAM ends inside the page directories. */
	fake_mem_create(&mem, PD_GPA(2), 0);
	cr_assert(eq(int, pagetable_build(&mem, false, &map_end), -EFAULT));
	fake_mem_destroy(&mem);
}
