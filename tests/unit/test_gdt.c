/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/gdt.c: the boot GDT and the kvm_segments unpacked from it. */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_mem.h"
#include "layout.h"
#include "payload_abi.h"
#include "vmm.h"

/* What a segment should unpack to. */
struct want {
	uint16_t sel;
	uint8_t type, s, dpl, l, db, g;
	uint32_t limit;
};

static void check_segment(const uint64_t gdt[GDT_ENTRIES], const struct want *w)
{
	struct kvm_segment seg;

	memset(&seg, 0x5a, sizeof(seg));
	gdt_to_kvm_segment(gdt, w->sel, &seg);
	cr_assert(eq(u16, seg.selector, w->sel));
	cr_assert(eq(u64, seg.base, 0), "sel %#x", w->sel);
	cr_assert(eq(u32, seg.limit, w->limit), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.type, w->type), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.s, w->s), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.dpl, w->dpl), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.present, 1), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.unusable, 0), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.l, w->l), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.db, w->db), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.g, w->g), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.avl, 0), "sel %#x", w->sel);
	cr_assert(eq(u8, seg.padding, 0), "sel %#x", w->sel);
	/* A 64-bit code segment must not also claim 32-bit default size (L=1 D=1 is reserved). */
	cr_assert(zero(int, seg.l &&seg.db), "sel %#x: L and D both set", w->sel);
	/* The RPL of each selector matches the DPL, as loading it into CS/SS requires. */
	if (w->s)
		cr_assert(eq(u8, w->sel & 3, seg.dpl), "sel %#x: RPL != DPL", w->sel);
}

Test(gdt, descriptors_bit_exact)
{
	uint64_t gdt[GDT_ENTRIES];

	memset(gdt, 0xff, sizeof(gdt));
	gdt_build(gdt);
	/* The canonical encodings (the same as Linux's boot GDT and Firecracker's). */
	cr_assert(eq(u64, gdt[0], 0));
	cr_assert(eq(u64, gdt[GDT_SEL_CODE32 >> 3], 0x00cf9b000000ffffull));
	cr_assert(eq(u64, gdt[GDT_SEL_CODE64 >> 3], 0x00af9b000000ffffull));
	cr_assert(eq(u64, gdt[GDT_SEL_DATA >> 3], 0x00cf93000000ffffull));
	cr_assert(eq(u64, gdt[GDT_SEL_TSS >> 3], 0x00008b0000000067ull));
	cr_assert(eq(u64, gdt[GDT_SEL_UDATA >> 3], 0x00cff3000000ffffull));
	cr_assert(eq(u64, gdt[GDT_SEL_UCODE64 >> 3], 0x00affb000000ffffull));
}

Test(gdt, selectors_match_the_payload_abi)
{
	cr_assert(eq(int, GDT_SEL_UDATA, PAYLOAD_SEL_DATA));
	cr_assert(eq(int, GDT_SEL_UCODE64, PAYLOAD_SEL_CODE));
	cr_assert(lt(int, GDT_SEL_UCODE64 >> 3, GDT_ENTRIES));
	/* SYSRET's layout: user SS = user CS - 8. */
	cr_assert(eq(int, (GDT_SEL_UCODE64 & ~3) - 8, GDT_SEL_UDATA & ~3));
}

Test(gdt, code64_ring0)
{
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	check_segment(gdt, &(struct want){.sel = GDT_SEL_CODE64,
					  .type = 0xb,
					  .s = 1,
					  .dpl = 0,
					  .l = 1,
					  .db = 0,
					  .g = 1,
					  .limit = 0xffffffff});
}

Test(gdt, code32_ring0)
{
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	check_segment(gdt, &(struct want){.sel = GDT_SEL_CODE32,
					  .type = 0xb,
					  .s = 1,
					  .dpl = 0,
					  .l = 0,
					  .db = 1,
					  .g = 1,
					  .limit = 0xffffffff});
}

Test(gdt, data_ring0)
{
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	check_segment(gdt, &(struct want){.sel = GDT_SEL_DATA,
					  .type = 0x3,
					  .s = 1,
					  .dpl = 0,
					  .l = 0,
					  .db = 1,
					  .g = 1,
					  .limit = 0xffffffff});
}

Test(gdt, user_data_ring3)
{
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	check_segment(gdt, &(struct want){.sel = GDT_SEL_UDATA,
					  .type = 0x3,
					  .s = 1,
					  .dpl = 3,
					  .l = 0,
					  .db = 1,
					  .g = 1,
					  .limit = 0xffffffff});
}

Test(gdt, user_code64_ring3)
{
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	check_segment(gdt, &(struct want){.sel = GDT_SEL_UCODE64,
					  .type = 0xb,
					  .s = 1,
					  .dpl = 3,
					  .l = 1,
					  .db = 0,
					  .g = 1,
					  .limit = 0xffffffff});
}

Test(gdt, tss_busy_system_segment)
{
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	/* Busy TSS (type 0xb), a system descriptor (s = 0), byte-granular limit 0x67. */
	check_segment(gdt, &(struct want){.sel = GDT_SEL_TSS,
					  .type = 0xb,
					  .s = 0,
					  .dpl = 0,
					  .l = 0,
					  .db = 0,
					  .g = 0,
					  .limit = 0x67});
}

Test(gdt, null_selector_is_unusable)
{
	uint64_t gdt[GDT_ENTRIES];
	struct kvm_segment seg;

	gdt_build(gdt);
	gdt_to_kvm_segment(gdt, 0, &seg);
	cr_assert(eq(u8, seg.present, 0));
	cr_assert(eq(u8, seg.unusable, 1));
	cr_assert(eq(u16, seg.selector, 0));
}

/* Every base and limit bit lands where it belongs (the boot GDT only has base 0). */
Test(gdt, unpacks_base_and_limit_fields)
{
	uint64_t gdt[GDT_ENTRIES] = {0};
	struct kvm_segment seg;

	/* base 0x12345678, limit 0xabcde, access 0x93 (present ring-0 data), flags D=1 G=0 AVL=1.
	 */
	gdt[3] = (0x12ull << 56) | (0x5ull << 52) | (0xaull << 48) | (0x93ull << 40) |
		 (0x345678ull << 16) | 0xbcdeull;
	gdt_to_kvm_segment(gdt, 0x18, &seg);
	cr_assert(eq(u64, seg.base, 0x12345678));
	cr_assert(eq(u32, seg.limit, 0xabcde));
	cr_assert(eq(u8, seg.g, 0));
	cr_assert(eq(u8, seg.db, 1));
	cr_assert(eq(u8, seg.avl, 1));
	cr_assert(eq(u8, seg.l, 0));
	cr_assert(eq(u8, seg.type, 3));
	cr_assert(eq(u8, seg.s, 1));
	cr_assert(eq(u8, seg.present, 1));

	/* G=1: the limit counts 4 KiB pages. */
	gdt[3] |= 1ull << 55;
	gdt_to_kvm_segment(gdt, 0x18, &seg);
	cr_assert(eq(u32, seg.limit, 0xabcdefff));
}

/* The RPL bits of a selector do not change which descriptor is used. */
Test(gdt, rpl_bits_select_the_same_descriptor)
{
	uint64_t gdt[GDT_ENTRIES];
	struct kvm_segment a, b;

	gdt_build(gdt);
	gdt_to_kvm_segment(gdt, GDT_SEL_UCODE64, &a);
	gdt_to_kvm_segment(gdt, GDT_SEL_UCODE64 & ~3, &b);
	cr_assert(eq(u8, a.dpl, b.dpl));
	cr_assert(eq(u8, a.l, b.l));
	cr_assert(eq(u16, a.selector, GDT_SEL_UCODE64));
	cr_assert(eq(u16, b.selector, GDT_SEL_UCODE64 & ~3));
}

Test(gdt, write_puts_the_table_at_gdt_gpa)
{
	struct guest_mem mem;
	uint8_t *buf = fake_mem_create(&mem, 64 * MIB, 0xa5);
	uint64_t gdt[GDT_ENTRIES];

	gdt_build(gdt);
	cr_assert(eq(int, gdt_write(&mem), 0));
	cr_assert(eq(int, memcmp(buf + GDT_GPA, gdt, sizeof(gdt)), 0));
	cr_assert(eq(u8, buf[GDT_GPA - 1], 0xa5));
	cr_assert(eq(u8, buf[GDT_GPA + sizeof(gdt)], 0xa5));
	/* The GDT stays below the next structure in the layout. */
	cr_assert(le(u64, GDT_GPA + sizeof(gdt), PAYLOAD_INFO_GPA));
	fake_mem_destroy(&mem);
}

/*
 * In long mode a TSS descriptor is 16 bytes: the slot after it holds base bits 63:32 and must
 * be zero, not another descriptor (the TSS once overlapped the ring-3 data selector, so an
 * `ltr` from the GDT in memory would have faulted).
 */
Test(gdt, tss_upper_half_is_free)
{
	uint64_t gdt[GDT_ENTRIES + 1] = {0};
	uint64_t upper;

	gdt_build(gdt);
	upper = gdt[(GDT_SEL_TSS >> 3) + 1];
	/* Bits 31:0 are base[63:32] (0 here); bits 44:40 of the upper quadword must be zero. */
	cr_assert(eq(u64, upper & 0xffffffffull, 0), "TSS base[63:32] = %#llx",
		  (unsigned long long)(upper & 0xffffffffull));
	cr_assert(eq(u64, (upper >> 40) & 0x1f, 0), "type field of the TSS's upper half");
}
