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
 * `sandbox-proxy forward --jail` (sandboxctl port) takes the same steps, with an empty,
 * read-only root (it needs no file) and in the sandbox's network namespace, which it entered
 * after making its listener in the host's.
 *
 * N is the sandbox's own proxy uid (SANDBOX_UID_BASE + 0x10000 + the id's 16 bits), never
 * the VMM's: a compromised VMM cannot write the proxy's files, nor the proxy the VMM's.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"
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
static const char *const jail_files[] = {"audit.log",	"audit.log.1", "audit.log.2", "audit.log.3",
					 "audit.log.4", "audit.log.5", "audit.log.6", "audit.log.7",
					 "audit.log.8", "dns.map",     "egress.left"};
_Static_assert(AUDIT_GENERATIONS == 8, "jail_files lists audit.log's generations");

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

int jail_enter(const struct proxy_jail *j, char *err, size_t errlen)
{
	const char *step = NULL;
	int e;

	/* PID 1 of a pid namespace of its own: sandboxctl clones the proxy so; started
	 * otherwise, it forks into one and the parent waits. The network namespace stays the
	 * host's: upstream connections are made there. */
	if ((e = confine_pid_namespace(j->uid, j->gid, 1, "sandbox-proxy", &step)) < 0 ||
	    (e = j->root[0] ? confine_root(j->root, CLONE_NEWIPC | CLONE_NEWUTS, "sandbox-proxy",
					   &step)
			    : confine_root_empty(CLONE_NEWIPC | CLONE_NEWUTS, "sandbox-proxy",
						 &step)) < 0 ||
	    (e = confine_limits(PROXY_JAIL_NOFILE, PROXY_JAIL_FSIZE, PROXY_JAIL_NPROC, &step)) < 0)
		return policy_errf(err, errlen, "%s: %s", step, strerror(-e));
	if ((e = confine_drop_identity(j->uid, j->gid, &step)) < 0)
		return policy_errf(err, errlen, "dropping to uid %u gid %u: %s: %s",
				   (unsigned)j->uid, (unsigned)j->gid, step, strerror(-e));
	if ((e = proxy_seccomp_install()) < 0)
		return policy_errf(err, errlen, "seccomp: %s", strerror(-e));
	return 0;
}
