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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int sandbox_jail_arg(const struct sandbox *sb, char *out, size_t len)
{
	uid_t id = sandbox_uid(sb->id);

	return path_fmt(out, len, "%s,uid=%u,gid=%u", sb->dir, (unsigned)id, (unsigned)id);
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
