/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The guest-physical memory map (see docs/architecture.md, "Memory map").
 *
 *   0x000500  GDT                        0x060000  kernel command line (4 KiB)
 *   0x001000  payload_info (payload ABI)  0x09fc00  MP table (last KiB of base memory)
 *   0x006000  PVH start_info + memmap     0x100000  kernel / payload image (1 MiB)
 *   0x007000  boot_params (zero page)     ...       initrd at the top of low RAM
 *   0x008ff0  boot stack (Linux)          3 GiB     MMIO hole: virtio-mmio 0xd0000000,
 *   0x010000  identity page tables                  IOAPIC 0xfec00000, LAPIC 0xfee00000
 *                                          4 GiB     RAM above the hole
 */
#ifndef SANDBOX_LAYOUT_H
#define SANDBOX_LAYOUT_H

#define GDT_GPA		  0x500ull
#define PVH_INFO_GPA	  0x6000ull
#define PVH_MEMMAP_GPA	  0x6040ull
#define PVH_MODLIST_GPA	  0x6800ull
#define BOOT_PARAMS_GPA	  0x7000ull
#define BOOT_STACK_GPA	  0x8ff0ull
#define PAGETABLE_GPA	  0x10000ull
#define PAGETABLE_END_GPA 0x60000ull /* 80 pages: 2 + up to 78 page directories */
#define CMDLINE_GPA	  0x60000ull
#define CMDLINE_MAX	  4096u /* including the NUL; the kernel may allow less */
#define EBDA_GPA	  0x9fc00ull
#define MPTABLE_GPA	  EBDA_GPA
#define LOWMEM_END_GPA	  0xa0000ull
#define KERNEL_GPA	  0x100000ull

#define MMIO_HOLE_GPA	     0xc0000000ull
#define MMIO_HOLE_END_GPA    0x100000000ull
#define VIRTIO_MMIO_GPA	     0xd0000000ull
#define IOAPIC_GPA	     0xfec00000ull
#define LAPIC_GPA	     0xfee00000ull
#define KVM_IDENTITY_MAP_GPA 0xfeffc000ull /* one page, inside the hole (VMX only) */
#define KVM_TSS_GPA	     0xfeffd000ull /* three pages, inside the hole (VMX only) */

#define MEM_MIN_MIB 64ull
#define MEM_MAX_MIB (64ull * 1024) /* bounded by the page-table area */
#define VCPU_MAX    32u

#endif
