/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host side of --net: attach to a persistent tap somebody else made (sandboxctl, in the
 * sandbox's own network namespace, docs/network.md). The VMM enters that namespace only for
 * the open: a tap fd keeps working from any namespace once attached, and every socket the
 * VMM makes afterwards (the API's, vsock's) stays in its own.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/if_tun.h>

#include "virtio/virtio.h"

#define NET_TUN_PATH "/dev/net/tun"

bool net_parse_mac(const char *s, uint8_t mac[6])
{
	static const char hex[] = "0123456789abcdef";

	if (strlen(s) != 17)
		return false;
	for (unsigned i = 0; i < 6; i++) {
		const char *hi = strchr(hex, tolower((unsigned char)s[3 * i]));
		const char *lo = strchr(hex, tolower((unsigned char)s[3 * i + 1]));

		if (!s[3 * i] || !s[3 * i + 1] || !hi || !lo || (i < 5 && s[3 * i + 2] != ':'))
			return false;
		mac[i] = (uint8_t)((hi - hex) << 4 | (lo - hex));
	}
	/* A multicast (or all-zero) address cannot be a NIC's. */
	return !(mac[0] & 1) && (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]);
}

/* Attach to `name` in the current namespace. 0 and *fd_out, or -errno and `msg`. */
static int net_tap_attach(const char *name, int *fd_out, char *msg, size_t msg_len)
{
	struct ifreq ifr = {0};
	int fd, err;

	if (strlen(name) >= IFNAMSIZ) {
		snprintf(msg, msg_len, "tap name %s: at most %d bytes", name, IFNAMSIZ - 1);
		return -ENAMETOOLONG;
	}
	/* TUNSETIFF would make a new tap of that name: only an existing one will do. */
	if (if_nametoindex(name) == 0) {
		snprintf(msg, msg_len, "no such tap: %s", name);
		return -ENODEV;
	}
	fd = open(NET_TUN_PATH, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		err = -errno;
		snprintf(msg, msg_len, "%s: %s", NET_TUN_PATH, strerror(errno));
		return err;
	}
	strcpy(ifr.ifr_name, name);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		err = -errno;
		if (errno == EBUSY)
			snprintf(msg, msg_len, "tap %s is busy (another process has it open)",
				 name);
		else if (errno == EINVAL)
			snprintf(msg, msg_len, "%s is not a tap (or not a single-queue one)", name);
		else if (errno == EPERM)
			snprintf(msg, msg_len, "tap %s belongs to another user", name);
		else
			snprintf(msg, msg_len, "tap %s: %s", name, strerror(errno));
		close(fd);
		return err;
	}
	/* It went away between the check and TUNSETIFF, and we made a new one: not ours. */
	if (ioctl(fd, TUNGETIFF, &ifr) < 0 || !(ifr.ifr_flags & IFF_PERSIST)) {
		close(fd);
		snprintf(msg, msg_len, "no such tap: %s (not a persistent one)", name);
		return -ENODEV;
	}
	*fd_out = fd;
	return 0;
}

int net_tap_open(const char *name, const char *netns_path, int *fd_out, char *msg, size_t msg_len)
{
	int self = -1, ns = -1, err;

	if (!netns_path)
		return net_tap_attach(name, fd_out, msg, msg_len);
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		err = -errno;
		snprintf(msg, msg_len, "/proc/self/ns/net: %s", strerror(errno));
		return err;
	}
	ns = open(netns_path, O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		err = -errno;
		snprintf(msg, msg_len, "no such network namespace: %s (%s)", netns_path,
			 strerror(errno));
		goto out;
	}
	if (setns(ns, CLONE_NEWNET) < 0) {
		err = -errno;
		snprintf(msg, msg_len, "%s: not a network namespace we can enter (%s)", netns_path,
			 strerror(errno));
		goto out;
	}
	err = net_tap_attach(name, fd_out, msg, msg_len);
	if (err == -ENODEV)
		snprintf(msg + strlen(msg), msg_len - strlen(msg), " in %s", netns_path);
	if (setns(self, CLONE_NEWNET) < 0) {
		/* Staying in the sandbox's namespace would put our later sockets there. */
		int back = -errno;

		if (!err)
			close(*fd_out);
		snprintf(msg, msg_len, "cannot return to our network namespace: %s",
			 strerror(-back));
		err = back;
	}
out:
	if (ns >= 0)
		close(ns);
	close(self);
	return err;
}
