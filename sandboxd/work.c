/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker pool: jobs queued by the loop run on WORK_THREADS threads; each finished job
 * goes to a done queue, and lws_cancel_service wakes the loop, which runs the jobs' done
 * (work_reap, from LWS_CALLBACK_EVENT_WAIT_CANCELLED). Nothing a worker does touches the
 * loop's records.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sandboxd.h"

pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
/* Two queues with threads of their own: lifecycle jobs (which take turns on lifecycle_lock)
 * and I/O jobs (files, pulls, service requests, agent connects), so that neither kind can
 * hold every thread the other needs. */
static pthread_cond_t q_cond[WORK_CLASSES] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
					      PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
					      PTHREAD_COND_INITIALIZER};
static struct sd_job *todo_head[WORK_CLASSES], *todo_tail[WORK_CLASSES], *done_head, *done_tail;
static struct lws_context *loop_ctx;

static void push(struct sd_job **head, struct sd_job **tail, struct sd_job *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

static void *worker(void *arg)
{
	int c = (int)(intptr_t)arg;

	for (;;) {
		pthread_mutex_lock(&q_lock);
		while (!todo_head[c])
			pthread_cond_wait(&q_cond[c], &q_lock);
		struct sd_job *j = todo_head[c];

		todo_head[c] = j->next;
		if (!todo_head[c])
			todo_tail[c] = NULL;
		pthread_mutex_unlock(&q_lock);
		j->run(j);
		pthread_mutex_lock(&q_lock);
		push(&done_head, &done_tail, j);
		pthread_mutex_unlock(&q_lock);
		lws_cancel_service(loop_ctx);
	}
	return NULL;
}

int work_start(unsigned nlifecycle, unsigned nio, struct lws_context *ctx)
{
	loop_ctx = ctx;
	int err = work_add_threads(WORK_LIFECYCLE, nlifecycle);

	return err < 0 ? err : work_add_threads(WORK_IO, nio);
}

int work_add_threads(enum work_class c, unsigned n)
{
	sigset_t all, old;

	/* Workers take no signal: SIGTERM and SIGINT are the loop's (main.c). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned i = 0; i < n; i++) {
		pthread_t t;
		pthread_attr_t a;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		int err = pthread_create(&t, &a, worker, (void *)(intptr_t)c);

		pthread_attr_destroy(&a);
		if (err) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			return -err;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

void work_queue_class(struct sd_job *j, enum work_class c)
{
	pthread_mutex_lock(&q_lock);
	push(&todo_head[c], &todo_tail[c], j);
	pthread_cond_signal(&q_cond[c]);
	pthread_mutex_unlock(&q_lock);
}

void work_serial_next(struct work_serial *s)
{
	struct sd_job *j = s->head;

	s->cur = NULL;
	if (!j)
		return;
	s->head = j->next;
	if (!s->head)
		s->tail = NULL;
	j->next = NULL;
	s->cur = j;
	work_queue_class(j, s->c);
}

void work_serial_add(struct work_serial *s, struct sd_job *j)
{
	push(&s->head, &s->tail, j);
	if (!s->cur)
		work_serial_next(s);
}

void work_queue(struct sd_job *j)
{
	work_queue_class(j, WORK_LIFECYCLE);
}

void work_queue_io(struct sd_job *j)
{
	work_queue_class(j, WORK_IO);
}

void work_post(struct sd_job *j)
{
	pthread_mutex_lock(&q_lock);
	push(&done_head, &done_tail, j);
	pthread_mutex_unlock(&q_lock);
	lws_cancel_service(loop_ctx);
}

void work_reap(void)
{
	pthread_mutex_lock(&q_lock);
	struct sd_job *j = done_head;

	done_head = done_tail = NULL;
	pthread_mutex_unlock(&q_lock);
	while (j) {
		struct sd_job *next = j->next;

		j->done(j);
		j = next;
	}
}
