/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/memory.c: the RAM layout around the MMIO hole and the one checked gpa -> hva helper. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_mem.h"
#include "layout.h"
#include "vmm.h"

Test(memory, layout_64mib_is_one_region)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 64 * MIB, 0);

	cr_assert(eq(u32, mem.nregions, 1));
	cr_assert(eq(u64, mem.ram_len, 64 * MIB));
	cr_assert(eq(ptr, mem.base, buf));
	cr_assert(eq(i32, mem.fd, -1));
	cr_assert(eq(u64, mem.regions[0].gpa, 0));
	cr_assert(eq(u64, mem.regions[0].len, 64 * MIB));
	cr_assert(eq(ptr, mem.regions[0].hva, buf));
	cr_assert(eq(u64, mem.regions[0].fd_offset, 0));
	/* The unused slot is cleared, not left over from an earlier layout. */
	cr_assert(eq(u64, mem.regions[1].len, 0));
	cr_assert(eq(u64, mem_low_end(&mem), 64 * MIB));
	cr_assert(eq(u64, mem_top(&mem), 64 * MIB));
	fake_mem_destroy(&mem);
}

Test(memory, layout_exactly_3gib_stays_below_the_hole)
{
	struct guest_mem mem;

	fake_mem_create(&mem, 3 * GIB, 0);
	cr_assert(eq(u32, mem.nregions, 1));
	cr_assert(eq(u64, mem.regions[0].len, MMIO_HOLE_GPA));
	cr_assert(eq(u64, mem_low_end(&mem), MMIO_HOLE_GPA));
	cr_assert(eq(u64, mem_top(&mem), MMIO_HOLE_GPA));
	fake_mem_destroy(&mem);
}

Test(memory, layout_5gib_splits_around_the_hole)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 5 * GIB, 0);

	cr_assert(eq(u32, mem.nregions, 2));
	cr_assert(eq(u64, mem.ram_len, 5 * GIB));
	cr_assert(eq(u64, mem.regions[0].gpa, 0));
	cr_assert(eq(u64, mem.regions[0].len, 3 * GIB));
	cr_assert(eq(ptr, mem.regions[0].hva, buf));
	cr_assert(eq(u64, mem.regions[0].fd_offset, 0));
	cr_assert(eq(u64, mem.regions[1].gpa, 4 * GIB));
	cr_assert(eq(u64, mem.regions[1].len, 2 * GIB));
	cr_assert(eq(ptr, mem.regions[1].hva, buf + 3 * GIB));
	cr_assert(eq(u64, mem.regions[1].fd_offset, 3 * GIB));
	cr_assert(eq(u64, mem_low_end(&mem), 3 * GIB));
	cr_assert(eq(u64, mem_top(&mem), 6 * GIB));
	fake_mem_destroy(&mem);
}

Test(memory, relayout_from_big_to_small_drops_the_high_region)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 5 * GIB, 0);

	mem_layout(&mem, buf, 64 * MIB);
	cr_assert(eq(u32, mem.nregions, 1));
	cr_assert(eq(u64, mem.regions[1].gpa, 0));
	cr_assert(eq(u64, mem.regions[1].len, 0));
	cr_assert(zero(ptr, mem.regions[1].hva));
	cr_assert(eq(u64, mem_top(&mem), 64 * MIB));
	mem_layout(&mem, buf, 5 * GIB);
	fake_mem_destroy(&mem);
}

Test(memory, gpa_to_hva_bounds_64mib)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 64 * MIB, 0);
	const uint64_t end = 64 * MIB;

	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 0, 1), buf));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 0, end), buf));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 0x12345, 8), buf + 0x12345));
	/* The last byte is RAM, one past it is not. */
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, end - 1, 1), buf + end - 1));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, end - 8, 8), buf + end - 8));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, end - 1, 2)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, end - 8, 9)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, end, 1)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 0, end + 1)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, MMIO_HOLE_GPA, 1)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 4 * GIB, 1)));
	fake_mem_destroy(&mem);
}

Test(memory, gpa_to_hva_len_zero)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 64 * MIB, 0);

	/* An empty range at a RAM address is that address; gpa itself must still be RAM. */
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 0, 0), buf));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 64 * MIB - 1, 0), buf + 64 * MIB - 1));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 64 * MIB, 0)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, UINT64_MAX, 0)));
	fake_mem_destroy(&mem);
}

Test(memory, gpa_to_hva_overflow)
{
	struct guest_mem mem;

	fake_mem_create(&mem, 64 * MIB, 0);
	/* gpa + len wraps to 2: a naive `gpa + len <= end` check would pass. */
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, UINT64_MAX - 1, 4)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, UINT64_MAX, 1)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, UINT64_MAX, UINT64_MAX)));
	/* A RAM address with a length that wraps. */
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 1, UINT64_MAX)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 0x1000, UINT64_MAX - 0xfff)));
	fake_mem_destroy(&mem);
}

Test(memory, gpa_to_hva_bounds_5gib)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 5 * GIB, 0);

	/* Low RAM ends at 3 GiB. */
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 3 * GIB - 1, 1), buf + 3 * GIB - 1));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 0, 3 * GIB), buf));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 3 * GIB - 1, 2)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 3 * GIB - 4, 8)));
	/* The hole: its start, the devices in it, its last byte. */
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, MMIO_HOLE_GPA, 1)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, VIRTIO_MMIO_GPA, 4)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, IOAPIC_GPA, 4)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, LAPIC_GPA, 4)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 4 * GIB - 1, 1)));
	/* Ranges from the hole into high RAM, and across the hole from low to high RAM: both
	 * ends are RAM, the middle is not. */
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 4 * GIB - 1, 2)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 3 * GIB - 4, 1 * GIB + 8)));
	/* High RAM: host offset 3 GiB, not 4 GiB. */
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 4 * GIB, 1), buf + 3 * GIB));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 4 * GIB + 12345, 16), buf + 3 * GIB + 12345));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 6 * GIB - 1, 1), buf + 5 * GIB - 1));
	cr_assert(eq(ptr, mem_gpa_to_hva(&mem, 4 * GIB, 2 * GIB), buf + 3 * GIB));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 6 * GIB - 1, 2)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 6 * GIB, 1)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 4 * GIB, 2 * GIB + 1)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, UINT64_MAX - 1, 4)));
	cr_assert(zero(ptr, mem_gpa_to_hva(&mem, 4 * GIB + 1, UINT64_MAX)));
	fake_mem_destroy(&mem);
}

Test(memory, write_copies_or_refuses_whole)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 64 * MIB, 0xa5);
	const uint8_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	cr_assert(eq(int, mem_write(&mem, 0x1000, src, sizeof(src)), 0));
	cr_assert(eq(u8[8], buf + 0x1000, (uint8_t *)src));
	cr_assert(eq(u8, buf[0xfff], 0xa5));
	cr_assert(eq(u8, buf[0x1008], 0xa5));
	cr_assert(eq(int, mem_write(&mem, 64 * MIB - 8, src, sizeof(src)), 0));
	cr_assert(eq(u8, buf[64 * MIB - 1], 8));

	/* A write straddling the end of RAM is refused as a whole: nothing is written. */
	cr_assert(eq(int, mem_write(&mem, 64 * MIB - 4, src, sizeof(src)), -EFAULT));
	cr_assert(eq(u8, buf[64 * MIB - 4], 5));
	cr_assert(eq(int, mem_write(&mem, UINT64_MAX - 1, src, sizeof(src)), -EFAULT));
	cr_assert(eq(int, mem_write(&mem, MMIO_HOLE_GPA, src, 1), -EFAULT));
	fake_mem_destroy(&mem);
}

Test(memory, write_high_ram_lands_after_low_ram)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 5 * GIB, 0);
	const uint32_t v = 0xdeadbeef;
	uint32_t got;

	cr_assert(eq(int, mem_write(&mem, 4 * GIB + 0x40, &v, sizeof(v)), 0));
	memcpy(&got, buf + 3 * GIB + 0x40, sizeof(got));
	cr_assert(eq(u32, got, v));
	cr_assert(eq(int, mem_write(&mem, 4 * GIB - 2, &v, sizeof(v)), -EFAULT));
	fake_mem_destroy(&mem);
}

/* The pages touched since a mark (mem_touched_mark, mem_touched_pages): a memfd's RAM counts
 * nothing before its first mark; after it, the pages touched since, read or written (a
 * transparent huge page maps, and so counts, its whole 2 MiB: the test touches the first and
 * the third 2 MiB and checks the second and fourth untouched); a page written before the mark
 * keeps its bytes. */
Test(memory, touched_pages_since_the_mark)
{
	const size_t huge = 2 * MIB / 4096 / 8; /* bitmap bytes of 2 MiB */
	struct guest_mem mem;
	uint8_t *bits;
	size_t len;
	volatile uint8_t sink;

	memset(&mem, 0, sizeof(mem)); /* as vm_create_from leaves it */
	mem.pager_fd = mem.uffd = -1;
	cr_assert_eq(mem_create(&mem, 8 * MIB), 0);
	cr_assert_eq(mem_touched_pages(&mem, &bits, &len), -ENOTSUP, "a memfd before a mark");
	mem.base[5 * 4096] = 0x5a;
	mem.base[2 * MIB + 4096] = 0x5b; /* the second 2 MiB, before the mark */
	cr_assert_eq(mem_touched_mark(&mem), 0);
	cr_assert_eq(mem_touched_pages(&mem, &bits, &len), 0);
	cr_assert_eq(len, 8 * MIB / 4096 / 8);
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(bits[i], 0, "byte %zu: %#x right after the mark", i, bits[i]);
	free(bits);
	sink = mem.base[3 * 4096];    /* a read */
	mem.base[4 * MIB + 8192] = 1; /* a write, in the third 2 MiB */
	cr_assert_eq(mem.base[5 * 4096], 0x5a, "the memfd kept what was written before");
	(void)sink;
	cr_assert_eq(mem_touched_pages(&mem, &bits, &len), 0);
	cr_assert_eq(bits[0] & 0x28, 0x28, "pages 3 and 5: %#x", bits[0]);
	cr_assert_eq(bits[2 * huge] & 0x04, 0x04, "page 1026: %#x", bits[2 * huge]);
	for (size_t i = huge; i < 2 * huge; i++)
		cr_assert_eq(bits[i], 0, "byte %zu (the second 2 MiB): %#x", i, bits[i]);
	for (size_t i = 3 * huge; i < len; i++)
		cr_assert_eq(bits[i], 0, "byte %zu (the fourth 2 MiB): %#x", i, bits[i]);
	cr_assert_eq(mem.base[2 * MIB + 4096], 0x5b, "the second 2 MiB kept its byte");
	free(bits);
	mem_destroy(&mem);
}
