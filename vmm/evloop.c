/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The I/O thread's event loop (evloop.h): epoll with the source's address as the event's data,
 * a dispatch that survives callbacks deleting sources, and sources paused for a while (a list
 * the loop looks at around each wait; there are few, and only listeners short of fds).
 */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "evloop.h"

static uint64_t evloop_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int evloop_init(struct evloop *l)
{
	l->pos = l->n = 0;
	l->paused = NULL;
	l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	return l->epoll_fd < 0 ? -errno : 0;
}

void evloop_fini(struct evloop *l)
{
	if (l->epoll_fd >= 0)
		close(l->epoll_fd);
	l->epoll_fd = -1;
	l->pos = l->n = 0;
	l->paused = NULL;
}

int evloop_add(struct evloop *l, struct ev_source *src, int fd, uint32_t events, ev_fn fn,
	       void *opaque)
{
	struct epoll_event ev = {.events = events, .data.ptr = src};

	if (src->added)
		return -EEXIST;
	src->fd = fd;
	src->fn = fn;
	src->opaque = opaque;
	src->events = events;
	src->resume_ns = 0;
	src->paused_next = NULL;
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	src->added = true;
	return 0;
}

/* Tell epoll what `src` waits for now. */
static int evloop_ctl(struct evloop *l, struct ev_source *src, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = src};

	return epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, src->fd, &ev) < 0 ? -errno : 0;
}

int evloop_mod(struct evloop *l, struct ev_source *src, uint32_t events)
{
	int err;

	if (!src->added)
		return -ENOENT;
	if (src->resume_ns) {
		src->events = events; /* applied when the pause ends */
		return 0;
	}
	if ((err = evloop_ctl(l, src, events)) == 0)
		src->events = events;
	return err;
}

/* Take `src` off the paused list (it is on it). */
static void evloop_unpause(struct evloop *l, struct ev_source *src)
{
	for (struct ev_source **p = &l->paused; *p; p = &(*p)->paused_next) {
		if (*p == src) {
			*p = src->paused_next;
			break;
		}
	}
	src->paused_next = NULL;
	src->resume_ns = 0;
}

void evloop_del(struct evloop *l, struct ev_source *src)
{
	if (!src->added)
		return;
	if (src->resume_ns)
		evloop_unpause(l, src);
	epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, src->fd, NULL);
	src->added = false;
	/* The batch may still hold events for it: the owner may free it once we return. */
	for (int i = l->pos; i < l->n; i++)
		if (l->batch[i].data.ptr == src)
			l->batch[i].data.ptr = NULL;
}

int evloop_pause(struct evloop *l, struct ev_source *src, unsigned ms)
{
	int err;

	if (!src->added)
		return -ENOENT;
	if (!src->resume_ns) {
		if ((err = evloop_ctl(l, src, 0)) < 0)
			return err;
		src->paused_next = l->paused;
		l->paused = src;
	}
	/* Never 0, which means "not paused". */
	src->resume_ns = evloop_now_ns() + (uint64_t)ms * 1000000u + 1;
	return 0;
}

bool evloop_accept_backoff(struct evloop *l, struct ev_source *src, int err)
{
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return false;
	/* Cannot fail for an added source but for lack of memory, and then the loop spins as
	 * it would have without us: nothing better to do. */
	return evloop_pause(l, src, EVLOOP_ACCEPT_BACKOFF_MS) == 0;
}

/* Resume the paused sources whose time is up at `now_ns`; returns the milliseconds until the
 * next one is (rounded up), or -1 when none is paused any more. */
static int evloop_resume_due(struct evloop *l, uint64_t now_ns)
{
	uint64_t next = 0;

	for (struct ev_source **p = &l->paused; *p;) {
		struct ev_source *src = *p;

		if (src->resume_ns > now_ns) {
			if (!next || src->resume_ns < next)
				next = src->resume_ns;
			p = &src->paused_next;
			continue;
		}
		*p = src->paused_next;
		src->paused_next = NULL;
		src->resume_ns = 0;
		/* A failure leaves it polled for nothing: its owner hears of no more events,
		 * which only an fd that epoll refuses to modify (never ours) would cause. */
		(void)evloop_ctl(l, src, src->events);
	}
	return next ? (int)((next - now_ns + 999999u) / 1000000u) : -1;
}

int evloop_run_once(struct evloop *l, int timeout_ms)
{
	int n, pause_ms = l->paused ? evloop_resume_due(l, evloop_now_ns()) : -1;

	if (pause_ms >= 0 && (timeout_ms < 0 || pause_ms < timeout_ms))
		timeout_ms = pause_ms;
	n = epoll_wait(l->epoll_fd, l->batch, EVLOOP_BATCH, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	l->n = n;
	for (l->pos = 0; l->pos < l->n;) {
		struct epoll_event *ev = &l->batch[l->pos++];
		struct ev_source *src = ev->data.ptr;

		if (src)
			src->fn(src, ev->events);
	}
	l->pos = l->n = 0;
	if (l->paused)
		evloop_resume_due(l, evloop_now_ns());
	return n;
}
