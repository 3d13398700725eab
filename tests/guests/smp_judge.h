/* SPDX-License-Identifier: Apache-2.0 */
/*
 * payload-smp's judgement of what one vCPU saw, as pure functions: the payload calls them on
 * what its `cpuid` and local APIC returned, and tests/unit/test_smp_judge.c on made-up
 * observations, so the case this host's CPU does not produce (cpuid trapped, or not) is tested
 * on every machine.
 *
 * What the VMM promises vCPU i (vmm/cpuid.c, wire/payload_abi.h): APIC id i, in the in-kernel
 * LAPIC's ID register and in CPUID.1:EBX[31:24]; PAYLOAD_CPUID_INFO_LEAF says i, the number of
 * vCPUs and the VM's nonce. The LAPIC is KVM's on every host. CPUID is this VMM's table only
 * where `cpuid` traps, which PAYLOAD_CPUID_SIG_LEAF's signature and the info leaf's nonce show
 * (the signature alone could be that of a sandbox-vmm the host itself runs under); where it
 * runs on the host CPU, the CPUID values are the host's and say nothing about the VMM, so they
 * are not judged.
 */
#ifndef SANDBOX_GUESTS_SMP_JUDGE_H
#define SANDBOX_GUESTS_SMP_JUDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "payload_abi.h"

/* What one vCPU read. */
struct smp_seen {
	uint32_t lapic_id_reg; /* the LAPIC's ID register (PAYLOAD_LAPIC_ID_REG) */
	uint32_t sig[3];       /* cpuid(PAYLOAD_CPUID_SIG_LEAF): EBX, ECX, EDX */
	uint32_t leaf1_ebx;    /* cpuid(1).EBX */
	uint32_t info_eax;     /* cpuid(PAYLOAD_CPUID_INFO_LEAF).EAX: the vCPU index */
	uint32_t info_ebx;     /* ... EBX: the number of vCPUs */
	uint32_t info_ecx;     /* ... ECX: the VM's nonce */
};

enum smp_verdict {
	SMP_OK_TRAPPED,	    /* cpuid reached the VMM's table, and everything matched */
	SMP_OK_NATIVE,	    /* cpuid ran on the host CPU; the LAPIC matched */
	SMP_BAD_LAPIC_ID,   /* the LAPIC's id is not the vCPU's index */
	SMP_BAD_CPUID_APIC, /* cpuid trapped, but leaf 1's APIC id is not the index */
	SMP_BAD_INFO,	    /* cpuid trapped, but the info leaf names another vCPU or count */
};

/* True when `cpuid` returned the VMM's signature and this VM's `nonce` (payload_info). */
static inline bool smp_cpuid_trapped(const struct smp_seen *s, uint32_t nonce)
{
	return payload_cpuid_is_ours(s->sig[0], s->sig[1], s->sig[2], s->info_ecx, nonce);
}

/* The APIC id in the LAPIC's ID register (xAPIC: bits 31:24). */
static inline uint32_t smp_lapic_id(const struct smp_seen *s)
{
	return s->lapic_id_reg >> 24;
}

/* Judges what vCPU `cpu` of `ncpus` saw, in the VM of `nonce`. */
static inline enum smp_verdict smp_judge(const struct smp_seen *s, uint32_t cpu, uint32_t ncpus,
					 uint32_t nonce)
{
	if (smp_lapic_id(s) != cpu)
		return SMP_BAD_LAPIC_ID;
	if (!smp_cpuid_trapped(s, nonce))
		return SMP_OK_NATIVE;
	if (s->leaf1_ebx >> 24 != cpu)
		return SMP_BAD_CPUID_APIC;
	if (s->info_eax != cpu || s->info_ebx != ncpus)
		return SMP_BAD_INFO;
	return SMP_OK_TRAPPED;
}

/* What the vCPUs' verdicts add up to: the first failure, else "trapped" or "native" when all
 * agree. A VM in which cpuid trapped on some vCPUs and not on others is a failure too. */
enum smp_outcome { SMP_ALL_TRAPPED, SMP_ALL_NATIVE, SMP_MIXED, SMP_FAILED };

static inline enum smp_outcome smp_outcome(uint32_t ntrapped, uint32_t nnative, uint32_t nfailed)
{
	if (nfailed)
		return SMP_FAILED;
	if (ntrapped && nnative)
		return SMP_MIXED;
	return ntrapped ? SMP_ALL_TRAPPED : SMP_ALL_NATIVE;
}

#endif
