/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inbound forwarder of `sandboxctl port` (docs/network.md): accepts on the host's loopback
 * and connects to the guest from inside the sandbox's namespace. The socket toward the guest is
 * made by the connection's thread after a setns of that thread alone, so the listener and the
 * rest of the process stay in the host's namespace.
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
	int ns_fd, self_fd;
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

	/* This thread alone enters the namespace to make its socket, then comes back. */
	if (setns(f->ns_fd, CLONE_NEWNET) == 0) {
		e = conn_connect((struct sockaddr *)&f->to, f->tolen, CONN_CONNECT_MS, &ufd);
		if (setns(f->self_fd, CLONE_NEWNET) < 0)
			abort(); /* a thread stuck in the sandbox's namespace must not go on */
		if (e == 0 &&
		    conn_relay(fc->cfd, ufd, NULL, 0, CONN_IDLE_MS, NULL, &up, &down) < 0) {
			/* the connection ends either way */
		}
		if (e < 0)
			proxy_log("forward: connect to the guest: %s", strerror(-e));
	}
	if (ufd >= 0)
		close(ufd);
	close(fc->cfd);
	atomic_fetch_sub(&f->n, 1);
	free(fc);
	return NULL;
}

int forward_run(const char *netns_path, const char *listen_at, const char *to, int ready_fd)
{
	static struct forward f;
	struct sockaddr_storage la;
	socklen_t lalen;
	pthread_attr_t attr;
	int lfd, one = 1;

	if (proxy_parse_hostport(to, 0, &f.to, &f.tolen) < 0 ||
	    proxy_parse_hostport(listen_at, 0, &la, &lalen) < 0) {
		proxy_log("forward: bad address (expected IP:PORT)");
		return -EINVAL;
	}
	f.self_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	f.ns_fd = open(netns_path, O_RDONLY | O_CLOEXEC);
	if (f.self_fd < 0 || f.ns_fd < 0) {
		proxy_log("forward: %s: %s", f.ns_fd < 0 ? netns_path : "/proc/self/ns/net",
			  strerror(errno));
		return -errno;
	}
	lfd = socket(la.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&la, lalen) < 0 || listen(lfd, 128) < 0) {
		proxy_log("forward: listen on %s: %s", listen_at, strerror(errno));
		return -errno;
	}
	signal(SIGPIPE, SIG_IGN);
	if (ready_fd >= 0) {
		if (proxy_write_all(ready_fd, "ready\n", 6) < 0)
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
