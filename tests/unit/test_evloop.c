/* SPDX-License-Identifier: Apache-2.0 */
/* vmm/evloop.c: dispatch, and sources deleted from inside a callback. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
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
