/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The payload ABI: how sandbox-vmm starts a freestanding ELF "payload" guest.
 *
 * Self-contained (no host headers beyond <stdint.h>) so that freestanding guests in
 * tests/guests/ include it as is. Change PAYLOAD_ABI_VERSION with any change here.
 *
 * Entry state, identical on every vCPU (all vCPUs start at once, at the same entry):
 *  - 64-bit long mode, CPL 3 (CS = PAYLOAD_SEL_CODE, SS/DS/ES = PAYLOAD_SEL_DATA), RFLAGS.IOPL
 *    = 3 and IF = 0. There is no IDT: any exception triple-faults and the VMM
 *    exits with its triple-fault status. Do not use SSE/AVX (build with -mgeneral-regs-only).
 *  - Paging: every guest-physical address below info->map_end is identity-mapped,
 *    user-accessible and writable, with 2 MiB pages (RAM and the MMIO hole alike).
 *  - rip = ELF e_entry; rdi = vCPU index (0..n-1); rsi = number of vCPUs;
 *    rdx = guest-physical address of struct payload_info (PAYLOAD_INFO_GPA);
 *    rsp = top of this vCPU's stack, stacks_gpa + (index + 1) * PAYLOAD_STACK_LEN, other GPRs 0.
 *  - The ELF's PT_LOAD segments are loaded at p_paddr, which must be >= PAYLOAD_LOAD_MIN and
 *    end below the stacks; the VMM refuses anything else.
 *
 * Devices are reached through MMIO, because port I/O from ring 3 faults on kvm-pvm whatever
 * IOPL says (measured: `in`/`out` at CPL 3 with IOPL 3 triple-fault there unless the TSS has
 * an I/O bitmap, while MMIO exits always work, and MMIO is what virtio-mmio needs anyway):
 *  - the 8250 UART's eight byte-wide registers at PAYLOAD_UART_GPA + register (THR/RBR at +0,
 *    LSR at +5): the same device Linux sees at port 0x3f8;
 *  - the i8042 at PAYLOAD_I8042_GPA: writing PAYLOAD_I8042_RESET to PAYLOAD_I8042_GPA +
 *    PAYLOAD_I8042_CMD ends the VM with exit status 0 (the same as port 0x64);
 *  - the local APIC at PAYLOAD_LAPIC_GPA (read its ID register only).
 * On hardware KVM the ports work too (IOPL is 3), but payloads should use the MMIO windows.
 */
#ifndef SANDBOX_PAYLOAD_ABI_H
#define SANDBOX_PAYLOAD_ABI_H

#include <stdint.h>

#define PAYLOAD_ABI_VERSION 3 /* 2: devices through MMIO windows; 3: the VMM's CPUID leaves */
#define PAYLOAD_INFO_MAGIC  0x64617970u /* "payd" */

#define PAYLOAD_INFO_GPA  0x1000ull
#define PAYLOAD_LOAD_MIN  0x100000ull /* 1 MiB */
#define PAYLOAD_STACK_LEN 0x4000ull   /* 16 KiB per vCPU */

#define PAYLOAD_SEL_DATA 0x2b /* GDT entry 5, RPL 3 */
#define PAYLOAD_SEL_CODE 0x33 /* GDT entry 6, RPL 3 */

#define PAYLOAD_UART_GPA    0xfe000000ull /* 8 bytes, in the MMIO hole */
#define PAYLOAD_I8042_GPA   0xfe001000ull /* +0 data (port 0x60), +4 command (port 0x64) */
#define PAYLOAD_I8042_CMD   4
#define PAYLOAD_I8042_RESET 0xfe

/* The in-kernel local APIC, in xAPIC mode: bits 31:24 of its ID register hold the vCPU's
 * APIC id, which is its index. KVM serves this page itself, whatever `cpuid` does. */
#define PAYLOAD_LAPIC_GPA    0xfee00000ull
#define PAYLOAD_LAPIC_ID_REG 0x20

#define PAYLOAD_MAX_RANGES 4

/*
 * The VMM's own CPUID leaves, in every vCPU's table (payload and Linux guests alike), well
 * after KVM's (0x40000000, or 0x40000100 when Hyper-V's leaves come first) so that a guest
 * looking for KVM still finds it:
 *  - PAYLOAD_CPUID_SIG_LEAF: EAX = PAYLOAD_CPUID_INFO_LEAF (the highest leaf of this range),
 *    EBX, ECX, EDX = "sandbox-vmm\0" (PAYLOAD_CPUID_SIG_EBX/ECX/EDX);
 *  - PAYLOAD_CPUID_INFO_LEAF: EAX = this vCPU's index, EBX = the number of vCPUs, ECX = this
 *    VM's nonce (random at each start; payload_info.cpuid_nonce), EDX = 0.
 * A guest whose `cpuid` returns the signature and its own VM's nonce knows that KVM served it
 * from this VMM's table for this vCPU. Without them, `cpuid` ran on the host CPU: kvm-pvm runs
 * ring-3 guest code natively, and a CPU without CPUID faulting then answers from its own
 * registers (docs/hosts.md), so nothing CPUID says about APIC ids or topology is the VMM's
 * promise. The signature is ours, not the hypervisor bit: our hosts are VMs themselves, and
 * that bit is set natively too; the nonce tells this VM's table from that of a sandbox-vmm
 * the host itself may run under.
 */
#define PAYLOAD_CPUID_SIG_LEAF	0x40000f00u
#define PAYLOAD_CPUID_INFO_LEAF 0x40000f01u
#define PAYLOAD_CPUID_SIG_EBX	0x646e6173u /* "sand" */
#define PAYLOAD_CPUID_SIG_ECX	0x2d786f62u /* "box-" */
#define PAYLOAD_CPUID_SIG_EDX	0x006d6d76u /* "vmm\0" */

/* True when `cpuid` answered from this VM's table: the signature leaf's EBX, ECX, EDX and the
 * info leaf's ECX against the VM's nonce (payload_info.cpuid_nonce). */
static inline int payload_cpuid_is_ours(uint32_t ebx, uint32_t ecx, uint32_t edx, uint32_t info_ecx,
					uint32_t nonce)
{
	return ebx == PAYLOAD_CPUID_SIG_EBX && ecx == PAYLOAD_CPUID_SIG_ECX &&
	       edx == PAYLOAD_CPUID_SIG_EDX && info_ecx == nonce;
}

/* One range of guest RAM, guest-physical. */
struct payload_ram_range {
	uint64_t gpa;
	uint64_t len;
};
_Static_assert(sizeof(struct payload_ram_range) == 16, "payload_ram_range layout");

/* Found at PAYLOAD_INFO_GPA, written by the VMM before any vCPU starts. */
struct payload_info {
	uint32_t magic;		/* PAYLOAD_INFO_MAGIC */
	uint32_t version;	/* PAYLOAD_ABI_VERSION */
	uint32_t ncpus;		/* vCPUs started */
	uint32_t nranges;	/* valid entries in ram[] */
	uint64_t ram_len;	/* total RAM in bytes */
	uint64_t map_end;	/* identity map covers [0, map_end) */
	uint64_t stacks_gpa;	/* lowest byte of the stacks area */
	uint64_t mmio_base_gpa; /* first virtio-mmio window (none attached yet) */
	struct payload_ram_range ram[PAYLOAD_MAX_RANGES];
	uint32_t cpuid_nonce; /* ECX of PAYLOAD_CPUID_INFO_LEAF in this VM's tables */
	uint32_t reserved;    /* 0 */
};
_Static_assert(sizeof(struct payload_info) == 56 + 16 * PAYLOAD_MAX_RANGES, "payload_info layout");

#endif
