/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vcpu-cpuid: what the VMM promises each vCPU, read back from this host's KVM.
 *
 * For 1, 2, 4 and 32 vCPUs, creates the VM and its vCPUs with the VMM's own code (vm_create,
 * vcpu_create: KVM_GET_SUPPORTED_CPUID, cpuid_filter, KVM_SET_CPUID2) and reads each vCPU back
 * through the paths KVM serves a guest from: KVM_GET_CPUID2 (the table a trapped `cpuid`
 * answers from, on Intel and AMD alike) and KVM_GET_LAPIC (the ID register). Checks vCPU i
 * has APIC id i in leaf 1, the LAPIC, the x2APIC leaves 0xb/0x1f and AMD's 0x8000001e where the
 * host's table has them; a topology of N cores (leaf 1, 0xb level 1, AMD's 0x80000008); the
 * VMM's signature and info leaves; the hypervisor bit; no PMU (leaf 0xa).
 *
 * This holds whether or not guest `cpuid` traps here, so it is the check of the CPUID table
 * on hosts where payload-smp cannot make it from inside the guest. Exits 0 (every check
 * passed), 1 (a check failed: each failure is printed), 77 (no usable /dev/kvm).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "payload_abi.h"
#include "vmm.h"

#define CPUID_READ_MAX 300 /* entries read back; KVM says E2BIG if a vCPU has more */

static unsigned failures;

static void fail(unsigned ncpus, unsigned cpu, const char *what, uint32_t got, uint32_t want)
{
	printf("FAIL %u vCPUs, vcpu%u: %s: got %#x, want %#x\n", ncpus, cpu, what, got, want);
	failures++;
}

static void expect(unsigned ncpus, unsigned cpu, const char *what, uint32_t got, uint32_t want)
{
	if (got != want)
		fail(ncpus, cpu, what, got, want);
}

/* The entry for (function, index) in `c`, or NULL. */
static const struct kvm_cpuid_entry2 *find(const struct kvm_cpuid2 *c, uint32_t function,
					   uint32_t index)
{
	for (unsigned i = 0; i < c->nent; i++)
		if (c->entries[i].function == function && c->entries[i].index == index)
			return &c->entries[i];
	return NULL;
}

static void check_cpuid(unsigned ncpus, unsigned i, const struct kvm_cpuid2 *c, uint32_t nonce)
{
	const struct kvm_cpuid_entry2 *e;

	if (!(e = find(c, 1, 0))) {
		fail(ncpus, i, "no leaf 1", 0, 1);
		return;
	}
	expect(ncpus, i, "leaf 1 EBX[31:24] (initial APIC id)", e->ebx >> 24, i);
	expect(ncpus, i, "leaf 1 EBX[23:16] (logical processors)", (e->ebx >> 16) & 0xff, ncpus);
	expect(ncpus, i, "leaf 1 ECX[31] (hypervisor)", e->ecx >> 31, 1);

	if (!(e = find(c, PAYLOAD_CPUID_SIG_LEAF, 0))) {
		fail(ncpus, i, "no signature leaf", 0, PAYLOAD_CPUID_SIG_LEAF);
	} else {
		expect(ncpus, i, "signature leaf EAX", e->eax, PAYLOAD_CPUID_INFO_LEAF);
		expect(ncpus, i, "signature EBX", e->ebx, PAYLOAD_CPUID_SIG_EBX);
		expect(ncpus, i, "signature ECX", e->ecx, PAYLOAD_CPUID_SIG_ECX);
		expect(ncpus, i, "signature EDX", e->edx, PAYLOAD_CPUID_SIG_EDX);
	}
	if (!(e = find(c, PAYLOAD_CPUID_INFO_LEAF, 0))) {
		fail(ncpus, i, "no info leaf", 0, PAYLOAD_CPUID_INFO_LEAF);
	} else {
		expect(ncpus, i, "info leaf EAX (vCPU index)", e->eax, i);
		expect(ncpus, i, "info leaf EBX (vCPUs)", e->ebx, ncpus);
		expect(ncpus, i, "info leaf ECX (the VM's nonce)", e->ecx, nonce);
	}
	if ((e = find(c, 0xa, 0)))
		expect(ncpus, i, "leaf 0xa EAX (PMU version)", e->eax, 0);

	for (uint32_t leaf = 0xb; leaf <= 0x1f; leaf += 0x1f - 0xb) {
		const struct kvm_cpuid_entry2 *smt = find(c, leaf, 0), *core = find(c, leaf, 1);

		if (!smt || !core)
			continue; /* not in this host's table */
		expect(ncpus, i, "x2APIC id (level 0 EDX)", smt->edx, i);
		expect(ncpus, i, "x2APIC id (level 1 EDX)", core->edx, i);
		expect(ncpus, i, "threads per core (level 0 EBX)", smt->ebx & 0xffff, 1);
		expect(ncpus, i, "logical processors (level 1 EBX)", core->ebx & 0xffff, ncpus);
	}
	if (cpuid_vendor_amd(c->entries, c->nent)) {
		if ((e = find(c, 0x80000008, 0)))
			expect(ncpus, i, "leaf 0x80000008 ECX[7:0] (cores - 1)", e->ecx & 0xff,
			       ncpus - 1);
		if ((e = find(c, 0x8000001e, 0)))
			expect(ncpus, i, "leaf 0x8000001e EAX (extended APIC id)", e->eax, i);
	}
}

/* Reads vCPU `i`'s table and LAPIC back and checks them. */
static int check_vcpu(unsigned ncpus, unsigned i, const struct vcpu *vcpu, uint32_t nonce)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + CPUID_READ_MAX * sizeof(c->entries[0]));
	struct kvm_lapic_state lapic;
	uint32_t id;

	if (!c)
		return -ENOMEM;
	c->nent = CPUID_READ_MAX;
	if (ioctl(vcpu->fd, KVM_GET_CPUID2, c) < 0) {
		printf("FAIL %u vCPUs, vcpu%u: KVM_GET_CPUID2: %s\n", ncpus, i, strerror(errno));
		failures++;
	} else {
		check_cpuid(ncpus, i, c, nonce);
	}
	free(c);
	if (ioctl(vcpu->fd, KVM_GET_LAPIC, &lapic) < 0) {
		printf("FAIL %u vCPUs, vcpu%u: KVM_GET_LAPIC: %s\n", ncpus, i, strerror(errno));
		failures++;
		return 0;
	}
	memcpy(&id, &lapic.regs[PAYLOAD_LAPIC_ID_REG], sizeof(id));
	expect(ncpus, i, "LAPIC ID register [31:24]", id >> 24, i);
	return 0;
}

static int check_vm(unsigned ncpus)
{
	struct boot_entry entry = {.mode = BOOT_PAYLOAD, .rip = KERNEL_GPA};
	unsigned before = failures;
	struct vm vm;
	int err;

	if ((err = vm_create(&vm, MEM_MIN_MIB << 20, ncpus)) < 0) {
		printf("FAIL %u vCPUs: cannot create the VM: %s\n", ncpus, strerror(-err));
		return -1;
	}
	for (unsigned i = 0; i < ncpus; i++) {
		if ((err = vcpu_create(&vm, i, &entry)) < 0) {
			printf("FAIL %u vCPUs: cannot create vcpu%u: %s\n", ncpus, i,
			       strerror(-err));
			vm_destroy(&vm);
			return -1;
		}
	}
	for (unsigned i = 0; i < ncpus; i++)
		if (check_vcpu(ncpus, i, &vm.vcpus[i], vm.cpuid_nonce) < 0)
			failures++;
	vm_destroy(&vm);
	if (failures == before)
		printf("ok: %u vCPUs: each has its APIC id in leaf 1, the LAPIC, the x2APIC and "
		       "AMD leaves, the topology, the VMM's signature and info leaves\n",
		       ncpus);
	return 0;
}

int main(void)
{
	static const unsigned counts[] = {1, 2, 4, VCPU_MAX};
	enum cpuid_trap trap;

	if (access("/dev/kvm", R_OK | W_OK) != 0) {
		printf("SKIP: /dev/kvm is not usable here: %s\n", strerror(errno));
		return 77;
	}
	log_init("vcpu-cpuid", LOG_WARN);
	for (unsigned k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
		if (check_vm(counts[k]) < 0)
			failures++;
	/* Not a pass or fail criterion: what a guest's own cpuid sees here, for the log. */
	trap = cpuid_probe_trap();
	printf("this host: %s\n", cpuid_trap_verdict(trap));
	if (failures) {
		printf("vcpu-cpuid: %u check(s) failed\n", failures);
		return 1;
	}
	return 0;
}
