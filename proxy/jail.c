/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's jail (docs/hardening.md "The proxy's jail"). `sandbox-proxy run --jail
 * uid=N,gid=N` first opens everything it needs while it is root: the policy, credentials
 * and CA from DIR, its run-time files in DIR/proxy (its own directory: audit.log, dns.map,
 * egress.left), its three listeners in the sandbox's network namespace. Then, before any
 * thread exists, jail_enter moves it into a pid namespace of its own (the launcher's clone,
 * or a fork here), new mount, ipc and uts namespaces (not the network's: its upstream
 * connections are the host's), pivots its root into DIR/proxy (bound nosuid, nodev, noexec;
 * nothing else is mounted), sets its rlimits, drops to N with no capabilities and
 * no_new_privs, and installs its seccomp filter (proxy/seccomp.c).
 *
 * N is the sandbox's own proxy uid (SANDBOX_UID_BASE + 0x10000 + the id's 16 bits), never
 * the VMM's: a compromised VMM cannot write the proxy's files, nor the proxy the VMM's.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
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

#include "proxy.h"

int jail_parse(const char *arg, struct proxy_jail *j)
{
	unsigned long uid, gid;
	char tail;

	memset(j, 0, sizeof(*j));
	/* No sign, no space: sscanf's %lu would take them. */
	if (strspn(arg, "uidg=,0123456789") != strlen(arg) ||
	    sscanf(arg, "uid=%lu,gid=%lu%c", &uid, &gid, &tail) != 2 || uid == 0 || gid == 0 ||
	    uid >= UINT32_MAX || gid >= UINT32_MAX)
		return -EINVAL;
	j->on = true;
	j->uid = (uid_t)uid;
	j->gid = (gid_t)gid;
	return 0;
}

int jail_close_inherited(int keep_fd)
{
	unsigned keep = keep_fd >= 3 ? (unsigned)keep_fd : 0;

	if (keep > 3 && close_range(3, keep - 1, 0) < 0)
		return -errno;
	if (close_range(keep ? keep + 1 : 3, ~0u, 0) < 0)
		return -errno;
	return 0;
}

/* What the proxy writes in DIR/proxy. */
static const char *const jail_files[] = {"audit.log", "audit.log.1", "dns.map", "egress.left"};

int jail_state_dir(const char *dir, struct proxy_jail *j, char *err, size_t errlen)
{
	char path[4200], *real;
	struct stat st;
	int fd, e = 0;

	real = realpath(dir, NULL);
	if (!real)
		return policy_errf(err, errlen, "%s: %s", dir, strerror(errno));
	e = snprintf(path, sizeof(path), "%s/proxy", real) >= (int)sizeof(path) ||
	    strlen(path) >= sizeof(j->root);
	free(real);
	if (e)
		return policy_errf(err, errlen, "%s: path too long", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return policy_errf(err, errlen, "%s: %s", path, strerror(errno));
	/* The sandbox's directory is writable by the VMM's group: a directory it made there
	 * (or a link) is refused, not used. */
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return policy_errf(err, errlen, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		e = policy_errf(err, errlen, "%s: %s", path, strerror(errno));
	else if (j->on && st.st_uid != 0 && st.st_uid != j->uid)
		e = policy_errf(err, errlen, "%s: owned by uid %u, not root's or the proxy's", path,
				(unsigned)st.st_uid);
	else if (fchown(fd, j->uid, j->gid) < 0 || fchmod(fd, 0700) < 0 || fchdir(fd) < 0)
		e = policy_errf(err, errlen, "%s: %s", path, strerror(errno));
	close(fd);
	/* Its files, written by an earlier proxy as its uid, are opened as root: never through
	 * a link. */
	for (size_t i = 0; !e && i < sizeof(jail_files) / sizeof(jail_files[0]); i++)
		if (lstat(jail_files[i], &st) == 0 && !S_ISREG(st.st_mode))
			e = policy_errf(err, errlen, "%s/%s: not a regular file", path,
					jail_files[i]);
	if (!e)
		snprintf(j->root, sizeof(j->root), "%s", path);
	return e;
}

/* Remove every capability from the bounding and ambient sets; the others empty themselves
 * when the uid changes from 0 (no SECBIT_KEEP_CAPS). */
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

static int drop_identity(const struct proxy_jail *j)
{
	if (drop_bounding_caps() < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(j->gid, j->gid, j->gid) < 0 || setresuid(j->uid, j->uid, j->uid) < 0)
		return -errno ? -errno : -EPERM;
	if (!caps_empty())
		return -EPERM;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* The parent left outside the pid namespace when the launcher did not make one: it forwards
 * SIGTERM and SIGINT and exits as the proxy did, as the proxy's uid with no capabilities and
 * a filter of the five calls it makes. */
static int jail_reaper(pid_t child, const struct proxy_jail *j)
{
	scmp_filter_ctx ctx;
	sigset_t set;
	int status = 0, sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (drop_identity(j) < 0)
		proxy_log("--jail: the waiting parent keeps its privileges");
	ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(wait4), 0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigtimedwait), 0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
			     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)child)) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(exit_group), 0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(restart_syscall), 0) < 0 ||
	    seccomp_load(ctx) < 0)
		proxy_log("--jail: the waiting parent has no seccomp filter");
	if (ctx)
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

/* PID 1 of a pid namespace of its own: sandboxctl clones the proxy so; started otherwise, it
 * forks into one here and the parent waits. */
static int jail_pid_namespace(const struct proxy_jail *j, char *err, size_t errlen)
{
	pid_t child;

	if (getpid() == 1)
		return 0;
	if (unshare(CLONE_NEWPID) < 0)
		return policy_errf(err, errlen, "unshare (pid namespace): %s", strerror(errno));
	fflush(NULL);
	child = fork();
	if (child < 0)
		return policy_errf(err, errlen, "fork into the pid namespace: %s", strerror(errno));
	if (child == 0)
		return 0;
	_exit(jail_reaper(child, j));
}

static int set_limit(int resource, uint64_t value, const char *name, char *err, size_t errlen)
{
	struct rlimit rl = {.rlim_cur = value, .rlim_max = value};

	if (setrlimit(resource, &rl) < 0)
		return policy_errf(err, errlen, "%s: %s", name, strerror(errno));
	return 0;
}

int jail_enter(const struct proxy_jail *j, char *err, size_t errlen)
{
	int e;

	if ((e = jail_pid_namespace(j, err, errlen)) < 0)
		return e;
	/* The network namespace stays the host's: upstream connections are made there. */
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
		return policy_errf(err, errlen, "unshare (mount, ipc, uts namespaces): %s",
				   strerror(errno));
	/* Nothing done to mounts from here propagates back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return policy_errf(err, errlen, "making the mounts private: %s", strerror(errno));
	if (mount(j->root, j->root, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, j->root, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  NULL) < 0)
		return policy_errf(err, errlen, "binding %s onto itself nosuid,nodev,noexec: %s",
				   j->root, strerror(errno));
	if (chdir(j->root) < 0)
		return policy_errf(err, errlen, "%s: %s", j->root, strerror(errno));
	/* pivot_root(".", "."): the old root ends up on top of the new one, then goes. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return policy_errf(err, errlen, "pivot_root: %s%s", strerror(errno),
				   errno == EINVAL ? " (is / an initramfs? run from a real root)"
						   : "");
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return policy_errf(err, errlen, "unmounting the host's root: %s", strerror(errno));
	if (sethostname("sandbox-proxy", 13) < 0)
		return policy_errf(err, errlen, "sethostname: %s", strerror(errno));

	/* A file past RLIMIT_FSIZE gets EFBIG (a lost audit line), not SIGXFSZ. */
	signal(SIGXFSZ, SIG_IGN);
	if ((e = set_limit(RLIMIT_CORE, 0, "RLIMIT_CORE", err, errlen)) < 0 ||
	    (e = set_limit(RLIMIT_NOFILE, PROXY_JAIL_NOFILE, "RLIMIT_NOFILE", err, errlen)) < 0 ||
	    (e = set_limit(RLIMIT_FSIZE, PROXY_JAIL_FSIZE, "RLIMIT_FSIZE", err, errlen)) < 0 ||
	    (e = set_limit(RLIMIT_NPROC, PROXY_JAIL_NPROC, "RLIMIT_NPROC", err, errlen)) < 0)
		return e;
	if ((e = drop_identity(j)) < 0)
		return policy_errf(err, errlen, "dropping to uid %u gid %u: %s", (unsigned)j->uid,
				   (unsigned)j->gid, strerror(-e));
	if ((e = proxy_seccomp_install()) < 0)
		return policy_errf(err, errlen, "seccomp: %s", strerror(-e));
	return 0;
}
