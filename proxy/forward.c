/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inbound forwarder of `sandboxctl port` (docs/network.md): accepts on the host's loopback
 * and connects to the guest from inside the sandbox's namespace. The listener is made in the
 * host's namespace; then the whole process enters the sandbox's, where every socket toward
 * the guest is made, and (--jail) is confined like `run` (jail.c): it relays what the guest
 * sends, so it must not do so as root.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy.h"

#define FORWARD_MAX 128

struct forward {
	struct sockaddr_storage to;
	socklen_t tolen;
	_Atomic unsigned n;
};

struct forward_conn {
	struct forward *f;
	int cfd;
};

static void *forward_thread(void *arg)
{
	struct forward_conn *fc = arg;
	struct forward *f = fc->f;
	uint64_t up, down;
	int ufd = -1, e;

	e = conn_connect((struct sockaddr *)&f->to, f->tolen, CONN_CONNECT_MS, &ufd);
	if (e == 0 && conn_relay(fc->cfd, ufd, NULL, 0, CONN_IDLE_MS, NULL, &up, &down) < 0) {
		/* the connection ends either way */
	}
	if (e < 0)
		proxy_log("forward: connect to the guest: %s", strerror(-e));
	if (ufd >= 0)
		close(ufd);
	close(fc->cfd);
	atomic_fetch_sub(&f->n, 1);
	free(fc);
	return NULL;
}

/* SIGTERM, SIGINT: the connections end with the process. A handler, not the default action:
 * as PID 1 of its pid namespace (--jail) the default would be ignored. */
static void forward_stop(int sig)
{
	(void)sig;
	_exit(0);
}

/* The listener, made in the host's namespace, then the process moved into `netns_path`'s.
 * The listening socket's fd, or -errno (said). */
static int forward_listen(const char *netns_path, const char *listen_at)
{
	struct sockaddr_storage la;
	socklen_t lalen;
	int lfd, ns_fd, one = 1, e;

	if (netpol_hostport_parse(listen_at, 0, &la, &lalen) < 0) {
		proxy_log("forward: bad address %s (expected IP:PORT)", listen_at);
		return -EINVAL;
	}
	ns_fd = open(netns_path, O_RDONLY | O_CLOEXEC);
	if (ns_fd < 0) {
		e = -errno;
		proxy_log("forward: %s: %s", netns_path, strerror(-e));
		return e;
	}
	lfd = socket(la.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&la, lalen) < 0 || listen(lfd, 128) < 0) {
		e = -errno;
		proxy_log("forward: listen on %s: %s", listen_at, strerror(-e));
	} else if (setns(ns_fd, CLONE_NEWNET) < 0) {
		e = -errno;
		proxy_log("forward: cannot enter %s: %s", netns_path, strerror(-e));
	} else {
		close(ns_fd);
		return lfd;
	}
	if (lfd >= 0)
		close(lfd);
	close(ns_fd);
	return e;
}

int forward_run(const char *netns_path, const char *listen_at, const char *to, int ready_fd,
		const struct proxy_jail *jail)
{
	static struct forward f;
	pthread_attr_t attr;
	char err[512];
	int lfd;

	if (netpol_hostport_parse(to, 0, &f.to, &f.tolen) < 0) {
		proxy_log("forward: bad address %s (expected IP:PORT)", to);
		return -EINVAL;
	}
	if ((lfd = forward_listen(netns_path, listen_at)) < 0)
		return lfd;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, forward_stop);
	signal(SIGINT, forward_stop);
	if (jail && jail->on && jail_enter(jail, err, sizeof(err)) < 0) {
		proxy_log("forward: --jail: %s", err);
		return -EPERM;
	}
	if (ready_fd >= 0) {
		if (write_all(ready_fd, "ready\n", 6) < 0)
			proxy_log("--ready-fd %d: %s", ready_fd, strerror(errno));
		close(ready_fd);
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (;;) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		struct forward_conn *fc;
		pthread_t t;

		if (cfd < 0) {
			usleep(10000);
			continue;
		}
		fc = malloc(sizeof(*fc));
		if (!fc || atomic_fetch_add(&f.n, 1) >= FORWARD_MAX) {
			if (fc)
				atomic_fetch_sub(&f.n, 1);
			free(fc);
			close(cfd);
			continue;
		}
		fc->f = &f;
		fc->cfd = cfd;
		if (pthread_create(&t, &attr, forward_thread, fc) != 0) {
			atomic_fetch_sub(&f.n, 1);
			close(cfd);
			free(fc);
		}
	}
}
