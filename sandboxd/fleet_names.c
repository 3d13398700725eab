/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A box's name in a fleet (fleetd.h): unique in its workspace across every host, as a
 * create-only record in the names bucket (its key a hash of workspace and name, its value the
 * box's id). Claimed by the host that places a create (fleet_rpc.c); here the changes the
 * owner makes: a rename claims the new name before the box takes it, a delete frees the name
 * before it answers (a create under it right after finds it free, as on one host), and a box
 * gone for good takes its ownership record with it. The bucket's calls run on WORK_FLEET.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleetd.h"

struct name_job {
	struct sd_job job;
	struct sd_pending *pending; /* NULL: no request waits */
	char id[SD_ID_LEN + 1];
	char claim[80];	  /* a key to claim for id first, or "" */
	char release[80]; /* a key to free if it still names id, or "" */
	bool unown;	  /* the ownership record goes too */
	bool unshare;	  /* and its share of its workspace's usage: */
	char workspace[SD_WORKSPACE_MAX + 1];
	unsigned vcpus;
	uint64_t mem_bytes, fs_bytes;
	int err; /* of the claim: 0, -EEXIST, -EIO */
	char name[SD_NAME_MAX + 1];
	enum { N_FORGET, N_DELETE, N_RENAME } kind;
};

/* Box n->id's ownership deleted while it names this host, on the revision read (a box the
 * fleet gave another host, or a create cancelled for good, keeps its record); then its state
 * in the store (its manifest box-<id>, from its earlier stops and checkpoints) goes too: no
 * host holds the box any more, and its chunks are a collection's. */
static void unown(struct name_job *n, const char *okey)
{
	char owner[FLEET_ID_MAX + 1], why[512];
	uint64_t rev = 0;
	int e = fleet_owner(&fleetd, n->id, owner, &rev);

	if (e == -ENOENT || (e == 0 && !fleetd_self(owner)))
		return;
	if (e < 0 || fleet_kv_delete_rev(&fleetd, fleetd.owners, okey, rev) < 0) {
		sd_log("fleet: the ownership of box %s stays: %s", n->id, fleetd.err);
		return;
	}
	if (n->workspace[0] && fleetd_forget_box_state(n->workspace, n->id, why, sizeof(why)) < 0)
		sd_log("box %s: its state stays in the store: %s", n->id, why);
}

static void name_run(struct sd_job *j)
{
	struct name_job *n = (struct name_job *)j;
	char id[SD_ID_LEN + 1], okey[48];

	if (n->claim[0]) {
		n->err = fleet_kv_create(&fleetd, fleetd_names.kv, n->claim, n->id, NULL);
		if (n->err < 0)
			return; /* the old name stays the box's */
	}
	uint64_t rev = 0;

	/* freed only while it names this box: on the revision read, so a name another box
	 * claimed meanwhile stays its */
	if (n->release[0] &&
	    fleet_kv_get(&fleetd, fleetd_names.kv, n->release, id, sizeof(id), &rev) == 0 &&
	    strcmp(id, n->id) == 0 &&
	    fleet_kv_delete_rev(&fleetd, fleetd_names.kv, n->release, rev) == -EIO)
		sd_log("fleet: a name of box %s stays claimed: %s", n->id, fleetd.err);
	snprintf(okey, sizeof(okey), "box.%s", n->id);
	if (n->unown)
		unown(n, okey);
	if (n->unshare)
		fleetd_quota_release_box(n->workspace, n->vcpus, n->mem_bytes, n->fs_bytes);
}

static void name_done(struct sd_job *j)
{
	struct name_job *n = (struct name_job *)j;
	struct sd_req *q = n->pending ? pending_take(n->pending) : NULL;

	if (q && n->kind == N_DELETE) {
		req_reply_raw(q, 204, "application/json", NULL, 0);
	} else if (q && n->kind == N_RENAME) {
		if (n->err == -EEXIST)
			req_reply_error(q, 409, "Conflict", "a sandbox named '%s' exists", n->name);
		else if (n->err < 0)
			req_reply_error(q, 503, "ServiceUnavailable",
					"the fleet's names did not answer: try again");
		else { /* claimed: the update runs again, and takes the name */
			snprintf(q->fleet_name_claimed, sizeof(q->fleet_name_claimed), "%s",
				 n->name);
			control_handle(q, NULL);
		}
	}
	free(n);
}

static void name_queue(struct name_job *n, struct sd_req *q)
{
	if (q && !(n->pending = req_park(q))) {
		free(n);
		return;
	}
	n->job.run = name_run;
	n->job.done = name_done;
	work_queue_class(&n->job, WORK_FLEET_BG);
}

void fleetd_records_drop(const char *workspace, const char *name, const char *id, unsigned vcpus,
			 uint64_t mem_bytes, uint64_t fs_bytes)
{
	struct name_job *n = calloc(1, sizeof(*n));

	if (!n)
		return;
	n->kind = N_FORGET;
	snprintf(n->id, sizeof(n->id), "%s", id);
	fleetd_name_key(workspace, name, n->release);
	n->unown = n->unshare = true;
	snprintf(n->workspace, sizeof(n->workspace), "%s", workspace);
	n->vcpus = vcpus;
	n->mem_bytes = mem_bytes;
	n->fs_bytes = fs_bytes;
	name_queue(n, NULL);
}

void fleetd_box_forgotten(const struct box *b)
{
	fleetd_lost_forget(b);
	if (b->released) /* in the store, or waking: its records are the fleet's, not ours */
		return;
	fleetd_records_drop(b->workspace, b->name, b->id, b->vcpus, b->mem_bytes,
			    b->fs_capacity_bytes);
}

void fleetd_box_deleted(struct sd_req *q, struct box *b)
{
	struct name_job *n = calloc(1, sizeof(*n));

	if (!n) {
		req_reply_raw(q, 204, "application/json", NULL, 0); /* freed when it is forgotten */
		return;
	}
	n->kind = N_DELETE;
	snprintf(n->id, sizeof(n->id), "%s", b->id);
	fleetd_name_key(b->workspace, b->name, n->release);
	name_queue(n, q);
}

void fleetd_box_rename(struct sd_req *q, struct box *b, const char *name)
{
	struct name_job *n = calloc(1, sizeof(*n));

	if (!n) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	n->kind = N_RENAME;
	snprintf(n->id, sizeof(n->id), "%s", b->id);
	snprintf(n->name, sizeof(n->name), "%s", name);
	fleetd_name_key(b->workspace, name, n->claim);
	fleetd_name_key(b->workspace, b->name, n->release);
	name_queue(n, q);
}
