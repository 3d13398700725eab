/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The confinement steps of sandbox-vmm and sandbox-proxy (confine.h). One copy, so a fix to
 * how either program drops root reaches both.
 */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include "confine.h"

static int fail(const char **step, const char *what, int err)
{
	*step = what;
	return -(err ? err : EPERM);
}

/* Remove every capability from the bounding and ambient sets; the permitted, effective and
 * inheritable sets empty themselves when the uid changes from 0 (no SECBIT_KEEP_CAPS). */
static int drop_bounding_caps(void)
{
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the last capability this kernel has */
			return -errno;
		}
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return -errno;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}

/* True when no capability is left in the effective, permitted or inheritable set. */
static bool caps_empty(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return false;
	return true;
}

int confine_drop_identity(uid_t uid, gid_t gid, const char **step)
{
	int r;

	if ((r = drop_bounding_caps()) < 0)
		return fail(step, "dropping the capability bounding set", -r);
	if (setgroups(0, NULL) < 0)
		return fail(step, "setgroups", errno);
	if (setresgid(gid, gid, gid) < 0)
		return fail(step, "setresgid", errno);
	if (setresuid(uid, uid, uid) < 0)
		return fail(step, "setresuid", errno);
	if (!caps_empty())
		return fail(step, "capabilities left after dropping root", EPERM);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(step, "no_new_privs", errno);
	/* Not ptraceable nor readable through /proc by another process of its uid. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return fail(step, "PR_SET_DUMPABLE", errno);
	return 0;
}

/* The reaper's filter: waiting, forwarding signals to `child` only, and exiting. */
static int reaper_filter(pid_t child)
{
	static const int calls[] = {SCMP_SYS(wait4), SCMP_SYS(rt_sigtimedwait),
				    SCMP_SYS(exit_group), SCMP_SYS(restart_syscall)};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	int r = 0;

	if (!ctx)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]) && !r; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, calls[i], 0);
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
				     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)child));
	if (!r)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r;
}

static __attribute__((noreturn)) void reaper(pid_t child, uid_t uid, gid_t gid, int fail_status,
					     const char *prog)
{
	const char *step = NULL;
	sigset_t set;
	int status = 0, sig, r;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((r = confine_drop_identity(uid, gid, &step)) < 0 || (r = reaper_filter(child)) < 0) {
		fprintf(stderr,
			"%s: error: the jail's waiting parent cannot confine itself (%s: %s)\n",
			prog, step ? step : "its seccomp filter", strerror(-r));
		kill(child, SIGKILL);
		_exit(fail_status);
	}
	for (;;) {
		sig = sigwaitinfo(&set, NULL);
		if (sig > 0 && sig != SIGCHLD)
			kill(child, sig);
		if (waitpid(child, &status, WNOHANG) == child)
			break;
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

int confine_pid_namespace(uid_t uid, gid_t gid, int fail_status, const char *prog,
			  const char **step)
{
	pid_t child;

	if (getpid() == 1)
		return 0; /* the launcher made it (sandboxctl does) */
	if (unshare(CLONE_NEWPID) < 0)
		return fail(step, "unshare (pid namespace)", errno);
	fflush(NULL);
	child = fork();
	if (child < 0)
		return fail(step, "fork into the pid namespace", errno);
	if (child == 0)
		return 0;
	reaper(child, uid, gid, fail_status, prog);
}

/* Pivot into the directory that is the cwd: the old root ends up on top of the new one
 * (pivot_root(".", ".")), then goes; then the uts namespace's hostname. */
static int pivot_here(const char *hostname, const char **step)
{
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return fail(step,
			    errno == EINVAL ? "pivot_root (is / an initramfs? then run from a "
					      "real root)"
					    : "pivot_root",
			    errno);
	if (umount2(".", MNT_DETACH) < 0)
		return fail(step, "unmounting the host's root", errno);
	if (chdir("/") < 0)
		return fail(step, "chdir /", errno);
	if (sethostname(hostname, strlen(hostname)) < 0)
		return fail(step, "sethostname", errno);
	return 0;
}

/* New namespaces, with nothing done to mounts from here propagating back to the host. */
static int unshare_private(int flags, const char **step)
{
	if (unshare(CLONE_NEWNS | flags) < 0)
		return fail(step, "unshare (the namespaces)", errno);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(step, "making the mounts private", errno);
	return 0;
}

int confine_root(const char *root, int flags, const char *hostname, const char **step)
{
	int r;

	if ((r = unshare_private(flags, step)) < 0)
		return r;
	if (mount(root, root, NULL, MS_BIND, NULL) < 0)
		return fail(step, "binding the jail onto itself", errno);
	if (mount(NULL, root, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) <
	    0)
		return fail(step, "remounting the jail nosuid,nodev,noexec", errno);
	if (chdir(root) < 0)
		return fail(step, "chdir into the jail", errno);
	return pivot_here(hostname, step);
}

int confine_root_empty(int flags, const char *hostname, const char **step)
{
	const unsigned long ro = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
	int r;

	if ((r = unshare_private(flags, step)) < 0)
		return r;
	/* Over /tmp in this mount namespace only: the host's /tmp is not touched. */
	if (mount("none", "/tmp", "tmpfs", ro, "size=4k,nr_inodes=1,mode=0555") < 0)
		return fail(step, "mounting an empty tmpfs for the jail", errno);
	if (chdir("/tmp") < 0)
		return fail(step, "chdir into the jail", errno);
	return pivot_here(hostname, step);
}

static int set_limit(int resource, uint64_t value, const char *name, const char **step)
{
	struct rlimit rl = {.rlim_cur = value, .rlim_max = value};

	return setrlimit(resource, &rl) < 0 ? fail(step, name, errno) : 0;
}

int confine_limits(uint64_t nofile, uint64_t fsize, uint64_t nproc, const char **step)
{
	int r;

	signal(SIGXFSZ, SIG_IGN);
	if ((r = set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE", step)) < 0 ||
	    (r = set_limit(RLIMIT_NOFILE, nofile, "RLIMIT_NOFILE", step)) < 0 ||
	    (r = set_limit(RLIMIT_FSIZE, fsize, "RLIMIT_FSIZE", step)) < 0 ||
	    (r = set_limit(RLIMIT_NPROC, nproc, "RLIMIT_NPROC", step)) < 0)
		return r;
	return 0;
}
