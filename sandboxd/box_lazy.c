/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lazy restore in a fleet (docs/fleet.md, "Lazy restore"): a create from a snapshot this
 * host does not hold, or a wake, pulls every file of the snapshot but its memory (the state,
 * the disk layers, meta.yaml: store/snap_remote.c), and the VMM starts with an empty RAM that
 * a pager thread here fills through its userfaultfd (store/pager.c, vmm/mem_pager.c): the
 * chunk of each page the guest touches first, fetched through the host's chunk cache and
 * checked against the sealed manifest. Once the box answers, the rest of its memory follows
 * in order. The box is ready after what its first answer needed, not after all of it.
 *
 * A chunk that is missing or corrupt ends the pager with a message naming it; the pager's
 * end stops the VMM before the page is ever mapped (a missing page waits, it is never read
 * as zeros). Before the box answered, the create fails with that message; after, the box is
 * failed with it. The pager outlives the job: the job's worker and the pager thread each
 * hold the restore, and the last to let go posts it to the loop, which logs its figures,
 * fails the box if it must, and frees it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "sandboxd.h"
#include "box_lazy.h"
#include "snap_remote.h"

#define LAZY_ACCEPT_MS 60000 /* the VMM's hello within this, or the pager gives up */

/* The boxes whose memory is still being filled, for box_lazy_wait (a stop or a capture waits
 * for the fill off the lifecycle lock: the VMM takes no snapshot of a RAM with holes). */
static pthread_mutex_t filling_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t filling_cond = PTHREAD_COND_INITIALIZER;
static struct lazy_restore *filling_head;

struct lazy_restore {
	struct sd_job job; /* posted by the last to let go */
	struct lazy_pull lp;
	struct pager pg;
	char box_id[SD_ID_LEN + 1];
	char manifest[64];
	int sock;      /* the pager's end, until its thread takes it */
	int refs;      /* (__atomic) the worker's and the pager thread's */
	int result;    /* (__atomic) 1 while the pager runs, then its end */
	bool restored; /* the box answered (the worker's, read once both let go) */
	uint64_t t0, ready_ms, ready_bytes;
	char err[PAGER_ERR_MAX];
	/* the sandbox's SANDBOX_LAZY_MARK: set before the fill may end (pager_prefetch), removed
	 * by the pager's thread once every layer is whole */
	char marker[4300];
	struct lazy_restore *filling_next;
	bool filling; /* on the filling list (filling_lock) */
};

static void filling_drop(struct lazy_restore *l)
{
	pthread_mutex_lock(&filling_lock);
	if (l->filling) {
		struct lazy_restore **pp = &filling_head;

		while (*pp && *pp != l)
			pp = &(*pp)->filling_next;
		if (*pp)
			*pp = l->filling_next;
		l->filling = false;
		pthread_cond_broadcast(&filling_cond);
	}
	pthread_mutex_unlock(&filling_lock);
}

void box_lazy_wait(const char *box_id, unsigned ms)
{
	struct timespec end;

	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += ms / 1000;
	pthread_mutex_lock(&filling_lock);
	for (;;) {
		struct lazy_restore *l = filling_head;

		while (l && strcmp(l->box_id, box_id) != 0)
			l = l->filling_next;
		if (!l || pthread_cond_timedwait(&filling_cond, &filling_lock, &end) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&filling_lock);
}

static void lazy_done(struct sd_job *sj)
{
	struct lazy_restore *l = (struct lazy_restore *)sj;
	struct box *b = box_by_id(l->box_id);
	int r = l->result;

	if (r == 0)
		sd_log("box %s: its memory in from the store in %llu ms: %llu MiB (%llu chunks on "
		       "faults, %llu ahead, %llu of zeros), %llu MiB of it before its first "
		       "answer (at %llu ms); its disk layers: %llu reads waited for them (%llu "
		       "before that answer), %llu chunks filled after",
		       l->box_id, (unsigned long long)(sd_now_ms() - l->t0),
		       (unsigned long long)(l->pg.bytes >> 20),
		       (unsigned long long)l->pg.fault_chunks,
		       (unsigned long long)l->pg.prefetch_chunks,
		       (unsigned long long)l->pg.zero_chunks,
		       (unsigned long long)(l->ready_bytes >> 20),
		       (unsigned long long)(l->ready_ms - l->t0),
		       (unsigned long long)l->pg.disk_wants,
		       (unsigned long long)l->pg.disk_wants_at_prefetch,
		       (unsigned long long)l->pg.disk_fills);
	else if (l->restored && r != -ESRCH)
		sd_log("box %s: its lazy restore failed after it answered: %s", l->box_id, l->err);
	/* a failure after the box answered: its VM is stopped; the box says why (before, the
	 * create failed with it) */
	if (b && l->restored && r < 0 && r != -ESRCH && b->status == BOX_READY) {
		b->status = BOX_FAILED;
		snprintf(b->status_message, sizeof(b->status_message),
			 "its memory could not be restored from the store (%.900s): its VM is "
			 "stopped; delete it",
			 l->err);
		box_store(b);
	}
	if (snap_store_hooks && snap_store_hooks->lazy_close)
		snap_store_hooks->lazy_close(&l->lp);
	free(l);
}

static void lazy_put(struct lazy_restore *l)
{
	if (__atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		l->job.done = lazy_done;
		work_post(&l->job);
	}
}

static void *pager_main(void *arg)
{
	struct lazy_restore *l = arg;
	int r = pager_accept(&l->pg, l->sock, l->lp.m.memory_bytes, &l->lp.src, LAZY_ACCEPT_MS);

	l->sock = -1; /* (the pager's, closed by it) */
	if (r == 0)
		r = pager_run(&l->pg);
	if (r == 0 && l->marker[0] && unlink(l->marker) < 0 && errno != ENOENT)
		sd_log("box %s: its layers are whole, but their mark stays: %s", l->box_id,
		       strerror(errno));
	snprintf(l->err, sizeof(l->err), "%s", l->pg.err);
	__atomic_store_n(&l->result, r, __ATOMIC_RELEASE);
	filling_drop(l);
	/* its end stops a VMM still missing pages: after the result, so that a create that
	 * fails for it finds the message */
	pager_close(&l->pg);
	lazy_put(l);
	return NULL;
}

int box_lazy_pull(const char *workspace, const char *manifest, uint64_t min_gen,
		  const char *store_name, const char *box_id, struct lazy_restore **out,
		  struct lc_report *r)
{
	struct lazy_restore *l = calloc(1, sizeof(*l));
	int err;

	*out = NULL;
	if (!l)
		return lc_fail(r, -ENOMEM, "out of memory");
	l->t0 = sd_now_ms();
	l->sock = -1;
	l->refs = 1;
	l->result = 1;
	snprintf(l->box_id, sizeof(l->box_id), "%s", box_id);
	snprintf(l->manifest, sizeof(l->manifest), "%s", manifest);
	err = snap_store_hooks->pull_lazy(workspace, manifest, min_gen, &l->lp, r->error,
					  sizeof(r->error));
	if (err < 0) {
		free(l);
		return err;
	}
	/* the name it has here, as an eager pull would have sealed it under (the sandbox's base) */
	snprintf(l->lp.m.name, sizeof(l->lp.m.name), "%s", store_name);
	*out = l;
	return 0;
}

/* What came in of its memory so far (boot_src.progress): the pager's and the read-ahead's. */
static uint64_t lazy_progress(void *arg)
{
	struct lazy_restore *l = arg;

	return __atomic_load_n(&l->pg.bytes, __ATOMIC_RELAXED) +
	       (l->lp.src.unused_bytes ? l->lp.src.unused_bytes(l->lp.src.arg) : 0);
}

int box_lazy_restore(struct lazy_restore *l, const struct create_opts *o, struct sandbox *sb,
		     struct lc_report *r)
{
	struct boot_src src = {.dir = l->lp.dir};
	pthread_attr_t at;
	pthread_t t;
	int sv[2], err, res;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return lc_fail(r, -errno, "a socket for the pager: %s", strerror(errno));
	/* (fd 0 would say "no pager" to the lifecycle: 3 up) */
	if (sv[0] < 3) {
		int fd = fcntl(sv[0], F_DUPFD_CLOEXEC, 3);

		close(sv[0]);
		if (fd < 0) {
			close(sv[1]);
			return lc_fail(r, -errno, "a socket for the pager: %s", strerror(errno));
		}
		sv[0] = fd;
	}
	l->sock = sv[1];
	__atomic_add_fetch(&l->refs, 1, __ATOMIC_ACQ_REL);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &at, pager_main, l);
	pthread_attr_destroy(&at);
	if (err) {
		__atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL);
		close(sv[0]);
		close(sv[1]);
		l->sock = -1;
		return lc_fail(r, -err, "a thread for the pager: %s", strerror(err));
	}
	src.pager_fd = sv[0];
	src.progress = lazy_progress; /* a slow store that goes on is waited for */
	src.progress_arg = l;
	err = sandbox_restore_create(l->lp.dir, &l->lp.m, o, &src, sb, r);
	close(sv[0]); /* (the VMM has its own; a VMM that never came: the pager sees the end) */
	res = __atomic_load_n(&l->result, __ATOMIC_ACQUIRE);
	if (err < 0 && res < 0 && res != -ESRCH) { /* the pager's failure stopped it */
		lc_clear(r);
		return lc_fail(r, res, "its memory from the store: %s", l->err);
	}
	if (err == 0) {
		l->restored = true;
		l->ready_ms = sd_now_ms();
		/* what came before its answer: what the pager put in, and what was read ahead
		 * for it and not put in yet */
		l->ready_bytes =
			__atomic_load_n(&l->pg.bytes, __ATOMIC_RELAXED) +
			(l->lp.src.unused_bytes ? l->lp.src.unused_bytes(l->lp.src.arg) : 0);
		pthread_mutex_lock(&filling_lock);
		if (__atomic_load_n(&l->result, __ATOMIC_ACQUIRE) == 1) { /* still filling */
			l->filling = true;
			l->filling_next = filling_head;
			filling_head = l;
		}
		pthread_mutex_unlock(&filling_lock);
		if (sandbox_path(sb, SANDBOX_LAZY_MARK, l->marker, sizeof(l->marker)) < 0)
			l->marker[0] = 0;
		if (l->lp.src.answered)
			l->lp.src.answered(l->lp.src.arg);
		pager_prefetch(&l->pg);
	}
	return err;
}

void box_lazy_release(struct lazy_restore *l)
{
	if (!l)
		return;
	/* the VMM opened what it needed of it (its disk's layers are linked into the sandbox,
	 * its state went as a sealed copy): the pulled directory goes */
	snap_pull_lazy_done(l->lp.dir);
	lazy_put(l);
}
