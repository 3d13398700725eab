/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's network namespace (docs/network.md): /run/netns/sbx-<id>, holding the loopback,
 * the persistent tap `tap0` the VMM attaches to (gateway MAC and 10.0.2.1/30), and the
 * nftables ruleset that sends the guest's TCP and DNS to the proxy and drops everything else.
 * Every sandbox's namespace looks the same from inside, so a forked or restored guest finds
 * its gateway where it was.
 *
 * The namespace is made by a child process that unshares its network namespace, configures
 * it with ioctls (no iproute2 needed), bind-mounts /proc/self/ns/net onto the namespace file
 * (so `ip netns exec sbx-<id>` works) and runs `nft -f -` there with the ruleset on a pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/if_tun.h>

#include "client.h"

#define NETNS_DIR "/run/netns"

/* How long `nft -f` may take (in the emulated host, loading the modules costs seconds). */
#define NET_NFT_TIMEOUT_MS 30000

int net_ns_path(const struct sandbox *sb, char *out, size_t len)
{
	return path_fmt(out, len, NETNS_DIR "/sbx-%s", sb->id);
}

/* The ruleset of docs/network.md, for a guest at NET_GUEST_IP with NET_GUEST_MAC. */
static int net_ruleset(char *buf, size_t len)
{
	int n = snprintf(
		buf, len,
		"flush ruleset\n"
		"table netdev sandbox_l2 {\n"
		"  counter dropped {\n"
		"  }\n"
		"  chain ingress {\n"
		"    type filter hook ingress device \"" NET_TAP "\" priority -500; policy drop;\n"
		"    ether saddr != " NET_GUEST_MAC " drop\n"
		"    ether type arp arp htype 1 arp ptype ip arp saddr ether " NET_GUEST_MAC
		" arp saddr ip " NET_GUEST_IP " accept\n"
		"    ether type ip ip saddr " NET_GUEST_IP " accept\n"
		"    counter name dropped drop\n"
		"  }\n"
		"}\n"
		"table ip sandbox {\n"
		"  chain prerouting {\n"
		"    type nat hook prerouting priority dstnat; policy accept;\n"
		"    iifname \"" NET_TAP "\" ip daddr " NET_GATEWAY_IP " tcp dport %u accept\n"
		"    iifname \"" NET_TAP "\" meta l4proto tcp redirect to :%u\n"
		"    iifname \"" NET_TAP "\" udp dport 53 redirect to :53\n"
		"  }\n"
		"  chain input {\n"
		"    type filter hook input priority filter; policy drop;\n"
		"    iif lo accept\n"
		"    ct state established,related accept\n"
		"    ct state invalid drop\n"
		"    iifname \"" NET_TAP "\" ip daddr " NET_GATEWAY_IP
		" tcp dport { %u, %u } accept\n"
		"    iifname \"" NET_TAP "\" ip daddr " NET_GATEWAY_IP " udp dport 53 accept\n"
		"    iifname \"" NET_TAP "\" ip daddr " NET_GATEWAY_IP
		" icmp type echo-request limit rate 10/second accept\n"
		"  }\n"
		"  chain forward {\n"
		"    type filter hook forward priority filter; policy drop;\n"
		"  }\n"
		"  chain output {\n"
		"    type filter hook output priority filter; policy drop;\n"
		"    oif lo accept\n"
		"    ct state established,related accept\n"
		"    oifname \"" NET_TAP "\" ip daddr " NET_GUEST_IP
		" tcp dport @forwarded accept\n"
		"  }\n"
		"  set forwarded {\n"
		"    type inet_service;\n"
		"  }\n"
		"}\n",
		NET_PROXY_PORT, NET_TRANSPARENT_PORT, NET_PROXY_PORT, NET_TRANSPARENT_PORT);

	return n < 0 || (size_t)n >= len ? -E2BIG : 0;
}

int net_nft(const char *rules, int err_fd)
{
	uint64_t deadline = now_ms() + NET_NFT_TIMEOUT_MS;
	int pipefd[2], status;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -errno;
	}
	if (pid == 0) {
		dup2(pipefd[0], 0);
		if (err_fd >= 0)
			dup2(err_fd, 2);
		execlp("nft", "nft", "-f", "-", (char *)NULL);
		fprintf(stderr, "sandboxctl: cannot run nft: %m (install nftables)\n");
		_exit(127);
	}
	close(pipefd[0]);
	if (write_all(pipefd[1], rules, strlen(rules)) < 0) {
		/* nft died early: its message is on stderr, the status below says so. */
	}
	close(pipefd[1]);
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -ETIMEDOUT;
		}
		usleep(2000);
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPROTO;
}

static int net_if_up(int sock, const char *name)
{
	struct ifreq ifr = {0};

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP;
	return ioctl(sock, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

static int net_if_addr(int sock, const char *name, const char *ip, const char *mask)
{
	struct ifreq ifr = {0};
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	sin->sin_family = AF_INET;
	if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1)
		return -EINVAL;
	if (ioctl(sock, SIOCSIFADDR, &ifr) < 0)
		return -errno;
	if (inet_pton(AF_INET, mask, &sin->sin_addr) != 1)
		return -EINVAL;
	return ioctl(sock, SIOCSIFNETMASK, &ifr) < 0 ? -errno : 0;
}

/* The persistent tap with the gateway's MAC; the VMM attaches to it by name. */
static int net_make_tap(int sock)
{
	static const uint8_t mac[6] = NET_GATEWAY_MAC_BYTES;
	struct ifreq ifr = {0};
	int fd, err = 0;

	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), NET_TAP);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETPERSIST, 1) < 0)
		err = -errno;
	close(fd);
	if (err < 0)
		return err;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), NET_TAP);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, mac, sizeof(mac));
	if (ioctl(sock, SIOCSIFHWADDR, &ifr) < 0)
		return -errno;
	return 0;
}

/* Written "1": no IPv6 at all. A new namespace copies the host's IPv4 settings, so a host
 * that forwards (any Docker host) would give it forwarding too: off, besides the forward
 * chain's drop. */
static const char *const no_ipv6[] = {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
				      "/proc/sys/net/ipv6/conf/default/disable_ipv6"};
static const char *const no_forwarding[] = {"/proc/sys/net/ipv4/ip_forward",
					    "/proc/sys/net/ipv4/conf/all/forwarding",
					    "/proc/sys/net/ipv4/conf/default/forwarding"};

static void net_sysctl(const char *const *paths, size_t n, const char *val)
{
	for (size_t i = 0; i < n; i++) {
		int fd = open(paths[i], O_WRONLY | O_CLOEXEC);

		if (fd >= 0) {
			(void)!write(fd, val, strlen(val));
			close(fd);
		}
	}
}

/* In the child, in the new namespace: lo, tap0, its address, the ruleset. */
static int net_configure(void)
{
	char rules[4096];
	int sock, err;

	/* No IPv6 in the namespace at all (the L2 filter drops it too): no link-local
	 * address on the tap for a guest to talk to. */
	net_sysctl(no_ipv6, sizeof(no_ipv6) / sizeof(no_ipv6[0]), "1\n");
	net_sysctl(no_forwarding, sizeof(no_forwarding) / sizeof(no_forwarding[0]), "0\n");
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	if ((err = net_if_up(sock, "lo")) < 0 || (err = net_make_tap(sock)) < 0 ||
	    (err = net_if_addr(sock, NET_TAP, NET_GATEWAY_IP, "255.255.255.252")) < 0 ||
	    (err = net_if_up(sock, NET_TAP)) < 0) {
		close(sock);
		return err;
	}
	close(sock);
	if ((err = net_ruleset(rules, sizeof(rules))) < 0)
		return err;
	return net_nft(rules, -1);
}

/* Make NETNS_DIR a directory; `ip netns` also makes it a shared mount, which we do not
 * need: the namespace files are bind mounts in the host's mount namespace. */
int net_ns_dir(void)
{
	if (mkdir(NETNS_DIR, 0755) < 0 && errno != EEXIST) {
		if (errno != ENOENT || mkdir("/run", 0755) < 0 || mkdir(NETNS_DIR, 0755) < 0)
			return -errno;
	}
	return 0;
}

int net_ns_make(const char *path, int (*configure)(void), char *err_msg, size_t err_len)
{
	int status, err;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int e;

		if (unshare(CLONE_NEWNET) < 0) {
			fprintf(stderr, "sandboxctl: cannot make a network namespace: %m\n");
			_exit(10);
		}
		if (mount("/proc/self/ns/net", path, NULL, MS_BIND, NULL) < 0) {
			fprintf(stderr, "sandboxctl: cannot bind %s: %m\n", path);
			_exit(11);
		}
		e = configure ? configure() : 0;
		if (e < 0) {
			fprintf(stderr, "sandboxctl: cannot set up the namespace %s: %s\n", path,
				e == -EPROTO ? "nft refused the ruleset" : strerror(-e));
			_exit(12);
		}
		_exit(0);
	}
	while ((err = waitpid(pid, &status, 0)) < 0)
		if (errno != EINTR)
			break;
	if (err < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err_msg, err_len, "cannot set up the network namespace %s", path);
		return -EIO;
	}
	return 0;
}

int net_setup(const struct sandbox *sb, char *err_msg, size_t err_len)
{
	char path[256];
	int fd, err;

	err_msg[0] = '\0';
	if ((err = net_ns_path(sb, path, sizeof(path))) < 0)
		return err;
	net_teardown(sb); /* a namespace left by a crash: start clean */
	if ((err = net_ns_dir()) < 0) {
		snprintf(err_msg, err_len, "cannot make %s: %s", NETNS_DIR, strerror(-err));
		return err;
	}
	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0) {
		err = -errno;
		snprintf(err_msg, err_len, "cannot create %s: %s", path, strerror(errno));
		return err;
	}
	close(fd);
	if ((err = net_ns_make(path, net_configure, err_msg, err_len)) < 0) {
		if (err != -EIO)
			unlink(path);
		else
			net_teardown(sb);
		return err;
	}
	return 0;
}

void net_teardown(const struct sandbox *sb)
{
	char path[256];

	if (net_ns_path(sb, path, sizeof(path)) < 0)
		return;
	/* Detached: a process still inside (a dying proxy) keeps it alive until it exits, and
	 * the tap with it; nothing else can reach it. Every mount of it: on a shared /run/netns
	 * a bind can be stacked (propagated back), and unlink fails (EBUSY) while one is left,
	 * which made the next start's O_EXCL create fail with EEXIST (seen after a suspend). */
	for (int i = 0; i < 8 && umount2(path, MNT_DETACH) == 0; i++)
		;
	(void)unlink(path);
}

int net_forward_port(const struct sandbox *sb, unsigned port, bool add)
{
	char path[256], rules[256];
	int fd, status, err;
	pid_t pid;

	if ((err = net_ns_path(sb, path, sizeof(path))) < 0)
		return err;
	snprintf(rules, sizeof(rules), "%s element ip sandbox forwarded { %u }\n",
		 add ? "add" : "delete", port);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(setns(fd, CLONE_NEWNET) < 0 ? 10 : net_nft(rules, -1) < 0 ? 11 : 0);
	close(fd);
	if (pid < 0)
		return -errno;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPROTO;
}
