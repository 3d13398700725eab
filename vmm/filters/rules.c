/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VMM's seccomp rules (docs/hardening.md), one filter per thread kind; seccomp-gen compiles
 * them at build time (filters.h). Anything not listed kills the whole process
 * (SCMP_ACT_KILL_PROCESS; the kernel logs the syscall number). Each entry says who needs it.
 *
 * - vCPU threads: KVM_RUN on their own vCPU and what the exits they handle do (the serial
 *   port, the i8042, virtio-mmio registers: device activation, queue notification).
 * - The I/O thread: the event loop, its devices' I/O, api.sock, snapshots and forks.
 * - The base, installed first, while the VMM has one thread: what both kinds need, and
 *   clone for a thread only. Every thread runs under it whatever becomes of the others
 *   (they share memory: a thread the guest took over could keep a later filter from being
 *   installed, never remove this one), and a thread of any other kind starts under it.
 * - The restore filter, installed first instead by a VMM that restores: the base plus the
 *   KVM_SET_* calls of applying the snapshot's state; the base goes on top once it is done.
 *
 * No filter allows clone, fork, execve, ptrace, mount or a socket other than AF_UNIX, and
 * the only opens allowed cannot open an existing file for reading or writing: a directory
 * (read-only, to fsync or openat in it) or a new file (O_CREAT | O_EXCL).
 *
 * KVM's fds are named by their fixed numbers (JAIL_FD_*). "Any vCPU" is every fd of the block
 * of VCPU_MAX from JAIL_FD_VCPU0: above the jail's RLIMIT_NOFILE only the fds vm_place_fds put
 * there exist, and none can be made. Every comparison of an fd takes all 64 bits of the
 * argument, so bits above the 32 the kernel uses never make a forbidden fd look allowed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "filters.h"
#include "vmm.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Syscalls any of our threads makes, with no argument worth checking. */
static const int common_calls[] = {
	SCMP_SYS(read),		   /* eventfds, sockets, the tap */
	SCMP_SYS(write),	   /* the console, eventfds, sockets, logs */
	SCMP_SYS(writev),	   /* logs (stdio) */
	SCMP_SYS(futex),	   /* mutexes, condition variables (pause/resume) */
	SCMP_SYS(munmap),	   /* free */
	SCMP_SYS(mremap),	   /* realloc */
	SCMP_SYS(madvise),	   /* free's trim; a thread's exit frees its stack */
	SCMP_SYS(brk),		   /* malloc */
	SCMP_SYS(rt_sigprocmask),  /* pthread, the vCPU kick */
	SCMP_SYS(rt_sigreturn),	   /* the vCPU kick's handler returns */
	SCMP_SYS(clock_gettime),   /* when the vDSO cannot answer */
	SCMP_SYS(clock_nanosleep), /* short waits (pause) */
	SCMP_SYS(nanosleep),	   /* short waits */
	SCMP_SYS(sched_yield),	   /* spin waits */
	SCMP_SYS(getpid),	   /* logs, tgkill */
	SCMP_SYS(gettid),	   /* tgkill */
	SCMP_SYS(exit),		   /* a thread ends */
	SCMP_SYS(exit_group),	   /* the VMM ends */
	SCMP_SYS(epoll_ctl),	   /* devices add, change and drop their fds */
	SCMP_SYS(restart_syscall), /* after a signal */
	SCMP_SYS(poll),		   /* the console waits for a stalled reader (serial.c) */
	SCMP_SYS(ppoll),	   /* same */
};

/* The I/O thread's, beyond those. */
static const int io_calls[] = {
	SCMP_SYS(epoll_wait),	   /* the event loop */
	SCMP_SYS(epoll_pwait),	   /* the event loop */
	SCMP_SYS(close),	   /* connections, snapshot files */
	SCMP_SYS(readv),	   /* synchronous disk I/O (no io_uring) */
	SCMP_SYS(pread64),	   /* disk layers, a fork's memory */
	SCMP_SYS(pwrite64),	   /* disk layers, a snapshot's memory */
	SCMP_SYS(preadv),	   /* synchronous disk I/O */
	SCMP_SYS(pwritev),	   /* synchronous disk I/O */
	SCMP_SYS(lseek),	   /* a snapshot's sparse memory file (SEEK_DATA) */
	SCMP_SYS(fsync),	   /* snapshots, disk flushes */
	SCMP_SYS(fdatasync),	   /* disk flushes */
	SCMP_SYS(ftruncate),	   /* snapshot memory, new layers, fork deltas */
	SCMP_SYS(fallocate),	   /* disk discard */
	SCMP_SYS(fstat),	   /* layer files */
	SCMP_SYS(newfstatat),	   /* realpath, layer files */
	SCMP_SYS(statx),	   /* layer files */
	SCMP_SYS(readlink),	   /* realpath of a new layer's directory */
	SCMP_SYS(renameat2),	   /* a new layer appears whole (RENAME_NOREPLACE) */
	SCMP_SYS(rename),	   /* same */
	SCMP_SYS(unlink),	   /* a half-made layer; our sockets at exit */
	SCMP_SYS(unlinkat),	   /* same */
	SCMP_SYS(flock),	   /* a frozen layer becomes shared */
	SCMP_SYS(fcntl),	   /* F_ADD_SEALS on frozen RAM, O_NONBLOCK on sockets */
	SCMP_SYS(memfd_create),	   /* a fork's delta memory */
	SCMP_SYS(getrandom),	   /* a new layer's id */
	SCMP_SYS(accept4),	   /* api.sock and vsock.sock clients */
	SCMP_SYS(connect),	   /* the guest's connections to host sockets */
	SCMP_SYS(recvfrom),	   /* sockets */
	SCMP_SYS(recvmsg),	   /* sockets */
	SCMP_SYS(sendto),	   /* sockets */
	SCMP_SYS(sendmsg),	   /* sockets */
	SCMP_SYS(shutdown),	   /* vsock half-close */
	SCMP_SYS(getsockopt),	   /* SO_PEERCRED of api clients, SO_ERROR */
	SCMP_SYS(setsockopt),	   /* socket buffer sizes */
	SCMP_SYS(timerfd_settime), /* device timers, the timeout */
	SCMP_SYS(timerfd_gettime), /* device timers */
	SCMP_SYS(io_uring_enter),  /* disk I/O (the rings exist already) */
	SCMP_SYS(tgkill),	   /* kick the vCPUs (pause, stop) */
	SCMP_SYS(rt_sigtimedwait), /* signals */
	SCMP_SYS(signalfd4),	   /* the main loop's SIGTERM, SIGINT, SIGHUP */
	SCMP_SYS(timerfd_create),  /* the main loop's --timeout */
};

/* A vCPU thread's, beyond the common ones. */
static const int vcpu_calls[] = {
	SCMP_SYS(tgkill), /* a vCPU that stops the VM kicks the others */
	SCMP_SYS(close),  /* an eventfd of a device reset */
	SCMP_SYS(fcntl),  /* stdio */
	SCMP_SYS(fstat),  /* stdio */
	SCMP_SYS(newfstatat),	  SCMP_SYS(timerfd_settime), /* a device armed by a register write
							      */
	SCMP_SYS(io_uring_enter), /* virtio-blk submits from a queue notify */
	SCMP_SYS(sendto),	  /* a vsock packet from a queue notify */
	SCMP_SYS(sendmsg),	  SCMP_SYS(recvfrom),	     SCMP_SYS(recvmsg),
	SCMP_SYS(pread64), /* synchronous disk I/O on a queue notify */
	SCMP_SYS(pwrite64),	  SCMP_SYS(preadv),	     SCMP_SYS(pwritev),
	SCMP_SYS(readv),	  SCMP_SYS(fdatasync), /* a blk flush on a queue notify */
	SCMP_SYS(fsync),	  SCMP_SYS(fallocate),
};

/* vCPU ioctls the I/O thread may make on any vCPU (snapshots read their state) and a vCPU
 * thread on its own. */
static const unsigned long vcpu_ioctls[] = {
	KVM_GET_REGS,	  KVM_GET_SREGS,       KVM_GET_FPU,	  KVM_GET_MSRS,	 KVM_GET_LAPIC,
	KVM_GET_MP_STATE, KVM_GET_VCPU_EVENTS, KVM_GET_DEBUGREGS, KVM_GET_XSAVE, KVM_GET_XSAVE2,
	KVM_GET_XCRS,	  KVM_SET_REGS,	       KVM_SET_SREGS,	  KVM_SET_MSRS,	 KVM_SET_MP_STATE,
	KVM_SET_LAPIC,	  KVM_SET_VCPU_EVENTS, KVM_KVMCLOCK_CTRL,
};

/* VM ioctls: interrupts (devices, from either thread), and the snapshot's reads. */
static const unsigned long vm_irq_ioctls[] = {KVM_IRQ_LINE, KVM_IRQ_LINE_STATUS, KVM_SIGNAL_MSI};
static const unsigned long vm_io_ioctls[] = {
	KVM_GET_CLOCK,
	KVM_GET_IRQCHIP,
	KVM_GET_PIT2,
	KVM_IOEVENTFD,
	KVM_IRQFD,
	KVM_CHECK_EXTENSION,	    /* a snapshot asks which vCPU state there is */
	KVM_SET_USER_MEMORY_REGION, /* a fork maps its memory anew */
};

static int allow_calls(scmp_filter_ctx ctx, const int *calls, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, calls[i], 0);

		if (err < 0 && err != -EEXIST) /* the base filter lists some twice */
			return err;
	}
	return 0;
}

/* The base filter's own: the vCPU threads are created under it. clone only for a thread
 * (clone3's flags are out of a filter's reach: ENOSYS makes glibc fall back to clone). */
static const int thread_calls[] = {
	SCMP_SYS(set_robust_list), /* a new thread's start */
	SCMP_SYS(rseq),		   /* same */
	SCMP_SYS(sched_getaffinity),
	SCMP_SYS(rt_sigaction), /* vcpu_start_all sets the kick's handler */
	SCMP_SYS(seccomp),	/* each thread stacks its own filter (only ever narrower) */
};

static int allow_threads(scmp_filter_ctx ctx)
{
	int err = allow_calls(ctx, thread_calls, ARRAY_SIZE(thread_calls));

	if (err < 0 ||
	    (err = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		return err;
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
}

/* ioctl(fd, req) for each req of `reqs`. The request is compared as the 32 bits the kernel
 * reads. */
static int allow_ioctls(scmp_filter_ctx ctx, uint32_t fd, const unsigned long *reqs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int err = seccomp_rule_add(
			ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 2,
			SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fd),
			SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)(uint32_t)reqs[i]));

		if (err < 0)
			return err;
	}
	return 0;
}

_Static_assert((VCPU_MAX & (VCPU_MAX - 1)) == 0 && JAIL_FD_VCPU0 % VCPU_MAX == 0,
	       "the vCPUs' fds are one aligned block");

/* The same on any vCPU's fd. */
static int allow_vcpu_ioctls(scmp_filter_ctx ctx, const unsigned long *reqs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int err = seccomp_rule_add(
			ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 2,
			SCMP_A0(SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)(VCPU_MAX - 1),
				(scmp_datum_t)JAIL_FD_VCPU0),
			SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)(uint32_t)reqs[i]));

		if (err < 0)
			return err;
	}
	return 0;
}

/* mmap (malloc, a fork's memory) and mprotect (malloc's arenas), never executable: no code
 * but the VMM's own ever runs in it. */
static int allow_memory(scmp_filter_ctx ctx)
{
	int err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				   SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));

	if (err < 0)
		return err;
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
}

/* openat only for a directory read-only, or a new file. */
static int allow_opens(scmp_filter_ctx ctx)
{
	int err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
				   SCMP_A2(SCMP_CMP_MASKED_EQ, O_DIRECTORY | O_ACCMODE | O_CREAT,
					   O_DIRECTORY | O_RDONLY));

	if (err < 0)
		return err;
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
				SCMP_A2(SCMP_CMP_MASKED_EQ, O_CREAT | O_EXCL, O_CREAT | O_EXCL));
}

/* Applying a snapshot (restore.c, snap_cpu.c), beyond the vCPU state vcpu_ioctls sets: the
 * FPU, XSAVE, XCRs and debug registers, the irqchips, the PIT and the clock. Only before the
 * base filter narrows the VMM: the state comes from a file a compromised VMM may have
 * written, so it is parsed under a filter, but the running VMM never sets these. */
static const unsigned long restore_vcpu_ioctls[] = {KVM_SET_FPU, KVM_SET_XSAVE, KVM_SET_XCRS,
						    KVM_SET_DEBUGREGS};
static const unsigned long restore_vm_ioctls[] = {KVM_SET_IRQCHIP, KVM_SET_PIT2, KVM_SET_CLOCK};

int filter_rules(scmp_filter_ctx ctx, enum filter_kind kind)
{
	static const unsigned long tap_ioctls[] = {TUNSETOFFLOAD};
	static const unsigned long msr_list[] = {KVM_GET_MSR_INDEX_LIST};
	static const unsigned long run[] = {KVM_RUN};
	int err;

	if ((err = allow_calls(ctx, common_calls, ARRAY_SIZE(common_calls))) < 0 ||
	    (err = allow_memory(ctx)) < 0 ||
	    (err = allow_ioctls(ctx, JAIL_FD_VM, vm_irq_ioctls, ARRAY_SIZE(vm_irq_ioctls))) < 0 ||
	    (err = allow_ioctls(ctx, JAIL_FD_TAP, tap_ioctls, ARRAY_SIZE(tap_ioctls))) < 0)
		return err;
	if (kind == FILTER_VCPU) {
		if ((err = allow_calls(ctx, vcpu_calls, ARRAY_SIZE(vcpu_calls))) < 0 ||
		    (err = allow_ioctls(ctx, FILTER_VCPU_SELF, run, 1)) < 0)
			return err;
		return allow_ioctls(ctx, FILTER_VCPU_SELF, vcpu_ioctls, ARRAY_SIZE(vcpu_ioctls));
	}
	if (kind == FILTER_RESTORE) {
		err = allow_vcpu_ioctls(ctx, restore_vcpu_ioctls, ARRAY_SIZE(restore_vcpu_ioctls));
		if (err < 0 || (err = allow_ioctls(ctx, JAIL_FD_VM, restore_vm_ioctls,
						   ARRAY_SIZE(restore_vm_ioctls))) < 0)
			return err;
	}
	if (kind == FILTER_BASE || kind == FILTER_RESTORE) {
		if ((err = allow_calls(ctx, vcpu_calls, ARRAY_SIZE(vcpu_calls))) < 0 ||
		    (err = allow_threads(ctx)) < 0 || (err = allow_vcpu_ioctls(ctx, run, 1)) < 0)
			return err;
	}
	if ((err = allow_calls(ctx, io_calls, ARRAY_SIZE(io_calls))) < 0 ||
	    (err = allow_opens(ctx)) < 0 ||
	    (err = allow_ioctls(ctx, JAIL_FD_VM, vm_io_ioctls, ARRAY_SIZE(vm_io_ioctls))) < 0 ||
	    (err = allow_ioctls(ctx, JAIL_FD_KVM, msr_list, 1)) < 0)
		return err;
	/* The guest's connections to host sockets: unix stream sockets only. */
	if ((err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				    SCMP_A0(SCMP_CMP_EQ, AF_UNIX))) < 0)
		return err;
	return allow_vcpu_ioctls(ctx, vcpu_ioctls, ARRAY_SIZE(vcpu_ioctls));
}
