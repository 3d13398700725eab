/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a box's lifecycle does off the loop: create (boot, or restore a snapshot), start
 * (resume a suspended box, else boot it again), stop (suspend: its memory to disk, its VMM
 * gone), delete, snapshot. One job at a time per box (box.busy); requests and WebSockets
 * that need the box running wait on it (waiters) and go on when the job is done.
 *
 * A worker sees only its job's copy of what it needs; the job's done, on the loop, writes
 * the outcome into the box record (saved before anyone is answered, so a crash right after
 * finds what the client was told).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "sandboxd.h"

struct box_waiter {
	struct sd_pending *pending; /* an HTTP request, or */
	void (*then)(struct sd_req *q, struct box *b);
	void *ws; /* a WebSocket session */
	void (*ws_then)(void *ws, struct box *b, int err, const char *msg);
	struct box_waiter *next;
};

struct box_job {
	struct sd_job job;
	enum box_job_kind kind;
	char box_id[SD_ID_LEN + 1];
	char sandbox[40];
	struct box_create_args create;
	char snap_name[64]; /* J_SNAPSHOT: the lifecycle's snapshot name to make */
	char snap_id[SD_ID_LEN + 1];
	char parent[48]; /* J_SNAPSHOT: the box's snapshot in the store before it */
	char workspace[SD_WORKSPACE_MAX + 1];
	int err;
	char msg[LC_ERROR_MAX];
	char new_sandbox[16];
	pid_t vmm_pid;		    /* J_STOP, J_DELETE: the VMM that ended, reaped on the loop */
	struct sd_pending *pending; /* an HTTP request answered when done */
	bool forget_on_fail;	    /* a create whose client waits: a failure leaves nothing */
	struct lazy_restore *lazy;  /* a create restored lazily from the store (box_lazy.c) */
	void (*reply)(struct sd_req *q, struct box *b, int err, const char *msg);
};

static void report_note(void *ctx, const char *line)
{
	sd_log("%s", line);
}

/* A warm pool's sandbox made the box's: its policy (when the create gave one), its vCPUs
 * running again. 0, or -errno (the caller boots one instead). */
static int run_claim(struct box_job *j, const struct create_opts *o, struct lc_report *r)
{
	struct sandbox sb;
	int err = sandbox_load(j->create.claim, &sb);

	if (err < 0)
		return lc_fail(r, err, "the pool's sandbox %s is gone", j->create.claim);
	/* running first: the new policy's CA certificate goes in through the agent. No tenant's
	 * code has run in it yet, and the create answers only once the policy is in force. */
	if ((err = sandbox_pause(&sb, false, r)) < 0)
		goto fail;
	if (o->nnet_opts && (err = sandbox_net_reconfigure(&sb, o, r)) < 0)
		goto fail;
	snprintf(j->new_sandbox, sizeof(j->new_sandbox), "%s", sb.id);
	return 0;
fail:;
	struct lc_report r2 = {0};

	if (sandbox_rm(&sb, true, &r2) < 0)
		sd_log("pool: %s cannot be removed: %s", sb.id, r2.error);
	return err;
}

void claim_drop(struct box_create_args *a)
{
	if (a->claim[0] && a->claim_fd >= 0)
		close(a->claim_fd);
	a->claim_fd = -1;
	a->claim[0] = 0;
}

static void run_create(struct box_job *j, struct lc_report *r)
{
	struct box_create_args *a = &j->create;
	struct create_opts o = CREATE_OPTS_DEFAULT;
	struct sandbox sb;

	o.image = a->image;
	o.cpus = a->cpus;
	o.memory_mib = a->memory_mib;
	o.disk_size_gib = a->disk_gib;
	o.timeout_s = a->timeout_s ? a->timeout_s : 120;
	/* In a fleet with a store a box may be captured or moved to another host: its disk must
	 * stand on the image alone, not on this host's ready snapshot's layer (another host's
	 * ready layer is another layer): it boots cold. */
	o.cold = snap_store_hooks != NULL;
	o.name = a->sandbox_name;
	o.net_opts = a->net_opts;
	o.nnet_opts = a->nnet_opts;
	if (a->claim[0]) {
		j->err = run_claim(j, &o, r);
		if (j->err == 0)
			return;
		sd_log("pool: a claim failed (%s): booting instead", r->error);
		lc_clear(r);
		claim_drop(a);
	}
	if (j->lazy) {
		j->err = box_lazy_restore(j->lazy, &o, &sb, r);
	} else if (a->snap_store[0]) {
		char dir[4200];
		struct snap_meta m;
		struct boot_src src;

		j->err = sandbox_snapshot_open(a->snap_store, dir, sizeof(dir), &m, r);
		if (j->err < 0)
			return;
		src = (struct boot_src){.dir = dir};
		j->err = sandbox_restore_create(dir, &m, &o, &src, &sb, r);
	} else {
		j->err = sandbox_create(&o, &sb, r);
	}
	if (j->err == 0)
		snprintf(j->new_sandbox, sizeof(j->new_sandbox), "%s", sb.id);
}

static void job_run(struct sd_job *sj)
{
	struct box_job *j = (struct box_job *)sj;
	struct lc_report r = {.note = report_note};
	struct sandbox sb;

	if (j->kind == J_CREATE && j->create.claim[0] && !j->create.nnet_opts) {
		/* a claim without a policy to apply touches only its own sandbox: no lock, so a
		 * create that boots meanwhile does not hold it up */
		j->err = run_claim(j, &(struct create_opts)CREATE_OPTS_DEFAULT, &r);
		if (j->err == 0)
			goto unlocked;
		sd_log("pool: a claim failed (%s): booting instead", r.error);
		lc_clear(&r);
		claim_drop(&j->create);
	}
	/* A snapshot this host does not hold (made on another host of a fleet) comes from the
	 * fleet's store first, off the lock: a pull may take minutes. It holds its disk's whole
	 * chain (a restore links a snapshot's layers into its sandbox, restore.c): nothing else. */
	if (j->kind == J_CREATE && j->create.snap_store[0] && snap_store_hooks) {
		uint64_t gen = j->create.snap_gen ? j->create.snap_gen : 1;
		char dir[4200];
		struct stat st;

		/* lazily unless it is here already (made here, or pulled before) */
		if (snap_store_hooks->pull_lazy &&
		    (snap_dir(j->create.snap_store, dir, sizeof(dir)) < 0 || lstat(dir, &st) < 0))
			j->err = box_lazy_pull(j->workspace, j->create.snap_id, gen,
					       j->create.snap_store, j->box_id, &j->lazy, &r);
		else
			j->err = snap_store_hooks->pull(j->workspace, j->create.snap_id, gen,
							j->create.snap_store, r.error,
							sizeof(r.error));
		if (j->err < 0)
			goto unlocked;
	}
	if (j->kind == J_STOP || j->kind == J_SNAPSHOT) /* a lazy restore's RAM whole first */
		box_lazy_wait(j->box_id, LAZY_WAIT_MS);
	pthread_mutex_lock(&lifecycle_lock);
	if (j->kind == J_CREATE) {
		run_create(j, &r);
		goto out;
	}
	if (!j->sandbox[0]) /* a create that failed: its sandbox, if any, by its name */
		box_sandbox_name_of(j->box_id, j->sandbox);
	j->err = sandbox_find(j->sandbox, &sb, &r);
	if (j->err < 0) {
		if (j->kind == J_DELETE && (j->err == -ENOENT || j->err == -EINVAL)) {
			j->err = 0; /* nothing left to remove */
			lc_clear(&r);
		}
		goto out;
	}
	if (j->kind == J_STOP || j->kind == J_DELETE)
		j->vmm_pid = sb.pid;
	switch (j->kind) {
	case J_START: {
		enum sandbox_state st = sandbox_state(&sb, NULL);

		if (st == SB_RUNNING)
			j->err = 0;
		else if (st == SB_PAUSED)
			j->err = sandbox_pause(&sb, false, &r);
		else if (st == SB_SUSPENDED)
			j->err = sandbox_resume_suspended(&sb, &r);
		else
			j->err = sandbox_start(&sb, 120, &r);
		break;
	}
	case J_STOP: {
		struct snap_take t = {0};
		enum sandbox_state st = sandbox_state(&sb, NULL);

		j->err = st == SB_SUSPENDED || st == SB_STOPPED ? 0 : sandbox_suspend(&sb, &t, &r);
		break;
	}
	case J_DELETE:
		j->err = sandbox_rm(&sb, true, &r);
		break;
	case J_SNAPSHOT: {
		struct snap_take t = {.name = j->snap_name};

		j->err = sandbox_snapshot(&sb, &t, &r);
		break;
	}
	default:
		j->err = -EINVAL;
	}
out:
	pthread_mutex_unlock(&lifecycle_lock);
	box_lazy_release(j->lazy);
	j->lazy = NULL;
	/* a capture in a fleet is ready once it is in the store: any host restores it */
	if (j->kind == J_SNAPSHOT && j->err == 0 && snap_store_hooks)
		j->err = snap_store_hooks->push(j->workspace, j->snap_name, j->snap_id, 1,
						j->parent[0] ? j->parent : NULL, r.error,
						sizeof(r.error));
unlocked:
	if (j->err < 0)
		snprintf(j->msg, sizeof(j->msg), "%s", r.error[0] ? r.error : strerror(-j->err));
}

static void waiters_run(struct box *b, int err, const char *msg);

/* What waited for b, which went (moved: on to its wake; else deleted: not found). */
static void waiters_went(struct box *b, bool moved)
{
	struct box_waiter *w = b->waiters;

	b->waiters = NULL;
	while (w) {
		struct box_waiter *next = w->next;
		struct sd_req *q = w->pending ? pending_take(w->pending) : NULL;

		if (q && moved)
			req_moved(q);
		else if (q)
			req_reply_error(q, 404, "NotFound", "Sandbox not found");
		else if (w->ws) /* an early close: the client sends its command again */
			w->ws_then(w->ws, b, moved ? -ESTALE : -ENOENT,
				   moved ? "the sandbox moved" : "the sandbox was deleted");
		free(w);
		w = next;
	}
}

void box_waiters_moved(struct box *b)
{
	waiters_went(b, true);
}

void box_waiters_gone(struct box *b)
{
	waiters_went(b, false);
}

static void waiters_run(struct box *b, int err, const char *msg)
{
	struct box_waiter *w = b->waiters;

	b->waiters = NULL;
	while (w) {
		struct box_waiter *next = w->next;

		if (w->pending) {
			struct sd_req *q = pending_take(w->pending);

			if (q && err < 0)
				req_reply_error(q, 503, "ServiceUnavailable",
						"the sandbox cannot start: %s", msg);
			else if (q)
				w->then(q, b);
		} else if (w->ws) {
			w->ws_then(w->ws, b, err, msg);
		}
		free(w);
		w = next;
	}
}

static void box_job_queue(struct box *b, struct box_job *j);

const struct snap_store_hooks *snap_store_hooks;

static void job_done(struct sd_job *sj)
{
	struct box_job *j = (struct box_job *)sj;
	struct box *b = box_by_id(j->box_id);

	/* A VMM this daemon started is its child: once stopped, it is reaped here (WNOHANG: one
	 * still exiting is left for init after our exit), or it stays a zombie. */
	if (j->vmm_pid > 0)
		(void)waitpid(j->vmm_pid, NULL, WNOHANG);
	if (!b) {
		if (j->kind == J_CREATE)
			claim_drop(&j->create);
		free(j);
		return;
	}
	b->busy = false;
	b->updated_ms = sd_now_ms();
	switch (j->kind) {
	case J_CREATE:
		for (unsigned i = 0; i < j->create.nnet_opts; i++)
			free(j->create.net_opts[i]);
		free(j->create.net_opts);
		proxy_config_cleanup(b->id);
		if (j->err == 0) {
			snprintf(b->sandbox, sizeof(b->sandbox), "%s", j->new_sandbox);
			b->status = BOX_READY;
			b->status_message[0] = 0;
			if (j->create.claim[0] && j->create.claim_fd >= 0) {
				link_adopt(b, j->create.claim_fd); /* warmed up: no connect */
				j->create.claim_fd = -1;
			}
		} else {
			b->status = BOX_FAILED;
			snprintf(b->status_message, sizeof(b->status_message), "%s", j->msg);
		}
		metrics_duration(j->create.claim[0] && j->err == 0 ? "claim" : "create",
				 sd_now_ms() - b->created_ms);
		claim_drop(&j->create);
		break;
	case J_START:
		b->starting = false;
		if (j->err == 0) {
			b->status = BOX_READY;
			b->stopped_ms = 0;
			b->status_message[0] = 0;
			metrics_duration("wake", sd_now_ms() - j->create.queued_ms);
		} else {
			b->status = BOX_FAILED;
			snprintf(b->status_message, sizeof(b->status_message), "%s", j->msg);
		}
		break;
	case J_STOP:
		if (j->err == 0) {
			b->status = BOX_STOPPED;
			b->stopped_ms = sd_now_ms();
		}
		break;
	case J_SNAPSHOT:
		if (j->err == 0) /* the next capture's parent */
			snprintf(b->store_last, sizeof(b->store_last), "%s", j->snap_id);
		snap_capture_done(j->snap_id, j->err, j->msg);
		break;
	case J_DELETE:
		break;
	}
	b->last_active_ms = sd_now_ms();
	if (j->kind == J_DELETE) {
		if (j->err < 0) {
			b->status = BOX_FAILED;
			snprintf(b->status_message, sizeof(b->status_message), "delete failed: %s",
				 j->msg);
			box_store(b);
		} else {
			waiters_run(b, -ENOENT, "the sandbox was deleted");
			box_forget(b);
			b = NULL;
		}
	} else if (box_save(b) < 0) {
		sd_log("box %s: cannot save its record", b->id);
	}
	if (j->pending) {
		struct sd_req *q = pending_take(j->pending);

		if (q)
			j->reply(q, b, j->err, j->msg);
	} else if (j->kind == J_CREATE && b && b->create_wait) {
		struct sd_req *q = pending_take(b->create_wait);

		b->create_wait = NULL;
		if (q)
			j->reply(q, b, j->err, j->msg);
		else
			j->forget_on_fail = false; /* nobody was told: it stays, failed */
	} else {
		j->forget_on_fail = false; /* answered 408 already: it stays, failed, to be seen */
	}
	if (j->kind == J_CREATE && b && j->err < 0 && j->forget_on_fail) {
		waiters_run(b, j->err, j->msg);
		box_forget(b);
		b = NULL;
	}
	if (b && b->delete_requested && !b->busy) {
		struct box_job *d = calloc(1, sizeof(*d));

		if (d) {
			d->kind = J_DELETE;
			box_job_queue(b, d);
		}
	} else if (b && b->waiters) {
		if (b->status == BOX_READY)
			waiters_run(b, 0, "");
		else if (b->status == BOX_STOPPED)
			box_start_job(b, NULL, NULL);
		else
			waiters_run(b, -EIO, b->status_message[0] ? b->status_message : "failed");
	}
	free(j);
}

static void box_job_queue(struct box *b, struct box_job *j)
{
	snprintf(j->box_id, sizeof(j->box_id), "%s", b->id);
	snprintf(j->sandbox, sizeof(j->sandbox), "%s", b->sandbox);
	snprintf(j->workspace, sizeof(j->workspace), "%s", b->workspace);
	j->job.run = job_run;
	j->job.done = job_done;
	j->create.queued_ms = sd_now_ms();
	b->busy = true;
	if (j->kind == J_STOP || j->kind == J_DELETE) {
		link_close(b); /* its clients are told 1001: they come back and wake it */
		ws_box_gone(b->id);
	}
	work_queue(&j->job);
}

int box_create_job(struct box *b, const struct box_create_args *a, struct sd_req *q,
		   void (*reply)(struct sd_req *q, struct box *b, int err, const char *msg))
{
	struct box_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->kind = J_CREATE;
	j->create = *a;
	if (q) { /* parked on the box, so that the tick can answer 408 at its deadline */
		b->create_wait = req_park(q);
		j->reply = reply;
		j->forget_on_fail = true;
	}
	box_job_queue(b, j);
	return 0;
}

int box_start_job(struct box *b, struct sd_req *q,
		  void (*reply)(struct sd_req *q, struct box *b, int err, const char *msg))
{
	struct box_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->kind = J_START;
	if (q) {
		j->pending = req_park(q);
		j->reply = reply;
	}
	box_job_queue(b, j);
	return 0;
}

int box_simple_job(struct box *b, enum box_job_kind kind, struct sd_req *q,
		   void (*reply)(struct sd_req *q, struct box *b, int err, const char *msg))
{
	struct box_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->kind = kind;
	if (q) {
		j->pending = req_park(q);
		j->reply = reply;
	}
	box_job_queue(b, j);
	return 0;
}

int box_snapshot_job(struct box *b, const char *store_name, const char *snap_id)
{
	struct box_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->kind = J_SNAPSHOT;
	snprintf(j->snap_name, sizeof(j->snap_name), "%s", store_name);
	snprintf(j->snap_id, sizeof(j->snap_id), "%s", snap_id);
	/* its state in the store when it has been there (its own chunks, cached where it woke),
	 * else its last capture here */
	char move_snap[64];

	if (b->fleet_gen || b->ckpt_gen)
		box_move_names(b->id, b->fleet_gen, move_snap, j->parent);
	else
		snprintf(j->parent, sizeof(j->parent), "%s", b->store_last);
	box_job_queue(b, j);
	return 0;
}

/* ---- waking a box for a request ---- */

static int waiter_add(struct box *b, struct box_waiter *w)
{
	unsigned n = 0;

	for (struct box_waiter *x = b->waiters; x; x = x->next)
		n++;
	if (n >= BOX_WAITERS_MAX)
		return -EAGAIN;
	w->next = b->waiters;
	b->waiters = w;
	if (!b->busy && b->status == BOX_STOPPED)
		box_start_job(b, NULL, NULL);
	return 0;
}

void box_wake_then(struct box *b, struct sd_req *q, void (*then)(struct sd_req *q, struct box *b))
{
	if (b->status == BOX_READY && !b->busy) {
		then(q, b);
		return;
	}
	if (b->status == BOX_PROVISIONING || b->status == BOX_FAILED) {
		req_reply_error(q, 400, "NotReady", "the sandbox is %s",
				box_status_name(b->status));
		return;
	}
	struct box_waiter *w = calloc(1, sizeof(*w));

	if (!w || !(w->pending = req_park(q))) {
		free(w);
		return;
	}
	w->then = then;
	if (waiter_add(b, w) < 0) {
		pending_take(w->pending);
		free(w);
		req_add_header(q, "retry-after:", "1");
		req_reply_error(q, 503, "ServiceUnavailable",
				"too many requests wait for this sandbox");
	}
}

void box_wake_ws(struct box *b, void *ws,
		 void (*then)(void *ws, struct box *b, int err, const char *msg))
{
	if (b->status == BOX_READY && !b->busy) {
		then(ws, b, 0, "");
		return;
	}
	if (b->status == BOX_PROVISIONING || b->status == BOX_FAILED) {
		then(ws, b, -EAGAIN, b->status == BOX_FAILED ? "it failed" : "it is provisioning");
		return;
	}
	struct box_waiter *w = calloc(1, sizeof(*w));

	if (!w) {
		then(ws, b, -ENOMEM, "out of memory");
		return;
	}
	w->ws = ws;
	w->ws_then = then;
	if (waiter_add(b, w) < 0) {
		free(w);
		then(ws, b, -EAGAIN, "too many clients wait for this sandbox");
	}
}

void box_wake_cancel(void *ws)
{
	for (struct box *b = box_first(); b; b = b->next)
		for (struct box_waiter **p = &b->waiters; *p; p = &(*p)->next)
			if ((*p)->ws == ws) {
				struct box_waiter *w = *p;

				*p = w->next;
				free(w);
				return;
			}
}
