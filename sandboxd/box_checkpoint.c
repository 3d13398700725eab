/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Periodic checkpoints of a fleet's running boxes (docs/fleet.md, "Checkpoints"). A workspace
 * whose checkpoint_s is set (sandboxd quota set WORKSPACE checkpoint_s=N) has each of its
 * running boxes, once it was used since its last one, snapshotted every N seconds (its disk and
 * its memory; the VM pauses for the memory's write and goes on) and pushed into the store as
 * the manifest its stop would push (box-<id>) at its next generation; the box's record then
 * names that generation, so that if this host is lost another host wakes the box from it
 * (fleet_lost.c) instead of showing it failed. What ran after the checkpoint is gone then,
 * and the box's status message says from when it came back.
 *
 * One checkpoint of a box at a time, and none beside a stop: a stop asked meanwhile waits
 * for it (the stop's generation is the next one, pushed after). The local copy goes once it
 * is in the store (its chunks stay in the host's chunk cache).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "sandboxd.h"

#define CKPT_MIN_S	10   /* a shorter interval is taken as this */
#define CKPT_SCAN_MS	2000 /* the boxes looked at this often */
#define CKPT_SCAN_WS	64   /* workspaces whose quota a scan keeps (more: read again) */
/* Checkpoints at once on a host: they run on the lifecycle's workers (the snapshot under its
 * lock, then the push), which every tenant's creates and stops need too. */
#define CKPT_INFLIGHT	1
/* Each checkpoint freezes a layer of the running box's disk; a snapshot refuses past
 * SNAP_LAYERS_MAX. Past this many, checkpoints wait for its next stop or move (whose restore
 * makes them one, restore.c), leaving room for the stop's own. */
#define CKPT_LAYERS_MAX (SNAP_LAYERS_MAX - 16)

static unsigned inflight; /* the loop's */

struct ckpt_job {
	struct sd_job job;
	struct box_push p;
	uint64_t snap_ms, took_ms; /* when its snapshot began (the state it holds), how long */
	int err;
	char msg[LC_ERROR_MAX];
};

static void ckpt_run(struct sd_job *sj)
{
	struct ckpt_job *j = (struct ckpt_job *)sj;
	struct lc_report r = {.note = NULL};
	struct sandbox sb;
	uint64_t t0 = sd_now_ms();
	char dir[4200];

	j->snap_ms = t0;
	j->err = box_push_run(&j->p, &sb, &r);
	if (j->err < 0)
		snprintf(j->msg, sizeof(j->msg), "%s", r.error[0] ? r.error : strerror(-j->err));
	/* the store has it (or it failed): the local copy goes either way (not one of that
	 * name it found there: -EEXIST) */
	if (j->err != -EEXIST && snap_dir(j->p.snap_name, dir, sizeof(dir)) == 0)
		remove_flat_dir(dir);
	j->took_ms = sd_now_ms() - t0;
}

/* A stop asked while its checkpoint ran, now (or at a later tick, while a job holds it). */
static void stop_waiting(struct box *b)
{
	if (!b->stop_after_ckpt || b->checkpointing || b->busy)
		return;
	b->stop_after_ckpt = false;
	if (b->status == BOX_READY && box_stop_job(b) < 0)
		sd_log("box %s: cannot stop it: out of memory", b->id);
}

static void ckpt_done(struct sd_job *sj)
{
	struct ckpt_job *j = (struct ckpt_job *)sj;
	struct box *b = box_by_id(j->p.box_id);

	inflight--;
	if (b) {
		b->checkpointing = false;
		if (j->err == 0) {
			b->ckpt_gen = j->p.gen;
			b->ckpt_ms = j->snap_ms; /* (what was used after it is not in it) */
			b->fleet_pub = false;	 /* its record for a loss of this host, again */
			box_store(b);
			sd_log("box %s: checkpoint in the store (generation %llu) in %llu ms",
			       b->id, (unsigned long long)j->p.gen, (unsigned long long)j->took_ms);
		} else {
			sd_log("box %s: the checkpoint failed: %s", b->id, j->msg);
		}
		stop_waiting(b);
	}
	free(j);
}

static int ckpt_start(struct box *b)
{
	struct ckpt_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	box_push_init(&j->p, b, b->fleet_gen + 1);
	j->p.max_frozen = CKPT_LAYERS_MAX;
	/* taken now, whatever becomes of it: a stop after it goes one further, and the fleet's
	 * copy of its record says so (a host waking it after this host's loss goes further
	 * still: no generation is made twice) */
	b->fleet_gen = j->p.gen;
	b->fleet_pub = false;
	box_store(b);
	inflight++;
	b->checkpointing = true;
	j->job.run = ckpt_run;
	j->job.done = ckpt_done;
	work_queue(&j->job);
	return 0;
}

/* The workspace's checkpoint interval in ms (0: none), its quota file read once a scan. */
static uint64_t interval_ms(const char *workspace, char (*seen)[SD_WORKSPACE_MAX + 1],
			    uint64_t *every, unsigned *nseen)
{
	struct sd_quota q;

	for (unsigned i = 0; i < *nseen; i++)
		if (strcmp(seen[i], workspace) == 0)
			return every[i];
	uint64_t ms = quota_load(workspace, &q) < 0 || !q.checkpoint_s ? 0
		      : q.checkpoint_s < CKPT_MIN_S		       ? CKPT_MIN_S * 1000
								       : q.checkpoint_s * 1000;

	if (*nseen < CKPT_SCAN_WS) {
		snprintf(seen[*nseen], sizeof(seen[0]), "%s", workspace);
		every[(*nseen)++] = ms;
	}
	return ms;
}

void box_checkpoint_tick(uint64_t now)
{
	static uint64_t scanned;
	static char seen[CKPT_SCAN_WS][SD_WORKSPACE_MAX + 1];
	uint64_t every[CKPT_SCAN_WS];
	unsigned nseen = 0;

	if (!snap_store_hooks || !fleet_hooks || !fleet_hooks->release ||
	    now < scanned + CKPT_SCAN_MS)
		return;
	scanned = now;
	for (struct box *b = box_first(); b; b = b->next) {
		stop_waiting(b);
		if (b->status != BOX_READY || b->busy || b->released || b->checkpointing ||
		    b->stop_after_ckpt || !b->sandbox[0] || inflight >= CKPT_INFLIGHT)
			continue;
		uint64_t ms = interval_ms(b->workspace, seen, every, &nseen);
		uint64_t last = b->ckpt_try_ms > b->ckpt_ms ? b->ckpt_try_ms : b->ckpt_ms;

		if (!ms)
			continue;
		if (!last)
			last = b->updated_ms; /* its first one an interval after it was made */
		if (now < last + ms || (b->ckpt_ms && b->last_active_ms < b->ckpt_ms))
			continue; /* not yet, or not used since its last one */
		b->ckpt_try_ms = now;
		if (ckpt_start(b) < 0)
			sd_log("box %s: no checkpoint: out of memory", b->id);
	}
}
