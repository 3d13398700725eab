/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Released boxes in a fleet (fleetd.h; box_move.c stops them into the store): each one's
 * record (stopped, at its generation) in the bucket sandbox_boxes as b.<id>, kept there until
 * a host wakes it. Every host follows the bucket on its loop, so a list or a get through any
 * host shows a released box as stopped without waking it; any other call wakes it (fleet_wake:
 * one host with room, one message however many callers), then runs on the host that woke it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "fleetd.h"

#define RECORD_MAX   (200u << 10) /* a box's record (its labels and run_config: 64 KiB each) */
#define RELEASED_MAX 100000	  /* released boxes followed, all workspaces */
#define WAKE_MS	     120000	  /* a wake's placement and restore */

static struct fleet_kv boxes_kv;
static struct fleet_watch *w_boxes;

struct released {
	char id[SD_ID_LEN + 1];
	char workspace[SD_WORKSPACE_MAX + 1];
	char name[SD_NAME_MAX + 1];
	char *record;
	struct released *next;
};
static struct released *rel; /* the loop's */
static unsigned nrel;

struct rec_job {
	struct sd_job job;
	char id[SD_ID_LEN + 1];
	char *text; /* NULL: gone */
	bool ok;    /* fleetd_woken's */
};

static void rec_done(struct sd_job *j)
{
	struct rec_job *r = (struct rec_job *)j;
	struct released **pp = &rel, *x;
	struct box b = {0};

	while ((x = *pp) && strcmp(x->id, r->id) != 0)
		pp = &x->next;
	if (x) { /* replaced, or gone */
		*pp = x->next;
		free(x->record);
		free(x);
		nrel--;
	}
	if (r->text && nrel < RELEASED_MAX && box_parse_record(r->text, &b) == 0 &&
	    strcmp(b.id, r->id) == 0 && (x = calloc(1, sizeof(*x)))) {
		memcpy(x->id, b.id, sizeof(x->id));
		memcpy(x->workspace, b.workspace, sizeof(x->workspace));
		memcpy(x->name, b.name, sizeof(x->name));
		x->record = r->text;
		r->text = NULL;
		x->next = rel;
		rel = x;
		nrel++;
	}
	box_record_free(&b);
	free(r->text);
	free(r);
}

static void on_boxrec(void *arg, const char *key, const char *val, size_t len)
{
	struct rec_job *r;

	(void)arg;
	if (key && strncmp(key, "r.", 2) == 0) { /* a running box's (fleet_lost.c) */
		fleetd_lost_in(key + 2, val, len);
		return;
	}
	if (!key || strncmp(key, "b.", 2) != 0 || strlen(key + 2) != SD_ID_LEN ||
	    !(r = calloc(1, sizeof(*r))))
		return;
	memcpy(r->id, key + 2, SD_ID_LEN + 1);
	if (val && !(r->text = strndup(val, len))) {
		free(r);
		return;
	}
	r->job.done = rec_done;
	work_post(&r->job);
}

/* ---- on the loop ---- */

void fleetd_released_list(const char *workspace, json_t *arr)
{
	for (struct released *x = rel; x; x = x->next) {
		struct box b = {0};
		char owner[FLEET_ID_MAX + 1];

		/* (a record whose box an owner holds now, a wake's or a revival's that has not
		 * gone yet, is that host's to list: never twice) */
		if (fleetd_owner_of(x->id, owner, false) == 0 && strcmp(owner, FLEET_RELEASED) != 0)
			continue;
		if (strcmp(x->workspace, workspace) == 0 && box_parse_record(x->record, &b) == 0) {
			json_array_append_new(arr, box_json(&b));
			box_record_free(&b);
		}
	}
}

/* ---- on WORK_FLEET ---- */

/* Released box id's record, if it is workspace's: 0 (*record malloc'd), -ENOENT (none),
 * -EACCES (another workspace's: its callers answer as for none, at once), -EIO. */
static int record_get(const char *workspace, const char *id, char **record)
{
	char key[48], *text = malloc(RECORD_MAX + 1);
	struct box b = {0};
	int err;

	if (!text)
		return -ENOMEM;
	snprintf(key, sizeof(key), "b.%s", id);
	err = fleet_kv_get(&fleetd, boxes_kv.kv, key, text, RECORD_MAX + 1, NULL);
	if (err == 0 && (box_parse_record(text, &b) < 0 || strcmp(b.workspace, workspace) != 0 ||
			 strcmp(b.id, id) != 0))
		err = -EACCES; /* another workspace's: the same as none */
	box_record_free(&b);
	if (err < 0) {
		free(text);
		return err == -ENOENT || err == -EMSGSIZE ? -ENOENT : err == -EACCES ? err : -EIO;
	}
	*record = text;
	return 0;
}

int fleetd_released_fetch(const char *workspace, const char *id, char **text)
{
	return record_get(workspace, id, text);
}

json_t *fleetd_released_record_json(const char *text)
{
	struct box b = {0};
	json_t *o = NULL;

	if (box_parse_record(text, &b) == 0)
		o = box_json(&b);
	box_record_free(&b);
	return o;
}

int fleetd_released_delete(const char *workspace, const char *id)
{
	char *record = malloc(RECORD_MAX + 1), key[80], name[SD_NAME_MAX + 1];
	char holder[FLEET_ID_MAX + 1];
	struct box b = {0};
	uint64_t rev = 0;
	int err;

	if (!record)
		return -ENOMEM;
	snprintf(key, sizeof(key), "b.%s", id);
	err = fleet_kv_get(&fleetd, boxes_kv.kv, key, record, RECORD_MAX + 1, &rev);
	if (err == 0 && (box_parse_record(record, &b) < 0 || strcmp(b.workspace, workspace) != 0 ||
			 strcmp(b.id, id) != 0))
		err = -EACCES; /* another workspace's: the same as none */
	free(record);
	if (err < 0) {
		box_record_free(&b);
		return err == -ENOENT || err == -EMSGSIZE ? -ENOENT : err == -EACCES ? err : -EIO;
	}
	snprintf(name, sizeof(name), "%s", b.name);
	/* the record as read, only: two deletes at once (a client's retry through another host)
	 * release its quota once, and a record a wake changed meanwhile is left to its owner */
	err = fleet_kv_delete_rev(&fleetd, boxes_kv.kv, key, rev);
	if (err == 0)
		fleetd_quota_release_box(workspace, b.vcpus, b.mem_bytes, b.fs_capacity_bytes);
	box_record_free(&b);
	if (err == -ESTALE)
		return -ENOENT;
	if (err < 0)
		return -EIO;
	/* its name freed only while it names this box (on the revision read): a delete asked
	 * during its stop freed it already, and another box may hold it now */
	char nid[SD_ID_LEN + 1];

	fleetd_name_key(workspace, name, key);
	if (fleet_kv_get(&fleetd, fleetd_names.kv, key, nid, sizeof(nid), &rev) == 0 &&
	    strcmp(nid, id) == 0 && fleet_kv_delete_rev(&fleetd, fleetd_names.kv, key, rev) < 0)
		sd_log("fleet: the name of deleted box %s stays claimed: %s", id, fleetd.err);
	/* its ownership, while the fleet holds it (not a host that woke it meanwhile) */
	snprintf(key, sizeof(key), "box.%s", id);
	if (fleet_owner(&fleetd, id, holder, &rev) == 0 &&
	    strncmp(holder, FLEET_RELEASED, strlen(FLEET_RELEASED)) == 0) {
		char why[512];

		if (fleet_kv_delete_rev(&fleetd, fleetd.owners, key, rev) < 0)
			sd_log("fleet: the ownership of deleted box %s stays: %s", id, fleetd.err);
		/* no host holds it (a wake that took it meanwhile keeps its state: not here) */
		else if (fleetd_forget_box_state(workspace, id, why, sizeof(why)) < 0)
			sd_log("box %s: its state stays in the store: %s", id, why);
	}
	return 0;
}

int fleetd_wake(const char *workspace, const char *key_id, const char *id,
		char owner[FLEET_ID_MAX + 1], char *err, size_t len)
{
	char *record = NULL;
	int r = record_get(workspace, id, &record);

	if (r < 0) {
		snprintf(err, len, r == -EIO ? "the fleet did not answer" : "no such sandbox");
		return r;
	}
	size_t mlen;
	uint8_t *m = fleet_rpc_msg(json_pack("{s:s, s:s, s:s, s:s}", "op", "wake", "w", workspace,
					     "k", key_id, "id", id),
				   record, strlen(record), &mlen);
	struct box rb = {0};
	uint64_t gen = box_parse_record(record, &rb) == 0 ? rb.fleet_gen : 0;

	box_record_free(&rb);
	free(record);
	if (!m) {
		snprintf(err, len, "out of memory");
		return -ENOMEM;
	}
	r = fleet_wake(&fleetd, id, m, mlen, WAKE_MS, owner, err, len);
	free(m);
	if (r < 0)
		return r;
	/* the host that took it answers once the box runs (or its restore failed) */
	uint8_t *a = NULL;
	size_t alen;

	/* (its generation: an answer the host kept from another take of the box is not this) */
	m = fleet_rpc_msg(
		json_pack("{s:s, s:s, s:I}", "op", "await", "id", id, "gen", (json_int_t)gen), NULL,
		0, &mlen);
	r = m ? fleet_rpc_ask(owner, m, mlen, WAKE_MS, &a, &alen) : -ENOMEM;
	free(m);
	if (r < 0)
		snprintf(err, len, "host %s took the wake and did not answer", owner);
	else if (fleet_rpc_status(a, alen) != 200) {
		const uint8_t *nl = memchr(a, '\n', alen);
		size_t rest = nl ? alen - (size_t)(nl + 1 - a) : 0;

		snprintf(err, len, "host %s could not restore it from the store: %.*s", owner,
			 (int)(rest < 300 ? rest : 300), nl ? (const char *)nl + 1 : "");
		r = -EIO;
	}
	free(a);
	return r;
}

int fleetd_release(const char *id, const char *record, char *err, size_t len)
{
	char key[48];
	uint64_t release = 0;

	if (strlen(record) > RECORD_MAX) {
		snprintf(err, len,
			 "the sandbox's record is over %u bytes (its labels and "
			 "run_config): it cannot move",
			 RECORD_MAX);
		return -EFBIG;
	}
	snprintf(key, sizeof(key), "b.%s", id);
	if (fleet_kv_put(&fleetd, boxes_kv.kv, key, record) < 0 ||
	    fleet_release(&fleetd, id, &release) < 0) {
		snprintf(err, len, "%s", fleetd.err);
		return -EIO;
	}
	return 0;
}

int fleetd_released_new(const char *id, const char *record, char *err, size_t len)
{
	char key[48];

	if (strlen(record) > RECORD_MAX) {
		snprintf(err, len, "the sandbox's record is over %u bytes", RECORD_MAX);
		return -EFBIG;
	}
	snprintf(key, sizeof(key), "b.%s", id);
	if (fleet_kv_put(&fleetd, boxes_kv.kv, key, record) < 0 ||
	    fleet_own_released(&fleetd, id) < 0) {
		snprintf(err, len, "%s", fleetd.err);
		if (fleet_kv_delete(&fleetd, boxes_kv.kv, key) < 0)
			sd_log("fleet: the record of unmade box %s stays: %s", id, fleetd.err);
		return -EIO;
	}
	return 0;
}

static void woken_run(struct sd_job *j)
{
	struct rec_job *r = (struct rec_job *)j;
	char key[48];

	uint64_t release;

	snprintf(key, sizeof(key), "b.%s", r->id);
	if (!r->ok && fleet_release(&fleetd, r->id, &release) < 0)
		sd_log("fleet: box %s did not wake here and cannot be released: %s", r->id,
		       fleetd.err);
	else if (r->ok && fleet_kv_delete(&fleetd, boxes_kv.kv, key) < 0)
		sd_log("fleet: box %s runs here, and its released record stays: %s", r->id,
		       fleetd.err);
}

static void woken_done(struct sd_job *j)
{
	free(j);
}

void fleetd_woken(const char *id, bool ok)
{
	struct rec_job *r = calloc(1, sizeof(*r));

	if (!r)
		return;
	r->ok = ok;
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->job.run = woken_run;
	r->job.done = woken_done;
	work_queue_class(&r->job, WORK_FLEET_BG);
}

int fleet_moves_start(void)
{
	int err = fleet_kv_open(&fleetd, "sandbox_boxes", RECORD_MAX, &boxes_kv);

	if (err == 0)
		err = fleet_watch_start(&fleetd, boxes_kv.kv, on_boxrec, NULL, &w_boxes);
	return err;
}

void fleet_moves_stop(void)
{
	fleet_watch_stop(w_boxes);
	w_boxes = NULL;
	fleet_kv_close(&boxes_kv);
}
