/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/guests/smp_judge.h: payload-smp's judgement, on observations made up for both kinds of
 * host (guest cpuid trapped by KVM, or executed on the host CPU), so each case is tested on
 * every machine whatever its own CPU does.
 */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "smp_judge.h"

#define NONCE 0x5eed1234u

/* What vCPU `cpu` of `ncpus` sees where cpuid traps and the VMM kept its promises. */
static struct smp_seen trapped(uint32_t cpu, uint32_t ncpus)
{
	return (struct smp_seen){
		.lapic_id_reg = cpu << 24,
		.sig = {PAYLOAD_CPUID_SIG_EBX, PAYLOAD_CPUID_SIG_ECX, PAYLOAD_CPUID_SIG_EDX},
		.leaf1_ebx = (cpu << 24) | (ncpus << 16) | 0x0800,
		.info_eax = cpu,
		.info_ebx = ncpus,
		.info_ecx = NONCE,
	};
}

/* What it sees where cpuid runs on a host CPU with APIC id `host_apic`: the host's leaf 1,
 * and for the unknown leaves whatever that CPU answers (zeros here, or the highest basic
 * leaf's values on an Intel CPU). */
static struct smp_seen native(uint32_t cpu, uint32_t host_apic)
{
	return (struct smp_seen){
		.lapic_id_reg = cpu << 24,
		.sig = {0x756e6547, 0, 0},
		.leaf1_ebx = (host_apic << 24) | (2u << 16),
		.info_eax = 0x1f,
	};
}

Test(smp_judge, trapped_and_as_promised)
{
	for (uint32_t cpu = 0; cpu < 32; cpu++) {
		struct smp_seen s = trapped(cpu, 32);

		cr_assert(smp_cpuid_trapped(&s, NONCE));
		cr_assert(eq(int, smp_judge(&s, cpu, 32, NONCE), SMP_OK_TRAPPED));
	}
}

Test(smp_judge, trapped_with_a_wrong_cpuid_apic_id)
{
	struct smp_seen s = trapped(3, 4);

	s.leaf1_ebx = (1u << 24) | (4u << 16);
	cr_assert(eq(int, smp_judge(&s, 3, 4, NONCE), SMP_BAD_CPUID_APIC));
}

Test(smp_judge, trapped_with_another_vcpus_table)
{
	struct smp_seen s = trapped(2, 4);

	s.info_eax = 0;
	cr_assert(eq(int, smp_judge(&s, 2, 4, NONCE), SMP_BAD_INFO));
	s = trapped(2, 4);
	s.info_ebx = 2;
	cr_assert(eq(int, smp_judge(&s, 2, 4, NONCE), SMP_BAD_INFO));
}

/* The AMD host this was found on: every vCPU read host CPU 0's or 1's APIC id through cpuid. */
Test(smp_judge, native_cpuid_is_not_judged)
{
	for (uint32_t cpu = 0; cpu < 4; cpu++) {
		struct smp_seen s = native(cpu, cpu & 1);

		cr_assert(not(smp_cpuid_trapped(&s, NONCE)));
		cr_assert(eq(int, smp_judge(&s, cpu, 4, NONCE), SMP_OK_NATIVE));
	}
}

Test(smp_judge, a_wrong_lapic_id_fails_either_way)
{
	struct smp_seen t = trapped(1, 2), n = native(1, 0);

	t.lapic_id_reg = 0;
	n.lapic_id_reg = 0xff000000u; /* an all-ones read: no in-kernel LAPIC answered */
	cr_assert(eq(int, smp_judge(&t, 1, 2, NONCE), SMP_BAD_LAPIC_ID));
	cr_assert(eq(int, smp_judge(&n, 1, 2, NONCE), SMP_BAD_LAPIC_ID));
}

Test(smp_judge, a_partial_signature_is_not_trapped)
{
	struct smp_seen s = trapped(0, 1);

	s.sig[2] = 0;
	cr_assert(not(smp_cpuid_trapped(&s, NONCE)));
}

Test(smp_judge, outcome)
{
	cr_assert(eq(int, smp_outcome(4, 0, 0), SMP_ALL_TRAPPED));
	cr_assert(eq(int, smp_outcome(0, 4, 0), SMP_ALL_NATIVE));
	cr_assert(eq(int, smp_outcome(3, 1, 0), SMP_MIXED));
	cr_assert(eq(int, smp_outcome(3, 0, 1), SMP_FAILED));
	cr_assert(eq(int, smp_outcome(0, 3, 1), SMP_FAILED));
}

/* An outer sandbox-vmm's table (the host runs under one, and its cpuid runs natively): the
 * signature is right, the nonce is not this VM's, so it is not judged as this VM's table. */
Test(smp_judge, another_vms_signature_is_not_trapped)
{
	struct smp_seen s = trapped(1, 4);

	s.info_ecx = NONCE ^ 1;
	s.leaf1_ebx = 0; /* the outer vCPU's APIC id */
	cr_assert(not(smp_cpuid_trapped(&s, NONCE)));
	cr_assert(eq(int, smp_judge(&s, 1, 4, NONCE), SMP_OK_NATIVE));
}
