/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Does guest `cpuid` trap on this host? On hardware KVM it always does: VT-x exits on it
 * unconditionally and KVM has SVM intercept it. kvm-pvm runs ring-3 guest code natively, so
 * there it traps only where the host CPU has CPUID faulting; elsewhere the instruction answers
 * from the host CPU's own registers, and no guest sees the VMM's table (docs/hosts.md).
 *
 * The probe asks the host itself: a one-vCPU payload-mode VM (64-bit ring 3, the payload
 * ABI's page tables and GDT) runs a dozen instructions that execute `cpuid` on the VMM's
 * signature leaf and info leaf and store the signature and the VM's nonce to an address in the
 * MMIO hole, and the VMM reads the four MMIO write exits. A repeating POSIX timer and a
 * deadline bound the run.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "layout.h"
#include "payload_abi.h"
#include "vmm.h"

/* glibc names the kernel's sigevent field only from 2.35 on. */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* Where the probe stores what `cpuid` returned: a page of the MMIO hole nothing claims. */
#define PROBE_OUT_GPA	 0xfe00f000ull
#define PROBE_STACKS_GPA 0x200000ull
#define PROBE_STORES	 4	       /* the signature's EBX, ECX, EDX; the info leaf's ECX */
#define PROBE_TIMEOUT_NS 2000000000ull /* the whole run; ~1 ms is typical */
#define PROBE_TICK_NS                                                                              \
	100000000 /* the timer repeats: a signal that came between two                             \
		   * KVM_RUNs is followed by another */

/*
 *	mov    $PAYLOAD_CPUID_SIG_LEAF, %eax
 *	xor    %ecx, %ecx
 *	cpuid
 *	movabs $PROBE_OUT_GPA, %rdi
 *	mov    %ebx, (%rdi)
 *	mov    %ecx, 4(%rdi)
 *	mov    %edx, 8(%rdi)
 *	mov    $PAYLOAD_CPUID_INFO_LEAF, %eax
 *	xor    %ecx, %ecx
 *	cpuid
 *	mov    %ecx, 12(%rdi)
 *	jmp    .
 */
static const uint8_t probe_code[] = {
	0xb8, 0x00, 0x0f, 0x00, 0x40,			/* mov $0x40000f00, %eax */
	0x31, 0xc9,					/* xor %ecx, %ecx */
	0x0f, 0xa2,					/* cpuid */
	0x48, 0xbf, 0x00, 0xf0, 0x00, 0xfe, 0, 0, 0, 0, /* movabs $0xfe00f000, %rdi */
	0x89, 0x1f,					/* mov %ebx, (%rdi) */
	0x89, 0x4f, 0x04,				/* mov %ecx, 4(%rdi) */
	0x89, 0x57, 0x08,				/* mov %edx, 8(%rdi) */
	0xb8, 0x01, 0x0f, 0x00, 0x40,			/* mov $0x40000f01, %eax */
	0x31, 0xc9,					/* xor %ecx, %ecx */
	0x0f, 0xa2,					/* cpuid */
	0x89, 0x4f, 0x0c,				/* mov %ecx, 12(%rdi) */
	0xeb, 0xfe,					/* jmp . */
};
_Static_assert(PAYLOAD_CPUID_SIG_LEAF == 0x40000f00u, "probe_code's leaf");
_Static_assert(PAYLOAD_CPUID_INFO_LEAF == 0x40000f01u, "probe_code's second leaf");
_Static_assert(PROBE_OUT_GPA == 0xfe00f000ull, "probe_code's address");

/* The timer's signal only has to interrupt KVM_RUN. */
static void probe_alarm(int sig)
{
	(void)sig;
}

/* Runs vCPU 0 until the probe's four stores arrived in `regs`, or the deadline. */
static enum cpuid_trap probe_run(struct vcpu *vcpu, uint32_t regs[PROBE_STORES], uint32_t nonce)
{
	uint64_t deadline = vmm_now_ns() + PROBE_TIMEOUT_NS;
	struct kvm_run *run = vcpu->run;
	unsigned got = 0, exits = 0;

	while (got != (1u << PROBE_STORES) - 1) {
		uint64_t off;

		if (ioctl(vcpu->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR && vmm_now_ns() < deadline)
				continue;
			log_info("cpuid probe: KVM_RUN: %s",
				 errno == EINTR ? "timed out" : strerror(errno));
			return CPUID_UNKNOWN;
		}
		off = run->mmio.phys_addr - PROBE_OUT_GPA;
		if (++exits > PROBE_STORES || run->exit_reason != KVM_EXIT_MMIO ||
		    !run->mmio.is_write || run->mmio.len != 4 ||
		    run->mmio.phys_addr < PROBE_OUT_GPA || off >= 4 * PROBE_STORES || off % 4) {
			log_info("cpuid probe: unexpected exit %u", run->exit_reason);
			return CPUID_UNKNOWN;
		}
		memcpy(&regs[off / 4], run->mmio.data, 4);
		got |= 1u << (off / 4);
	}
	/* The signature says a sandbox-vmm's table answered; the nonce, that it was ours. */
	return payload_cpuid_is_ours(regs[0], regs[1], regs[2], regs[3], nonce) ? CPUID_TRAPPED
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
	struct itimerspec its = {.it_value = {.tv_nsec = PROBE_TICK_NS},
				 .it_interval = {.tv_nsec = PROBE_TICK_NS}};
	enum cpuid_trap verdict = CPUID_UNKNOWN;
	uint32_t regs[PROBE_STORES] = {0};
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
	sev.sigev_notify_thread_id = gettid();
	sigemptyset(&alarm_set);
	sigaddset(&alarm_set, SIGALRM);
	if (sigaction(SIGALRM, &sa, &old_sa) < 0) {
		log_info("cpuid probe: cannot arm its timeout: %s", strerror(errno));
		vm_destroy(&vm);
		return CPUID_UNKNOWN;
	}
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer) < 0) {
		log_info("cpuid probe: cannot arm its timeout: %s", strerror(errno));
		sigaction(SIGALRM, &old_sa, NULL);
		vm_destroy(&vm);
		return CPUID_UNKNOWN;
	}
	pthread_sigmask(SIG_UNBLOCK, &alarm_set, &old_mask);
	if (timer_settime(timer, 0, &its, NULL) == 0)
		verdict = probe_run(&vm.vcpus[0], regs, vm.cpuid_nonce);
	else
		log_info("cpuid probe: cannot arm its timeout: %s", strerror(errno));
	/* A signal the timer sent after all was delivered at once (unblocked, this thread). */
	timer_delete(timer);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	if (verdict == CPUID_NATIVE)
		log_debug("cpuid probe: leaf %#x answered %08x %08x %08x (info ECX %08x, nonce "
			  "%08x): not this VM's table",
			  PAYLOAD_CPUID_SIG_LEAF, regs[0], regs[1], regs[2], regs[3],
			  vm.cpuid_nonce);
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
