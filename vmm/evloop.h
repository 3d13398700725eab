/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The I/O thread's event loop: one epoll set per VM over every fd a device or the VMM waits
 * on (ioeventfds, io_uring's completion eventfd, vsock and API sockets, the signalfd, the
 * timeout). A user embeds a struct ev_source, registers it with a callback, and the loop calls
 * back on the I/O thread with the epoll events.
 *
 * Threads: evloop_add may be called from any thread (epoll_ctl is thread-safe); evloop_mod and
 * evloop_del only from the I/O thread or before the loop runs. A source may be deleted (and
 * freed) from inside any callback, including its own: evloop_del forgets the events of the
 * batch being dispatched that still point at it.
 */
#ifndef SANDBOX_EVLOOP_H
#define SANDBOX_EVLOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#ifndef __must_check
#define __must_check __attribute__((warn_unused_result))
#endif

#define EVLOOP_BATCH 32

struct ev_source;
typedef void (*ev_fn)(struct ev_source *src, uint32_t events);

struct ev_source {
	int fd;
	ev_fn fn;
	void *opaque; /* for the callback */
	bool added;
};

struct evloop {
	int epoll_fd;
	/* The batch being dispatched: entries [pos, n) are still to call. */
	struct epoll_event batch[EVLOOP_BATCH];
	int pos, n;
};

int evloop_init(struct evloop *l) __must_check;
/* Close the epoll set. Sources are not touched: their owners close their fds. */
void evloop_fini(struct evloop *l);
/* Watch `fd` for `events` (EPOLLIN, EPOLLOUT, ...; level-triggered unless EPOLLET is given)
 * and call `fn(src, events)`. -EEXIST when `src` is already added. */
int evloop_add(struct evloop *l, struct ev_source *src, int fd, uint32_t events, ev_fn fn,
	       void *opaque) __must_check;
/* Change the events `src` waits for. */
int evloop_mod(struct evloop *l, struct ev_source *src, uint32_t events) __must_check;
/* Stop watching `src` (a no-op when it is not added). Call before closing its fd. */
void evloop_del(struct evloop *l, struct ev_source *src);
/* Wait up to `timeout_ms` (-1: for ever) and dispatch one batch of events. Returns the number
 * of events dispatched, or -errno (-EINTR is returned as 0). */
int evloop_run_once(struct evloop *l, int timeout_ms);

#endif
