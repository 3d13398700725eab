/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/bzimage.c and vmm/bootparams.c: parsing a bzImage's setup header and filling the zero
 * page from it, and the PVH start_info. The bzImage is a fake built in memory: a setup area
 * holding struct setup_header at 0x1f1 and a protected-mode "kernel" of known bytes.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <asm/bootparam.h>
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "fake_mem.h"
#include "layout.h"
#include "pvh.h"
#include "vmm.h"

#define HDR_OFFSET  0x1f1
#define HDR_END	    (HDR_OFFSET + sizeof(struct setup_header)) /* 0x26c for protocol 2.15 */
#define SETUP_SECTS 4
#define SETUP_LEN   ((SETUP_SECTS + 1) * 512)
#define KERNEL_LEN  4096

struct fake_bz {
	uint8_t *buf;
	size_t len;
};

static struct setup_header fake_bz_get(const struct fake_bz *f)
{
	struct setup_header h;

	memcpy(&h, f->buf + HDR_OFFSET, sizeof(h));
	return h;
}

static void fake_bz_put(struct fake_bz *f, const struct setup_header *h)
{
	memcpy(f->buf + HDR_OFFSET, h, sizeof(*h));
}

/* A bzImage of boot protocol 2.15 with a 64-bit entry: SETUP_LEN bytes of setup, then
 * KERNEL_LEN bytes of kernel (byte i is i * 7), syssize exact. */
static struct fake_bz fake_bz_make(void)
{
	struct fake_bz f = {.len = SETUP_LEN + KERNEL_LEN};
	struct setup_header h;

	f.buf = calloc(1, f.len);
	cr_assert(f.buf != NULL);
	memset(&h, 0, sizeof(h));
	h.setup_sects = SETUP_SECTS;
	h.syssize = KERNEL_LEN / 16;
	h.vid_mode = 0xffff;
	h.boot_flag = 0xaa55;
	/* jmp short over the header: byte 0x201 says where the header ends (0x202 + it). */
	h.jump = (uint16_t)(0xeb | ((HDR_END - 0x202) << 8));
	memcpy(&h.header, "HdrS", 4);
	h.version = 0x020f;
	h.loadflags = LOADED_HIGH;
	h.code32_start = 0x100000;
	h.initrd_addr_max = 0x7fffffff;
	h.kernel_alignment = 0x200000;
	h.relocatable_kernel = 1;
	h.min_alignment = 21;
	h.xloadflags = XLF_KERNEL_64 | (1 << 1); /* XLF_CAN_BE_LOADED_ABOVE_4G */
	h.cmdline_size = 2047;
	h.pref_address = 0x1000000;
	h.init_size = 0x2345000;
	h.handover_offset = 0x190;
	h.kernel_info_offset = 0x4321;
	fake_bz_put(&f, &h);
	for (size_t i = 0; i < KERNEL_LEN; i++)
		f.buf[SETUP_LEN + i] = (uint8_t)(i * 7);
	return f;
}

static int fake_bz_parse(const struct fake_bz *f, struct bzimage *bz)
{
	return bzimage_parse(f->buf, f->len, bz);
}

/* ---- bzimage_parse ---- */

Test(bzimage, parse_accepts_a_good_image)
{
	struct fake_bz f = fake_bz_make();
	struct bzimage bz;

	cr_assert(eq(int, fake_bz_parse(&f, &bz), 0));
	cr_assert(eq(ptr, (void *)bz.setup, f.buf));
	cr_assert(eq(sz, bz.setup_len, SETUP_LEN));
	cr_assert(eq(ptr, (void *)bz.kernel, f.buf + SETUP_LEN));
	cr_assert(eq(sz, bz.kernel_len, KERNEL_LEN));
	cr_assert(eq(u16, bz.version, 0x020f));
	cr_assert(eq(u32, bz.cmdline_max, 2047));
	cr_assert(eq(u32, bz.initrd_addr_max, 0x7fffffff));
	cr_assert(eq(u32, bz.init_size, 0x2345000));
	cr_assert(eq(u64, bz.pref_address, 0x1000000));
	cr_assert(eq(u8, bz.kernel[1], 7));
	free(f.buf);
}

Test(bzimage, parse_oldest_accepted_protocol_2_12)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	h.version = 0x020c;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), 0));
	cr_assert(eq(u16, bz.version, 0x020c));
	free(f.buf);
}

Test(bzimage, parse_setup_sects_zero_means_four)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	h.setup_sects = 0;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), 0));
	cr_assert(eq(sz, bz.setup_len, 5 * 512));
	free(f.buf);
}

Test(bzimage, parse_setup_sects_sets_the_kernel_offset)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	h.setup_sects = 1;
	h.syssize = (f.len - 1024) / 16;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), 0));
	cr_assert(eq(sz, bz.setup_len, 1024));
	cr_assert(eq(ptr, (void *)bz.kernel, f.buf + 1024));
	cr_assert(eq(sz, bz.kernel_len, f.len - 1024));
	free(f.buf);
}

Test(bzimage, parse_rejects_too_short)
{
	struct fake_bz f = fake_bz_make();
	struct bzimage bz;

	cr_assert(eq(int, bzimage_parse(f.buf, 0, &bz), -ENOEXEC));
	cr_assert(eq(int, bzimage_parse(f.buf, 0x200, &bz), -ENOEXEC));
	cr_assert(eq(int, bzimage_parse(f.buf, HDR_END - 1, &bz), -ENOEXEC));
	/* Exactly the header: a valid header, but no room for setup and kernel. */
	cr_assert(eq(int, bzimage_parse(f.buf, HDR_END, &bz), -ENOEXEC));
	free(f.buf);
}

/* ASan: a file shorter than the header is never read past its end. */
Test(bzimage, parse_short_heap_buffer_is_not_overread)
{
	struct fake_bz f = fake_bz_make();
	struct bzimage bz;
	uint8_t *shortbuf = malloc(HDR_END - 1);

	cr_assert(shortbuf != NULL);
	memcpy(shortbuf, f.buf, HDR_END - 1);
	cr_assert(eq(int, bzimage_parse(shortbuf, HDR_END - 1, &bz), -ENOEXEC));
	free(shortbuf);
	free(f.buf);
}

Test(bzimage, parse_rejects_wrong_magic)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	h.boot_flag = 0x55aa;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -ENOEXEC));

	h.boot_flag = 0xaa55;
	memcpy(&h.header, "HdrZ", 4);
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -ENOEXEC));
	free(f.buf);
}

Test(bzimage, parse_rejects_old_protocol)
{
	static const uint16_t old[] = {0x0000, 0x0200, 0x0206, 0x020b};
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
		h.version = old[i];
		fake_bz_put(&f, &h);
		cr_assert(eq(int, fake_bz_parse(&f, &bz), -EPROTO), "version %#x", old[i]);
	}
	free(f.buf);
}

Test(bzimage, parse_rejects_no_64bit_entry)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	h.xloadflags &= (uint16_t)~XLF_KERNEL_64;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -EPROTO));

	/* A zImage (loaded low) is refused too. */
	h = fake_bz_get(&f);
	h.xloadflags |= XLF_KERNEL_64;
	h.loadflags &= (uint8_t)~LOADED_HIGH;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -EPROTO));
	free(f.buf);
}

Test(bzimage, parse_rejects_truncated)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	/* The header promises one paragraph more than the file has. */
	h.syssize = KERNEL_LEN / 16 + 1;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -ENODATA));

	/* The same file cut short by one byte. */
	h.syssize = KERNEL_LEN / 16;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, bzimage_parse(f.buf, f.len - 1, &bz), -ENODATA));

	/* syssize * 16 overflows 32 bits: must not wrap into "fits". */
	h.syssize = 0x10000001;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -ENODATA));
	h.syssize = UINT32_MAX;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -ENODATA));
	free(f.buf);
}

Test(bzimage, parse_rejects_setup_as_big_as_the_file)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct bzimage bz;

	h.setup_sects = 255; /* 128 KiB of setup in a 6.5 KiB file */
	h.syssize = 0;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, fake_bz_parse(&f, &bz), -ENOEXEC));

	/* Setup exactly fills the file: no kernel at all. */
	h.setup_sects = SETUP_SECTS;
	fake_bz_put(&f, &h);
	cr_assert(eq(int, bzimage_parse(f.buf, SETUP_LEN, &bz), -ENOEXEC));
	free(f.buf);
}

/* ---- bootparams_build ---- */

static void build_zero_page(struct boot_params *bp, const struct fake_bz *f, uint64_t ram_len,
			    gpa_t cmdline_gpa, gpa_t initrd_gpa, uint64_t initrd_len)
{
	struct guest_mem mem;
	struct bzimage bz;

	fake_mem_create(&mem, ram_len, 0);
	cr_assert(eq(int, fake_bz_parse(f, &bz), 0));
	memset(bp, 0xcc, sizeof(*bp)); /* whatever was on the stack */
	bootparams_build(bp, &bz, &mem, cmdline_gpa, initrd_gpa, initrd_len);
	fake_mem_destroy(&mem);
}

Test(bootparams, loader_fields)
{
	struct fake_bz f = fake_bz_make();
	struct boot_params *bp = malloc(sizeof(*bp));

	cr_assert(bp != NULL);
	build_zero_page(bp, &f, 128 * MIB, CMDLINE_GPA, 0x7000000, 0x123456);
	cr_assert(eq(u8, bp->hdr.type_of_loader, 0xff));
	cr_assert(eq(u8, bp->hdr.loadflags & CAN_USE_HEAP, CAN_USE_HEAP));
	/* The image's own flag survives. */
	cr_assert(eq(u8, bp->hdr.loadflags & LOADED_HIGH, LOADED_HIGH));
	cr_assert(eq(u16, bp->hdr.heap_end_ptr, 0xfe00));
	/* cmdline_size is the kernel's limit, copied from the image, never overwritten. */
	cr_assert(eq(u32, bp->hdr.cmdline_size, 2047));
	cr_assert(eq(u32, bp->hdr.cmd_line_ptr, (uint32_t)CMDLINE_GPA));
	cr_assert(eq(u32, bp->ext_cmd_line_ptr, 0));
	cr_assert(eq(u32, bp->hdr.ramdisk_image, 0x7000000));
	cr_assert(eq(u32, bp->ext_ramdisk_image, 0));
	cr_assert(eq(u32, bp->hdr.ramdisk_size, 0x123456));
	cr_assert(eq(u32, bp->ext_ramdisk_size, 0));
	free(bp);
	free(f.buf);
}

Test(bootparams, no_initrd)
{
	struct fake_bz f = fake_bz_make();
	struct boot_params *bp = malloc(sizeof(*bp));

	cr_assert(bp != NULL);
	build_zero_page(bp, &f, 128 * MIB, CMDLINE_GPA, 0, 0);
	cr_assert(eq(u32, bp->hdr.ramdisk_image, 0));
	cr_assert(eq(u32, bp->hdr.ramdisk_size, 0));
	cr_assert(eq(u32, bp->ext_ramdisk_image, 0));
	cr_assert(eq(u32, bp->ext_ramdisk_size, 0));
	free(bp);
	free(f.buf);
}

Test(bootparams, addresses_above_4gib_use_the_ext_fields)
{
	struct fake_bz f = fake_bz_make();
	struct boot_params *bp = malloc(sizeof(*bp));

	cr_assert(bp != NULL);
	build_zero_page(bp, &f, 128 * MIB, 0x123456000ull, 0x234567000ull, 0x345678000ull);
	cr_assert(eq(u32, bp->hdr.cmd_line_ptr, 0x23456000));
	cr_assert(eq(u32, bp->ext_cmd_line_ptr, 0x1));
	cr_assert(eq(u32, bp->hdr.ramdisk_image, 0x34567000));
	cr_assert(eq(u32, bp->ext_ramdisk_image, 0x2));
	cr_assert(eq(u32, bp->hdr.ramdisk_size, 0x45678000));
	cr_assert(eq(u32, bp->ext_ramdisk_size, 0x3));
	free(bp);
	free(f.buf);
}

Test(bootparams, e820_copied)
{
	static const uint64_t sizes[] = {128 * MIB, 5 * GIB};
	struct fake_bz f = fake_bz_make();
	struct boot_params *bp = malloc(sizeof(*bp));

	cr_assert(bp != NULL);
	for (size_t s = 0; s < 2; s++) {
		struct guest_mem mem;
		struct e820_entry_host e[E820_MAX];
		struct bzimage bz;
		unsigned n;

		fake_mem_create(&mem, sizes[s], 0);
		n = e820_build(&mem, e);
		cr_assert(eq(int, fake_bz_parse(&f, &bz), 0));
		memset(bp, 0xcc, sizeof(*bp));
		bootparams_build(bp, &bz, &mem, CMDLINE_GPA, 0, 0);
		cr_assert(eq(u8, bp->e820_entries, n));
		for (unsigned i = 0; i < n; i++) {
			cr_assert(eq(u64, bp->e820_table[i].addr, e[i].addr));
			cr_assert(eq(u64, bp->e820_table[i].size, e[i].size));
			cr_assert(eq(u32, bp->e820_table[i].type, e[i].type));
		}
		/* The rest of the table is zero, not stack garbage. */
		cr_assert(eq(u64, bp->e820_table[n].size, 0));
		cr_assert(eq(u32, bp->e820_table[n].type, 0));
		fake_mem_destroy(&mem);
	}
	cr_assert(eq(u64, bp->e820_table[3].addr, 4 * GIB));
	cr_assert(eq(u64, bp->e820_table[3].size, 2 * GIB));
	free(bp);
	free(f.buf);
}

Test(bootparams, header_copied_from_the_image)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct boot_params *bp = malloc(sizeof(*bp));

	cr_assert(bp != NULL);
	build_zero_page(bp, &f, 128 * MIB, CMDLINE_GPA, 0, 0);
	cr_assert(eq(u8, bp->hdr.setup_sects, SETUP_SECTS));
	cr_assert(eq(u32, bp->hdr.syssize, KERNEL_LEN / 16));
	cr_assert(eq(u16, bp->hdr.vid_mode, 0xffff));
	cr_assert(eq(u16, bp->hdr.boot_flag, 0xaa55));
	cr_assert(eq(u16, bp->hdr.jump, h.jump));
	cr_assert(eq(u32, bp->hdr.header, h.header));
	cr_assert(eq(u16, bp->hdr.version, 0x020f));
	cr_assert(eq(u32, bp->hdr.code32_start, 0x100000));
	cr_assert(eq(u32, bp->hdr.initrd_addr_max, 0x7fffffff));
	cr_assert(eq(u32, bp->hdr.kernel_alignment, 0x200000));
	cr_assert(eq(u8, bp->hdr.relocatable_kernel, 1));
	cr_assert(eq(u8, bp->hdr.min_alignment, 21));
	cr_assert(eq(u16, bp->hdr.xloadflags, h.xloadflags));
	cr_assert(eq(u64, bp->hdr.pref_address, 0x1000000));
	cr_assert(eq(u32, bp->hdr.init_size, 0x2345000));
	cr_assert(eq(u32, bp->hdr.handover_offset, 0x190));
	cr_assert(eq(u32, bp->hdr.kernel_info_offset, 0x4321));
	/* Outside the header the zero page is zero. */
	cr_assert(eq(u8, bp->screen_info.orig_video_isVGA, 0));
	cr_assert(eq(u32, bp->acpi_rsdp_addr, 0));
	cr_assert(eq(u8, bp->sentinel, 0));
	cr_assert(fake_mem_all(bp->_pad9, sizeof(bp->_pad9), 0));
	free(bp);
	free(f.buf);
}

/* The header is as long as the jump at 0x200 says: fields past it are not the header's (in a
 * real image they are setup code) and must not be copied. */
Test(bootparams, header_copy_stops_where_the_jump_says)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct boot_params *bp = malloc(sizeof(*bp));
	size_t end = HDR_OFFSET + offsetof(struct setup_header, kernel_alignment);

	cr_assert(bp != NULL);
	h.jump = (uint16_t)(0xeb | ((end - 0x202) << 8));
	fake_bz_put(&f, &h);
	build_zero_page(bp, &f, 128 * MIB, CMDLINE_GPA, 0, 0);
	cr_assert(eq(u32, bp->hdr.initrd_addr_max, 0x7fffffff)); /* last field before `end` */
	cr_assert(eq(u32, bp->hdr.kernel_alignment, 0));
	cr_assert(eq(u16, bp->hdr.xloadflags, 0));
	cr_assert(eq(u64, bp->hdr.pref_address, 0));
	cr_assert(eq(u32, bp->hdr.init_size, 0));
	free(bp);
	free(f.buf);
}

/* A jump beyond our struct (a newer protocol's longer header, or just code) copies only what
 * struct setup_header holds, and setup code past it is not read into the zero page. */
Test(bootparams, header_copy_bounded_by_the_struct)
{
	struct fake_bz f = fake_bz_make();
	struct setup_header h = fake_bz_get(&f);
	struct boot_params *bp = malloc(sizeof(*bp));

	cr_assert(bp != NULL);
	h.jump = 0xffeb;
	fake_bz_put(&f, &h);
	memset(f.buf + HDR_END, 0x5a, 0x100);
	build_zero_page(bp, &f, 128 * MIB, CMDLINE_GPA, 0, 0);
	cr_assert(eq(u32, bp->hdr.kernel_info_offset, 0x4321));
	cr_assert(fake_mem_all(bp->_pad7, sizeof(bp->_pad7), 0));
	free(bp);
	free(f.buf);
}

/* ---- pvh_build ---- */

Test(pvh, start_info_without_initrd)
{
	struct guest_mem mem;
	struct e820_entry_host e[E820_MAX];
	struct pvh_boot pb;
	unsigned n;

	fake_mem_create(&mem, 5 * GIB, 0);
	n = e820_build(&mem, e);
	memset(&pb, 0xcc, sizeof(pb));
	pvh_build(&pb, &mem, CMDLINE_GPA, 0, 0);
	cr_assert(eq(u32, pb.info.magic, HVM_START_MAGIC));
	cr_assert(eq(u32, pb.info.version, 1));
	cr_assert(eq(u32, pb.info.flags, 0));
	cr_assert(eq(u64, pb.info.cmdline_paddr, CMDLINE_GPA));
	cr_assert(eq(u64, pb.info.rsdp_paddr, 0));
	cr_assert(eq(u64, pb.info.memmap_paddr, PVH_MEMMAP_GPA));
	cr_assert(eq(u32, pb.info.memmap_entries, n));
	cr_assert(eq(u32, pb.info.nr_modules, 0));
	cr_assert(eq(u64, pb.info.modlist_paddr, 0));
	cr_assert(eq(u64, pb.module.paddr, 0));
	cr_assert(eq(u64, pb.module.size, 0));
	for (unsigned i = 0; i < n; i++) {
		cr_assert(eq(u64, pb.memmap[i].addr, e[i].addr));
		cr_assert(eq(u64, pb.memmap[i].size, e[i].size));
		cr_assert(eq(u32, pb.memmap[i].type, e[i].type));
		cr_assert(eq(u32, pb.memmap[i].reserved, 0));
	}
	for (unsigned i = n; i < E820_MAX; i++)
		cr_assert(eq(u64, pb.memmap[i].size, 0));
	fake_mem_destroy(&mem);
}

Test(pvh, start_info_with_initrd)
{
	struct guest_mem mem;
	struct pvh_boot pb;

	fake_mem_create(&mem, 128 * MIB, 0);
	pvh_build(&pb, &mem, CMDLINE_GPA, 0x7000000, 0x123456);
	cr_assert(eq(u32, pb.info.nr_modules, 1));
	cr_assert(eq(u64, pb.info.modlist_paddr, PVH_MODLIST_GPA));
	cr_assert(eq(u64, pb.module.paddr, 0x7000000));
	cr_assert(eq(u64, pb.module.size, 0x123456));
	cr_assert(eq(u64, pb.module.cmdline_paddr, 0));
	cr_assert(eq(u32, pb.info.memmap_entries, 3));
	/* The layout's areas do not overlap one another. */
	cr_assert(le(u64, PVH_INFO_GPA + sizeof(pb.info), PVH_MEMMAP_GPA));
	cr_assert(le(u64, PVH_MEMMAP_GPA + sizeof(pb.memmap), PVH_MODLIST_GPA));
	cr_assert(le(u64, PVH_MODLIST_GPA + sizeof(pb.module), BOOT_PARAMS_GPA));
	fake_mem_destroy(&mem);
}
