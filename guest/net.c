/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox-init's network set-up, with the classic ioctls (SIOCSIFADDR, SIOCSIFNETMASK,
 * SIOCSIFFLAGS, SIOCADDRT) on one datagram socket: a handful of calls, no netlink parser in
 * PID 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "net.h"

/* How long eth0 may take to appear (the virtio driver probes before init runs: normally 0). */
#define NET_WAIT_MS 1000

/* Fill a sockaddr_in (as struct sockaddr) with addr, in host byte order. */
static void net_sockaddr(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(addr)};

	memcpy(sa, &sin, sizeof(sin));
}

/* Set IFF_UP on `name`. Returns 0 or -errno. */
static int net_link_up(int fd, const char *name)
{
	struct ifreq ifr = {0};

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	return 0;
}

/* Wait until `name` exists, up to NET_WAIT_MS. Returns 0 or -ENODEV. */
static int net_wait_link(const char *name)
{
	for (int waited = 0; if_nametoindex(name) == 0; waited += 10) {
		struct timespec ts = {0, 10 * 1000 * 1000};

		if (waited >= NET_WAIT_MS)
			return -ENODEV;
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* The address and netmask of NET_IFNAME, then up. Returns 0 or -errno (logged). */
static int net_set_addr(int fd, const struct cmdline_options *opts)
{
	struct ifreq ifr = {0};
	int rc;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", NET_IFNAME);
	net_sockaddr(&ifr.ifr_addr, opts->net_addr);
	if (ioctl(fd, SIOCSIFADDR, &ifr) < 0) {
		rc = -errno;
		log_error("net: %s address: %s", NET_IFNAME, strerror(errno));
		return rc;
	}
	net_sockaddr(&ifr.ifr_netmask, ~0u << (32 - opts->net_prefix));
	if (ioctl(fd, SIOCSIFNETMASK, &ifr) < 0) {
		rc = -errno;
		log_error("net: %s netmask: %s", NET_IFNAME, strerror(errno));
		return rc;
	}
	if ((rc = net_link_up(fd, NET_IFNAME)) < 0) {
		log_error("net: bringing %s up: %s", NET_IFNAME, strerror(-rc));
		return rc;
	}
	return 0;
}

/* The default route via the gateway. Returns 0 or -errno (logged). */
static int net_add_default_route(int fd, const struct cmdline_options *opts)
{
	struct rtentry rt;
	char dev[IFNAMSIZ] = NET_IFNAME;

	memset(&rt, 0, sizeof(rt));
	net_sockaddr(&rt.rt_dst, 0);
	net_sockaddr(&rt.rt_genmask, 0);
	net_sockaddr(&rt.rt_gateway, opts->net_gateway);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = dev;
	if (ioctl(fd, SIOCADDRT, &rt) < 0 && errno != EEXIST) {
		int rc = -errno;

		log_error("net: default route via the gateway: %s", strerror(errno));
		return rc;
	}
	return 0;
}

/* /etc/resolv.conf naming the gateway; skipped (logged) where /etc cannot be written. */
static void net_write_resolv(const struct cmdline_options *opts)
{
	char line[64];
	uint32_t gw = opts->net_gateway;
	int fd, n;

	if (mkdir("/etc", 0755) < 0 && errno != EEXIST) {
		log_info("net: no /etc (%s): %s not written", strerror(errno), NET_RESOLV_PATH);
		return;
	}
	n = snprintf(line, sizeof(line), "nameserver %u.%u.%u.%u\n", gw >> 24, (gw >> 16) & 255,
		     (gw >> 8) & 255, gw & 255);
	/* Replace a symlink (systemd-resolved's) rather than write through it. */
	unlink(NET_RESOLV_PATH);
	fd = open(NET_RESOLV_PATH, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		log_info("net: %s not written (%s): the root is read-only?", NET_RESOLV_PATH,
			 strerror(errno));
		return;
	}
	if (write(fd, line, (size_t)n) != n)
		log_warn("net: writing %s: %s", NET_RESOLV_PATH, strerror(errno));
	close(fd);
}

int net_setup(const struct cmdline_options *opts)
{
	int fd, rc;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		log_error("net: socket: %s", strerror(errno));
		return rc;
	}
	if ((rc = net_link_up(fd, "lo")) < 0)
		log_warn("net: bringing lo up: %s", strerror(-rc));
	rc = 0;
	if (!opts->net)
		goto out;
	if ((rc = net_wait_link(NET_IFNAME)) < 0) {
		log_error("net: sandbox.net is given but there is no %s", NET_IFNAME);
		goto out;
	}
	if ((rc = net_set_addr(fd, opts)) < 0 || (rc = net_add_default_route(fd, opts)) < 0)
		goto out;
	net_write_resolv(opts);
out:
	close(fd);
	return rc;
}
