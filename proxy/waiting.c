/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The waiting room (docs/network.md "Decisions"): one thread accepts on both listeners and
 * keeps every new connection in an epoll set until its first bytes decide where it goes
 * (conn_take) or its deadline passes; only then does a thread serve it (conn_serve). A
 * connection that has said nothing costs a slot and an fd here, never a thread, and never an
 * upstream connection where its protocol needs the client's bytes (conn_silent).
 *
 * Bounds: at most WAIT_MAX waiting, and when full the oldest undecided one is closed to
 * make room (a flood of silent connections pushes out its own, never a new one); at most
 * CONN_MAX served at once (each a thread, two for plain HTTP), the decided ones past that
 * wait for a thread up to CONN_FIRST_MS in the order they decided. Every connection closed
 * here without being served is a deny line (audit.c counts them past its rate).
 *
 * What it is not: the decisions themselves (conn.c: sniffing, the policy, the relays).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "proxy.h"

#define WAIT_EVENTS	 64 /* epoll events a pass */
#define WAIT_ACCEPTS	 64 /* accepts per listener a pass: the slots get read in between */
#define WAIT_PAUSE_MS	 10 /* no accept after EMFILE/ENOMEM for this long */
#define WAIT_READY_MS	 CONN_FIRST_MS /* a decided connection waits this long for a thread */
#define WAIT_TAG_LISTEN	 0xfffffffeu   /* epoll data of a listener (its index in the low bits) */
#define WAIT_TAG_WAKE	 0xffffffffu   /* ... of the wake pipe */
#define WAIT_STACK_BYTES (256u << 10)

enum { L_AGE, L_DUE };

struct wait_slot;
struct wait_link {
	struct wait_slot *prev, *next;
};
struct wait_list {
	struct wait_slot *head, *tail;
};

struct wait_slot {
	struct conn *c; /* NULL: free */
	int fd;
	uint32_t gen; /* changes with each use: an event for the slot's last user is ignored */
	uint64_t deadline_ms;
	bool ready; /* decided: in `ready`, not in epoll, waiting for a thread */
	/* L_AGE: the undecided, oldest first (the next to make room); L_DUE: the undecided by
	 * deadline (`due`), or the decided in `ready`, oldest first (their deadline order too). */
	struct wait_link link[2];
	struct wait_slot *next_free;
};

static struct {
	struct proxy *px;
	int ep;
	int wake[2]; /* a served connection's end writes a byte: a thread is free */
	int listen_fd[2];
	bool listen_explicit[2];
	bool paused; /* listeners out of the epoll set until pause_end_ms */
	uint64_t pause_end_ms;
	struct wait_slot slots[WAIT_MAX];
	struct wait_slot *free;
	struct wait_list age, due, ready;
	unsigned nused;
	pthread_attr_t attr;
} w;

static void wl_remove(struct wait_list *l, struct wait_slot *s, int k)
{
	struct wait_link *n = &s->link[k];

	if (n->prev)
		n->prev->link[k].next = n->next;
	else
		l->head = n->next;
	if (n->next)
		n->next->link[k].prev = n->prev;
	else
		l->tail = n->prev;
	n->prev = n->next = NULL;
}

/* Put `s` after `after` (NULL: first). */
static void wl_insert_after(struct wait_list *l, struct wait_slot *after, struct wait_slot *s,
			    int k)
{
	struct wait_slot *next = after ? after->link[k].next : l->head;

	s->link[k].prev = after;
	s->link[k].next = next;
	if (after)
		after->link[k].next = s;
	else
		l->head = s;
	if (next)
		next->link[k].prev = s;
	else
		l->tail = s;
}

/* Into `due` by deadline: from the tail, where nearly every one goes (the deadlines are
 * CONN_FIRST_MS or CONN_SERVER_FIRST_MS after now); at most WAIT_MAX steps. */
static void wl_insert_due(struct wait_slot *s)
{
	struct wait_slot *after = w.due.tail;

	while (after && after->deadline_ms > s->deadline_ms)
		after = after->link[L_DUE].prev;
	wl_insert_after(&w.due, after, s, L_DUE);
}

static uint64_t wait_tag(const struct wait_slot *s)
{
	return (uint64_t)s->gen << 32 | (uint64_t)(s - w.slots);
}

/* The slot back to the free list; its conn is the caller's. */
static void wait_slot_free(struct wait_slot *s)
{
	if (s->ready) {
		wl_remove(&w.ready, s, L_DUE);
	} else {
		wl_remove(&w.age, s, L_AGE);
		wl_remove(&w.due, s, L_DUE);
		/* the fd stays open (the conn's): it must leave the set by hand */
		epoll_ctl(w.ep, EPOLL_CTL_DEL, s->fd, NULL);
	}
	s->c = NULL;
	s->ready = false;
	s->gen = (s->gen + 1) % WAIT_TAG_LISTEN; /* never a listener's or the pipe's tag */
	s->next_free = w.free;
	w.free = s;
	w.nused--;
}

/* Close a waiting or decided connection unserved, with its line. */
static void wait_refuse(struct wait_slot *s, const char *rule)
{
	struct conn *c = s->c;

	wait_slot_free(s);
	conn_refuse(c, rule);
}

static void *wait_thread(void *arg)
{
	struct proxy *px = w.px;

	conn_serve(arg);
	atomic_fetch_sub(&px->nconns, 1);
	/* A full pipe already says a thread is free: nothing lost. */
	if (write(w.wake[1], "", 1) < 0 && errno != EAGAIN)
		proxy_log("waiting room: wake: %s", strerror(errno));
	return NULL;
}

/* A thread for a decided connection (a thread is free: the caller checked). */
static void wait_start(struct wait_slot *s)
{
	struct conn *c = s->c;
	pthread_t t;
	int e;

	wait_slot_free(s);
	atomic_fetch_add(&w.px->nconns, 1);
	e = pthread_create(&t, &w.attr, wait_thread, c);
	if (e != 0) {
		char rule[RULE_LEN];

		/* The budget (RLIMIT_NPROC, pids.max) is sized for CONN_MAX: shared with the
		 * port forwarders of the same uid, or memory. */
		atomic_fetch_sub(&w.px->nconns, 1);
		snprintf(rule, sizeof(rule), "deny (no thread: %s)", strerror(e));
		conn_refuse(c, rule);
	}
}

/* Decided (by its bytes, its end or its deadline): refused if it said nothing where it
 * must, else a thread now or a place in `ready`. */
static void wait_decided(struct wait_slot *s, bool eof)
{
	const char *silent = conn_silent(s->c, eof);

	if (silent) {
		wait_refuse(s, silent);
		return;
	}
	if (!w.ready.head && atomic_load(&w.px->nconns) < CONN_MAX) {
		wait_start(s);
		return;
	}
	wl_remove(&w.age, s, L_AGE);
	wl_remove(&w.due, s, L_DUE);
	epoll_ctl(w.ep, EPOLL_CTL_DEL, s->fd, NULL);
	s->ready = true;
	s->deadline_ms = now_ms() + WAIT_READY_MS;
	wl_insert_after(&w.ready, w.ready.tail, s, L_DUE);
}

/* A slot for a new connection: a free one, or the oldest undecided one's (else the oldest
 * decided one's) closed with its line. */
static struct wait_slot *wait_slot_get(void)
{
	struct wait_slot *s = w.free;

	if (!s) {
		static const char rule[] = "deny (too many waiting connections: 1024)";
		_Static_assert(WAIT_MAX == 1024, "the rule says 1024");

		wait_refuse(w.age.head ? w.age.head : w.ready.head, rule);
		s = w.free;
	}
	w.free = s->next_free;
	w.nused++;
	return s;
}

static void wait_pause(bool pause)
{
	for (int i = 0; i < 2; i++) {
		struct epoll_event ev = {.events = pause ? 0 : EPOLLIN,
					 .data.u64 = (uint64_t)WAIT_TAG_LISTEN << 32 | (unsigned)i};

		epoll_ctl(w.ep, EPOLL_CTL_MOD, w.listen_fd[i], &ev);
	}
	w.paused = pause;
	w.pause_end_ms = now_ms() + WAIT_PAUSE_MS;
}

/* Accept what listener `i` has (a bounded batch); each new connection into the set. */
static void wait_accept(int i)
{
	for (unsigned n = 0; n < WAIT_ACCEPTS; n++) {
		int fd = accept4(w.listen_fd[i], NULL, NULL, SOCK_CLOEXEC);
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
		struct wait_slot *s;
		struct conn *c;
		uint64_t deadline;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM ||
			    errno == ENOBUFS) {
				proxy_log("accept: %s: pausing %u ms", strerror(errno),
					  WAIT_PAUSE_MS);
				wait_pause(true);
			}
			return; /* EAGAIN: drained; ECONNABORTED and the like: next time */
		}
		if (conn_new(w.px, fd, w.listen_explicit[i], &c, &deadline) < 0)
			continue; /* refused at once, its line written */
		s = wait_slot_get();
		s->c = c;
		s->fd = fd;
		s->deadline_ms = deadline;
		wl_insert_after(&w.age, w.age.tail, s, L_AGE);
		wl_insert_due(s);
		ev.data.u64 = wait_tag(s);
		if (epoll_ctl(w.ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			wait_refuse(s, "deny (no room in the epoll set)");
	}
}

/* Bytes (or the end) on a waiting connection. */
static void wait_readable(struct wait_slot *s)
{
	bool eof;

	if (conn_take(s->c, &eof))
		wait_decided(s, eof);
}

/* The deadlines passed; threads freed for the decided. */
static void wait_tick(void)
{
	uint64_t now = now_ms();

	while (w.due.head && w.due.head->deadline_ms <= now) {
		bool eof;

		/* what came since the last event counts: read it first */
		(void)!conn_take(w.due.head->c, &eof);
		wait_decided(w.due.head, eof);
	}
	while (w.ready.head && w.ready.head->deadline_ms <= now)
		wait_refuse(w.ready.head, "deny (too many connections: 512)");
	_Static_assert(CONN_MAX == 512, "the rule says 512");
	while (w.ready.head && atomic_load(&w.px->nconns) < CONN_MAX)
		wait_start(w.ready.head);
	if (w.paused && now >= w.pause_end_ms)
		wait_pause(false);
}

/* Milliseconds to the next deadline, -1 when none. */
static int wait_timeout(void)
{
	uint64_t now = now_ms(), next = UINT64_MAX;

	if (w.due.head)
		next = w.due.head->deadline_ms;
	if (w.ready.head && w.ready.head->deadline_ms < next)
		next = w.ready.head->deadline_ms;
	if (w.paused && w.pause_end_ms < next)
		next = w.pause_end_ms;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now + 1);
}

int waiting_init(struct proxy *px, char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)WAIT_TAG_WAKE << 32};

	w.px = px;
	w.listen_fd[0] = px->explicit_fd;
	w.listen_explicit[0] = true;
	w.listen_fd[1] = px->tproxy_fd;
	w.listen_explicit[1] = false;
	for (unsigned i = 0; i < WAIT_MAX; i++) {
		w.slots[i].next_free = i + 1 < WAIT_MAX ? &w.slots[i + 1] : NULL;
		w.slots[i].fd = -1;
	}
	w.free = &w.slots[0];
	w.ep = epoll_create1(EPOLL_CLOEXEC);
	if (w.ep < 0 || pipe2(w.wake, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    epoll_ctl(w.ep, EPOLL_CTL_ADD, w.wake[0], &ev) < 0)
		return policy_errf(err, errlen, "the waiting room: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		int fl = fcntl(w.listen_fd[i], F_GETFL);

		ev = (struct epoll_event){.events = EPOLLIN,
					  .data.u64 =
						  (uint64_t)WAIT_TAG_LISTEN << 32 | (unsigned)i};
		/* Non-blocking: a connection reset between epoll and accept must not stall
		 * every other. */
		if (fl < 0 || fcntl(w.listen_fd[i], F_SETFL, fl | O_NONBLOCK) < 0 ||
		    epoll_ctl(w.ep, EPOLL_CTL_ADD, w.listen_fd[i], &ev) < 0)
			return policy_errf(err, errlen, "the waiting room: listener: %s",
					   strerror(errno));
	}
	pthread_attr_init(&w.attr);
	pthread_attr_setdetachstate(&w.attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&w.attr, WAIT_STACK_BYTES);
	return 0;
}

void *waiting_run(void *arg)
{
	struct epoll_event evs[WAIT_EVENTS];

	(void)arg;
	for (;;) {
		int n = epoll_wait(w.ep, evs, WAIT_EVENTS, wait_timeout());

		if (n < 0 && errno != EINTR) {
			proxy_log("waiting room: epoll_wait: %s", strerror(errno));
			usleep(10000);
		}
		for (int i = 0; i < n; i++) {
			uint32_t tag = (uint32_t)(evs[i].data.u64 >> 32);
			uint32_t idx = (uint32_t)evs[i].data.u64;
			char drain[64];

			if (tag == WAIT_TAG_WAKE) {
				while (read(w.wake[0], drain, sizeof(drain)) > 0)
					;
			} else if (tag == WAIT_TAG_LISTEN) {
				if (!w.paused)
					wait_accept((int)idx);
			} else if (idx < WAIT_MAX && w.slots[idx].c && !w.slots[idx].ready &&
				   w.slots[idx].gen == tag) {
				wait_readable(&w.slots[idx]);
			}
		}
		wait_tick();
	}
	return NULL;
}
