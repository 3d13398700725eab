/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Does guest `cpuid` trap on this host? On hardware KVM it always does: VT-x exits on it
 * unconditionally and KVM has SVM intercept it. kvm-pvm runs ring-3 guest code natively, so
 * there it traps only where the host CPU has CPUID faulting; elsewhere the instruction answers
 * from the host CPU's own registers, and no guest sees the VMM's table (docs/hosts.md).
 *
 * The probe asks the host itself: a one-vCPU payload-mode VM (64-bit ring 3, the payload
 * ABI's page tables and GDT) runs seven instructions that execute `cpuid` on the VMM's
 * signature leaf and store EBX, ECX and EDX to an address in the MMIO hole, and the VMM reads
 * the three MMIO write exits. A POSIX timer bounds the run.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "layout.h"
#include "payload_abi.h"
#include "vmm.h"

/* Where the probe stores what `cpuid` returned: a page of the MMIO hole nothing claims. */
#define PROBE_OUT_GPA	 0xfe00f000ull
#define PROBE_STACKS_GPA 0x200000ull
#define PROBE_RUNS_MAX	 8	    /* KVM_RUN calls: three MMIO exits, and a little slack */
#define PROBE_TIMEOUT_NS 2000000000 /* the whole run; ~1 ms is typical */

/*
 *	mov    $PAYLOAD_CPUID_SIG_LEAF, %eax
 *	xor    %ecx, %ecx
 *	cpuid
 *	movabs $PROBE_OUT_GPA, %rdi
 *	mov    %ebx, (%rdi)
 *	mov    %ecx, 4(%rdi)
 *	mov    %edx, 8(%rdi)
 *	jmp    .
 */
static const uint8_t probe_code[] = {
	0xb8, 0x00, 0x01, 0x00, 0x40,			/* mov $0x40000100, %eax */
	0x31, 0xc9,					/* xor %ecx, %ecx */
	0x0f, 0xa2,					/* cpuid */
	0x48, 0xbf, 0x00, 0xf0, 0x00, 0xfe, 0, 0, 0, 0, /* movabs $0xfe00f000, %rdi */
	0x89, 0x1f,					/* mov %ebx, (%rdi) */
	0x89, 0x4f, 0x04,				/* mov %ecx, 4(%rdi) */
	0x89, 0x57, 0x08,				/* mov %edx, 8(%rdi) */
	0xeb, 0xfe,					/* jmp . */
};
_Static_assert(PAYLOAD_CPUID_SIG_LEAF == 0x40000100u, "probe_code's leaf");
_Static_assert(PROBE_OUT_GPA == 0xfe00f000ull, "probe_code's address");

/* The timer's signal only has to interrupt KVM_RUN. */
static void probe_alarm(int sig)
{
	(void)sig;
}

/* Runs vCPU 0 until the probe's three stores arrived in `regs` (EBX, ECX, EDX). */
static enum cpuid_trap probe_run(struct vcpu *vcpu, uint32_t regs[3])
{
	struct kvm_run *run = vcpu->run;
	unsigned got = 0;

	for (unsigned i = 0; i < PROBE_RUNS_MAX && got != 0x7; i++) {
		uint64_t off;

		if (ioctl(vcpu->fd, KVM_RUN, 0) < 0) {
			log_info("cpuid probe: KVM_RUN: %s",
				 errno == EINTR ? "timed out" : strerror(errno));
			return CPUID_UNKNOWN;
		}
		off = run->mmio.phys_addr - PROBE_OUT_GPA;
		if (run->exit_reason != KVM_EXIT_MMIO || !run->mmio.is_write ||
		    run->mmio.len != 4 || run->mmio.phys_addr < PROBE_OUT_GPA || off > 8 ||
		    off % 4) {
			log_info("cpuid probe: unexpected exit %u", run->exit_reason);
			return CPUID_UNKNOWN;
		}
		memcpy(&regs[off / 4], run->mmio.data, 4);
		got |= 1u << (off / 4);
	}
	if (got != 0x7) {
		log_info("cpuid probe: the guest stopped short of its three stores");
		return CPUID_UNKNOWN;
	}
	return regs[0] == PAYLOAD_CPUID_SIG_EBX && regs[1] == PAYLOAD_CPUID_SIG_ECX &&
			       regs[2] == PAYLOAD_CPUID_SIG_EDX
		       ? CPUID_TRAPPED
		       : CPUID_NATIVE;
}

enum cpuid_trap cpuid_probe_trap(void)
{
	struct boot_entry entry = {.mode = BOOT_PAYLOAD,
				   .rip = KERNEL_GPA,
				   .arg_gpa = PAYLOAD_INFO_GPA,
				   .stacks_gpa = PROBE_STACKS_GPA};
	struct sigaction sa = {.sa_handler = probe_alarm}, old_sa;
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM};
	struct itimerspec its = {.it_value = {.tv_sec = PROBE_TIMEOUT_NS / 1000000000,
					      .tv_nsec = PROBE_TIMEOUT_NS % 1000000000}};
	enum cpuid_trap verdict = CPUID_UNKNOWN;
	uint32_t regs[3] = {0};
	sigset_t alarm_set, old_mask;
	timer_t timer;
	struct vm vm;

	if (vm_create(&vm, MEM_MIN_MIB << 20, 1) < 0)
		return CPUID_UNKNOWN;
	if (pagetable_build(&vm.mem, true, &entry.map_end) < 0 || gdt_write(&vm.mem) < 0 ||
	    mem_write(&vm.mem, KERNEL_GPA, probe_code, sizeof(probe_code)) < 0 ||
	    vcpu_create(&vm, 0, &entry) < 0) {
		log_info("cpuid probe: cannot set up the probe VM");
		vm_destroy(&vm);
		return CPUID_UNKNOWN;
	}
	sev._sigev_un._tid = gettid();
	sigemptyset(&alarm_set);
	sigaddset(&alarm_set, SIGALRM);
	if (sigaction(SIGALRM, &sa, &old_sa) < 0 ||
	    timer_create(CLOCK_MONOTONIC, &sev, &timer) < 0) {
		log_info("cpuid probe: cannot arm its timeout: %s", strerror(errno));
		vm_destroy(&vm);
		return CPUID_UNKNOWN;
	}
	pthread_sigmask(SIG_UNBLOCK, &alarm_set, &old_mask);
	if (timer_settime(timer, 0, &its, NULL) == 0)
		verdict = probe_run(&vm.vcpus[0], regs);
	else
		log_info("cpuid probe: cannot arm its timeout: %s", strerror(errno));
	/* A signal the timer sent after all was delivered at once (unblocked, this thread). */
	timer_delete(timer);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	if (verdict == CPUID_NATIVE)
		log_debug("cpuid probe: leaf %#x answered %08x %08x %08x, not the VMM's signature",
			  PAYLOAD_CPUID_SIG_LEAF, regs[0], regs[1], regs[2]);
	vm_destroy(&vm);
	return verdict;
}

const char *cpuid_trap_verdict(enum cpuid_trap t)
{
	switch (t) {
	case CPUID_TRAPPED:
		return "guest cpuid traps: guests read the VMM's per-vCPU CPUID table";
	case CPUID_NATIVE:
		return "guest cpuid does not trap: ring-3 guest code executes it on the host CPU, "
		       "so payload guests see the host's CPUID, not the VMM's table";
	case CPUID_UNKNOWN:
		break;
	}
	return "guest cpuid: unknown (the probe VM did not run)";
}
