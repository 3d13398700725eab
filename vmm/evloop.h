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
 *
 * A source may also be paused for a while (evloop_pause): it is polled for nothing until its
 * time is up, then for what it waited for before. A listener that cannot accept for lack of
 * fds uses it, since its level-triggered readiness would otherwise wake the loop at once,
 * for ever.
 */
#ifndef SANDBOX_EVLOOP_H
#define SANDBOX_EVLOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#ifndef __must_check
#define __must_check __attribute__((warn_unused_result))
#endif

#define EVLOOP_BATCH		 32
/* How long a listener rests after accept() failed for lack of fds or memory: the pending
 * client stays in the backlog and is taken when the listener is polled again. */
#define EVLOOP_ACCEPT_BACKOFF_MS 100u

struct ev_source;
typedef void (*ev_fn)(struct ev_source *src, uint32_t events);

struct ev_source {
	int fd;
	ev_fn fn;
	void *opaque; /* for the callback */
	bool added;
	uint32_t events; /* what it waits for (once resumed, while paused) */
	/* Paused until then (CLOCK_MONOTONIC ns), on the loop's paused list; 0: not paused. */
	uint64_t resume_ns;
	struct ev_source *paused_next;
};

struct evloop {
	int epoll_fd;
	/* The batch being dispatched: entries [pos, n) are still to call. */
	struct epoll_event batch[EVLOOP_BATCH];
	int pos, n;
	struct ev_source *paused; /* sources evloop_pause took off the set for a while */
};

int evloop_init(struct evloop *l) __must_check;
/* Close the epoll set. Sources are not touched: their owners close their fds. */
void evloop_fini(struct evloop *l);
/* Watch `fd` for `events` (EPOLLIN, EPOLLOUT, ...; level-triggered unless EPOLLET is given)
 * and call `fn(src, events)`. -EEXIST when `src` is already added. */
int evloop_add(struct evloop *l, struct ev_source *src, int fd, uint32_t events, ev_fn fn,
	       void *opaque) __must_check;
/* Change the events `src` waits for (a paused source waits for them once resumed). */
int evloop_mod(struct evloop *l, struct ev_source *src, uint32_t events) __must_check;
/* Stop watching `src` (a no-op when it is not added; a pause is forgotten). Call before
 * closing its fd. */
void evloop_del(struct evloop *l, struct ev_source *src);
/* Poll `src` for nothing during `ms` milliseconds, then for what it waited for again (a
 * later pause of a paused source moves its end). I/O thread only. -ENOENT when it is not
 * added. */
int evloop_pause(struct evloop *l, struct ev_source *src, unsigned ms) __must_check;
/* After accept() on listener `src` failed with `err` (an errno value): true when that was
 * for lack of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) and the listener is now paused
 * for EVLOOP_ACCEPT_BACKOFF_MS (the caller logs, rate-limited); false for any other error,
 * which pausing would not cure (EAGAIN, a client that went away). */
bool evloop_accept_backoff(struct evloop *l, struct ev_source *src, int err);
/* Wait up to `timeout_ms` (-1: for ever; shortened to the end of the first pause) and
 * dispatch one batch of events, then resume the sources whose pause is over. Returns the
 * number of events dispatched, or -errno (-EINTR is returned as 0). */
int evloop_run_once(struct evloop *l, int timeout_ms);

#endif
