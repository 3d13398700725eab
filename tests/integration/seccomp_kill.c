/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp-kill: the VMM's filters (vmm/seccomp.c) kill what a compromised VMM would try.
 * For the base filter and each thread kind's, a child installs it exactly as the VMM does (over
 * stand-in fds for KVM, the VM, a vCPU and the tap) and then tries one thing; it must die of
 * SIGSYS. Controls: a call the filter allows returns (with its own error), so a filter that kills
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm.h"

static struct vm vm;
static int other_fd;

enum kind { BASE, IO, VCPU };

static const char *const kind_name[] = {"base", "I/O", "vCPU"};

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
		err = kind == IO ? seccomp_install_io(&vm)
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
	} cases[] = {
		{"execve", try_execve},
		{"open of a host file", try_open},
		{"open of a host file for writing", try_open_write},
		{"an AF_INET socket", try_socket},
		{"ptrace", try_ptrace},
		{"KVM_RUN on another fd", try_kvm_other_fd},
		{"KVM_CREATE_VM on /dev/kvm's fd", try_kvm_create_vm},
		{"fork", try_fork},
		{"an executable mapping", try_exec_mapping},
	};
	unsigned failed = 0, n = 0;

	/* Stand-ins: the filters compare fd numbers, not what is behind them. */
	vm.kvm_fd = eventfd(0, EFD_CLOEXEC);
	vm.vm_fd = eventfd(0, EFD_CLOEXEC);
	vm.tap_fd = eventfd(0, EFD_CLOEXEC);
	vm.ncpus = 1;
	vm.vcpus[0].fd = eventfd(0, EFD_CLOEXEC);
	other_fd = eventfd(0, EFD_CLOEXEC);
	if (vm.kvm_fd < 0 || vm.vm_fd < 0 || vm.tap_fd < 0 || vm.vcpus[0].fd < 0 || other_fd < 0) {
		perror("eventfd");
		return 1;
	}
	for (enum kind k = BASE; k <= VCPU; k++) {
		int st = run(k, control_allowed);

		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("FAIL: %s filter: an allowed ioctl did not return (status 0x%x)\n",
			       kind_name[k], st);
			failed++;
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++, n++) {
			st = run(k, cases[i].fn);
			if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
				continue;
			printf("FAIL: %s filter: %s was not killed (status 0x%x)\n", kind_name[k],
			       cases[i].what, st);
			failed++;
		}
	}
	if (failed)
		return 1;
	printf("ok: %u attempts under the base, I/O and vCPU filters each killed by SIGSYS; "
	       "allowed calls return\n",
	       n);
	return 0;
}
