/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandboxctl net policy ID, net log ID [--follow], port ID GUESTPORT [HOSTPORT]: what a
 * sandbox's proxy enforces and decided (docs/network.md), and inbound forwarding from the
 * host's loopback to the guest.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandboxctl.h"

/* Copy the file's bytes from `off` to stdout (made printable on a terminal: the names in
 * it are the guest's); the new offset, or -errno. */
static long long dump_from(int fd, long long off)
{
	bool tty = isatty(STDOUT_FILENO);
	char buf[65536];
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		if (tty)
			printable(buf, (size_t)n, true);
		if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
			return -EPIPE;
		off += n;
	}
	return n < 0 ? -errno : off;
}

static int net_networked(const char *ref, struct sandbox *sb)
{
	int status = sandbox_resolve(ref, sb);

	if (status)
		return status;
	if (!sb->network) {
		errmsg("%s has no network (created with --network none)", sb->id);
		return EXIT_ERR;
	}
	return EXIT_OK;
}

static int net_policy(const char *ref)
{
	struct sandbox sb;
	char path[4200];
	int fd, status;

	if ((status = net_networked(ref, &sb)))
		return status;
	if (sandbox_path(&sb, "policy.yaml", path, sizeof(path)) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		errmsg("%s: no policy (%s)", sb.id, strerror(errno));
		return EXIT_ERR;
	}
	status = dump_from(fd, 0) < 0 ? EXIT_ERR : EXIT_OK;
	close(fd);
	return status;
}

/* The proxy keeps audit.log and its generations audit.log.1 (newest) .. .8 (proxy/proxy.h,
 * AUDIT_GENERATIONS). */
#define AUDIT_FILES 9

/* Open a file of the proxy's (its uid's: never through a link, never a FIFO that blocks):
 * the fd of a regular file, else -1. */
static int open_proxy_file(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int net_log(const char *ref, bool follow)
{
	struct sandbox sb;
	struct stat st, seen[AUDIT_FILES];
	char path[4200], gen[4300];
	int fds[AUDIT_FILES], nfds = 0, fd = -1, status;
	long long off = 0;

	if ((status = net_networked(ref, &sb)))
		return status;
	if (sandbox_path(&sb, "proxy/audit.log", path, sizeof(path)) < 0)
		return EXIT_ERR;
	/* Every file opened first, newest first (audit.log, .1, ..), a file seen twice (renamed
	 * by a rotation meanwhile) once; then printed oldest first. */
	for (unsigned g = 0; g < AUDIT_FILES; g++) {
		bool dup = false;
		int gfd;

		if (g)
			snprintf(gen, sizeof(gen), "%s.%u", path, g);
		else
			snprintf(gen, sizeof(gen), "%s", path);
		if ((gfd = open_proxy_file(gen)) < 0 || fstat(gfd, &st) < 0) {
			if (gfd >= 0)
				close(gfd);
			continue;
		}
		for (int i = 0; i < nfds; i++)
			dup |= seen[i].st_ino == st.st_ino && seen[i].st_dev == st.st_dev;
		if (dup) {
			close(gfd);
			continue;
		}
		seen[nfds] = st;
		fds[nfds++] = gfd;
	}
	for (int i = nfds - 1; i >= 0 && off >= 0; i--)
		off = dump_from(fds[i], 0);
	/* --follow: go on in the newest, and into each new audit.log a rotation starts */
	if (nfds && off >= 0 && follow && fstat(fds[0], &st) == 0) {
		struct stat now;

		fd = fds[0];
		fds[0] = -1;
		while (off >= 0) {
			enum sandbox_state s = sandbox_state(&sb, NULL);

			if (s != SB_RUNNING && s != SB_PAUSED)
				break;
			poll(NULL, 0, 200);
			if ((off = dump_from(fd, off)) < 0)
				break;
			if (lstat(path, &now) == 0 &&
			    (now.st_ino != st.st_ino || now.st_dev != st.st_dev)) {
				int nfd = open_proxy_file(path);

				if (nfd < 0 || fstat(nfd, &st) < 0) {
					if (nfd >= 0)
						close(nfd);
					continue;
				}
				off = dump_from(fd, off); /* what the old one got last */
				close(fd);
				fd = nfd;
				off = off < 0 ? off : 0;
			}
		}
	}
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (fd >= 0)
		close(fd);
	return off < 0 && off != -EPIPE ? EXIT_ERR : EXIT_OK;
}

int cmd_net(int argc, char **argv)
{
	bool follow = false;

	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		return ctl_help("net");
	}
	if (argc == 3 && strcmp(argv[1], "policy") == 0)
		return net_policy(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "log") == 0) {
		for (int i = 3; i < argc; i++) {
			if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0) {
				follow = true;
				continue;
			}
			return ctl_usage("net");
		}
		return net_log(argv[2], follow);
	}
	return ctl_usage("net");
}

int cmd_port(int argc, char **argv)
{
	struct sandbox sb;
	uint64_t guest, host;
	int status, err;

	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		return ctl_help("port");
	}
	if (argc < 3 || argc > 4) {
		return ctl_usage("port");
	}
	if (!parse_u64(argv[2], 1, 65535, &guest) ||
	    (argc == 4 && !parse_u64(argv[3], 1, 65535, &host))) {
		errmsg("port: give ports from 1 to 65535");
		return EXIT_USAGE;
	}
	if (argc == 3)
		host = guest;
	if ((status = net_networked(argv[1], &sb)) ||
	    (status = sandbox_resolve_running(argv[1], &sb)))
		return status;
	err = proxy_forward(&sb, (unsigned)guest, (unsigned)host);
	if (err == -EEXIST) {
		errmsg("%s: its port %llu is forwarded already", sb.id, (unsigned long long)guest);
		return EXIT_ERR;
	}
	if (err < 0) {
		char log[4200];

		errmsg("%s: cannot forward port %llu: %s", sb.id, (unsigned long long)guest,
		       strerror(-err));
		if (sandbox_path(&sb, "proxy.log", log, sizeof(log)) == 0)
			print_tail(log, 3); /* "listen on 127.0.0.1:N: Address in use" */
		return EXIT_ERR;
	}
	printf("127.0.0.1:%llu\n", (unsigned long long)host);
	return EXIT_OK;
}
