/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail (docs/hardening.md). Once the VMM holds every resource it needs (KVM, the guest's
 * RAM, its disks, the tap, its sockets), jail_enter moves it into new mount, ipc, uts and
 * network namespaces (its launcher made the pid namespace: a process cannot enter one
 * itself), pivots its root into the sandbox's directory (bound onto itself nosuid, nodev,
 * noexec; nothing else is mounted, not even /proc or /dev), sets its rlimits, drops to the
 * sandbox's uid and gid with no supplementary groups and no capabilities (bounding and ambient
 * sets cleared too), and sets no_new_privs. What it does afterwards with paths (a snapshot's
 * directory, a new disk layer, a guest's connection to a host socket) is inside that
 * directory, so every host path it is given is translated by jail_path.
 *
 * It must run while the VMM has one thread: unshare(CLONE_NEWNS) needs an unshared fs_struct.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include "vmm.h"

static char jail_root[4096]; /* "" when not jailed */

static int fail(char *msg, size_t len, int err, const char *what)
{
	snprintf(msg, len, "%s: %s", what, strerror(err));
	return -err;
}

const char *jail_path_in(const char *root, const char *path)
{
	size_t n = strlen(root);

	if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != '\0'))
		return NULL;
	return path[n] ? path + n : "/";
}

const char *jail_path(const char *path)
{
	return jail_root[0] ? jail_path_in(jail_root, path) : path;
}

bool jail_active(void)
{
	return jail_root[0] != '\0';
}

const char *jail_dir(void)
{
	return jail_root;
}

int jail_check_root(const char *dir, char *msg, size_t len)
{
	char *real = realpath(dir, NULL);
	struct stat st;
	int err = 0;

	if (!real)
		return fail(msg, len, errno, dir);
	if (strcmp(real, dir) != 0 || strcmp(real, "/") == 0) {
		snprintf(msg, len,
			 "%s: give the directory as an absolute path without links "
			 "(%s), not /",
			 dir, real);
		err = -EINVAL;
	} else if (strlen(real) >= sizeof(jail_root)) {
		snprintf(msg, len, "%s: path too long", dir);
		err = -ENAMETOOLONG;
	} else if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(msg, len, "%s: not a directory", dir);
		err = -ENOTDIR;
	}
	free(real);
	return err;
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

/* True when no capability is left in any set. */
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

/* The parent left outside: it forwards the signals that stop a VMM and exits as the VMM
 * did. It runs as the jail's uid with no capabilities and a filter of the few calls it
 * makes, so a jailed VMM gains nothing by controlling it. */
static int reaper(pid_t child, const struct jail_config *j)
{
	sigset_t set;
	scmp_filter_ctx ctx;
	int status, sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (drop_bounding_caps() < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(j->gid, j->gid, j->gid) < 0 || setresuid(j->uid, j->uid, j->uid) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		log_error("--jail: the waiting parent cannot drop its privileges: %m");
		kill(child, SIGKILL);
		_exit(VM_EXIT_VMM_ERROR);
	}
	ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(wait4), 0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigtimedwait), 0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
			     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)child)) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(exit_group), 0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(restart_syscall), 0) < 0 ||
	    seccomp_load(ctx) < 0) {
		log_error("--jail: the waiting parent cannot install its seccomp filter");
		kill(child, SIGKILL);
		_exit(VM_EXIT_VMM_ERROR);
	}
	seccomp_release(ctx);
	for (;;) {
		sig = sigwaitinfo(&set, NULL);
		if (sig > 0 && sig != SIGCHLD)
			kill(child, sig);
		if (waitpid(child, &status, WNOHANG) == child)
			break;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

int jail_pid_namespace(const struct jail_config *j)
{
	pid_t child;

	if (getpid() == 1)
		return 0; /* the launcher made it (sandboxctl does) */
	if (unshare(CLONE_NEWPID) < 0)
		return -errno;
	fflush(NULL);
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0)
		return 0;
	_exit(reaper(child, j));
}

int jail_parse(char *arg, struct jail_config *j)
{
	char *save = NULL, *end;
	unsigned long v;
	bool uid = false, gid = false;

	memset(j, 0, sizeof(*j));
	j->root = strtok_r(arg, ",", &save);
	if (!j->root || j->root[0] != '/')
		return -EINVAL;
	for (char *f = strtok_r(NULL, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
		bool is_uid = strncmp(f, "uid=", 4) == 0, is_gid = strncmp(f, "gid=", 4) == 0;

		if ((!is_uid && !is_gid) || (is_uid && uid) || (is_gid && gid) || !f[4] ||
		    f[4] == '-')
			return -EINVAL;
		errno = 0;
		v = strtoul(f + 4, &end, 10);
		if (errno || *end || v == 0 || v >= (unsigned long)UINT32_MAX)
			return -EINVAL;
		if (is_uid) {
			j->uid = (uid_t)v;
			uid = true;
		} else {
			j->gid = (gid_t)v;
			gid = true;
		}
	}
	return uid && gid ? 0 : -EINVAL;
}

static int set_limit(int resource, uint64_t value, const char *name, char *msg, size_t len)
{
	struct rlimit rl = {.rlim_cur = value, .rlim_max = value};

	if (setrlimit(resource, &rl) < 0)
		return fail(msg, len, errno, name);
	return 0;
}

int jail_enter(const struct jail_config *j, char *msg, size_t len)
{
	int err;

	if ((err = jail_check_root(j->root, msg, len)) < 0)
		return err;
	if (j->uid == 0 || j->gid == 0) {
		snprintf(msg, len, "the jail's uid and gid must not be 0");
		return -EINVAL;
	}
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET) < 0)
		return fail(msg, len, errno, "unshare (mount, ipc, uts, net namespaces)");
	log_debug("jail: namespaces made");
	/* Nothing done to mounts from here propagates back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail(msg, len, errno, "making the mounts private");
	if (mount(j->root, j->root, NULL, MS_BIND, NULL) < 0)
		return fail(msg, len, errno, "binding the jail onto itself");
	if (mount(NULL, j->root, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) < 0)
		return fail(msg, len, errno, "remounting the jail nosuid,nodev,noexec");
	if (chdir(j->root) < 0)
		return fail(msg, len, errno, j->root);
	/* pivot_root(".", "."): the old root ends up on top of the new one, then goes. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return fail(msg, len, errno,
			    errno == EINVAL ? "pivot_root (is / an initramfs? then run from a "
					      "real root)"
					    : "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return fail(msg, len, errno, "unmounting the host's root");
	if (chdir("/") < 0)
		return fail(msg, len, errno, "chdir /");
	log_debug("jail: root pivoted");
	if (sethostname("sandbox-vmm", 11) < 0)
		return fail(msg, len, errno, "sethostname");

	/* A file past RLIMIT_FSIZE gets EFBIG, said by the code that wrote, not SIGXFSZ. */
	signal(SIGXFSZ, SIG_IGN);
	if ((err = set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE", msg, len)) < 0 ||
	    (err = set_limit(RLIMIT_NOFILE, j->nofile, "RLIMIT_NOFILE", msg, len)) < 0 ||
	    (err = set_limit(RLIMIT_FSIZE, j->fsize, "RLIMIT_FSIZE", msg, len)) < 0 ||
	    (err = set_limit(RLIMIT_NPROC, j->nproc, "RLIMIT_NPROC", msg, len)) < 0)
		return err;

	if ((err = drop_bounding_caps()) < 0)
		return fail(msg, len, -err, "dropping the capability bounding set");
	if (setgroups(0, NULL) < 0)
		return fail(msg, len, errno, "setgroups");
	if (setresgid(j->gid, j->gid, j->gid) < 0)
		return fail(msg, len, errno, "setresgid");
	if (setresuid(j->uid, j->uid, j->uid) < 0)
		return fail(msg, len, errno, "setresuid");
	if (!caps_empty()) {
		snprintf(msg, len, "capabilities left after dropping root");
		return -EPERM;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(msg, len, errno, "no_new_privs");
	/* Not ptraceable nor readable through /proc by another process of its uid. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return fail(msg, len, errno, "PR_SET_DUMPABLE");
	snprintf(jail_root, sizeof(jail_root), "%s", j->root);
	return 0;
}
