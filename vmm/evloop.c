/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The I/O thread's event loop (evloop.h): epoll with the source's address as the event's data,
 * and a dispatch that survives callbacks deleting sources.
 */
#include <errno.h>
#include <unistd.h>

#include "evloop.h"

int evloop_init(struct evloop *l)
{
	l->pos = l->n = 0;
	l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	return l->epoll_fd < 0 ? -errno : 0;
}

void evloop_fini(struct evloop *l)
{
	if (l->epoll_fd >= 0)
		close(l->epoll_fd);
	l->epoll_fd = -1;
	l->pos = l->n = 0;
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
	if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	src->added = true;
	return 0;
}

int evloop_mod(struct evloop *l, struct ev_source *src, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = src};

	if (!src->added)
		return -ENOENT;
	return epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, src->fd, &ev) < 0 ? -errno : 0;
}

void evloop_del(struct evloop *l, struct ev_source *src)
{
	if (!src->added)
		return;
	epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, src->fd, NULL);
	src->added = false;
	/* The batch may still hold events for it: the owner may free it once we return. */
	for (int i = l->pos; i < l->n; i++)
		if (l->batch[i].data.ptr == src)
			l->batch[i].data.ptr = NULL;
}

int evloop_run_once(struct evloop *l, int timeout_ms)
{
	int n = epoll_wait(l->epoll_fd, l->batch, EVLOOP_BATCH, timeout_ms);

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
	return n;
}
