/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The boot identity map: one PML4, one PDPT and one page directory per GiB, 2 MiB pages.
 * Linux only needs the first GiBs until it builds its own tables; a payload guest keeps this
 * map for life, so it covers all of RAM and the MMIO hole, user-accessible.
 */
#include <errno.h>
#include <string.h>

#include "layout.h"
#include "vmm.h"

#define PTE_PRESENT 0x1ull
#define PTE_WRITE   0x2ull
#define PTE_USER    0x4ull
#define PTE_HUGE    0x80ull
#define GIB	    (1ull << 30)
#define PAGE_SIZE   4096ull

int pagetable_build(const struct guest_mem *mem, bool user, gpa_t *map_end)
{
	uint64_t flags = PTE_PRESENT | PTE_WRITE | (user ? PTE_USER : 0);
	gpa_t end = mem_top(mem);
	uint64_t ngib, *pml4, *pdpt;

	if (end < MMIO_HOLE_END_GPA)
		end = MMIO_HOLE_END_GPA;
	ngib = (end + GIB - 1) / GIB;
	/* PML4 + PDPT + one directory per GiB; one PDPT maps 512 GiB. */
	if (ngib > 512 || PAGETABLE_GPA + (2 + ngib) * PAGE_SIZE > PAGETABLE_END_GPA)
		return -E2BIG;
	pml4 = mem_gpa_to_hva(mem, PAGETABLE_GPA, (2 + ngib) * PAGE_SIZE);
	if (!pml4)
		return -EFAULT;
	memset(pml4, 0, (2 + ngib) * PAGE_SIZE);
	pdpt = pml4 + 512;
	pml4[0] = (PAGETABLE_GPA + PAGE_SIZE) | flags;
	for (uint64_t g = 0; g < ngib; g++) {
		uint64_t *pd = pdpt + 512 * (1 + g);
		gpa_t pd_gpa = PAGETABLE_GPA + (2 + g) * PAGE_SIZE;

		pdpt[g] = pd_gpa | flags;
		for (uint64_t i = 0; i < 512; i++)
			pd[i] = (g * GIB + i * (2ull << 20)) | flags | PTE_HUGE;
	}
	*map_end = ngib * GIB;
	return 0;
}
