/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The jail each sandbox's VMM runs in (docs/hardening.md), host side: the sandbox's own uid
 * and gid, the modes of its directory (the jail's root), and taking over the files a jailed
 * VMM made (a snapshot's memory and state, a new top layer) before anything trusts them.
 *
 * The directory is root's, group the sandbox's gid, mode 1770: the VMM may add files (a
 * snapshot, a new layer) but, sticky, never rename or remove root's (the config, the layers
 * sandboxctl made, the proxy's policy, credentials and CA). The proxy runs as a uid of its
 * own (sandbox_proxy_uid) in DIR/proxy, which the VMM cannot enter.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "client.h"

bool jail_enabled(void)
{
	const char *e = getenv("SANDBOX_JAIL");

	return !e || strcmp(e, "off") != 0;
}

uid_t sandbox_uid(const char *id)
{
	char four[5] = {0};

	memcpy(four, id, 4);
	return (uid_t)(SANDBOX_UID_BASE + strtoul(four, NULL, 16));
}

uid_t sandbox_proxy_uid(const char *id)
{
	return sandbox_uid(id) + SANDBOX_PROXY_UID_OFFSET;
}

int sandbox_jail_prepare(const struct sandbox *sb)
{
	uid_t id = sandbox_uid(sb->id);

	if (chown(sb->dir, 0, id) < 0 || chmod(sb->dir, 01770) < 0)
		return -errno;
	return 0;
}

/* Is `path` a network namespace bound there (an nsfs file)? */
static bool is_netns(const char *path)
{
	struct statfs fs;

	return statfs(path, &fs) == 0 && fs.f_type == NSFS_MAGIC;
}

/*
 * The empty network namespace every jailed VMM joins instead of making its own
 * (JAIL_NETNS_PATH; docs/hardening.md, "What the jail costs"): made on first use like
 * `ip netns add`, a namespace with nothing in it (its loopback down) bound onto a file. Two
 * sandboxctl making it at once are kept apart by a lock on that file. 0 or -errno.
 */
static int jail_netns_ready(void)
{
	int fd, err = 0;

	if (is_netns(JAIL_NETNS_PATH))
		return 0;
	if ((err = net_ns_dir()) < 0)
		return err;
	fd = open(JAIL_NETNS_PATH, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (!is_netns(JAIL_NETNS_PATH)) {
		char msg[300];

		err = net_ns_make(JAIL_NETNS_PATH, NULL, msg, sizeof(msg));
		if (!err && !is_netns(JAIL_NETNS_PATH))
			err = -EIO;
	}
	close(fd); /* drops the lock */
	return err;
}

int sandbox_jail_arg(const struct sandbox *sb, char *out, size_t len)
{
	uid_t id = sandbox_uid(sb->id);

	/* Without the shared namespace the VMM makes one of its own: as safe, only slower. */
	if (jail_netns_ready() < 0)
		return path_fmt(out, len, "%s,uid=%u,gid=%u", sb->dir, (unsigned)id, (unsigned)id);
	return path_fmt(out, len, "%s,uid=%u,gid=%u,netns=%s", sb->dir, (unsigned)id, (unsigned)id,
			JAIL_NETNS_PATH);
}

int sandbox_jail_socket(const struct sandbox *sb, const char *path)
{
	if (chown(path, 0, sandbox_uid(sb->id)) < 0 || chmod(path, 0660) < 0)
		return -errno;
	return 0;
}

int sandbox_jail_adopt(const struct sandbox *sb, const char *path)
{
	struct stat st;
	int fd, err = 0;

	/* Made by the VMM, so possibly by a compromised one: a regular file of its own, not a
	 * link to anything, or it is refused. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		err = -errno;
	else if (!S_ISREG(st.st_mode) || st.st_nlink != 1 ||
		 (st.st_uid != sandbox_uid(sb->id) && st.st_uid != 0))
		err = -EPERM;
	else if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0600) < 0)
		err = -errno;
	close(fd);
	return err;
}
