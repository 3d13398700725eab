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
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"
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

int jail_place_fd(int *fd, int target)
{
	struct rlimit rl;
	int placed;

	if (target < JAIL_FD_KVM || target >= (int)JAIL_FD_END)
		return -EINVAL;
	if (*fd == target)
		return 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -errno;
	if (rl.rlim_cur < JAIL_FD_END || rl.rlim_max < JAIL_FD_END) {
		if (rl.rlim_max < JAIL_FD_END)
			rl.rlim_max = JAIL_FD_END;
		if (rl.rlim_cur < JAIL_FD_END)
			rl.rlim_cur = JAIL_FD_END;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			return -errno;
	}
	/* dup3 would close whatever is there: nothing must be. */
	if (fcntl(target, F_GETFD) >= 0)
		return -EBUSY;
	if ((placed = dup3(*fd, target, O_CLOEXEC)) < 0)
		return -errno;
	close(*fd);
	*fd = placed;
	return 0;
}

int jail_pid_namespace(const struct jail_config *j)
{
	const char *step = NULL;

	return confine_pid_namespace(j->uid, j->gid, VM_EXIT_VMM_ERROR, "sandbox-vmm", &step);
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

		if (strncmp(f, "netns=", 6) == 0) {
			if (j->netns || f[6] != '/')
				return -EINVAL;
			j->netns = f + 6;
			continue;
		}

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

/*
 * Join the network namespace at `path` instead of making one: sandboxctl keeps one, empty, for
 * every jailed VMM (making a namespace costs a start 0.4-0.7 ms here, and the kernel's
 * teardown of each more after its exit). The VMM needs none: seccomp allows it AF_UNIX
 * sockets only, and what a namespace still separates for those, the abstract socket names,
 * no VMM binds or connects to. Refused when it is not a network namespace or is this
 * process's own (the host's).
 */
static int join_netns(const char *path, char *msg, size_t len)
{
	struct stat want, own;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return fail(msg, len, errno, path);
	if (fstat(fd, &want) < 0 || stat("/proc/self/ns/net", &own) < 0)
		err = fail(msg, len, errno, path);
	else if (want.st_dev == own.st_dev && want.st_ino == own.st_ino) {
		snprintf(msg, len, "%s: the host's own network namespace, not a jail's", path);
		err = -EINVAL;
	} else if (setns(fd, CLONE_NEWNET) < 0) {
		snprintf(msg, len, "%s: cannot join it as a network namespace: %s", path,
			 strerror(errno));
		err = -errno;
	}
	close(fd);
	return err;
}

int jail_enter(const struct jail_config *j, char *msg, size_t len)
{
	const char *step = NULL;
	int err;

	if ((err = jail_check_root(j->root, msg, len)) < 0)
		return err;
	if (j->uid == 0 || j->gid == 0) {
		snprintf(msg, len, "the jail's uid and gid must not be 0");
		return -EINVAL;
	}
	if (j->netns && (err = join_netns(j->netns, msg, len)) < 0)
		return err;
	if ((err = confine_root(j->root,
				CLONE_NEWIPC | CLONE_NEWUTS | (j->netns ? 0 : CLONE_NEWNET),
				"sandbox-vmm", &step)) < 0)
		return fail(msg, len, -err, step);
	log_debug("jail: namespaces made, root pivoted");
	if ((err = confine_limits(j->nofile, j->fsize, j->nproc, &step)) < 0 ||
	    (err = confine_drop_identity(j->uid, j->gid, &step)) < 0)
		return fail(msg, len, -err, step);
	snprintf(jail_root, sizeof(jail_root), "%s", j->root);
	return 0;
}
