/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp-kill: the VMM's filters (vmm/seccomp.c) kill what a compromised VMM would try.
 * For the base filter and each thread kind's, a child installs it exactly as the VMM does (over
 * stand-in fds for KVM, the VM, two vCPUs and the tap, placed at the numbers the filters name,
 * as vm_place_fds places the real ones) and then tries one thing; it must die of SIGSYS.
 * Controls: a call the filter allows returns (with its own error), so a filter that kills
 * everything fails the test too.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm.h"

static struct vm vm;
static int other_fd;

enum kind { BASE, RESTORE, IO, VCPU };

static const char *const kind_name[] = {"base", "restore", "I/O", "vCPU"};

/* What a compromised VMM would do; each returns only if it was allowed. */
static void try_execve(void)
{
	char *argv[] = {"/bin/true", NULL};

	execve(argv[0], argv, NULL);
}

static void try_open(void)
{
	(void)open("/etc/passwd", O_RDONLY);
}

static void try_open_write(void)
{
	(void)open("/etc/passwd", O_WRONLY | O_APPEND);
}

static void try_socket(void)
{
	(void)socket(AF_INET, SOCK_STREAM, 0);
}

static void try_ptrace(void)
{
	(void)ptrace(PTRACE_TRACEME, 0, NULL, NULL);
}

static void try_kvm_other_fd(void)
{
	(void)ioctl(other_fd, KVM_RUN, 0);
}

/* The same fd with bits above the 32 the kernel takes of it: a filter that compared all 64
 * would see a number it allows. */
static void try_kvm_other_fd_high_bits(void)
{
	(void)syscall(SYS_ioctl, (1ul << 32) | (unsigned long)other_fd, KVM_RUN, 0);
}

/* A vCPU thread's filter allows its own vCPU only (the I/O thread's reads any vCPU's state). */
static void try_kvm_other_vcpu(void)
{
	struct kvm_regs regs;

	(void)ioctl(vm.vcpus[1].fd, KVM_GET_REGS, &regs);
}

/* A vCPU's fd with bits above the 32 the kernel takes: allowed only if they are ignored. */
static void try_kvm_vcpu_high_bits(void)
{
	(void)syscall(SYS_ioctl, (1ul << 32) | (unsigned long)vm.vcpus[1].fd, KVM_GET_REGS, 0);
}

/* What the fixed numbers rest on: the limit cannot be raised, and no fd made at or above it. */
static void try_raise_nofile(void)
{
	struct rlimit rl = {.rlim_cur = JAIL_FD_END, .rlim_max = JAIL_FD_END};

	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

static void try_dup_above_limit(void)
{
	if (fcntl(other_fd, F_DUPFD, JAIL_FD_KVM) >= 0 ||
	    fcntl(other_fd, F_DUPFD_CLOEXEC, JAIL_FD_VCPU0 + 1) >= 0)
		_exit(3); /* a new fd among the filters' numbers */
}

static void try_kvm_create_vm(void)
{
	(void)ioctl(vm.kvm_fd, KVM_CREATE_VM, 0);
}

static void try_fork(void)
{
	(void)fork();
}

static void try_exec_mapping(void)
{
	(void)mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
}

/* Allowed: an interrupt ioctl on the VM's fd (an eventfd here: ENOTTY, not death). */
static void control_allowed(void)
{
	struct kvm_irq_level irq = {.irq = 4, .level = 1};

	if (ioctl(vm.vm_fd, KVM_IRQ_LINE, &irq) == 0 || errno != ENOTTY)
		_exit(3);
	_exit(0);
}

/* Run `fn` in a child under `kind`'s filter. Returns its wait status. */
static int run(enum kind kind, void (*fn)(void))
{
	pid_t pid = fork();
	int status, err;

	if (pid == 0) {
		/* As the jail leaves it: no fd can be made at the filters' numbers. */
		struct rlimit rl = {.rlim_cur = JAIL_NOFILE, .rlim_max = JAIL_NOFILE};

		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			perror("setrlimit");
			_exit(2);
		}
		err = kind == BASE	? seccomp_install_base(&vm)
		      : kind == RESTORE ? seccomp_install_restore(&vm)
		      : kind == IO	? seccomp_install_io(&vm)
					: seccomp_install_vcpu(&vm, &vm.vcpus[0]);
		if (err < 0) {
			fprintf(stderr, "cannot install the %s filter: %s\n", kind_name[kind],
				strerror(-err));
			_exit(2);
		}
		fn();
		_exit(0); /* allowed: the filter did not stop it */
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		perror("fork/waitpid");
		exit(1);
	}
	return status;
}

int main(void)
{
	static const struct {
		const char *what;
		void (*fn)(void);
		bool vcpu_only; /* killed under the vCPU filter, allowed under the others */
		bool allowed;	/* never killed: it must return (and fail, if it says so) */
	} cases[] = {
		{"execve", try_execve, false, false},
		{"open of a host file", try_open, false, false},
		{"open of a host file for writing", try_open_write, false, false},
		{"an AF_INET socket", try_socket, false, false},
		{"ptrace", try_ptrace, false, false},
		{"KVM_RUN on another fd", try_kvm_other_fd, false, false},
		{"KVM_RUN on another fd with its high 32 bits set", try_kvm_other_fd_high_bits,
		 false, false},
		{"KVM_GET_REGS on another vCPU's fd", try_kvm_other_vcpu, true, false},
		{"KVM_GET_REGS on a vCPU's fd with its high 32 bits set", try_kvm_vcpu_high_bits,
		 false, false},
		{"KVM_CREATE_VM on /dev/kvm's fd", try_kvm_create_vm, false, false},
		{"raising RLIMIT_NOFILE", try_raise_nofile, false, false},
		{"an fd made at the filters' numbers (must fail, not die)", try_dup_above_limit,
		 false, true},
		{"fork", try_fork, false, false},
		{"an executable mapping", try_exec_mapping, false, false},
	};
	unsigned failed = 0, n = 0, killed_n = 0;
	int err;

	/* Stand-ins: the filters compare fd numbers, not what is behind them. */
	vm.kvm_fd = eventfd(0, EFD_CLOEXEC);
	vm.vm_fd = eventfd(0, EFD_CLOEXEC);
	vm.tap_fd = eventfd(0, EFD_CLOEXEC);
	vm.ncpus = 2;
	vm.vcpus[0].fd = eventfd(0, EFD_CLOEXEC);
	vm.vcpus[1].fd = eventfd(0, EFD_CLOEXEC);
	other_fd = eventfd(0, EFD_CLOEXEC);
	if (vm.kvm_fd < 0 || vm.vm_fd < 0 || vm.tap_fd < 0 || vm.vcpus[0].fd < 0 ||
	    vm.vcpus[1].fd < 0 || other_fd < 0) {
		perror("eventfd");
		return 1;
	}
	if ((err = vm_place_fds(&vm)) < 0 || (err = jail_place_fd(&vm.tap_fd, JAIL_FD_TAP)) < 0) {
		fprintf(stderr, "cannot place the stand-in fds: %s\n", strerror(-err));
		return 1;
	}
	/* Unplaced fds are refused, not filtered wrongly. */
	{
		struct vm unplaced = vm;

		unplaced.vcpus[1].fd = other_fd;
		if (seccomp_install_io(&unplaced) != -EBADFD) {
			printf("FAIL: a filter was installed over an fd not where it names it\n");
			failed++;
		}
	}
	for (enum kind k = BASE; k <= VCPU; k++) {
		int st = run(k, control_allowed);

		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("FAIL: %s filter: an allowed ioctl did not return (status 0x%x)\n",
			       kind_name[k], st);
			failed++;
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++, n++) {
			bool killed, want = !cases[i].allowed && (k == VCPU || !cases[i].vcpu_only);

			st = run(k, cases[i].fn);
			killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS;
			killed_n += killed;
			if (killed == want && (killed || (WIFEXITED(st) && !WEXITSTATUS(st))))
				continue;
			printf("FAIL: %s filter: %s was %s (status 0x%x)\n", kind_name[k],
			       cases[i].what, want ? "not killed" : "killed", st);
			failed++;
		}
	}
	if (failed)
		return 1;
	printf("ok: %u attempts under the base, restore, I/O and vCPU filters, %u killed by "
	       "SIGSYS; "
	       "allowed calls return\n",
	       n, killed_n);
	return 0;
}
