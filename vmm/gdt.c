/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The boot GDT. Descriptors are built once here and unpacked into kvm_segments from the same
 * bits, so what KVM loads and what the guest would reload from memory cannot disagree.
 */
#include <string.h>

#include "layout.h"
#include "vmm.h"

/* `flags` packs the descriptor's flag nibble (G, D/B, L, AVL) in bits 12-15 and its access byte
 * (P, DPL, S, type) in bits 0-7. */
static uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return ((uint64_t)(base & 0xff000000u) << 32) | ((uint64_t)(flags & 0xf0ffu) << 40) |
	       ((uint64_t)(limit & 0x000f0000u) << 32) | ((uint64_t)(base & 0x00ffffffu) << 16) |
	       (uint64_t)(limit & 0x0000ffffu);
}

void gdt_build(uint64_t gdt[GDT_ENTRIES])
{
	memset(gdt, 0, GDT_ENTRIES * sizeof(gdt[0]));
	gdt[GDT_SEL_CODE32 >> 3] = gdt_entry(0xc09b, 0, 0xfffff);  /* 32-bit code, ring 0 */
	gdt[GDT_SEL_CODE64 >> 3] = gdt_entry(0xa09b, 0, 0xfffff);  /* 64-bit code, ring 0 */
	gdt[GDT_SEL_DATA >> 3] = gdt_entry(0xc093, 0, 0xfffff);	   /* data, ring 0 */
	gdt[GDT_SEL_UDATA >> 3] = gdt_entry(0xc0f3, 0, 0xfffff);   /* data, ring 3 */
	gdt[GDT_SEL_UCODE64 >> 3] = gdt_entry(0xa0fb, 0, 0xfffff); /* 64-bit code, ring 3 */
	/* A busy TSS at base 0. In long mode its descriptor is 16 bytes: the next slot holds base
	 * bits 63:32, zero here, and must not be another descriptor. */
	gdt[GDT_SEL_TSS >> 3] = gdt_entry(0x008b, 0, 0x67);
}

void gdt_to_kvm_segment(const uint64_t gdt[GDT_ENTRIES], uint16_t sel, struct kvm_segment *seg)
{
	uint64_t e = gdt[(sel >> 3) % GDT_ENTRIES];

	memset(seg, 0, sizeof(*seg));
	seg->base = ((e >> 16) & 0xffffff) | (((e >> 56) & 0xff) << 24);
	seg->limit = (uint32_t)((e & 0xffff) | (((e >> 48) & 0xf) << 16));
	seg->g = (e >> 55) & 1;
	if (seg->g) /* the limit is in 4 KiB units */
		seg->limit = (seg->limit << 12) | 0xfff;
	seg->selector = sel;
	seg->type = (e >> 40) & 0xf;
	seg->s = (e >> 44) & 1;
	seg->dpl = (e >> 45) & 3;
	seg->present = (e >> 47) & 1;
	seg->avl = (e >> 52) & 1;
	seg->l = (e >> 53) & 1;
	seg->db = (e >> 54) & 1;
	seg->unusable = !seg->present;
}

int gdt_write(const struct guest_mem *mem)
{
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	return mem_write(mem, GDT_GPA, gdt, sizeof(gdt));
}
