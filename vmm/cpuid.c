/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-vCPU CPUID, from KVM_GET_SUPPORTED_CPUID: each vCPU gets its own APIC id and a topology
 * of `ncpus` cores in one socket, one thread per core, in Intel's leaves (1, 4, 0xb, 0x1f) and
 * AMD's (0x80000008, 0x8000001d, 0x8000001e) alike, since the host's table has one vendor's and
 * the guest reads whichever its vendor string says; the guest is told it runs under a
 * hypervisor, and under this VMM (the leaves of payload_abi.h); the PMU is hidden (KVM here has
 * none to offer, and a guest must not probe it).
 */
#include <errno.h>

#include "payload_abi.h"
#include "vmm.h"

#define CPUID_1_ECX_HYPERVISOR	 (1u << 31)
#define CPUID_1_EDX_HTT		 (1u << 28)
#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)

/* Bits needed to number `n` items: the shift of the next topology level. */
static uint32_t cpuid_order(unsigned n)
{
	uint32_t bits = 0;

	while ((1u << bits) < n)
		bits++;
	return bits;
}

/* Leaves 0xb and 0x1f: level 0 is SMT (1 thread), level 1 is the core level (ncpus). */
static void cpuid_topology_leaf(struct kvm_cpuid_entry2 *e, unsigned index, unsigned ncpus)
{
	uint32_t level = e->index;

	e->edx = index; /* x2APIC id */
	if (level == 0) {
		e->eax = 0;
		e->ebx = 1;
		e->ecx = (1u << 8) | level;
	} else if (level == 1) {
		e->eax = cpuid_order(ncpus);
		e->ebx = ncpus;
		e->ecx = (2u << 8) | level;
	} else {
		e->eax = 0;
		e->ebx = 0;
		e->ecx = level;
	}
}

void cpuid_set_tsc_deadline(struct kvm_cpuid_entry2 *entries, unsigned nent)
{
	for (unsigned i = 0; i < nent; i++)
		if (entries[i].function == 0x1)
			entries[i].ecx |= CPUID_1_ECX_TSC_DEADLINE;
}

/* Sets `e` to leaf `function` (subleaf 0, not indexed). */
static void cpuid_set_leaf(struct kvm_cpuid_entry2 *e, uint32_t function, uint32_t eax,
			   uint32_t ebx, uint32_t ecx, uint32_t edx)
{
	*e = (struct kvm_cpuid_entry2){
		.function = function, .eax = eax, .ebx = ebx, .ecx = ecx, .edx = edx};
}

int cpuid_add_vmm_leaves(struct kvm_cpuid_entry2 *entries, unsigned *nent, unsigned cap,
			 uint32_t nonce)
{
	unsigned n = 0;

	/* Drop any entries of ours the host table had (it has none today), then append. */
	for (unsigned i = 0; i < *nent; i++)
		if (entries[i].function != PAYLOAD_CPUID_SIG_LEAF &&
		    entries[i].function != PAYLOAD_CPUID_INFO_LEAF)
			entries[n++] = entries[i];
	*nent = n;
	if (cap < 2 || n > cap - 2)
		return -ENOSPC;
	cpuid_set_leaf(&entries[n++], PAYLOAD_CPUID_SIG_LEAF, PAYLOAD_CPUID_INFO_LEAF,
		       PAYLOAD_CPUID_SIG_EBX, PAYLOAD_CPUID_SIG_ECX, PAYLOAD_CPUID_SIG_EDX);
	/* EAX and EBX are filled per vCPU by cpuid_filter. */
	cpuid_set_leaf(&entries[n++], PAYLOAD_CPUID_INFO_LEAF, 0, 0, nonce, 0);
	*nent = n;
	return 0;
}

/* Intel's leaf 4 and AMD's 0x8000001d share EAX's layout: [7:5] cache level, [25:14] threads
 * sharing the cache - 1. Caches above level 2 are shared by every core, the others by none.
 * Returns EAX for a guest of `ncpus` (without the cores field, which only leaf 4 has). */
static uint32_t cpuid_cache_sharing(uint32_t eax, unsigned ncpus)
{
	uint32_t level = (eax >> 5) & 0x7;
	uint32_t sharing = level > 2 ? ncpus - 1 : 0;

	return (eax & ~(0xfffu << 14)) | ((sharing & 0xfffu) << 14);
}

bool cpuid_vendor_amd(const struct kvm_cpuid_entry2 *entries, unsigned nent)
{
	for (unsigned i = 0; i < nent; i++) {
		const struct kvm_cpuid_entry2 *e = &entries[i];

		if (e->function != 0)
			continue;
		return (e->ebx == 0x68747541 && e->edx == 0x69746e65 && e->ecx == 0x444d4163) ||
		       (e->ebx == 0x6f677948 && e->edx == 0x6e65476e && e->ecx == 0x656e6975);
	}
	return false;
}

void cpuid_filter(struct kvm_cpuid_entry2 *entries, unsigned nent, unsigned index, unsigned ncpus)
{
	bool amd = cpuid_vendor_amd(entries, nent);

	for (unsigned i = 0; i < nent; i++) {
		struct kvm_cpuid_entry2 *e = &entries[i];

		switch (e->function) {
		case 0x1:
			/* EBX: [31:24] initial APIC id, [23:16] logical processors per package. */
			e->ebx = (e->ebx & 0x0000ffffu) | (index << 24) | ((ncpus & 0xffu) << 16);
			e->ecx |= CPUID_1_ECX_HYPERVISOR;
			if (ncpus > 1)
				e->edx |= CPUID_1_EDX_HTT;
			else
				e->edx &= ~CPUID_1_EDX_HTT;
			break;
		case 0x4:
			/* EAX: [31:26] cores per package - 1, [25:14] threads sharing this cache
			 * - 1; a type of 0 ends the list. */
			if ((e->eax & 0x1f) == 0)
				break;
			e->eax = (cpuid_cache_sharing(e->eax, ncpus) & 0x03ffffffu) |
				 (((ncpus - 1) & 0x3fu) << 26);
			break;
		case 0x8000001d: /* AMD's leaf 4: the same EAX, without the cores field */
			if ((e->eax & 0x1f) == 0)
				break;
			e->eax = cpuid_cache_sharing(e->eax, ncpus);
			break;
		case 0xa: /* architectural performance monitoring: none */
			e->eax = e->ebx = e->ecx = e->edx = 0;
			break;
		case 0xb:
		case 0x1f:
			cpuid_topology_leaf(e, index, ncpus);
			break;
		case 0x80000008:
			/* AMD: ECX [7:0] cores - 1, [15:12] APIC id bits for them. KVM passes the
			 * host's through, so a 4-vCPU guest on a 2-CPU host would see 2 cores
			 * and place APIC ids 2 and 3 in a second package. Reserved on Intel. */
			if (amd)
				e->ecx = (e->ecx & ~0xf0ffu) | ((ncpus - 1) & 0xffu) |
					 (cpuid_order(ncpus) << 12);
			break;
		case 0x8000001e: /* AMD: extended APIC id, core id, node id */
			e->eax = index;
			e->ebx = index & 0xffu; /* [15:8] threads per core - 1 = 0 */
			e->ecx = 0;
			break;
		case PAYLOAD_CPUID_INFO_LEAF: /* ECX, the VM's nonce, stays */
			e->eax = index;
			e->ebx = ncpus;
			e->edx = 0;
			break;
		default:
			break;
		}
	}
}
