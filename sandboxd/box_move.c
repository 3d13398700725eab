/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A box's move in a fleet with an object store (docs/fleet.md, "Moves"): a stop (the user's,
 * or the idle one) suspends it into the store and lets it go, and the next request wakes it
 * on any host with room, with its name, id, files and processes.
 *
 * The stop: its memory and disks as a lifecycle snapshot (mv-<id hex>-<generation>), pushed as
 * the store's manifest box-<id> at the box's next generation; only once that is in the store
 * is its record (stopped, that generation) put in the fleet's boxes bucket, its ownership
 * released and its sandbox removed here. A push that fails leaves the box running where it
 * was (the stop fails, nothing is lost). The wake: the host that takes the wake makes the box
 * from its record and restores it from that manifest (a pull, every chunk checked; the
 * generation at least the record's, so an older copy is refused).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "sandboxd.h"

struct release_job {
	struct sd_job job;
	struct box_push p;
	char *record; /* the box stopped, at gen: what the fleet keeps of it */
	int cancel;   /* (__atomic) a delete came: not let go (box->release_cancel) */
	int err;
	char msg[LC_ERROR_MAX];
};

void box_move_names(const char *id, uint64_t gen, char snap_name[64], char manifest[48])
{
	char hex[33] = {0};

	for (size_t i = 0, j = 0; id[i] && j < 32; i++)
		if (id[i] != '-')
			hex[j++] = id[i];
	snprintf(snap_name, 64, "mv-%s-%llu", hex, (unsigned long long)gen);
	snprintf(manifest, 48, "box-%s", id);
}

void box_push_init(struct box_push *p, const struct box *b, uint64_t gen)
{
	memset(p, 0, sizeof(*p));
	p->gen = gen;
	box_move_names(b->id, gen, p->snap_name, p->manifest);
	snprintf(p->box_id, sizeof(p->box_id), "%s", b->id);
	snprintf(p->sandbox, sizeof(p->sandbox), "%s", b->sandbox);
	snprintf(p->workspace, sizeof(p->workspace), "%s", b->workspace);
}

/* The frozen layers of sandbox sb's disk (every layer file but its top). */
static unsigned frozen_layers(const struct sandbox *sb)
{
	DIR *d = opendir(sb->dir);
	struct dirent *e;
	unsigned n = 0;

	while (d && (e = readdir(d)))
		n += snap_valid_layer_name(e->d_name) && strcmp(e->d_name, sb->top) != 0;
	if (d)
		closedir(d);
	return n;
}

int box_push_run(const struct box_push *p, struct sandbox *sb, struct lc_report *r)
{
	struct snap_take t = {.name = p->snap_name};
	int err;

	box_lazy_wait(p->box_id, LAZY_WAIT_MS); /* a lazy restore's RAM whole first */
	pthread_mutex_lock(&lifecycle_lock);
	err = sandbox_find(p->sandbox, sb, r);
	if (err == 0 && p->max_frozen && frozen_layers(sb) >= p->max_frozen)
		err = lc_fail(r, -ELOOP,
			      "its disk has %u frozen layers: no more checkpoints until it is "
			      "stopped or moves (its next restore makes them one)",
			      p->max_frozen);
	if (err == 0)
		err = sandbox_snapshot(sb, &t, r);
	pthread_mutex_unlock(&lifecycle_lock);
	if (err == 0)
		err = snap_store_hooks->push(p->workspace, p->snap_name, p->manifest, p->gen, NULL,
					     r->error, sizeof(r->error));
	return err;
}

static void release_run(struct sd_job *sj)
{
	struct release_job *j = (struct release_job *)sj;
	struct lc_report r = {.note = NULL};
	struct sandbox sb;

	j->err = box_push_run(&j->p, &sb, &r);
	/* deleted during the push: kept (and deleted) here, not given to the fleet, where a wake
	 * through another host could take it before the delete caught up */
	if (j->err == 0 && __atomic_load_n(&j->cancel, __ATOMIC_ACQUIRE))
		j->err = lc_fail(&r, -ECANCELED, "deleted during its stop");
	if (j->err == 0)
		j->err = fleet_hooks->release(j->p.box_id, j->record, r.error, sizeof(r.error));
	if (j->err < 0) {
		snprintf(j->msg, sizeof(j->msg), "%s", r.error[0] ? r.error : strerror(-j->err));
		return;
	}
	/* in the store and let go: this host's copy goes (a wake elsewhere restores it) */
	lc_clear(&r);
	pthread_mutex_lock(&lifecycle_lock);
	if (sandbox_rm(&sb, true, &r) < 0)
		sd_log("box %s: released, but its sandbox %s stays here: %s", j->p.box_id,
		       j->p.sandbox, r.error);
	pthread_mutex_unlock(&lifecycle_lock);
}

/* The boxes this host let go lately, so that a call another host sends here for one of them
 * meanwhile is answered 421 (ask where it went), and one for any other box not here 404. */
#define RECENT_RELEASES 256
#define RECENT_MS	600000
static struct {
	char workspace[SD_WORKSPACE_MAX + 1];
	char id[SD_ID_LEN + 1];
	char name[SD_NAME_MAX + 1];
	uint64_t at_ms;
} recent[RECENT_RELEASES]; /* the loop's */
static unsigned recent_next;

bool box_released_lately(const char *workspace, const char *ref)
{
	uint64_t now = sd_now_ms();

	for (unsigned i = 0; i < RECENT_RELEASES; i++)
		if (recent[i].at_ms && now - recent[i].at_ms < RECENT_MS &&
		    strcmp(recent[i].workspace, workspace) == 0 &&
		    (strcmp(recent[i].id, ref) == 0 || strcmp(recent[i].name, ref) == 0))
			return true;
	return false;
}

static void released_lately(const struct box *b)
{
	unsigned i = recent_next++ % RECENT_RELEASES;

	snprintf(recent[i].workspace, sizeof(recent[i].workspace), "%s", b->workspace);
	snprintf(recent[i].id, sizeof(recent[i].id), "%s", b->id);
	snprintf(recent[i].name, sizeof(recent[i].name), "%s", b->name);
	recent[i].at_ms = sd_now_ms();
}

/* A box deleted while its stop into the store ran, and the stop went through: the records
 * the stop gave the fleet deleted after it (the user was answered 204 already). */
struct gone_job {
	struct sd_job job;
	char workspace[SD_WORKSPACE_MAX + 1];
	char id[SD_ID_LEN + 1];
	int err;
};

static void gone_run(struct sd_job *sj)
{
	struct gone_job *g = (struct gone_job *)sj;

	/* the fleet away for a moment: asked again, 1, 2, 4 then 8 s apart (the user was
	 * answered: nobody else would) */
	for (unsigned try = 0;; try++) {
		g->err = fleet_hooks->released_delete(g->workspace, g->id);
		if (g->err != -EIO || try == 4)
			break;
		sleep(1u << try);
	}
}

static void gone_done(struct sd_job *sj)
{
	struct gone_job *g = (struct gone_job *)sj;

	if (g->err < 0 && g->err != -ENOENT)
		sd_log("box %s: deleted during its stop into the store, but the fleet keeps its "
		       "record: %s",
		       g->id, strerror(-g->err));
	else
		sd_log("box %s: deleted as asked during its stop into the store (after it was "
		       "let go: its fleet records deleted)",
		       g->id);
	free(g);
}

static void released_then_deleted(const struct box *b)
{
	struct gone_job *g = calloc(1, sizeof(*g));

	if (!g || !fleet_hooks->released_delete) {
		sd_log("box %s: deleted during its stop into the store, but the fleet keeps its "
		       "record: out of memory",
		       b->id);
		free(g);
		return;
	}
	snprintf(g->workspace, sizeof(g->workspace), "%s", b->workspace);
	snprintf(g->id, sizeof(g->id), "%s", b->id);
	g->job.run = gone_run;
	g->job.done = gone_done;
	work_queue(&g->job);
}

static void release_done(struct sd_job *sj)
{
	struct release_job *j = (struct release_job *)sj;
	struct box *b = box_by_id(j->p.box_id);
	bool deleted = (b && b->delete_requested) || j->err == -ECANCELED;

	if (b) {
		b->busy = b->releasing = false;
		b->release_cancel = NULL;
		if (j->err == 0) {
			sd_log("box %s: stopped into the store (generation %llu)", b->id,
			       (unsigned long long)j->p.gen);
			b->released = true;
			if (b->delete_requested) { /* a delete came meanwhile (answered 204) */
				released_then_deleted(b);
				box_waiters_gone(b);
			} else {
				released_lately(b);
				box_waiters_moved(b); /* on to its wake */
			}
			box_forget(b); /* not deleted here: its records are the fleet's now */
		} else {
			/* its generation is spent (it may be in the store): the next goes on */
			if (b->fleet_gen < j->p.gen)
				b->fleet_gen = j->p.gen;
			b->fleet_pub = false;
			if (j->err == -ECANCELED) {
				sd_log("box %s: deleted as asked during its stop into the store "
				       "(before "
				       "it was let go: deleted here)",
				       b->id);
			} else {
				sd_log("box %s: could not stop into the store: %s", b->id, j->msg);
				snprintf(b->status_message, sizeof(b->status_message),
					 "the last stop failed: %s", j->msg);
			}
			box_store(b);
			/* a delete asked meanwhile: it runs now, here */
			if (b->delete_requested && box_simple_job(b, J_DELETE, NULL, NULL) == 0)
				b->delete_requested = false;
		}
	}
	if (fleet_hooks && fleet_hooks->released)
		fleet_hooks->released(j->p.box_id, deleted); /* (a wake taken meanwhile runs now) */
	free(j->record);
	free(j);
}

int box_stop_job(struct box *b)
{
	if (!snap_store_hooks || !fleet_hooks || !fleet_hooks->release)
		return box_simple_job(b, J_STOP, NULL, NULL);
	if (b->checkpointing) { /* after it, at the generation after its */
		b->stop_after_ckpt = true;
		return 0;
	}
	struct release_job *j = calloc(1, sizeof(*j));
	struct box stopped;

	if (!j)
		return -ENOMEM;
	box_push_init(&j->p, b, b->fleet_gen + 1);
	/* the record as the fleet will keep it: stopped, at the new generation, no sandbox */
	stopped = *b;
	stopped.status = BOX_STOPPED;
	stopped.stopped_ms = sd_now_ms();
	stopped.fleet_gen = j->p.gen;
	stopped.ckpt_gen = stopped.ckpt_ms = 0; /* the stop is newer than any checkpoint */
	stopped.wake_min_gen = 0;
	stopped.sandbox[0] = 0;
	stopped.status_message[0] = 0;
	j->record = box_record(&stopped);
	if (!j->record) {
		free(j);
		return -ENOMEM;
	}
	b->busy = b->releasing = true;
	b->release_cancel = &j->cancel;
	link_close(b); /* its clients are told 1001: they come back, and wake it */
	ws_box_gone(b->id);
	j->job.run = release_run;
	j->job.done = release_done;
	work_queue(&j->job);
	return 0;
}

int box_wake_here(const char *record, struct sd_req *q, box_reply_fn reply)
{
	struct box *b = box_from_record(record);
	struct box_create_args a = {.claim_fd = -1};
	int err;

	if (!b)
		return -EBADMSG;
	b->released = true; /* until it runs here: a failed wake leaves the fleet's records */
	if (b->status != BOX_STOPPED || !b->fleet_gen) {
		box_forget(b);
		return -EBADMSG;
	}
	b->status = BOX_PROVISIONING;
	snprintf(a.image, sizeof(a.image), "%s", b->image[0] ? b->image : sd_conf.default_image);
	box_move_names(b->id, b->fleet_gen, a.snap_store, a.snap_id);
	/* (a lost host's box: its checkpoint's generation or any later one it pushed) */
	a.snap_gen = b->wake_min_gen ? b->wake_min_gen : b->fleet_gen;
	b->wake_min_gen = 0;
	b->ckpt_gen = b->ckpt_ms = 0; /* this host's own come later */
	a.cpus = b->vcpus ? b->vcpus : 1;
	a.memory_mib = b->mem_bytes >> 20;
	a.disk_gib = (b->fs_capacity_bytes + (1ull << 30) - 1) >> 30;
	a.timeout_s = 120;
	box_sandbox_name(b, a.sandbox_name);
	if (b->proxy_config && (err = proxy_config_words(b, &a.net_opts, &a.nnet_opts)) < 0) {
		box_forget(b);
		return err;
	}
	if (box_save(b) < 0 || (err = box_create_job(b, &a, q, reply)) < 0) {
		box_forget(b);
		return -ENOMEM;
	}
	return 0;
}
