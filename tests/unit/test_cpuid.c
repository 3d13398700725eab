/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm/cpuid.c: per-vCPU CPUID, on fake KVM_GET_SUPPORTED_CPUID output: values as a 16-thread
 * Intel host reports them (plus AMD's leaf 0x8000001e), and as a 2-CPU AMD EPYC host does.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "payload_abi.h"
#include "vmm.h"

#define SIG KVM_CPUID_FLAG_SIGNIFCANT_INDEX

/* Indexes into the fake table. */
enum {
	L0,
	L1,
	L4_0,
	L4_1,
	L4_2,
	L4_3,
	L4_END,
	L7,
	LA,
	LB_0,
	LB_1,
	LB_2,
	L1F_0,
	L1F_1,
	L8_1,
	L8_1E
};
#define NLEAVES (L8_1E + 1)

static struct kvm_cpuid_entry2 leaf(uint32_t function, uint32_t index, uint32_t eax, uint32_t ebx,
				    uint32_t ecx, uint32_t edx)
{
	bool indexed = function == 4 || function == 7 || function == 0xb || function == 0x1f;

	return (struct kvm_cpuid_entry2){.function = function,
					 .index = index,
					 .flags = indexed ? SIG : 0,
					 .eax = eax,
					 .ebx = ebx,
					 .ecx = ecx,
					 .edx = edx};
}

static void fake_host(struct kvm_cpuid_entry2 e[NLEAVES])
{
	memset(e, 0, NLEAVES * sizeof(*e));
	e[L0] = leaf(0, 0, 0x1f, 0x756e6547, 0x6c65746e, 0x49656e69);
	/* Leaf 1: host APIC id 0xaa, 0xbb logical CPUs, CLFLUSH size 8, brand 0x01. */
	e[L1] = leaf(1, 0, 0x000906ea, 0xaabb0801, 0x7ffafbff, 0xbfebfbff);
	/* Leaf 4: L1d, L1i, L2 (host: 2 threads share each), L3 (16 share), terminator. */
	e[L4_0] = leaf(4, 0, 0x1c004121, 0x01c0003f, 0x3f, 0);
	e[L4_1] = leaf(4, 1, 0x1c004122, 0x01c0003f, 0x3f, 0);
	e[L4_2] = leaf(4, 2, 0x1c004143, 0x00c0003f, 0x3ff, 0);
	e[L4_3] = leaf(4, 3, 0x1c03c163, 0x03c0003f, 0x3fff, 0x6);
	e[L4_END] = leaf(4, 4, 0, 0, 0, 0);
	e[L7] = leaf(7, 0, 0, 0x029c6fbf, 0, 0xbc000400);
	e[LA] = leaf(0xa, 0, 0x07300404, 0, 0, 0x603);
	/* Leaf 0xb: SMT level (2 threads, shift 1), core level (16, shift 4), invalid level;
	 * EDX is the host's x2APIC id. */
	e[LB_0] = leaf(0xb, 0, 1, 2, 0x100, 0xaa);
	e[LB_1] = leaf(0xb, 1, 4, 16, 0x201, 0xaa);
	e[LB_2] = leaf(0xb, 2, 0, 0, 0x2, 0xaa);
	e[L1F_0] = leaf(0x1f, 0, 1, 2, 0x100, 0xaa);
	e[L1F_1] = leaf(0x1f, 1, 4, 16, 0x201, 0xaa);
	e[L8_1] = leaf(0x80000001, 0, 0, 0, 0x121, 0x2c100800);
	e[L8_1E] = leaf(0x8000001e, 0, 0x17, 0x10b, 0x300, 0);
}

static void filtered(struct kvm_cpuid_entry2 e[NLEAVES], unsigned index, unsigned ncpus)
{
	fake_host(e);
	cpuid_filter(e, NLEAVES, index, ncpus);
}

static void check_leaf_eq(const struct kvm_cpuid_entry2 *got, const struct kvm_cpuid_entry2 *want)
{
	cr_assert(eq(u32, got->function, want->function));
	cr_assert(eq(u32, got->index, want->index));
	cr_assert(eq(u32, got->flags, want->flags));
	cr_assert(eq(u32, got->eax, want->eax), "leaf %#x.%u eax", want->function, want->index);
	cr_assert(eq(u32, got->ebx, want->ebx), "leaf %#x.%u ebx", want->function, want->index);
	cr_assert(eq(u32, got->ecx, want->ecx), "leaf %#x.%u ecx", want->function, want->index);
	cr_assert(eq(u32, got->edx, want->edx), "leaf %#x.%u edx", want->function, want->index);
}

Test(cpuid, leaf1_index3_of4)
{
	struct kvm_cpuid_entry2 e[NLEAVES], host[NLEAVES];

	fake_host(host);
	filtered(e, 3, 4);
	cr_assert(eq(u32, e[L1].ebx >> 24, 3), "initial APIC id");
	cr_assert(eq(u32, (e[L1].ebx >> 16) & 0xff, 4), "logical processors");
	cr_assert(eq(u32, e[L1].ebx & 0xffff, host[L1].ebx & 0xffff),
		  "CLFLUSH size and brand kept");
	cr_assert(eq(u32, e[L1].ecx & (1u << 31), 1u << 31), "hypervisor bit");
	cr_assert(eq(u32, e[L1].ecx & ~(1u << 31), host[L1].ecx & ~(1u << 31)));
	cr_assert(eq(u32, e[L1].edx & (1u << 28), 1u << 28), "HTT");
	cr_assert(eq(u32, e[L1].edx, host[L1].edx | (1u << 28)));
	cr_assert(eq(u32, e[L1].eax, host[L1].eax));
}

Test(cpuid, leaf1_single_cpu_clears_htt)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, 0, 1);
	cr_assert(eq(u32, e[L1].ebx >> 24, 0));
	cr_assert(eq(u32, (e[L1].ebx >> 16) & 0xff, 1));
	cr_assert(eq(u32, e[L1].edx & (1u << 28), 0), "HTT with one CPU");
	cr_assert(eq(u32, e[L1].ecx & (1u << 31), 1u << 31));
}

Test(cpuid, leaf1_max_cpus)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, VCPU_MAX - 1, VCPU_MAX);
	cr_assert(eq(u32, e[L1].ebx >> 24, VCPU_MAX - 1));
	cr_assert(eq(u32, (e[L1].ebx >> 16) & 0xff, VCPU_MAX));
}

Test(cpuid, leaf4_caches_index3_of4)
{
	struct kvm_cpuid_entry2 e[NLEAVES], host[NLEAVES];

	fake_host(host);
	filtered(e, 3, 4);
	for (int i = L4_0; i <= L4_3; i++) {
		uint32_t level = (host[i].eax >> 5) & 7;

		cr_assert(eq(u32, e[i].eax >> 26, 3), "subleaf %d: cores per package - 1",
			  i - L4_0);
		/* Private L1 and L2, an L3 shared by all four. */
		cr_assert(eq(u32, (e[i].eax >> 14) & 0xfff, level > 2 ? 3 : 0),
			  "subleaf %d sharing", i - L4_0);
		/* Type, level, self-init and fully-associative bits are the host's. */
		cr_assert(eq(u32, e[i].eax & 0x3fff, host[i].eax & 0x3fff));
		cr_assert(eq(u32, e[i].ebx, host[i].ebx));
		cr_assert(eq(u32, e[i].ecx, host[i].ecx));
		cr_assert(eq(u32, e[i].edx, host[i].edx));
	}
	cr_assert(eq(u32, e[L4_0].eax, 0x0c000121));
	cr_assert(eq(u32, e[L4_3].eax, 0x0c00c163));
	/* The terminator stays a terminator. */
	check_leaf_eq(&e[L4_END], &host[L4_END]);
}

Test(cpuid, leaf4_single_cpu)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, 0, 1);
	for (int i = L4_0; i <= L4_3; i++)
		cr_assert(eq(u32, e[i].eax >> 14, 0), "subleaf %d", i - L4_0);
}

Test(cpuid, leaf4_max_cpus)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, 0, VCPU_MAX);
	cr_assert(eq(u32, e[L4_0].eax >> 26, VCPU_MAX - 1));
	cr_assert(eq(u32, (e[L4_3].eax >> 14) & 0xfff, VCPU_MAX - 1));
}

Test(cpuid, leaf_a_pmu_hidden)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, 3, 4);
	cr_assert(eq(u32, e[LA].eax, 0));
	cr_assert(eq(u32, e[LA].ebx, 0));
	cr_assert(eq(u32, e[LA].ecx, 0));
	cr_assert(eq(u32, e[LA].edx, 0));
	cr_assert(eq(u32, e[LA].function, 0xa));
}

static void check_topology(const struct kvm_cpuid_entry2 *smt, const struct kvm_cpuid_entry2 *core,
			   unsigned index, unsigned ncpus, uint32_t shift)
{
	/* SMT level: one thread per core, so the shift to the core level is 0. */
	cr_assert(eq(u32, smt->edx, index), "x2APIC id");
	cr_assert(eq(u32, smt->eax & 0x1f, 0));
	cr_assert(eq(u32, smt->ebx & 0xffff, 1));
	cr_assert(eq(u32, smt->ecx & 0xff, 0), "level number");
	cr_assert(eq(u32, (smt->ecx >> 8) & 0xff, 1), "level type SMT");
	/* Core level: ncpus logical processors, x2APIC id >> shift is the package id (0). */
	cr_assert(eq(u32, core->edx, index));
	cr_assert(eq(u32, core->eax & 0x1f, shift));
	cr_assert(eq(u32, core->ebx & 0xffff, ncpus));
	cr_assert(eq(u32, core->ecx & 0xff, 1));
	cr_assert(eq(u32, (core->ecx >> 8) & 0xff, 2), "level type core");
	cr_assert(eq(u32, index >> shift, 0), "all CPUs in package 0");
	cr_assert(ge(u32, 1u << shift, ncpus), "shift leaves room for every id");
}

Test(cpuid, leaf_b_index3_of4)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, 3, 4);
	check_topology(&e[LB_0], &e[LB_1], 3, 4, 2);
	cr_assert(eq(u32, e[LB_1].ebx, 4));
	cr_assert(eq(u32, e[LB_1].eax, 2));
	/* Past the last level: invalid type, level number echoed, x2APIC id still there. */
	cr_assert(eq(u32, e[LB_2].eax, 0));
	cr_assert(eq(u32, e[LB_2].ebx, 0));
	cr_assert(eq(u32, e[LB_2].ecx, 2));
	cr_assert(eq(u32, e[LB_2].edx, 3));
}

Test(cpuid, leaf_1f_like_leaf_b)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, 3, 4);
	check_topology(&e[L1F_0], &e[L1F_1], 3, 4, 2);
}

Test(cpuid, leaf_b_shift_rounds_up)
{
	static const struct {
		unsigned ncpus;
		uint32_t shift;
	} cases[] = {{1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4}, {17, 5}, {32, 5}};
	struct kvm_cpuid_entry2 e[NLEAVES];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		filtered(e, cases[i].ncpus - 1, cases[i].ncpus);
		check_topology(&e[LB_0], &e[LB_1], cases[i].ncpus - 1, cases[i].ncpus,
			       cases[i].shift);
	}
}

Test(cpuid, leaf_8000001e_index3)
{
	struct kvm_cpuid_entry2 e[NLEAVES];

	filtered(e, 3, 4);
	cr_assert(eq(u32, e[L8_1E].eax, 3), "extended APIC id");
	cr_assert(eq(u32, e[L8_1E].ebx & 0xff, 3), "core id");
	cr_assert(eq(u32, (e[L8_1E].ebx >> 8) & 0xff, 0), "threads per core - 1");
	cr_assert(eq(u32, e[L8_1E].ecx, 0), "node 0, one node");
}

Test(cpuid, other_leaves_untouched)
{
	struct kvm_cpuid_entry2 e[NLEAVES], host[NLEAVES];

	fake_host(host);
	filtered(e, 3, 4);
	check_leaf_eq(&e[L0], &host[L0]);
	check_leaf_eq(&e[L7], &host[L7]);
	check_leaf_eq(&e[L8_1], &host[L8_1]);
}

/* Each vCPU's table is filtered from a fresh copy: ids differ, everything else is shared. */
Test(cpuid, vcpus_differ_only_in_ids)
{
	struct kvm_cpuid_entry2 a[NLEAVES], b[NLEAVES];

	filtered(a, 0, 4);
	filtered(b, 2, 4);
	cr_assert(eq(u32, a[L1].ebx >> 24, 0));
	cr_assert(eq(u32, b[L1].ebx >> 24, 2));
	cr_assert(eq(u32, a[L1].ebx & 0xffffff, b[L1].ebx & 0xffffff));
	cr_assert(eq(u32, a[LB_1].edx, 0));
	cr_assert(eq(u32, b[LB_1].edx, 2));
	cr_assert(eq(u32, a[L4_3].eax, b[L4_3].eax));
}

Test(cpuid, empty_table)
{
	struct kvm_cpuid_entry2 e[1];

	memset(e, 0x77, sizeof(e));
	cpuid_filter(e, 0, 0, 1);
	cr_assert(eq(u32, e[0].eax, 0x77777777));
}

Test(cpuid, tsc_deadline_is_announced)
{
	struct kvm_cpuid_entry2 e[2] = {{.function = 0x1, .ecx = 0x1}, {.function = 0x7}};

	cpuid_set_tsc_deadline(e, 2);
	cr_assert(eq(u32, e[0].ecx, 0x1u | (1u << 24)), "leaf 1 ECX bit 24, others kept");
	cr_assert(eq(u32, e[1].ecx, 0));
}

/* ---- an AMD host (EPYC, family 0x19), as KVM_GET_SUPPORTED_CPUID reports it there ---- */

enum { A0, A1, A8_8, A8_1D_0, A8_1D_3, A8_1D_END, A8_1E, NAMD };

/* The host has 2 CPUs (ECX NC = 1, ApicIdSize 1) and an L3 shared by 16 threads. */
static void fake_amd_host(struct kvm_cpuid_entry2 e[NAMD])
{
	memset(e, 0, NAMD * sizeof(*e));
	e[A0] = leaf(0, 0, 0x10, 0x68747541, 0x444d4163, 0x69746e65); /* AuthenticAMD */
	e[A1] = leaf(1, 0, 0x00a00f11, 0x01020800, 0xfef83203, 0x178bfbff);
	e[A8_8] = leaf(0x80000008, 0, 0x3030, 0x0100d000, 0x1001, 0);
	e[A8_1D_0] = leaf(0x8000001d, 0, 0x00004121, 0x01c0003f, 0x3f, 0);
	e[A8_1D_3] = leaf(0x8000001d, 3, 0x0003c163, 0x03c0003f, 0x7fff, 1);
	e[A8_1D_END] = leaf(0x8000001d, 4, 0, 0, 0, 0);
	e[A8_1E] = leaf(0x8000001e, 0, 1, 0x100, 0, 0);
}

Test(cpuid, amd_0x80000008_says_ncpus_cores)
{
	struct kvm_cpuid_entry2 e[NAMD], host[NAMD];

	fake_amd_host(host);
	for (unsigned n = 1; n <= VCPU_MAX; n++) {
		fake_amd_host(e);
		cpuid_filter(e, NAMD, n - 1, n);
		cr_assert(eq(u32, e[A8_8].ecx & 0xff, n - 1), "NC for %u vCPUs", n);
		cr_assert(ge(u32, 1u << ((e[A8_8].ecx >> 12) & 0xf), n), "ApicIdSize for %u", n);
		cr_assert(eq(u32, e[A8_8].ecx & ~0xf0ffu, host[A8_8].ecx & ~0xf0ffu));
		cr_assert(eq(u32, e[A8_8].eax, host[A8_8].eax));
		cr_assert(eq(u32, e[A8_8].ebx, host[A8_8].ebx));
	}
}

/* On an Intel host ECX of 0x80000008 is reserved: left as the host has it. */
Test(cpuid, intel_0x80000008_untouched)
{
	struct kvm_cpuid_entry2 e[2] = {leaf(0, 0, 0x1f, 0x756e6547, 0x6c65746e, 0x49656e69),
					leaf(0x80000008, 0, 0x3027, 0, 0, 0)};

	cpuid_filter(e, 2, 3, 4);
	cr_assert(eq(u32, e[1].ecx, 0));
}

Test(cpuid, amd_0x8000001d_caches_index3_of4)
{
	struct kvm_cpuid_entry2 e[NAMD], host[NAMD];

	fake_amd_host(host);
	fake_amd_host(e);
	cpuid_filter(e, NAMD, 3, 4);
	cr_assert(eq(u32, (e[A8_1D_0].eax >> 14) & 0xfff, 0), "L1 private");
	cr_assert(eq(u32, (e[A8_1D_3].eax >> 14) & 0xfff, 3), "L3 shared by all four");
	cr_assert(eq(u32, e[A8_1D_3].eax & 0x3fff, host[A8_1D_3].eax & 0x3fff));
	cr_assert(eq(u32, e[A8_1D_3].eax >> 26, host[A8_1D_3].eax >> 26), "no cores field");
	check_leaf_eq(&e[A8_1D_END], &host[A8_1D_END]);
}

Test(cpuid, amd_leaf1_and_0x8000001e)
{
	struct kvm_cpuid_entry2 e[NAMD];

	fake_amd_host(e);
	cpuid_filter(e, NAMD, 5, 8);
	cr_assert(eq(u32, e[A1].ebx >> 24, 5));
	cr_assert(eq(u32, (e[A1].ebx >> 16) & 0xff, 8));
	cr_assert(eq(u32, e[A8_1E].eax, 5));
}

/* ---- the VMM's own leaves ---- */

static const struct kvm_cpuid_entry2 *find_leaf(const struct kvm_cpuid_entry2 *e, unsigned n,
						uint32_t function)
{
	for (unsigned i = 0; i < n; i++)
		if (e[i].function == function)
			return &e[i];
	return NULL;
}

Test(cpuid, vmm_leaves_appended_and_filled_per_vcpu)
{
	struct kvm_cpuid_entry2 e[NLEAVES + 2], host[NLEAVES];
	const struct kvm_cpuid_entry2 *sig, *info;
	unsigned n = NLEAVES;

	fake_host(e);
	fake_host(host);
	cr_assert(eq(int, cpuid_add_vmm_leaves(e, &n, NLEAVES + 2, 0xabcd1234), 0));
	cr_assert(eq(u32, n, NLEAVES + 2));
	for (unsigned i = 0; i < NLEAVES; i++)
		check_leaf_eq(&e[i], &host[i]);
	cpuid_filter(e, n, 6, 7);
	sig = find_leaf(e, n, PAYLOAD_CPUID_SIG_LEAF);
	info = find_leaf(e, n, PAYLOAD_CPUID_INFO_LEAF);
	cr_assert(sig && info);
	cr_assert(eq(u32, sig->eax, PAYLOAD_CPUID_INFO_LEAF));
	cr_assert(eq(int, memcmp(&sig->ebx, "sand", 4), 0));
	cr_assert(eq(int, memcmp(&sig->ecx, "box-", 4), 0));
	cr_assert(eq(int, memcmp(&sig->edx, "vmm", 4), 0));
	cr_assert(eq(u32, info->eax, 6));
	cr_assert(eq(u32, info->ebx, 7));
	cr_assert(eq(u32, info->ecx, 0xabcd1234), "the nonce survives the filter");
	cr_assert(eq(u32, info->edx, 0));
}

/* A host table that already had our leaves (a stale or hostile copy) gets them once. */
Test(cpuid, vmm_leaves_replace_existing_ones)
{
	struct kvm_cpuid_entry2 e[4] = {leaf(0, 0, 1, 0, 0, 0),
					leaf(PAYLOAD_CPUID_SIG_LEAF, 0, 9, 9, 9, 9)};
	unsigned n = 2;

	cr_assert(eq(int, cpuid_add_vmm_leaves(e, &n, 4, 1), 0));
	cr_assert(eq(u32, n, 3));
	cr_assert(eq(u32, e[1].function, PAYLOAD_CPUID_SIG_LEAF));
	cr_assert(eq(u32, e[1].ebx, PAYLOAD_CPUID_SIG_EBX));
	cr_assert(eq(u32, e[2].function, PAYLOAD_CPUID_INFO_LEAF));
}

Test(cpuid, vmm_leaves_need_room)
{
	struct kvm_cpuid_entry2 e[3] = {leaf(0, 0, 1, 0, 0, 0), leaf(1, 0, 0, 0, 0, 0)};
	unsigned n = 2;

	cr_assert(eq(int, cpuid_add_vmm_leaves(e, &n, 3, 1), -ENOSPC));
	cr_assert(eq(u32, n, 2));
	cr_assert(eq(int, cpuid_add_vmm_leaves(e, &n, 1, 1), -ENOSPC));
}
