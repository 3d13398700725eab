/* SPDX-License-Identifier: Apache-2.0 */
/* The guest's e820 memory map, shared by the Linux zero page and the PVH start_info. */
#include "layout.h"
#include "vmm.h"

unsigned e820_build(const struct guest_mem *mem, struct e820_entry_host *out)
{
	unsigned n = 0;
	gpa_t low_end = mem_low_end(mem);

	/* Base memory up to the EBDA, where the MP table lives. */
	out[n++] = (struct e820_entry_host){0, EBDA_GPA, E820_RAM_TYPE};
	out[n++] =
		(struct e820_entry_host){EBDA_GPA, LOWMEM_END_GPA - EBDA_GPA, E820_RESERVED_TYPE};
	/* 0xa0000-0x100000 (VGA, option ROMs, BIOS) is absent: the guest must not use it. */
	if (low_end > KERNEL_GPA)
		out[n++] =
			(struct e820_entry_host){KERNEL_GPA, low_end - KERNEL_GPA, E820_RAM_TYPE};
	if (mem->nregions > 1)
		out[n++] = (struct e820_entry_host){mem->regions[1].gpa, mem->regions[1].len,
						    E820_RAM_TYPE};
	return n;
}
