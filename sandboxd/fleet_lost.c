/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The boxes of a lost host (fleetd.h, docs/fleet.md "How it fails"). Every host keeps, for
 * each box it runs, the box's record in the bucket sandbox_boxes as r.<id> (its value: the
 * host's id, a newline, the record; b.<id> is a released box's, fleet_moves.c): put when the
 * box is first seen ready here and when it changes (a PATCH, a rename), deleted when it is
 * forgotten here (only while it still names this host: a box woken elsewhere has its new
 * host's). Every host follows them on its loop.
 *
 * A host is lost when it has not beaten for FLEETD_LOST_MS (20 s) by this host's copy and the hosts
 * bucket agrees it is gone (a lagging watcher alone never loses a host). A box of a lost host is
 * then answered for by any host from its record: a get or a list shows it failed, naming its host;
 * a delete frees its name, ownership and share of the workspace's quotas; anything else is
 * refused. Its VMM may still run there (the host's sandboxd died, not its machine): a sandboxd
 * restarted there adopts only the boxes whose ownership still names it (fleetd_adopt_filter).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleetd.h"

#define RECORD_MAX     (200u << 10) /* as fleet_moves.c's */
#define LOST_BYTES_MAX (64u << 20)  /* the copy's records, all workspaces */
#define LOST_BUCKETS   4096

static struct fleet_kv boxes_kv;

static void revive_tick(void);

struct running {
	char id[SD_ID_LEN + 1];
	char workspace[SD_WORKSPACE_MAX + 1];
	char host[FLEET_ID_MAX + 1];
	char *record;
	size_t bytes;
	uint64_t ckpt_gen;  /* its last checkpoint in the store (box_checkpoint.c), 0 */
	uint64_t revive_ms; /* when a revival of it last ended here */
	bool reviving;	    /* one is queued or runs */
	struct running *next;
};
static struct running *runs[LOST_BUCKETS]; /* the loop's, by id */
static size_t runs_bytes;

static unsigned bucket_of(const char *id)
{
	unsigned h = 2166136261u;

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 16777619u;
	return h % LOST_BUCKETS;
}

/* A record's value "HOST\nRECORD": its host into host, *record the rest. 0, or -EBADMSG (no
 * host id first). */
static int split_value(const char *text, char host[FLEET_ID_MAX + 1], const char **record)
{
	const char *nl = strchr(text, '\n');

	if (!nl || (size_t)(nl - text) > FLEET_ID_MAX)
		return -EBADMSG;
	memcpy(host, text, (size_t)(nl - text));
	host[nl - text] = 0;
	*record = nl + 1;
	return fleet_id_ok(host) ? 0 : -EBADMSG;
}

/* ---- the bucket's r. records into this host's copy ---- */

struct in_job {
	struct sd_job job;
	char id[SD_ID_LEN + 1];
	char *text; /* "HOST\nRECORD"; NULL: gone */
};

static void in_done(struct sd_job *j)
{
	struct in_job *r = (struct in_job *)j;
	unsigned k = bucket_of(r->id);
	struct running **pp = &runs[k], *x;
	struct box b = {0};
	char host[FLEET_ID_MAX + 1];
	const char *record = NULL;
	size_t len = 0;

	while ((x = *pp) && strcmp(x->id, r->id) != 0)
		pp = &x->next;
	if (x) { /* replaced, or gone */
		*pp = x->next;
		runs_bytes -= x->bytes;
		free(x->record);
		free(x);
	}
	if (r->text && split_value(r->text, host, &record) == 0)
		len = strlen(record);
	if (record && runs_bytes + len <= LOST_BYTES_MAX) {
		if (box_parse_record(record, &b) == 0 && strcmp(b.id, r->id) == 0 &&
		    (x = calloc(1, sizeof(*x)))) {
			memcpy(x->id, b.id, sizeof(x->id));
			memcpy(x->workspace, b.workspace, sizeof(x->workspace));
			memcpy(x->host, host, sizeof(x->host));
			x->ckpt_gen = b.ckpt_gen;
			x->record = strdup(record);
			if (!x->record) {
				free(x);
			} else {
				x->bytes = len;
				runs_bytes += len;
				x->next = runs[k];
				runs[k] = x;
			}
		}
		box_record_free(&b);
	}
	free(r->text);
	free(r);
}

void fleetd_lost_in(const char *id, const char *val, size_t len)
{
	struct in_job *r;

	if (strlen(id) != SD_ID_LEN || !(r = calloc(1, sizeof(*r))))
		return;
	memcpy(r->id, id, SD_ID_LEN + 1);
	if (val && !(r->text = strndup(val, len))) {
		free(r);
		return;
	}
	r->job.done = in_done;
	work_post(&r->job);
}

/* ---- this host's records out, in order (a delete never overtaken by its put) ---- */

struct out_job {
	struct sd_job job;
	char id[SD_ID_LEN + 1];
	char *text; /* "HOST\nRECORD"; NULL: delete it while it names this host */
	int err;
};
static struct work_serial out = {.c = WORK_FLEET_BG};

static void out_run(struct sd_job *j)
{
	struct out_job *o = (struct out_job *)j;
	char key[48], *now;
	uint64_t rev = 0;
	size_t hl;
	int err = 0;

	snprintf(key, sizeof(key), "r.%s", o->id);
	if (o->text) {
		err = fleet_kv_put(&fleetd, boxes_kv.kv, key, o->text);
	} else if ((now = malloc(RECORD_MAX + 1))) {
		err = fleet_kv_get(&fleetd, boxes_kv.kv, key, now, RECORD_MAX + 1, &rev);
		hl = err == 0 ? strcspn(now, "\n") : 0;
		if (err == 0 && hl == strlen(fleetd.conf.host) &&
		    strncmp(now, fleetd.conf.host, hl) == 0)
			err = fleet_kv_delete_rev(&fleetd, boxes_kv.kv, key, rev);
		else if (err == -ENOENT || err == -EMSGSIZE || err == 0)
			err = 0; /* none, or another host's now */
		free(now);
	}
	if (err < 0 && err != -ESTALE)
		sd_log("fleet: box %s's record for a lost host: %s", o->id, fleetd.err);
	o->err = err;
}

static void out_done(struct sd_job *j)
{
	struct out_job *o = (struct out_job *)j;
	struct box *b = o->text && o->err < 0 ? box_by_id(o->id) : NULL;

	if (b) /* not kept: put again at the next tick */
		b->fleet_pub = false;
	free(o->text);
	free(o);
	work_serial_next(&out);
}

static void out_add(const char *id, char *text)
{
	struct out_job *o = calloc(1, sizeof(*o));

	if (!o) {
		free(text);
		return;
	}
	snprintf(o->id, sizeof(o->id), "%s", id);
	o->text = text;
	o->job.run = out_run;
	o->job.done = out_done;
	work_serial_add(&out, &o->job);
}

void fleetd_lost_tick(void)
{
	if (!boxes_kv.kv)
		return;
	revive_tick();
	for (struct box *b = box_first(); b; b = b->next) {
		if (b->status != BOX_READY || b->released ||
		    (b->fleet_pub && b->fleet_pub_ms == b->updated_ms &&
		     strcmp(b->fleet_pub_name, b->name) == 0))
			continue; /* (kept as it is: a PATCH, a rename put it again) */
		char *record = box_record(b), *text = NULL;
		size_t rl = record ? strlen(record) : 0;

		b->fleet_pub = true; /* (once: a record too large is said once) */
		snprintf(b->fleet_pub_name, sizeof(b->fleet_pub_name), "%s", b->name);
		b->fleet_pub_ms = b->updated_ms;
		if (rl > RECORD_MAX - FLEET_ID_MAX - 2 || !(text = malloc(FLEET_ID_MAX + 2 + rl))) {
			sd_log("fleet: box %s's record is too large to be kept for a lost host",
			       b->id);
			free(record);
			continue;
		}
		snprintf(text, FLEET_ID_MAX + 2 + rl, "%s\n%s", fleetd.conf.host, record);
		free(record);
		out_add(b->id, text);
	}
}

void fleetd_lost_forget(const struct box *b)
{
	if (boxes_kv.kv && b->fleet_pub)
		out_add(b->id, NULL);
}

/* ---- answers for a lost host's boxes ---- */

/* A box's record (text) as its API object, failed for the loss of host (ago_ms without a
 * beat); NULL if it is not one. */
static json_t *lost_json(const char *record, const char *host, uint64_t ago_ms)
{
	struct box b = {0};
	json_t *o = NULL;

	if (box_parse_record(record, &b) == 0) {
		b.status = BOX_FAILED;
		snprintf(b.status_message, sizeof(b.status_message),
			 "its host %s was lost (no beat for %llu s): what ran and was written "
			 "there is gone; delete it",
			 host, (unsigned long long)(ago_ms / 1000));
		o = box_json(&b);
	}
	box_record_free(&b);
	return o;
}

json_t *fleetd_lost_json(const char *text, uint64_t ago_ms)
{
	char host[FLEET_ID_MAX + 1];
	const char *record;

	return split_value(text, host, &record) == 0 ? lost_json(record, host, ago_ms) : NULL;
}

void fleetd_lost_list(const char *workspace, json_t *arr, char (*alive)[FLEET_ID_MAX + 1],
		      unsigned nalive)
{
	for (unsigned k = 0; k < LOST_BUCKETS; k++)
		for (struct running *x = runs[k]; x; x = x->next) {
			char owner[FLEET_ID_MAX + 1];
			uint64_t ago;
			unsigned i = 0;

			if (strcmp(x->workspace, workspace) != 0)
				continue;
			/* (a record whose box is not its host's any more, retired or moved, or
			 * whose host is among the alive, is not shown) */
			while (i < nalive && strcmp(alive[i], x->host) != 0)
				i++;
			if (i < nalive || (ago = fleetd_host_lapsed_ms(x->host)) < FLEETD_LOST_MS ||
			    fleetd_owner_of(x->id, owner, false) < 0 || strcmp(owner, x->host) != 0)
				continue;
			json_t *o = lost_json(x->record, x->host, ago);

			if (o)
				json_array_append_new(arr, o);
		}
}

/* ---- on a worker ---- */

int fleetd_host_lost(const char *host, uint64_t *ago_ms)
{
	char text[512];
	int err;

	*ago_ms = fleetd_host_lapsed_ms(host);
	if (*ago_ms < FLEETD_LOST_MS || !fleet_id_ok(host))
		return 0;
	/* the bucket's own word: its entry expired (an error of the bucket is no such word) */
	err = fleet_kv_get(&fleetd, fleetd.hosts, host, text, sizeof(text), NULL);
	return err == -ENOENT ? 1 : err == 0 || err == -EMSGSIZE ? 0 : -EIO;
}

/* Lost box id's record, if it is workspace's: its text ("HOST\nRECORD", malloc'd) in *text,
 * parsed into *b, its revision *rev, its host in host: 0, -ENOENT, -EIO. */
static int lost_read(const char *workspace, const char *id, char **text, struct box *b,
		     uint64_t *rev, char host[FLEET_ID_MAX + 1])
{
	char key[48], *t = malloc(RECORD_MAX + 1);
	const char *record;
	int err;

	*text = NULL;
	if (!t)
		return -ENOMEM;
	snprintf(key, sizeof(key), "r.%s", id);
	err = fleet_kv_get(&fleetd, boxes_kv.kv, key, t, RECORD_MAX + 1, rev);
	if (err == 0 && (split_value(t, host, &record) < 0 || box_parse_record(record, b) < 0 ||
			 strcmp(b->workspace, workspace) != 0 || strcmp(b->id, id) != 0))
		err = -ENOENT; /* another workspace's: the same as none */
	if (err < 0) {
		free(t);
		box_record_free(b);
		memset(b, 0, sizeof(*b));
		return err == -ENOENT || err == -EMSGSIZE ? -ENOENT : -EIO;
	}
	*text = t;
	return 0;
}

int fleetd_lost_fetch(const char *workspace, const char *id, char **text)
{
	struct box b = {0};
	uint64_t rev;
	char host[FLEET_ID_MAX + 1] = "";
	int err = lost_read(workspace, id, text, &b, &rev, host);

	box_record_free(&b);
	return err;
}

int fleetd_lost_delete(const char *workspace, const char *id)
{
	char key[80], named[SD_ID_LEN + 1], host[FLEET_ID_MAX + 1] = "", *text = NULL;
	uint64_t rev = 0, nrev = 0;
	struct box b = {0};
	int err = lost_read(workspace, id, &text, &b, &rev, host);

	if (err < 0)
		return err;
	free(text);
	/* retired for good first (its host, back, does not adopt it; only one delete retires it,
	 * and not one racing a revival that released it: -ESTALE), then its name (on the
	 * revision read: a name another box claimed meanwhile stays its) */
	err = fleet_retire(&fleetd, id, host);
	if (err < 0 && err != -ENOENT) {
		box_record_free(&b);
		return err == -ESTALE ? err : -EIO;
	}
	/* (retired already: a delete asked again after its name could not be freed frees it) */
	fleetd_name_key(workspace, b.name, key);
	if (fleet_kv_get(&fleetd, fleetd_names.kv, key, named, sizeof(named), &nrev) == 0 &&
	    strcmp(named, id) == 0 &&
	    fleet_kv_delete_rev(&fleetd, fleetd_names.kv, key, nrev) == -EIO)
		sd_log("fleet: the name of deleted box %s stays claimed: %s", id, fleetd.err);
	if (err == -ENOENT) {
		box_record_free(&b);
		return err;
	}
	/* gone for good: its share back, its record goes (a failure said: a list skips a record
	 * whose box is not its host's any more) */
	fleetd_quota_release_box(workspace, b.vcpus, b.mem_bytes, b.fs_capacity_bytes);
	snprintf(key, sizeof(key), "r.%s", id);
	if (fleet_kv_delete_rev(&fleetd, boxes_kv.kv, key, rev) == -EIO)
		sd_log("fleet: the record of lost box %s stays: %s", id, fleetd.err);
	box_record_free(&b);
	return 0;
}

/* ---- a lost host's checkpointed boxes, woken elsewhere ---- */

#define REVIVE_SCAN_MS	5000  /* the records looked at this often */
#define REVIVE_AGAIN_MS 30000 /* a revival tried here is tried again after this */

struct revive_job {
	struct sd_job job;
	char id[SD_ID_LEN + 1];
	char workspace[SD_WORKSPACE_MAX + 1];
};

/* The box as its wake will have it: stopped, restored from its checkpoint's generation or a
 * later one its host pushed, and going on above the last generation that host took (its
 * record says which: a checkpoint publishes it before its push), so none is made twice. */
static char *revived_record(struct box *b, const char *host)
{
	time_t at = (time_t)(b->ckpt_ms / 1000);
	struct tm tm;
	char when[40] = "?";

	if (gmtime_r(&at, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	b->status = BOX_STOPPED;
	b->stopped_ms = b->ckpt_ms;
	b->wake_min_gen = b->ckpt_gen;
	b->ckpt_gen = b->ckpt_ms = 0;
	b->sandbox[0] = 0;
	snprintf(b->status_message, sizeof(b->status_message),
		 "its host %s was lost: stopped at its checkpoint of %s (by %s), what it did after "
		 "that is gone; the next call wakes it",
		 host, when, fleetd.conf.host);
	return box_record(b);
}

static void revive_run(struct sd_job *sj)
{
	struct revive_job *j = (struct revive_job *)sj;
	char host[FLEET_ID_MAX + 1] = "", key[48], owner[FLEET_ID_MAX + 1], *text = NULL;
	char *record = NULL;
	struct box b = {0};
	uint64_t rev = 0, brev = 0, ago;
	bool mine = false;
	int err;

	/* its record now (the copy may lag), its host lost by the bucket's word too, and the
	 * box still that host's by the owners bucket itself (not woken, released or deleted
	 * meanwhile) */
	if (lost_read(j->workspace, j->id, &text, &b, &rev, host) < 0 || !b.ckpt_gen ||
	    fleetd_host_lost(host, &ago) != 1 || fleetd_owner_fresh(j->id, owner, 0) < 0 ||
	    strcmp(owner, host) != 0 || !(record = revived_record(&b, host)))
		goto out;
	/* create-only: a record there already (another host's revival, or a stop of the lost
	 * host cut short between its record and its release, newer) is the one kept */
	snprintf(key, sizeof(key), "b.%s", j->id);
	err = strlen(record) > RECORD_MAX
		      ? -EFBIG
		      : fleet_kv_create(&fleetd, boxes_kv.kv, key, record, &brev);
	if (err < 0 && err != -EEXIST) {
		sd_log("fleet: box %s of lost host %s: its record cannot be put: %s", j->id, host,
		       fleetd.err);
		goto out;
	}
	mine = err == 0;
	if (fleet_release_lost(&fleetd, j->id, host) < 0) {
		/* another host released it first, else it is not host's any more: a record put
		 * here goes again, unless the box is released (then it is the one to wake) */
		if (mine &&
		    (fleetd_owner_fresh(j->id, owner, 0) < 0 ||
		     strcmp(owner, FLEET_RELEASED) != 0) &&
		    fleet_kv_delete_rev(&fleetd, boxes_kv.kv, key, brev) == -EIO)
			sd_log("fleet: box %s: a released record stays: %s", j->id, fleetd.err);
		goto out;
	}
	snprintf(key, sizeof(key), "r.%s", j->id);
	if (fleet_kv_delete_rev(&fleetd, boxes_kv.kv, key, rev) == -EIO)
		sd_log("fleet: the record of lost box %s stays: %s", j->id, fleetd.err);
	sd_log("box %s of lost host %s: released at its checkpoint (generation %llu), to wake "
	       "elsewhere",
	       j->id, host, (unsigned long long)b.wake_min_gen);
out:
	free(record);
	free(text);
	box_record_free(&b);
}

static void revive_done(struct sd_job *sj)
{
	struct revive_job *j = (struct revive_job *)sj;

	for (struct running *x = runs[bucket_of(j->id)]; x; x = x->next)
		if (strcmp(x->id, j->id) == 0) {
			x->reviving = false;
			x->revive_ms = sd_now_ms(); /* tried again REVIVE_AGAIN_MS after this */
		}
	free(j);
}

/* On the loop: the boxes with a checkpoint whose host has not beaten for FLEETD_LOST_MS. Every
 * host may try one; the release on the revision read lets one do it. */
static void revive_tick(void)
{
	static uint64_t scanned;
	uint64_t now = sd_now_ms();

	if (now < scanned + REVIVE_SCAN_MS)
		return;
	scanned = now;
	for (unsigned k = 0; k < LOST_BUCKETS; k++)
		for (struct running *x = runs[k]; x; x = x->next) {
			struct revive_job *j;

			if (!x->ckpt_gen || x->reviving || now < x->revive_ms + REVIVE_AGAIN_MS ||
			    strcmp(x->host, fleetd.conf.host) == 0 ||
			    fleetd_host_lapsed_ms(x->host) < FLEETD_LOST_MS ||
			    !(j = calloc(1, sizeof(*j))))
				continue;
			x->reviving = true;
			memcpy(j->id, x->id, sizeof(j->id));
			memcpy(j->workspace, x->workspace, sizeof(j->workspace));
			j->job.run = revive_run;
			j->job.done = revive_done;
			work_queue_class(&j->job, WORK_FLEET_BG);
		}
}

int fleet_lost_start(void)
{
	return fleet_kv_open(&fleetd, "sandbox_boxes", RECORD_MAX, &boxes_kv);
}

void fleet_lost_stop(void)
{
	fleet_kv_close(&boxes_kv);
	boxes_kv.kv = NULL;
}
