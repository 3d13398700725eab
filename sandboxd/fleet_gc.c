/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The store's collector in a fleet (docs/fleet.md, "The collector"): every push into the
 * store holds a lease on its workspace for its whole length (fstore_lease: a host's capture,
 * stop or checkpoint, a client's import), and a collection holds the workspace's lock
 * (fleet/lease.c), so no push skips a chunk a collection is deleting. POST /gc on the
 * operator's listener runs one collection (store/gc.c) of one workspace, on a thread of its
 * own, one at a time on a host:
 *
 *   POST /gc {"workspace": NAME, "grace_seconds": 3600, "dry_run": false}
 *
 * answers the collection's figures, or 409 while another runs here, 503 while pushes of the
 * workspace did not end within GC_WAIT_MS (nothing deleted) or when one began during it (a
 * collection yields to pushes: what it deleted before stays deleted; asked again later).
 * grace_seconds (0 to 30 days): a chunk no manifest names is kept while younger than that, as the
 * store dates it (a client's push sends its chunks before its import, with no lease between).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fleetd.h"
#include "fstore.h"

/* A push waits this long for a collection's lock to go: a live collection stops within a
 * second and one store request (60 s at most) of its lease; a dead one's goes stale (120 s). */
#define GC_PUSH_WAIT_MS (4 * 60 * 1000)
#define GC_WAIT_MS	(10 * 60 * 1000) /* a collection waits this long for pushes' ends */

static struct fleet_kv leases_kv;
static atomic_bool leases_open;
static atomic_bool collecting;

int fleet_gc_start(void)
{
	int err = fleet_lease_bucket(&fleetd, &leases_kv);

	atomic_store(&leases_open, err == 0);
	return err;
}

void fleet_gc_stop(void)
{
	/* no lease from now on; those ended lately deleting their records; the bucket's handle
	 * left to the process's end (a held lease's thread, a collection's, may still use it) */
	atomic_store(&leases_open, false);
	/* a collection under way (its own thread) stops at its next look at its lock: waited
	 * for a bounded while, so none acts on the fleet's handles closed after this */
	for (int i = 0; i < 50 && atomic_load(&collecting); i++)
		usleep(100 * 1000);
	if (!fleet_lease_quiesce(5000))
		sd_log("gc: leases still held at the stop: they go stale in the fleet");
}

static bool lease_held(void *arg)
{
	return fleet_lease_fresh(arg);
}

int fstore_lease(struct fstore *h, const char *workspace, bool reader, char *err, size_t len)
{
	int r;

	if (!fleetd_on)
		return 0;		  /* one host: no collector runs (POST /gc is a fleet's) */
	if (!atomic_load(&leases_open)) { /* (stopping): no push without its lease */
		snprintf(err, len, "the fleet's leases are closed: sandboxd is stopping");
		return -ESHUTDOWN;
	}
	if ((r = fleet_lease_push(&fleetd, leases_kv.kv, workspace, reader, GC_PUSH_WAIT_MS,
				  &h->lease, err, len)) < 0)
		return r;
	h->cs.may_publish = lease_held;
	h->cs.may_publish_arg = h->lease;
	return 0;
}

void fstore_unlease(struct fstore *h)
{
	fleet_lease_end_async(h->lease); /* (on the loop too: a lazy restore's close) */
	h->lease = NULL;
	h->cs.may_publish = NULL;
	h->cs.may_publish_arg = NULL;
}

struct gc_job {
	struct sd_job job;
	struct sd_pending *pending;
	char workspace[SD_WORKSPACE_MAX + 1];
	int64_t grace_s;
	bool dry_run;
	/* the answer */
	int status;
	struct store_gc_report rep;
	uint64_t ms;
	char err[512];
};

static int lock_held(void *arg)
{
	return fleet_lease_sweep_ok(arg) == 0 ? 0 : 1;
}

int fleet_gc_collect(const char *workspace, int64_t grace_s, bool dry_run, int wait_ms,
		     struct store_gc_report *rep, char *err, size_t len)
{
	struct fleet_lease *lock = NULL;
	struct fstore h;
	uint64_t t0 = sd_now_ms(), ms;
	int r, status = 200;

	memset(rep, 0, sizeof(*rep));
	if ((r = fleet_lease_collect(&fleetd, leases_kv.kv, workspace, wait_ms, &lock, err, len)) <
	    0)
		return r == -EBUSY ? 503 : r == -EINVAL ? 422 : 502;
	if ((r = fstore_open(&h, workspace, err, len)) == 0) {
		r = store_gc(&h.cs, (int64_t)time(NULL) - grace_s, dry_run, rep, lock_held, lock);
		if (r < 0)
			snprintf(err, len, "%s", h.cs.err);
		fstore_close(&h);
	}
	fleet_lease_end(lock);
	ms = sd_now_ms() - t0;
	if (r < 0)
		status = r == -EBADMSG ? 409 : r == -ECANCELED ? 503 : 502;
	sd_log("gc %s: %s in %llu ms: %llu manifests, %llu chunks listed, %llu deleted (%llu "
	       "bytes), %llu kept (%llu bytes, %llu young)%s%s",
	       workspace,
	       r < 0	 ? "stopped"
	       : dry_run ? "dry run"
			 : "done",
	       (unsigned long long)ms, (unsigned long long)rep->manifests,
	       (unsigned long long)rep->chunks, (unsigned long long)rep->deleted,
	       (unsigned long long)rep->deleted_bytes, (unsigned long long)rep->kept,
	       (unsigned long long)rep->kept_bytes, (unsigned long long)rep->young,
	       r < 0 ? ": " : "", r < 0 ? err : "");
	return status;
}

bool fleet_gc_hold(void)
{
	return snap_store_hooks && atomic_load(&leases_open) && !atomic_exchange(&collecting, true);
}

void fleet_gc_unhold(void)
{
	atomic_store(&collecting, false);
}

static void gc_run(struct sd_job *sj)
{
	struct gc_job *j = (struct gc_job *)sj;
	uint64_t t0 = sd_now_ms();

	j->status = fleet_gc_collect(j->workspace, j->grace_s, j->dry_run, GC_WAIT_MS, &j->rep,
				     j->err, sizeof(j->err));
	j->ms = sd_now_ms() - t0;
}

/* A collection's own thread (it may wait minutes for pushes: never a worker of the pool's,
 * which those pushes may need); its answer goes to the loop. */
static void *gc_thread(void *arg)
{
	struct gc_job *j = arg;

	gc_run(&j->job);
	work_post(&j->job);
	return NULL;
}

static void gc_done(struct sd_job *sj)
{
	struct gc_job *j = (struct gc_job *)sj;
	struct sd_req *q = j->pending ? pending_take(j->pending) : NULL;

	fleet_gc_unhold();
	if (q && j->status != 200)
		req_reply_error(q, j->status,
				j->status == 503   ? "ServiceUnavailable"
				: j->status == 409 ? "Conflict"
				: j->status == 422 ? "ValidationError"
						   : "BadGateway",
				"%s", j->err);
	else if (q)
		req_reply_json(q, 200,
			       json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
					 "workspace", j->workspace, "dry_run", j->dry_run,
					 "manifests", (json_int_t)j->rep.manifests, "chunks",
					 (json_int_t)j->rep.chunks, "kept", (json_int_t)j->rep.kept,
					 "kept_bytes", (json_int_t)j->rep.kept_bytes, "young",
					 (json_int_t)j->rep.young, "deleted",
					 (json_int_t)j->rep.deleted, "deleted_bytes",
					 (json_int_t)j->rep.deleted_bytes, "grace_seconds",
					 (json_int_t)j->grace_s, "ms", (json_int_t)j->ms));
	free(j);
}

void fleetd_gc(struct sd_req *q)
{
	json_t *o, *ws, *grace, *dry;
	struct gc_job *j;

	if (!snap_store_hooks || !leases_open) {
		req_reply_error(q, 409, "Conflict",
				"a collection is of a fleet's object store: serve with --fleet and "
				"--store-endpoint");
		return;
	}
	if (!(o = req_json(q)))
		return;
	ws = json_object_get(o, "workspace");
	grace = json_object_get(o, "grace_seconds");
	dry = json_object_get(o, "dry_run");
	if (!json_is_string(ws) || !valid_workspace(json_string_value(ws))) {
		json_decref(o);
		req_reply_invalid(q, "workspace", "a workspace's name");
		return;
	}
	if (grace && (!json_is_integer(grace) || json_integer_value(grace) < 0 ||
		      json_integer_value(grace) > FLEET_GC_GRACE_MAX)) {
		json_decref(o);
		req_reply_invalid(q, "grace_seconds", "0 to %d seconds", FLEET_GC_GRACE_MAX);
		return;
	}
	if (dry && !json_is_boolean(dry)) {
		json_decref(o);
		req_reply_invalid(q, "dry_run", "true or false");
		return;
	}
	if (!fleet_gc_hold()) {
		json_decref(o);
		req_reply_error(q, 409, "Conflict", "a collection runs on this host");
		return;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		fleet_gc_unhold();
		json_decref(o);
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	snprintf(j->workspace, sizeof(j->workspace), "%s", json_string_value(ws));
	j->grace_s = grace ? (int64_t)json_integer_value(grace) : FLEET_GC_GRACE_DEFAULT;
	j->dry_run = dry && json_is_true(dry);
	json_decref(o);
	j->job.run = gc_run;
	j->job.done = gc_done;
	pthread_attr_t a;
	pthread_t t;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	j->pending = req_park(q);
	if (pthread_create(&t, &a, gc_thread, j) != 0) {
		j->status = 503;
		snprintf(j->err, sizeof(j->err), "no thread for the collection");
		work_post(&j->job);
	}
	pthread_attr_destroy(&a);
}
