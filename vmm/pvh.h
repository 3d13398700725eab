/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PVH boot ABI's start_info (Xen's xen/include/public/arch-x86/hvm/start_info.h, version 1:
 * the structures are restated here because Debian ships no header for them).
 */
#ifndef SANDBOX_PVH_H
#define SANDBOX_PVH_H

#include <stdint.h>

#include "vmm.h"

#define HVM_START_MAGIC 0x336ec578u

struct hvm_start_info {
	uint32_t magic;
	uint32_t version;
	uint32_t flags;
	uint32_t nr_modules;
	uint64_t modlist_paddr;
	uint64_t cmdline_paddr;
	uint64_t rsdp_paddr;
	uint64_t memmap_paddr; /* version >= 1 */
	uint32_t memmap_entries;
	uint32_t reserved;
};
_Static_assert(sizeof(struct hvm_start_info) == 56, "hvm_start_info");

struct hvm_modlist_entry {
	uint64_t paddr;
	uint64_t size;
	uint64_t cmdline_paddr;
	uint64_t reserved;
};
_Static_assert(sizeof(struct hvm_modlist_entry) == 32, "hvm_modlist_entry");

struct hvm_memmap_table_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
	uint32_t reserved;
};
_Static_assert(sizeof(struct hvm_memmap_table_entry) == 24, "hvm_memmap_table_entry");

/* Everything the PVH entry is handed, as written to guest RAM at PVH_INFO_GPA,
 * PVH_MEMMAP_GPA and PVH_MODLIST_GPA. */
struct pvh_boot {
	struct hvm_start_info info;
	struct hvm_memmap_table_entry memmap[E820_MAX];
	struct hvm_modlist_entry module;
};

/* Fill `pb` for the guest's RAM, command line and optional initrd (initrd_len 0: none). */
void pvh_build(struct pvh_boot *pb, const struct guest_mem *mem, gpa_t cmdline_gpa,
	       gpa_t initrd_gpa, uint64_t initrd_len);

#endif
