/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vCPUs: creation, the architectural state each boot mode starts in, and one thread per vCPU
 * running KVM_RUN. Exits are dispatched through a table indexed by exit reason; a handler says
 * whether the vCPU continues or the VM stops (and with which status).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"
#include "payload_abi.h"
#include "vmm.h"

#define X86_CR0_PE	   (1ull << 0)
#define X86_CR0_MP	   (1ull << 1)
#define X86_CR0_ET	   (1ull << 4)
#define X86_CR0_NE	   (1ull << 5)
#define X86_CR0_WP	   (1ull << 16)
#define X86_CR0_PG	   (1ull << 31)
#define X86_CR4_PAE	   (1ull << 5)
#define X86_CR4_OSFXSR	   (1ull << 9)
#define X86_CR4_OSXMMEXCPT (1ull << 10)
#define EFER_LME	   (1ull << 8)
#define EFER_LMA	   (1ull << 10)
#define RFLAGS_RESERVED	   (1ull << 1)
#define RFLAGS_IOPL3	   (3ull << 12)

#define APIC_LVT0	 0x350
#define APIC_LVT1	 0x360
#define APIC_MODE_NMI	 0x4
#define APIC_MODE_EXTINT 0x7

enum vcpu_action { VCPU_CONTINUE, VCPU_STOP };

/* ---- architectural state at entry ---- */

static int vcpu_set_cpuid(struct vcpu *vcpu)
{
	const struct kvm_cpuid2 *host = vcpu->vm->cpuid;
	size_t len = sizeof(*host) + host->nent * sizeof(host->entries[0]);
	struct kvm_cpuid2 *c = malloc(len);
	int err = 0;

	if (!c)
		return -ENOMEM;
	memcpy(c, host, len);
	cpuid_filter(c->entries, c->nent, vcpu->index, vcpu->vm->ncpus);
	if (ioctl(vcpu->fd, KVM_SET_CPUID2, c) < 0)
		err = -errno;
	free(c);
	return err;
}

/* The MSRs a 64-bit kernel expects in a known state. Each is set on its own so that one the
 * host refuses (kvm-pvm refuses some) is skipped, not fatal. */
static void vcpu_set_boot_msrs(struct vcpu *vcpu)
{
	static const struct {
		uint32_t index;
		uint64_t value;
	} msrs[] = {
		{0x174, 0},		 /* IA32_SYSENTER_CS */
		{0x175, 0},		 /* IA32_SYSENTER_ESP */
		{0x176, 0},		 /* IA32_SYSENTER_EIP */
		{0xc0000081, 0},	 /* STAR */
		{0xc0000082, 0},	 /* LSTAR */
		{0xc0000083, 0},	 /* CSTAR */
		{0xc0000084, 0},	 /* SYSCALL_MASK */
		{0xc0000102, 0},	 /* KERNEL_GS_BASE */
		{0x10, 0},		 /* IA32_TSC */
		{0x1a0, 1},		 /* IA32_MISC_ENABLE: fast strings */
		{0x2ff, (1u << 11) | 6}, /* MTRR default type: enabled, write-back */
	};
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry entry;
	} one;

	for (size_t i = 0; i < sizeof(msrs) / sizeof(msrs[0]); i++) {
		memset(&one, 0, sizeof(one));
		one.hdr.nmsrs = 1;
		one.entry.index = msrs[i].index;
		one.entry.data = msrs[i].value;
		if (ioctl(vcpu->fd, KVM_SET_MSRS, &one) != 1)
			log_debug("vcpu%u: MSR %#x refused by the host, skipped", vcpu->index,
				  msrs[i].index);
	}
}

/* Virtual-wire mode: LINT0 takes the PIC's ExtINT, LINT1 takes NMIs, as firmware leaves it. */
static int vcpu_set_lapic(struct vcpu *vcpu)
{
	struct kvm_lapic_state lapic;
	uint32_t v;

	if (ioctl(vcpu->fd, KVM_GET_LAPIC, &lapic) < 0)
		return -errno;
	memcpy(&v, &lapic.regs[APIC_LVT0], 4);
	v = (v & ~0x700u) | (APIC_MODE_EXTINT << 8);
	memcpy(&lapic.regs[APIC_LVT0], &v, 4);
	memcpy(&v, &lapic.regs[APIC_LVT1], 4);
	v = (v & ~0x700u) | (APIC_MODE_NMI << 8);
	memcpy(&lapic.regs[APIC_LVT1], &v, 4);
	if (ioctl(vcpu->fd, KVM_SET_LAPIC, &lapic) < 0)
		return -errno;
	return 0;
}

static int vcpu_set_sregs(struct vcpu *vcpu, const struct boot_entry *entry)
{
	uint64_t gdt[GDT_ENTRIES];
	struct kvm_sregs s;
	uint16_t code, data;

	if (ioctl(vcpu->fd, KVM_GET_SREGS, &s) < 0)
		return -errno;
	gdt_build(gdt);
	s.gdt.base = GDT_GPA;
	s.gdt.limit = sizeof(gdt) - 1;
	s.idt.base = 0;
	s.idt.limit = 0; /* no IDT: an exception before the guest sets one up triple-faults */
	gdt_to_kvm_segment(gdt, GDT_SEL_TSS, &s.tr);

	switch (entry->mode) {
	case BOOT_PVH: /* 32-bit protected mode, paging off (the PVH boot ABI) */
		code = GDT_SEL_CODE32;
		data = GDT_SEL_DATA;
		s.cr0 = X86_CR0_PE | X86_CR0_ET;
		s.cr4 = 0;
		s.efer = 0;
		break;
	case BOOT_LINUX64:
	case BOOT_PAYLOAD:
		code = entry->mode == BOOT_PAYLOAD ? GDT_SEL_UCODE64 : GDT_SEL_CODE64;
		data = entry->mode == BOOT_PAYLOAD ? GDT_SEL_UDATA : GDT_SEL_DATA;
		s.cr0 = X86_CR0_PE | X86_CR0_MP | X86_CR0_ET | X86_CR0_NE | X86_CR0_WP | X86_CR0_PG;
		s.cr3 = PAGETABLE_GPA;
		s.cr4 = X86_CR4_PAE | X86_CR4_OSFXSR | X86_CR4_OSXMMEXCPT;
		s.efer = EFER_LME | EFER_LMA;
		break;
	default:
		return -EINVAL;
	}
	gdt_to_kvm_segment(gdt, code, &s.cs);
	gdt_to_kvm_segment(gdt, data, &s.ds);
	s.es = s.fs = s.gs = s.ss = s.ds;
	if (ioctl(vcpu->fd, KVM_SET_SREGS, &s) < 0)
		return -errno;
	return 0;
}

static int vcpu_set_regs(struct vcpu *vcpu, const struct boot_entry *entry)
{
	struct kvm_regs r;
	struct kvm_fpu fpu;

	memset(&fpu, 0, sizeof(fpu));
	fpu.fcw = 0x37f;
	fpu.mxcsr = 0x1f80;
	if (ioctl(vcpu->fd, KVM_SET_FPU, &fpu) < 0)
		return -errno;

	memset(&r, 0, sizeof(r));
	r.rflags = RFLAGS_RESERVED;
	r.rip = entry->rip;
	switch (entry->mode) {
	case BOOT_LINUX64:
		r.rsi = entry->arg_gpa;
		r.rsp = r.rbp = BOOT_STACK_GPA;
		break;
	case BOOT_PVH:
		r.rbx = entry->arg_gpa;
		break;
	case BOOT_PAYLOAD:
		r.rflags |= RFLAGS_IOPL3;
		r.rdi = vcpu->index;
		r.rsi = vcpu->vm->ncpus;
		r.rdx = entry->arg_gpa;
		r.rsp = entry->stacks_gpa + (vcpu->index + 1ull) * PAYLOAD_STACK_LEN;
		break;
	}
	if (ioctl(vcpu->fd, KVM_SET_REGS, &r) < 0)
		return -errno;
	return 0;
}

/* The vCPU's fd, its run page and its CPUID: what a boot and a restore both need. */
static int vcpu_open(struct vm *vm, unsigned index)
{
	struct vcpu *vcpu = &vm->vcpus[index];
	long run_len;
	int err;

	memset(vcpu, 0, sizeof(*vcpu));
	vcpu->vm = vm;
	vcpu->index = index;
	vcpu->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)index);
	if (vcpu->fd < 0) {
		err = -errno;
		log_error("KVM_CREATE_VCPU %u: %s", index, strerror(errno));
		return err;
	}
	run_len = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_len < (long)sizeof(struct kvm_run)) {
		err = -EINVAL;
		goto fail;
	}
	vcpu->run = mmap(NULL, (size_t)run_len, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu->fd, 0);
	if (vcpu->run == MAP_FAILED) {
		err = -errno;
		vcpu->run = NULL;
		goto fail;
	}
	vcpu->run_len = (size_t)run_len;
	if ((err = vcpu_set_cpuid(vcpu)) < 0) {
		log_error("vcpu%u: KVM_SET_CPUID2: %s", index, strerror(-err));
		goto fail;
	}
	return 0;
fail:
	vcpu_destroy(vcpu);
	return err;
}

int vcpu_create_restored(struct vm *vm, unsigned index)
{
	return vcpu_open(vm, index);
}

int vcpu_create(struct vm *vm, unsigned index, const struct boot_entry *entry)
{
	struct vcpu *vcpu = &vm->vcpus[index];
	int err;

	if ((err = vcpu_open(vm, index)) < 0)
		return err;
	vcpu_set_boot_msrs(vcpu);
	if ((err = vcpu_set_lapic(vcpu)) < 0) {
		log_error("vcpu%u: cannot set up the local APIC: %s", index, strerror(-err));
		goto fail;
	}
	/* Linux starts on the boot vCPU and wakes the others with INIT/SIPI, which resets them;
	 * a payload starts every vCPU at once, so every vCPU gets the entry state. */
	if (index == 0 || entry->mode == BOOT_PAYLOAD) {
		if ((err = vcpu_set_sregs(vcpu, entry)) < 0 ||
		    (err = vcpu_set_regs(vcpu, entry)) < 0) {
			log_error("vcpu%u: cannot set the entry state: %s", index, strerror(-err));
			goto fail;
		}
	}
	if (index > 0 && entry->mode == BOOT_PAYLOAD) {
		struct kvm_mp_state mp = {.mp_state = KVM_MP_STATE_RUNNABLE};

		if (ioctl(vcpu->fd, KVM_SET_MP_STATE, &mp) < 0) {
			err = -errno;
			log_error("vcpu%u: KVM_SET_MP_STATE: %s", index, strerror(errno));
			goto fail;
		}
	}
	return 0;
fail:
	vcpu_destroy(vcpu);
	return err;
}

void vcpu_destroy(struct vcpu *vcpu)
{
	if (vcpu->run)
		munmap(vcpu->run, vcpu->run_len);
	vcpu->run = NULL;
	if (vcpu->fd >= 0)
		close(vcpu->fd);
	vcpu->fd = -1;
}

/* ---- exits ---- */

static uint64_t vcpu_rip(const struct vcpu *vcpu)
{
	struct kvm_regs r;

	if (ioctl(vcpu->fd, KVM_GET_REGS, &r) < 0)
		return 0;
	return r.rip;
}

static enum vcpu_action vcpu_exit_io(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	uint32_t size = run->io.size;

	/* KVM placed the data inside the run page; bound it anyway (rep ins/outs). */
	if (size == 0 || size > 4 || run->io.data_offset > vcpu->run_len ||
	    (uint64_t)size * run->io.count > vcpu->run_len - run->io.data_offset)
		goto bad;
	vcpu->io_exits++;
	for (uint32_t i = 0; i < run->io.count; i++, data += size) {
		bool write = run->io.direction == KVM_EXIT_IO_OUT;

		if (!bus_access(&vcpu->vm->pio, run->io.port, data, size, write) &&
		    log_ratelimit_ok(&vcpu->unhandled_rl, 5))
			log_debug("vcpu%u: unhandled port %s %#x", vcpu->index,
				  write ? "write" : "read", run->io.port);
	}
	return VCPU_CONTINUE;
bad:
	vm_request_stop(vcpu->vm, VM_EXIT_VMM_ERROR, "malformed port I/O exit from KVM");
	return VCPU_STOP;
}

static enum vcpu_action vcpu_exit_mmio(struct vcpu *vcpu)
{
	struct kvm_run *run = vcpu->run;

	vcpu->mmio_exits++;
	if (run->mmio.len > sizeof(run->mmio.data)) {
		vm_request_stop(vcpu->vm, VM_EXIT_VMM_ERROR, "malformed MMIO exit from KVM");
		return VCPU_STOP;
	}
	if (!bus_access(&vcpu->vm->mmio, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
			run->mmio.is_write) &&
	    log_ratelimit_ok(&vcpu->unhandled_rl, 5))
		log_debug("vcpu%u: unhandled MMIO %s %#llx", vcpu->index,
			  run->mmio.is_write ? "write" : "read",
			  (unsigned long long)run->mmio.phys_addr);
	return VCPU_CONTINUE;
}

static enum vcpu_action vcpu_exit_hlt(struct vcpu *vcpu)
{
	/* With the in-kernel LAPIC, HLT only exits when no interrupt can ever wake the vCPU. */
	vm_request_stop(vcpu->vm, VM_EXIT_SHUTDOWN, "vcpu%u halted for good", vcpu->index);
	return VCPU_STOP;
}

/* With -v, the state a fatal exit left the vCPU in. */
static void vcpu_dump_state(const struct vcpu *vcpu)
{
	struct kvm_regs r;
	struct kvm_sregs s;

	if (ioctl(vcpu->fd, KVM_GET_REGS, &r) < 0 || ioctl(vcpu->fd, KVM_GET_SREGS, &s) < 0)
		return;
	log_debug(
		"vcpu%u: rip=%#llx rsp=%#llx rflags=%#llx cs=%#x/dpl%u ss=%#x cr0=%#llx cr3=%#llx "
		"cr4=%#llx efer=%#llx",
		vcpu->index, (unsigned long long)r.rip, (unsigned long long)r.rsp,
		(unsigned long long)r.rflags, s.cs.selector, s.cs.dpl, s.ss.selector,
		(unsigned long long)s.cr0, (unsigned long long)s.cr3, (unsigned long long)s.cr4,
		(unsigned long long)s.efer);
}

static enum vcpu_action vcpu_exit_shutdown(struct vcpu *vcpu)
{
	vcpu_dump_state(vcpu);
	vm_request_stop(vcpu->vm, VM_EXIT_TRIPLE_FAULT, "guest triple fault on vcpu%u at rip %#llx",
			vcpu->index, (unsigned long long)vcpu_rip(vcpu));
	return VCPU_STOP;
}

static enum vcpu_action vcpu_exit_internal_error(struct vcpu *vcpu)
{
	uint32_t sub = vcpu->run->internal.suberror;

	vcpu_dump_state(vcpu);
	vm_request_stop(vcpu->vm, VM_EXIT_EMULATION,
			"KVM internal error, suberror %u%s, on vcpu%u at rip %#llx", sub,
			sub == KVM_INTERNAL_ERROR_EMULATION ? " (emulation failure)" : "",
			vcpu->index, (unsigned long long)vcpu_rip(vcpu));
	return VCPU_STOP;
}

static enum vcpu_action vcpu_exit_fail_entry(struct vcpu *vcpu)
{
	vm_request_stop(
		vcpu->vm, VM_EXIT_EMULATION,
		"KVM could not enter the guest on vcpu%u (hardware reason %#llx) at rip %#llx",
		vcpu->index,
		(unsigned long long)vcpu->run->fail_entry.hardware_entry_failure_reason,
		(unsigned long long)vcpu_rip(vcpu));
	return VCPU_STOP;
}

static enum vcpu_action vcpu_exit_system_event(struct vcpu *vcpu)
{
	switch (vcpu->run->system_event.type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
	case KVM_SYSTEM_EVENT_RESET:
		vm_request_stop(vcpu->vm,
				atomic_load(&vcpu->vm->guest_panicked) ? VM_EXIT_PANIC
								       : VM_EXIT_SHUTDOWN,
				"guest system event %u", vcpu->run->system_event.type);
		break;
	case KVM_SYSTEM_EVENT_CRASH:
		vm_request_stop(vcpu->vm, VM_EXIT_PANIC, "guest crashed");
		break;
	default:
		vm_request_stop(vcpu->vm, VM_EXIT_VMM_ERROR, "unknown system event %u",
				vcpu->run->system_event.type);
	}
	return VCPU_STOP;
}

static enum vcpu_action vcpu_exit_intr(struct vcpu *vcpu)
{
	return VCPU_CONTINUE; /* a signal kicked us out; the run loop checks for a stop */
}

typedef enum vcpu_action (*vcpu_exit_fn)(struct vcpu *vcpu);

static const vcpu_exit_fn vcpu_exit_handlers[] = {
	[KVM_EXIT_IO] = vcpu_exit_io,
	[KVM_EXIT_MMIO] = vcpu_exit_mmio,
	[KVM_EXIT_HLT] = vcpu_exit_hlt,
	[KVM_EXIT_SHUTDOWN] = vcpu_exit_shutdown,
	[KVM_EXIT_FAIL_ENTRY] = vcpu_exit_fail_entry,
	[KVM_EXIT_INTR] = vcpu_exit_intr,
	[KVM_EXIT_INTERNAL_ERROR] = vcpu_exit_internal_error,
	[KVM_EXIT_SYSTEM_EVENT] = vcpu_exit_system_event,
};

static enum vcpu_action vcpu_dispatch_exit(struct vcpu *vcpu)
{
	uint32_t reason = vcpu->run->exit_reason;
	size_t n = sizeof(vcpu_exit_handlers) / sizeof(vcpu_exit_handlers[0]);

	if (reason < n && vcpu_exit_handlers[reason])
		return vcpu_exit_handlers[reason](vcpu);
	vm_request_stop(vcpu->vm, VM_EXIT_VMM_ERROR,
			"unexpected KVM exit reason %u on vcpu%u at rip %#llx", reason, vcpu->index,
			(unsigned long long)vcpu_rip(vcpu));
	return VCPU_STOP;
}

/* Paused: count ourselves parked and sleep until resumed or stopped. Called at the top of
 * the run loop, so a parked vCPU is never inside an exit handler. */
static void vcpu_park(struct vcpu *vcpu)
{
	struct vm *vm = vcpu->vm;

	/*
	 * The last exit's I/O (an MMIO read's value, a port read's) only reaches the guest's
	 * registers at the next KVM_RUN. With immediate_exit set (the pause kicked us), KVM_RUN
	 * completes it and returns -EINTR without running the guest: a parked vCPU's state is
	 * then whole, as a snapshot must see it.
	 */
	/* An exit KVM_RUN returns instead (not expected) is served, and its own I/O completed
	 * the same way, a bounded number of times. */
	for (unsigned i = 0;
	     i < 8 && __atomic_load_n(&vcpu->run->immediate_exit, __ATOMIC_SEQ_CST) &&
	     ioctl(vcpu->fd, KVM_RUN, 0) == 0;
	     i++) {
		vcpu->exits++;
		if (vcpu_dispatch_exit(vcpu) == VCPU_STOP)
			break;
	}
	pthread_mutex_lock(&vm->lock);
	vm->nparked++;
	pthread_cond_broadcast(&vm->parked_cond);
	while (atomic_load(&vm->pause_requested) && !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->lock);
	vm->nparked--;
	pthread_mutex_unlock(&vm->lock);
}

static void *vcpu_thread(void *opaque)
{
	struct vcpu *vcpu = opaque;
	struct vm *vm = vcpu->vm;
	sigset_t set;

	/* The main thread blocks every signal it waits for; a vCPU only takes the kick. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (vm->seccomp) {
		/* Started under the base filter; this one's own narrows it at once. */
		int err = seccomp_install_vcpu(vm, vcpu);

		if (err < 0) {
			vm_request_stop(vm, VM_EXIT_VMM_ERROR,
					"vcpu%u: cannot install its seccomp filter: %s",
					vcpu->index, strerror(-err));
			return NULL;
		}
	}
	/* Until the I/O thread's filter is in and the devices have resumed. */
	pthread_mutex_lock(&vm->lock);
	while (!vm->vcpus_released)
		pthread_cond_wait(&vm->release_cond, &vm->lock);
	pthread_mutex_unlock(&vm->lock);
	if (atomic_load(&vm->stopping))
		return NULL;

	while (!atomic_load(&vm->stopping)) {
		if (atomic_load(&vm->pause_requested)) {
			vcpu_park(vcpu);
			continue;
		}
		if (ioctl(vcpu->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			vm_request_stop(vm, VM_EXIT_VMM_ERROR, "KVM_RUN on vcpu%u: %s", vcpu->index,
					strerror(errno));
			break;
		}
		vcpu->exits++;
		if (vcpu_dispatch_exit(vcpu) == VCPU_STOP)
			break;
	}
	return NULL;
}

static void vcpu_kick_handler(int sig)
{
	(void)sig; /* only there to interrupt KVM_RUN */
}

int vcpu_start_all(struct vm *vm)
{
	struct sigaction sa;
	sigset_t set;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = vcpu_kick_handler; /* no SA_RESTART: KVM_RUN must return EINTR */
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		return -errno;
	/* Threads start with SIGUSR1 blocked and unblock it themselves, so no kick can arrive
	 * before the thread is ready for it. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	for (unsigned i = 0; i < vm->ncpus; i++) {
		int err = pthread_create(&vm->vcpus[i].thread, NULL, vcpu_thread, &vm->vcpus[i]);

		if (err) {
			vm_request_stop(vm, VM_EXIT_VMM_ERROR, "cannot start vcpu%u: %s", i,
					strerror(err));
			return -err;
		}
		vm->vcpus[i].started = true;
	}
	return 0;
}

void vcpu_release_all(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	vm->vcpus_released = true;
	pthread_cond_broadcast(&vm->release_cond);
	pthread_mutex_unlock(&vm->lock);
}

/* Kick every started vCPU out of KVM_RUN: immediate_exit covers a vCPU about to enter it,
 * the signal one inside it. */
static void vcpu_kick_all(struct vm *vm)
{
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vcpu *vcpu = &vm->vcpus[i];

		if (!vcpu->started)
			continue;
		__atomic_store_n(&vcpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		pthread_kill(vcpu->thread, SIGUSR1);
	}
}

int vcpu_pause_all(struct vm *vm, unsigned timeout_ms)
{
	unsigned nstarted = 0;
	struct timespec until;
	int err = 0;

	if (atomic_load(&vm->stopping))
		return -ESHUTDOWN;
	for (unsigned i = 0; i < vm->ncpus; i++)
		nstarted += vm->vcpus[i].started;
	atomic_store(&vm->pause_requested, true);
	vcpu_kick_all(vm);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&vm->lock);
	/* vm_request_stop broadcasts parked_cond too: a vCPU that stops the VM instead of
	 * parking does not leave us waiting for the timeout. */
	while (vm->nparked < nstarted && !atomic_load(&vm->stopping) && !err)
		err = -pthread_cond_timedwait(&vm->parked_cond, &vm->lock, &until);
	pthread_mutex_unlock(&vm->lock);
	if (atomic_load(&vm->stopping))
		return -ESHUTDOWN;
	if (err) {
		/* Not paused after all: say so everywhere, and let the parked ones run again. */
		vcpu_resume_all(vm);
		return err;
	}
	return 0;
}

void vcpu_resume_all(struct vm *vm)
{
	if (atomic_load(&vm->stopping))
		return; /* the kicks stay: every vCPU is on its way out */
	pthread_mutex_lock(&vm->lock);
	/* Clear immediate_exit before the vCPUs may run again, or KVM_RUN would return at once. */
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (vm->vcpus[i].started)
			__atomic_store_n(&vm->vcpus[i].run->immediate_exit, 0, __ATOMIC_SEQ_CST);
	atomic_store(&vm->pause_requested, false);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->lock);
}

bool vcpu_paused(struct vm *vm)
{
	return atomic_load(&vm->pause_requested);
}

void vcpu_stop_all(struct vm *vm)
{
	atomic_store(&vm->stopping, true);
	/* Wake parked vCPUs: they see `stopping` and leave their loop. */
	pthread_mutex_lock(&vm->lock);
	pthread_cond_broadcast(&vm->pause_cond);
	pthread_mutex_unlock(&vm->lock);
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vcpu *vcpu = &vm->vcpus[i];

		if (!vcpu->started)
			continue;
		/* immediate_exit covers a vCPU about to enter KVM_RUN; the signal one inside it. */
		__atomic_store_n(&vcpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		pthread_kill(vcpu->thread, SIGUSR1);
	}
	for (unsigned i = 0; i < vm->ncpus; i++) {
		struct vcpu *vcpu = &vm->vcpus[i];

		if (vcpu->started)
			pthread_join(vcpu->thread, NULL);
		vcpu->started = false;
		log_debug("vcpu%u: %llu exits, %llu port I/O, %llu MMIO", i,
			  (unsigned long long)vcpu->exits, (unsigned long long)vcpu->io_exits,
			  (unsigned long long)vcpu->mmio_exits);
	}
}
