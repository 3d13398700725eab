/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading the VMM's seccomp filters (docs/hardening.md), one per thread kind. Their rules are
 * vmm/filters/rules.c, compiled to BPF when the VMM is built (vmm/filters/gen.c, into
 * seccomp_bpf.h): here a filter is copied, a vCPU's own fd written into its own, and handed to
 * the kernel. The fds the filters name are at fixed numbers (JAIL_FD_*); a filter is refused
 * unless the VM's fds are there.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "filters/filters.h"
#include "seccomp_bpf.h"
#include "vmm.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Decided once, before the base filter, before any thread runs guest code: afterwards a thread
 * that guest input took over could change the environment or this variable, but not the base
 * filter, which every later filter only narrows. */
static uint32_t action;

static uint32_t seccomp_action(void)
{
	const char *e = getenv("SANDBOX_SECCOMP");

	if (action)
		return action;
	/* "log": the kernel logs what would have killed (debugging; docs/hardening.md). */
	action = e && strcmp(e, "log") == 0 ? SECCOMP_RET_LOG : SECCOMP_RET_KILL_PROCESS;
	if (action == SECCOMP_RET_LOG)
		log_warn("SANDBOX_SECCOMP=log: the seccomp filters only log (debugging only)");
	return action;
}

void seccomp_decide_action(void)
{
	(void)seccomp_action();
}

/* Whether the VM's fds are where the filters name them. */
static bool fds_placed(const struct vm *vm)
{
	if (vm->kvm_fd != JAIL_FD_KVM || vm->vm_fd != JAIL_FD_VM ||
	    (vm->tap_fd >= 0 && vm->tap_fd != JAIL_FD_TAP) || vm->ncpus > VCPU_MAX)
		return false;
	for (unsigned i = 0; i < vm->ncpus; i++)
		if (vm->vcpus[i].fd != (int)(JAIL_FD_VCPU0 + i))
			return false;
	return true;
}

/*
 * What the filters' fixed numbers rest on, checked before the first filter: RLIMIT_NOFILE
 * (soft and hard) keeps every fd opened from now on below JAIL_FD_KVM, and the only fds at
 * JAIL_FD_KVM and above are the VM's own. 0 or -EBADFD.
 */
static int fds_sealed(const struct vm *vm)
{
	/* Once checked, it holds: no filter allows raising the limit (nor getrlimit's
	 * prlimit64, which is why the base after the restore filter does not look again). */
	static bool sealed;
	struct rlimit rl;

	if (sealed)
		return 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur > JAIL_FD_KVM ||
	    rl.rlim_max > JAIL_FD_KVM)
		return -EBADFD;
	for (int fd = JAIL_FD_KVM; fd < (int)JAIL_FD_END; fd++) {
		bool ours = fd == vm->kvm_fd || fd == vm->vm_fd ||
			    (vm->tap_fd >= 0 && fd == vm->tap_fd) ||
			    (fd >= (int)JAIL_FD_VCPU0 && fd < (int)(JAIL_FD_VCPU0 + vm->ncpus));

		if (!ours && fcntl(fd, F_GETFD) >= 0)
			return -EBADFD;
	}
	sealed = true;
	return 0;
}

/*
 * Load `n` instructions of `insns` on this thread (TSYNC: on every thread), with the vCPU fd
 * `self` written at each of `at`, and the kill returns made log returns under
 * SANDBOX_SECCOMP=log.
 */
static int load(const struct vm *vm, const struct sock_filter *insns, size_t n,
		const unsigned short *at, size_t nat, int self, unsigned flags)
{
	struct sock_filter *copy;
	struct sock_fprog prog;
	uint32_t act = seccomp_action();
	long r;

	if (!fds_placed(vm))
		return -EBADFD;
	if (!(copy = malloc(n * sizeof(*copy))))
		return -ENOMEM;
	memcpy(copy, insns, n * sizeof(*copy));
	for (size_t i = 0; i < nat; i++)
		copy[at[i]].k = (uint32_t)self; /* seccomp-gen checked: each an equality jump */
	if (act != SECCOMP_RET_KILL_PROCESS)
		for (size_t i = 0; i < n; i++)
			if (copy[i].code == (BPF_RET | BPF_K) &&
			    copy[i].k == SECCOMP_RET_KILL_PROCESS)
				copy[i].k = act;
	prog.len = (unsigned short)n;
	prog.filter = copy;
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	free(copy);
	if (r < 0)
		return -errno;
	return r == 0 ? 0 : -EAGAIN; /* TSYNC: the id of a thread that could not take it */
}

/* The first filter of a VMM (or the base over the restore filter): checked against what the
 * fixed numbers rest on, and onto every thread at once (TSYNC): there should be no other,
 * but one must not be left unfiltered. */
static int load_first(const struct vm *vm, const struct sock_filter *insns, size_t n)
{
	int err = fds_sealed(vm);

	return err ? err : load(vm, insns, n, NULL, 0, -1, SECCOMP_FILTER_FLAG_TSYNC);
}

int seccomp_install_base(const struct vm *vm)
{
	return load_first(vm, seccomp_bpf_base, ARRAY_SIZE(seccomp_bpf_base));
}

int seccomp_install_restore(const struct vm *vm)
{
	return load_first(vm, seccomp_bpf_restore, ARRAY_SIZE(seccomp_bpf_restore));
}

int seccomp_install_io(const struct vm *vm)
{
	return load(vm, seccomp_bpf_io, ARRAY_SIZE(seccomp_bpf_io), NULL, 0, -1, 0);
}

int seccomp_install_vcpu(const struct vm *vm, const struct vcpu *vcpu)
{
	if (vcpu->fd < (int)JAIL_FD_VCPU0)
		return -EBADFD;
	return load(vm, seccomp_bpf_vcpu, ARRAY_SIZE(seccomp_bpf_vcpu), seccomp_bpf_vcpu_self,
		    ARRAY_SIZE(seccomp_bpf_vcpu_self), vcpu->fd, 0);
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
