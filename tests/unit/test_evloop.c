/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/evloop.c: dispatch, and sources deleted from inside a callback. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "evloop.h"

struct counter {
	struct ev_source src;
	int fd;
	int calls;
	struct counter *victim; /* deleted (and freed) by this one's callback */
	struct evloop *loop;
};

static int total_calls;

static void counter_fn(struct ev_source *src, uint32_t events)
{
	struct counter *c = src->opaque;
	uint64_t v;

	c->calls++;
	total_calls++;
	cr_assert(events & EPOLLIN);
	cr_assert(read(c->fd, &v, sizeof(v)) == sizeof(v));
	if (c->victim) {
		evloop_del(c->loop, &c->victim->src);
		close(c->victim->fd);
		free(c->victim);
		c->victim = NULL;
	}
}

static struct counter *counter_new(struct evloop *l)
{
	struct counter *c = calloc(1, sizeof(*c));
	uint64_t one = 1;

	cr_assert(c);
	c->loop = l;
	c->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	cr_assert(c->fd >= 0);
	cr_assert(evloop_add(l, &c->src, c->fd, EPOLLIN, counter_fn, c) == 0);
	cr_assert(write(c->fd, &one, sizeof(one)) == sizeof(one));
	return c;
}

Test(evloop, dispatches_each_ready_source_once)
{
	struct evloop l;
	struct counter *a, *b;

	cr_assert(evloop_init(&l) == 0);
	a = counter_new(&l);
	b = counter_new(&l);
	cr_assert_eq(evloop_run_once(&l, 1000), 2);
	cr_assert_eq(a->calls, 1);
	cr_assert_eq(b->calls, 1);
	/* Drained: nothing is ready any more. */
	cr_assert_eq(evloop_run_once(&l, 0), 0);
	cr_assert_eq(evloop_add(&l, &a->src, a->fd, EPOLLIN, counter_fn, a), -EEXIST);
	evloop_fini(&l);
}

Test(evloop, a_callback_may_delete_and_free_a_pending_source)
{
	struct evloop l;
	struct counter *a, *b;

	cr_assert(evloop_init(&l) == 0);
	a = counter_new(&l);
	b = counter_new(&l);
	/* Both are ready and in one batch; whichever runs first frees the other. Under ASan a
	 * call through the freed source would be a use-after-free. */
	a->victim = b;
	b->victim = a;
	total_calls = 0;
	cr_assert_eq(evloop_run_once(&l, 1000), 2);
	cr_assert_eq(total_calls, 1, "one ran, the other was freed before its turn");
	evloop_fini(&l);
}

Test(evloop, mod_and_del_of_an_unknown_source)
{
	struct evloop l;
	struct ev_source s = {0};

	cr_assert(evloop_init(&l) == 0);
	cr_assert_eq(evloop_mod(&l, &s, EPOLLIN), -ENOENT);
	evloop_del(&l, &s);
	evloop_fini(&l);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A level-triggered source that stays ready (its eventfd is never read). */
static int ready_calls;

static void ready_fn(struct ev_source *src, uint32_t events)
{
	ready_calls++;
}

Test(evloop, a_paused_source_is_not_dispatched_until_its_time)
{
	struct evloop l;
	struct ev_source s = {0};
	int fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t t0;
	int n;

	cr_assert(fd >= 0 && evloop_init(&l) == 0);
	cr_assert_eq(evloop_add(&l, &s, fd, EPOLLIN, ready_fn, NULL), 0);
	ready_calls = 0;
	cr_assert_eq(evloop_run_once(&l, 0), 1, "ready before the pause");
	cr_assert_eq(evloop_pause(&l, &s, 150), 0);
	/* A change while paused is kept for the resume, not applied now. */
	cr_assert_eq(evloop_mod(&l, &s, EPOLLIN), 0);
	cr_assert_eq(evloop_run_once(&l, 0), 0, "paused: not polled");
	/* A wait for ever is cut short at the pause's end, and the source is polled again. */
	t0 = now_ms();
	n = evloop_run_once(&l, -1);
	cr_assert_geq(now_ms() - t0, 140, "woke after %llu ms",
		      (unsigned long long)(now_ms() - t0));
	cr_assert_lt(now_ms() - t0, 1000);
	if (n == 0)
		n = evloop_run_once(&l, 1000);
	cr_assert_eq(n, 1, "polled again after the pause");
	cr_assert_eq(ready_calls, 2);
	cr_assert(!s.resume_ns && !l.paused);
	evloop_del(&l, &s);
	close(fd);
	evloop_fini(&l);
}

Test(evloop, a_paused_source_may_be_deleted)
{
	struct evloop l;
	struct ev_source a = {0}, b = {0};
	int fa = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK),
	    fb = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);

	cr_assert(fa >= 0 && fb >= 0 && evloop_init(&l) == 0);
	cr_assert_eq(evloop_add(&l, &a, fa, EPOLLIN, ready_fn, NULL), 0);
	cr_assert_eq(evloop_add(&l, &b, fb, EPOLLIN, ready_fn, NULL), 0);
	cr_assert_eq(evloop_pause(&l, &a, 10000), 0);
	cr_assert_eq(evloop_pause(&l, &b, 10000), 0);
	evloop_del(&l, &a);
	cr_assert(l.paused == &b && !b.paused_next, "only b is left paused");
	/* Deleted, it may be added again, unpaused. */
	cr_assert_eq(evloop_add(&l, &a, fa, EPOLLIN, ready_fn, NULL), 0);
	ready_calls = 0;
	cr_assert_eq(evloop_run_once(&l, 0), 1);
	evloop_del(&l, &b);
	cr_assert(!l.paused);
	cr_assert_eq(evloop_pause(&l, &b, 10), -ENOENT);
	evloop_del(&l, &a);
	close(fa);
	close(fb);
	evloop_fini(&l);
}

Test(evloop, accept_backs_off_for_lack_of_fds_only)
{
	struct evloop l;
	struct ev_source s = {0};
	int fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);

	cr_assert(fd >= 0 && evloop_init(&l) == 0);
	cr_assert_eq(evloop_add(&l, &s, fd, EPOLLIN, ready_fn, NULL), 0);
	cr_assert(!evloop_accept_backoff(&l, &s, EAGAIN));
	cr_assert(!evloop_accept_backoff(&l, &s, ECONNABORTED));
	cr_assert(!s.resume_ns);
	cr_assert(evloop_accept_backoff(&l, &s, EMFILE));
	cr_assert(s.resume_ns);
	cr_assert_eq(evloop_run_once(&l, 0), 0, "the listener rests");
	evloop_del(&l, &s);
	for (int err = 0; err < 4; err++) {
		const int errs[] = {ENFILE, ENOBUFS, ENOMEM, EMFILE};

		cr_assert_eq(evloop_add(&l, &s, fd, EPOLLIN, ready_fn, NULL), 0);
		cr_assert(evloop_accept_backoff(&l, &s, errs[err]));
		evloop_del(&l, &s);
	}
	close(fd);
	evloop_fini(&l);
}
