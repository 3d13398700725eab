/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the kernel is told at entry: the Linux zero page (struct boot_params, 64-bit boot
 * protocol) for a bzImage, or the PVH hvm_start_info for an ELF vmlinux. Both carry the same
 * e820 map, command line and initrd.
 */
#include <string.h>

#include <asm/bootparam.h>

#include "layout.h"
#include "pvh.h"
#include "vmm.h"

#define LOADER_TYPE_UNDEFINED 0xff

void bootparams_build(struct boot_params *bp, const struct bzimage *bz, const struct guest_mem *mem,
		      gpa_t cmdline_gpa, gpa_t initrd_gpa, uint64_t initrd_len)
{
	struct e820_entry_host e820[E820_MAX];
	size_t hdr_end;
	unsigned n;

	memset(bp, 0, sizeof(*bp));
	/* Copy the setup header as the file has it: its length is given by the byte at 0x201
	 * (the jump's offset), bounded by our struct and by the file's setup area. */
	hdr_end = 0x202 + bz->setup[0x201];
	if (hdr_end > offsetof(struct boot_params, hdr) + sizeof(bp->hdr))
		hdr_end = offsetof(struct boot_params, hdr) + sizeof(bp->hdr);
	if (hdr_end > bz->setup_len)
		hdr_end = bz->setup_len;
	memcpy(&bp->hdr, bz->setup + offsetof(struct boot_params, hdr),
	       hdr_end - offsetof(struct boot_params, hdr));

	bp->hdr.type_of_loader = LOADER_TYPE_UNDEFINED;
	bp->hdr.loadflags |= CAN_USE_HEAP | KEEP_SEGMENTS;
	bp->hdr.heap_end_ptr = 0xfe00;
	bp->hdr.cmd_line_ptr = (uint32_t)cmdline_gpa;
	bp->ext_cmd_line_ptr = (uint32_t)(cmdline_gpa >> 32);
	bp->hdr.ramdisk_image = (uint32_t)initrd_gpa;
	bp->ext_ramdisk_image = (uint32_t)(initrd_gpa >> 32);
	bp->hdr.ramdisk_size = (uint32_t)initrd_len;
	bp->ext_ramdisk_size = (uint32_t)(initrd_len >> 32);

	n = e820_build(mem, e820);
	for (unsigned i = 0; i < n; i++) {
		bp->e820_table[i].addr = e820[i].addr;
		bp->e820_table[i].size = e820[i].size;
		bp->e820_table[i].type = e820[i].type;
	}
	bp->e820_entries = (uint8_t)n;
}

void pvh_build(struct pvh_boot *pb, const struct guest_mem *mem, gpa_t cmdline_gpa,
	       gpa_t initrd_gpa, uint64_t initrd_len)
{
	struct e820_entry_host e820[E820_MAX];
	unsigned n;

	memset(pb, 0, sizeof(*pb));
	n = e820_build(mem, e820);
	for (unsigned i = 0; i < n; i++) {
		pb->memmap[i].addr = e820[i].addr;
		pb->memmap[i].size = e820[i].size;
		pb->memmap[i].type = e820[i].type;
	}
	pb->info.magic = HVM_START_MAGIC;
	pb->info.version = 1;
	pb->info.cmdline_paddr = cmdline_gpa;
	pb->info.memmap_paddr = PVH_MEMMAP_GPA;
	pb->info.memmap_entries = n;
	if (initrd_len) {
		pb->module.paddr = initrd_gpa;
		pb->module.size = initrd_len;
		pb->info.nr_modules = 1;
		pb->info.modlist_paddr = PVH_MODLIST_GPA;
	}
}
