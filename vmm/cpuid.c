/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-vCPU CPUID, from KVM_GET_SUPPORTED_CPUID: each vCPU gets its own APIC id and a topology
 * of `ncpus` cores in one socket, one thread per core; the guest is told it runs under a
 * hypervisor; the PMU is hidden (KVM here has none to offer, and a guest must not probe it).
 */
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

void cpuid_filter(struct kvm_cpuid_entry2 *entries, unsigned nent, unsigned index, unsigned ncpus)
{
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
		case 0x4: {
			/* EAX: [31:26] cores per package - 1, [25:14] threads sharing this cache
			 * - 1. Caches above level 2 are shared by every core. */
			uint32_t level = (e->eax >> 5) & 0x7;
			uint32_t sharing = level > 2 ? ncpus - 1 : 0;

			if (e->eax == 0)
				break; /* no more caches */
			e->eax = (e->eax & 0x3fffu) | ((sharing & 0xfffu) << 14) |
				 (((ncpus - 1) & 0x3fu) << 26);
			break;
		}
		case 0xa: /* architectural performance monitoring: none */
			e->eax = e->ebx = e->ecx = e->edx = 0;
			break;
		case 0xb:
		case 0x1f:
			cpuid_topology_leaf(e, index, ncpus);
			break;
		case 0x8000001e: /* AMD: extended APIC id, core id, node id */
			e->eax = index;
			e->ebx = index & 0xffu;
			e->ecx = 0;
			break;
		default:
			break;
		}
	}
}
