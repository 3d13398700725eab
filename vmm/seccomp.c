/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VMM's seccomp filters (docs/hardening.md), one per thread kind, built with libseccomp
 * from the tables below once the VMM is jailed. Anything not listed kills the whole process
 * (SCMP_ACT_KILL_PROCESS; the kernel logs the syscall number). Each entry says who needs it.
 *
 * - vCPU threads: KVM_RUN on their own vCPU and what the exits they handle do (the serial
 *   port, the i8042, virtio-mmio registers: device activation, queue notification).
 * - The I/O thread: the event loop, its devices' I/O, api.sock, snapshots and forks.
 * - The base, installed first, while the VMM has one thread: what both kinds need, and
 *   clone for a thread only. Every thread runs under it whatever becomes of the others
 *   (they share memory: a thread the guest took over could keep a later filter from being
 *   installed, never remove this one), and a thread of any other kind starts under it.
 *
 * No filter allows clone, fork, execve, ptrace, mount or a socket other than AF_UNIX, and
 * the only opens allowed cannot open an existing file for reading or writing: a directory
 * (read-only, to fsync or openat in it) or a new file (O_CREAT | O_EXCL).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

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

enum filter_kind { FILTER_IO, FILTER_VCPU, FILTER_BASE };

/* Decided once, by the base filter, before any thread runs guest code: afterwards a thread
 * that guest input took over could change the environment or this variable, but not the
 * base filter, which every later filter only narrows. */
static uint32_t action;

static uint32_t seccomp_action(void)
{
	const char *e = getenv("SANDBOX_SECCOMP");

	if (action)
		return action;
	/* "log": the kernel logs what would have killed (debugging; docs/hardening.md). */
	action = e && strcmp(e, "log") == 0 ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS;
	if (action == SCMP_ACT_LOG)
		log_warn("SANDBOX_SECCOMP=log: the seccomp filters only log (debugging only)");
	return action;
}

void seccomp_decide_action(void)
{
	(void)seccomp_action();
}

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
	/* libseccomp sets no_new_privs before it loads a filter: that prctl alone */
	if ((err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				    SCMP_A0(SCMP_CMP_EQ, PR_SET_NO_NEW_PRIVS))) < 0)
		return err;
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
}

/* ioctl(fd, req) for each req of `reqs`. The request is compared as the 32 bits the kernel
 * reads. */
static int allow_ioctls(scmp_filter_ctx ctx, int fd, const unsigned long *reqs, size_t n)
{
	if (fd < 0)
		return 0;
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

static int build(scmp_filter_ctx ctx, const struct vm *vm, const struct vcpu *vcpu,
		 enum filter_kind kind)
{
	static const unsigned long tap_ioctls[] = {TUNSETOFFLOAD};
	static const unsigned long msr_list[] = {KVM_GET_MSR_INDEX_LIST};
	int err;

	if ((err = allow_calls(ctx, common_calls, ARRAY_SIZE(common_calls))) < 0 ||
	    (err = allow_memory(ctx)) < 0 ||
	    (err = allow_ioctls(ctx, vm->vm_fd, vm_irq_ioctls, ARRAY_SIZE(vm_irq_ioctls))) < 0 ||
	    (err = allow_ioctls(ctx, vm->tap_fd, tap_ioctls, ARRAY_SIZE(tap_ioctls))) < 0)
		return err;
	if (kind == FILTER_VCPU) {
		static const unsigned long run[] = {KVM_RUN};

		if ((err = allow_calls(ctx, vcpu_calls, ARRAY_SIZE(vcpu_calls))) < 0 ||
		    (err = allow_ioctls(ctx, vcpu->fd, run, 1)) < 0)
			return err;
		return allow_ioctls(ctx, vcpu->fd, vcpu_ioctls, ARRAY_SIZE(vcpu_ioctls));
	}
	if (kind == FILTER_BASE) {
		static const unsigned long run[] = {KVM_RUN};

		if ((err = allow_calls(ctx, vcpu_calls, ARRAY_SIZE(vcpu_calls))) < 0 ||
		    (err = allow_threads(ctx)) < 0)
			return err;
		for (unsigned i = 0; i < vm->ncpus; i++)
			if ((err = allow_ioctls(ctx, vm->vcpus[i].fd, run, 1)) < 0)
				return err;
	}
	if ((err = allow_calls(ctx, io_calls, ARRAY_SIZE(io_calls))) < 0 ||
	    (err = allow_opens(ctx)) < 0 ||
	    (err = allow_ioctls(ctx, vm->vm_fd, vm_io_ioctls, ARRAY_SIZE(vm_io_ioctls))) < 0 ||
	    (err = allow_ioctls(ctx, vm->kvm_fd, msr_list, 1)) < 0)
		return err;
	/* The guest's connections to host sockets: unix stream sockets only. */
	if ((err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				    SCMP_A0(SCMP_CMP_EQ, AF_UNIX))) < 0)
		return err;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if ((err = allow_ioctls(ctx, vm->vcpus[i].fd, vcpu_ioctls,
					ARRAY_SIZE(vcpu_ioctls))) < 0)
			return err;
	return 0;
}

static int install(const struct vm *vm, const struct vcpu *vcpu, enum filter_kind kind)
{
	scmp_filter_ctx ctx = seccomp_init(seccomp_action());
	int err;

	if (!ctx)
		return -ENOMEM;
	/* Both the no_new_privs the jail set and a filter of this thread only; the base goes
	 * onto every thread at once (TSYNC): the vCPU threads exist already, waiting. */
	err = build(ctx, vm, vcpu, kind);
	if (!err && kind == FILTER_BASE)
		err = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (!err)
		err = seccomp_load(ctx);
	seccomp_release(ctx);
	return err;
}

int seccomp_prepare_vcpu(const struct vm *vm, const struct vcpu *vcpu, struct sock_fprog *out)
{
	scmp_filter_ctx ctx = seccomp_init(seccomp_action());
	int fd = -1, err;
	struct stat st;

	memset(out, 0, sizeof(*out));
	if (!ctx)
		return -ENOMEM;
	err = build(ctx, vm, vcpu, FILTER_VCPU);
	/* libseccomp (2.5) exports only to an fd. */
	if (!err && (fd = memfd_create("vcpu-filter", MFD_CLOEXEC)) < 0)
		err = -errno;
	if (!err)
		err = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	if (!err && fstat(fd, &st) < 0)
		err = -errno;
	if (!err && (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
		     st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS))
		err = -E2BIG;
	if (!err && !(out->filter = malloc((size_t)st.st_size)))
		err = -ENOMEM;
	if (!err && pread(fd, out->filter, (size_t)st.st_size, 0) != st.st_size)
		err = -EIO;
	if (fd >= 0)
		close(fd);
	if (err) {
		free(out->filter);
		out->filter = NULL;
		return err;
	}
	out->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
	return 0;
}

int seccomp_load_prepared(struct sock_fprog *prog)
{
	int err = 0;

	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
		err = -errno;
	free(prog->filter);
	prog->filter = NULL;
	return err;
}

int uring_restrict(struct io_uring *ring)
{
	/* The operations virtio-blk submits (readv, writev; a cancel of what is queued at exit)
	 * and the one flag it sets; no io_uring_register call once enabled. */
	struct io_uring_restriction r[] = {
		{.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_READV},
		{.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_WRITEV},
		{.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_ASYNC_CANCEL},
		{.opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED, .sqe_flags = IOSQE_ASYNC},
	};
	if (!(ring->flags & IORING_SETUP_R_DISABLED))
		return 0; /* a kernel without restrictions: made enabled */
	/* The raw calls: Debian's liburing.so (2.3) does not export its wrappers for them. */
	if (syscall(SYS_io_uring_register, ring->ring_fd, IORING_REGISTER_RESTRICTIONS, r,
		    ARRAY_SIZE(r)) < 0 ||
	    syscall(SYS_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) <
		    0)
		return -errno;
	return 0;
}

int seccomp_install_io(const struct vm *vm)
{
	return install(vm, NULL, FILTER_IO);
}

int seccomp_install_vcpu(const struct vm *vm, const struct vcpu *vcpu)
{
	struct sock_fprog prog;
	int err = seccomp_prepare_vcpu(vm, vcpu, &prog);

	/* The path vcpu_thread takes, in one call (seccomp-kill tests it so). */
	return err ? err : seccomp_load_prepared(&prog);
}

int seccomp_install_base(const struct vm *vm)
{
	return install(vm, NULL, FILTER_BASE);
}
