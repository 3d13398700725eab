/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API's snapshot records in a fleet (fleetd.h): every host's copy follows the bucket
 * sandbox_snaps (s.<id> -> the record's JSON text), through a watcher.
 *
 * A host's own changes go out one at a time, in the order they were made: a capture's "ready"
 * is never overtaken by its "building" (the bucket would keep the older, and every other host
 * would show the snapshot building for ever). A capture's answer, and a delete's, wait behind
 * them, so that a GET through any host right after finds the record (or, mirrors a moment
 * behind aside, not); and a GET by id that finds no copy here reads the bucket itself, as
 * this host's watcher may lag (its connection moving to another node), unless its delete is
 * still on its way. That answer is made from the bucket's record without keeping it: a copy
 * kept then could outlive a delete the watcher brought meanwhile. Such reads are bounded (a
 * tenant's GETs of made-up ids hold at most two of the fleet's call threads).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetd.h"
#include "fstore.h"

#define SNAP_RECORD_MAX 8192

static struct fleet_kv snaps_kv;
static struct fleet_watch *w_snaps;

/* ---- the bucket's changes into this host's copy ---- */

struct in_job {
	struct sd_job job;
	char id[SD_ID_LEN + 1];
	char *text; /* NULL: deleted */
};

static void in_done(struct sd_job *j)
{
	struct in_job *s = (struct in_job *)j;

	snap_mirror(s->id, s->text);
	free(s->text);
	free(s);
}

/* The watcher's thread: a record handed to the loop. */
static void on_snap(void *arg, const char *key, const char *val, size_t len)
{
	struct in_job *s;

	(void)arg;
	if (!key || strncmp(key, "s.", 2) != 0 || strlen(key + 2) != SD_ID_LEN ||
	    !(s = calloc(1, sizeof(*s))))
		return;
	memcpy(s->id, key + 2, SD_ID_LEN + 1);
	if (val && !(s->text = strndup(val, len))) {
		free(s);
		return;
	}
	s->job.done = in_done;
	work_post(&s->job);
}

/* ---- this host's changes out, in order ---- */

struct out_job {
	struct sd_job job;
	char id[SD_ID_LEN + 1]; /* "": no record, an answer only */
	char *text;		/* NULL: deleted */
	char workspace[SD_WORKSPACE_MAX + 1];
	struct sd_pending *pending;
	json_t *answer;
};

/* The changes not yet sent, and the one being sent. */
static struct work_serial out = {.c = WORK_FLEET_BG};

static void out_run(struct sd_job *j)
{
	struct out_job *o = (struct out_job *)j;
	char key[48];
	int err;

	if (!o->id[0])
		return;
	snprintf(key, sizeof(key), "s.%s", o->id);
	err = o->text ? fleet_kv_put(&fleetd, snaps_kv.kv, key, o->text)
		      : fleet_kv_delete(&fleetd, snaps_kv.kv, key);
	if (err < 0)
		sd_log("fleet: snapshot %s's record is not in the fleet: %s", o->id, fleetd.err);
	/* a deleted snapshot's manifest (its id) goes from the store after its record: its
	 * chunks no other manifest names are a collection's (fleet_gc.c) */
	char why[512];

	if (!o->text && err == 0 && o->workspace[0] &&
	    fstore_forget(o->workspace, o->id, why, sizeof(why)) < 0)
		sd_log("snapshot %s: its manifest stays in the store: %s", o->id, why);
}

static void out_done(struct sd_job *j)
{
	struct out_job *o = (struct out_job *)j;
	struct sd_req *q = o->pending ? pending_take(o->pending) : NULL;

	if (q && o->answer)
		req_reply_json(q, 200, o->answer);
	else if (q)
		req_reply_raw(q, 204, "application/json", NULL, 0);
	else
		json_decref(o->answer);
	free(o->text);
	free(o);
	work_serial_next(&out);
}

static void out_add(struct out_job *o)
{
	o->job.run = out_run;
	o->job.done = out_done;
	work_serial_add(&out, &o->job);
}

/* snap_fleet_hooks.saved: a record saved (NULL: forgotten) here goes to the bucket. */
static void snap_saved(const char *id, const char *workspace, const char *record)
{
	struct out_job *o = calloc(1, sizeof(*o));

	if (!o || (record && (strlen(record) > SNAP_RECORD_MAX || !(o->text = strdup(record))))) {
		sd_log("fleet: snapshot %s's record is not in the fleet: %s", id,
		       o ? "too large" : "out of memory");
		free(o);
		return;
	}
	snprintf(o->id, sizeof(o->id), "%s", id);
	snprintf(o->workspace, sizeof(o->workspace), "%s", workspace);
	out_add(o);
}

/* snap_fleet_hooks.answer: q answered with body (200; NULL: 204) once the records before it
 * are sent. */
static void snap_answer(struct sd_req *q, json_t *body)
{
	struct out_job *o = calloc(1, sizeof(*o));

	if (!o && body) {
		req_reply_json(q, 200, body);
		return;
	}
	if (!o) {
		req_reply_raw(q, 204, "application/json", NULL, 0);
		return;
	}
	if (!(o->pending = req_park(q))) {
		json_decref(body);
		free(o);
		return;
	}
	o->answer = body;
	out_add(o);
}

/* Whether snapshot id's delete is still on its way to the bucket (its record there is
 * stale). */
static bool delete_pending(const char *id)
{
	const struct out_job *o = (const struct out_job *)out.cur;

	if (o && o->id[0] && !o->text && strcmp(o->id, id) == 0)
		return true;
	for (const struct sd_job *j = out.head; j; j = j->next) {
		o = (const struct out_job *)j;
		if (o->id[0] && !o->text && strcmp(o->id, id) == 0)
			return true;
	}
	return false;
}

/* ---- a GET by id this host's copy does not answer: the bucket's record ---- */

/* Lookups waiting on the bucket (the loop's): at most LOOK_MAX at once, LOOK_WS_MAX of one
 * workspace, so that a tenant's GETs of made-up ids hold no more of WORK_FLEET's threads. */
#define LOOK_MAX    4
#define LOOK_WS_MAX 2
static char looking[LOOK_MAX][SD_WORKSPACE_MAX + 1]; /* "": a free place */

static int look_take(const char *workspace)
{
	int n = 0, free_at = -1;

	for (int i = 0; i < LOOK_MAX; i++) {
		if (!looking[i][0] && free_at < 0)
			free_at = i;
		n += looking[i][0] && strcmp(looking[i], workspace) == 0;
	}
	if (free_at < 0 || n >= LOOK_WS_MAX)
		return -1;
	snprintf(looking[free_at], sizeof(looking[0]), "%s", workspace);
	return free_at;
}

struct look_job {
	struct sd_job job;
	struct sd_pending *pending;
	int place; /* in looking[] */
	char id[SD_ID_LEN + 1];
	char text[SNAP_RECORD_MAX + 1];
	int err;
};

static void look_run(struct sd_job *j)
{
	struct look_job *l = (struct look_job *)j;
	char key[48];

	snprintf(key, sizeof(key), "s.%s", l->id);
	l->err = fleet_kv_get(&fleetd, snaps_kv.kv, key, l->text, sizeof(l->text), NULL);
}

static void look_done(struct sd_job *j)
{
	struct look_job *l = (struct look_job *)j;
	struct sd_req *q = pending_take(l->pending);

	looking[l->place][0] = 0;
	if (q && (l->err == 0 && delete_pending(l->id)))
		req_reply_error(q, 404, "NotFound", "snapshot not found");
	else if (q && l->err == -EIO)
		req_reply_error(q, 503, "ServiceUnavailable",
				"the fleet's snapshot records did not answer: try again");
	else if (q)
		snap_reply_record(q, l->id, l->err == 0 ? l->text : NULL);
	free(l);
}

/* snap_fleet_hooks.lookup */
static void snap_lookup(struct sd_req *q, const char *id)
{
	struct look_job *l;
	int place;

	if (!fleet_is_uuid(id) || delete_pending(id)) {
		snap_reply_record(q, id, NULL);
		return;
	}
	if ((place = look_take(q->workspace)) < 0) {
		req_reply_error(q, 429, "TooManyRequests",
				"too many snapshot lookups at once: try again");
		return;
	}
	if (!(l = calloc(1, sizeof(*l))) || !(l->pending = req_park(q))) {
		looking[place][0] = 0;
		if (!l)
			req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		free(l);
		return;
	}
	l->place = place;
	snprintf(l->id, sizeof(l->id), "%s", id);
	l->job.run = look_run;
	l->job.done = look_done;
	work_queue_class(&l->job, WORK_FLEET);
}

int fleet_snaps_start(void)
{
	static const struct snap_fleet_hooks hooks = {
		.saved = snap_saved,
		.answer = snap_answer,
		.lookup = snap_lookup,
		.host = fleetd_host_id,
	};
	int err = fleet_kv_open(&fleetd, "sandbox_snaps", SNAP_RECORD_MAX, &snaps_kv);

	if (err == 0)
		err = fleet_watch_start(&fleetd, snaps_kv.kv, on_snap, NULL, &w_snaps);
	if (err == 0)
		snap_fleet_hooks = &hooks;
	return err;
}

void fleet_snaps_stop(void)
{
	snap_fleet_hooks = NULL;
	fleet_watch_stop(w_snaps);
	w_snaps = NULL;
	fleet_kv_close(&snaps_kv);
}
