/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox sent to a fleet, or fetched from it, through the API with the user's key
 * (docs/fleet.md, "Push and pull"; sandboxctl push and pull): the laptop-to-cloud handoff.
 * Routes of our own beside LangSmith's, on any host, all in the workspace's chunks:
 *
 *   POST /v2/sandboxes/chunks/missing     a manifest's text: which of its chunks the store lacks
 *   PUT  /v2/sandboxes/chunks/<sha-256>   one chunk (checked against its name), sealed and stored
 *   GET  /v2/sandboxes/chunks/<sha-256>   one chunk, checked
 *   POST /v2/sandboxes/imports?name=NAME  a manifest whose chunks are all there: a new box,
 *                                         stopped in the store (the next call wakes it)
 *   GET  /v2/sandboxes/boxes/<ref>/export a stopped box's manifest (its proxy files left out)
 *
 * The client never sees a store credential or key: chunks go in and out as plain bytes over
 * the API, named by their SHA-256; the host seals them. A pushed manifest is hostile: only a
 * snapshot's state, memory, layers and meta.yaml, every chunk checked, then pulled here and
 * checked as a snapshot from elsewhere (its layers' parents its own or its image's) before its
 * box exists; its network is this service's (a wake makes the proxy's files from the box's
 * options), never the client's policy or credentials.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk.h"
#include "client.h"
#include "fleetd.h"

#define XFER_PER_WS 2 /* a workspace's transfers at once: WORK_XFER has 4 threads */
#define XFER_WS_MAX 64

struct xfer_job {
	struct sd_job job;
	struct sd_pending *pending;
	enum route_kind kind;
	enum http_method method;
	char workspace[SD_WORKSPACE_MAX + 1];
	char arg[ROUTE_ARG_MAX];
	char name[SD_NAME_MAX + 1];
	char dp_base[512];
	char *body;
	size_t body_len;
	uint64_t budget; /* its body's share of the uploads' budget (http.c) */
	/* out */
	int status;
	const char *etype;
	char emsg[600];
	char *resp; /* with ctype */
	size_t resp_len;
	const char *ctype;
	json_t *json;
};

static struct {
	char workspace[SD_WORKSPACE_MAX + 1];
	unsigned n;
} inflight[XFER_WS_MAX]; /* the loop's */

static unsigned *inflight_of(const char *workspace, bool make)
{
	for (unsigned i = 0; i < XFER_WS_MAX; i++)
		if (inflight[i].n && strcmp(inflight[i].workspace, workspace) == 0)
			return &inflight[i].n;
	for (unsigned i = 0; make && i < XFER_WS_MAX; i++)
		if (!inflight[i].n) {
			snprintf(inflight[i].workspace, sizeof(inflight[i].workspace), "%s",
				 workspace);
			return &inflight[i].n;
		}
	return NULL;
}

static void fail(struct xfer_job *j, int err, const char *msg)
{
	j->status = err == -EINVAL || err == -EBADMSG || err == -EPERM || err == -EXDEV ? 400
		    : err == -ENOENT							? 404
		    : err == -EEXIST || err == -ESTALE					? 409
		    : err == -EFBIG || err == -E2BIG					? 413
		    : err == -EDQUOT							? 429
											: 503;
	j->etype = j->status == 400   ? "InvalidRequest"
		   : j->status == 404 ? "NotFound"
		   : j->status == 409 ? "Conflict"
		   : j->status == 413 ? "InvalidRequest"
		   : j->status == 429 ? "QuotaExceeded"
				      : "ServiceUnavailable";
	snprintf(j->emsg, sizeof(j->emsg), "%s", msg);
}

/* The root disk's size, from its top frozen layer's header (0 when it cannot be read). */
static uint64_t disk_bytes(const char *store_name, const struct snap_meta *m)
{
	char dir[4200], path[4300];
	struct disk_header h;
	ssize_t n = -1;
	int fd;

	if (snap_dir(store_name, dir, sizeof(dir)) < 0 ||
	    path_fmt(path, sizeof(path), "%s/%s", dir, m->root_layer) < 0)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		n = pread(fd, &h, sizeof(h), 0);
		close(fd);
	}
	return n == (ssize_t)sizeof(h) ? le64toh(h.virtual_len) : 0;
}

/* POST /imports: the box of a pushed manifest, stopped in the store. Its name claimed first
 * (a taken one costs no pull), then the manifest put and pulled here (checked as a snapshot
 * from elsewhere), then its share of the quotas, then its records: a failure undoes the rest. */
static void import_run(struct xfer_job *j)
{
	char snap_name[64], manifest[48], key[80], msg[FLEET_ERR_MAX], dir[4200];
	struct snap_meta m;
	struct box b = {0};
	json_t *share = NULL;
	char *record = NULL;
	int err;

	sd_uuid(b.id);
	box_move_names(b.id, 1, snap_name, manifest);
	fleetd_name_key(j->workspace, j->name, key);
	err = fleet_kv_create(&fleetd, fleetd_names.kv, key, b.id, NULL);
	if (err < 0) {
		snprintf(msg, sizeof(msg),
			 err == -EEXIST ? "a sandbox named '%s' exists"
					: "the fleet's names did not answer (%s)",
			 j->name);
		fail(j, err == -EEXIST ? -EEXIST : -EIO, msg);
		return;
	}
	err = fstore_import(j->workspace, j->body, j->body_len, manifest, snap_name, &m, msg,
			    sizeof(msg));
	if (err == 0) {
		snprintf(b.name, sizeof(b.name), "%s", j->name);
		snprintf(b.workspace, sizeof(b.workspace), "%s", j->workspace);
		snprintf(b.image, sizeof(b.image), "%s", m.image);
		snprintf(b.dp_base, sizeof(b.dp_base), "%s", j->dp_base);
		b.status = BOX_STOPPED;
		b.created_ms = b.updated_ms = b.stopped_ms = sd_now_ms();
		b.idle_ttl_s = 600;
		b.vcpus = m.cpus ? m.cpus : 1;
		b.mem_bytes = m.memory_mib << 20;
		b.fs_capacity_bytes = disk_bytes(snap_name, &m);
		b.fleet_gen = 1;
		share = json_pack("{s:I, s:I, s:I}", "vcpus", (json_int_t)b.vcpus, "mem_bytes",
				  (json_int_t)b.mem_bytes, "fs_capacity_bytes",
				  (json_int_t)b.fs_capacity_bytes);
		err = share ? fleetd_quota_reserve(j->workspace, share, msg, sizeof(msg)) : -ENOMEM;
		if (err < 0) {
			json_decref(share);
			share = NULL;
		}
	}
	if (err == 0 && !(record = box_record(&b)))
		err = -ENOMEM;
	if (err == 0)
		err = fleetd_released_new(b.id, record, msg, sizeof(msg));
	free(record);
	if (err < 0) {
		if (share)
			fleetd_quota_release_body(j->workspace, share);
		if (fleet_kv_delete(&fleetd, fleetd_names.kv, key) < 0)
			sd_log("fleet: the name of unmade box %s stays: %s", b.id, fleetd.err);
		if (snap_dir(snap_name, dir, sizeof(dir)) == 0)
			remove_flat_dir(dir); /* (its manifest waits for the store's collector) */
		json_decref(share);
		fail(j, err, err == -ENOMEM ? "out of memory" : msg);
		return;
	}
	json_decref(share);
	sd_log("box %s (%s): pushed into the store, stopped (%s, %u vCPUs, %llu MiB)", b.id, b.name,
	       b.image, b.vcpus, (unsigned long long)(b.mem_bytes >> 20));
	j->json = box_json(&b);
	j->status = 201;
}

/* GET /boxes/<ref>/export of a box this host does not hold. */
static void export_run(struct xfer_job *j)
{
	char id[SD_ID_LEN + 1], key[80], host[FLEET_ID_MAX + 1], snap_name[64], manifest[48];
	char msg[FLEET_ERR_MAX], *text = NULL;
	struct box b = {0};
	uint64_t rev;
	int err;

	if (fleet_is_uuid(j->arg)) {
		memcpy(id, j->arg, sizeof(id));
	} else {
		fleetd_name_key(j->workspace, j->arg, key);
		err = fleet_kv_get(&fleetd, fleetd_names.kv, key, id, sizeof(id), NULL);
		if (err < 0 || !fleet_is_uuid(id)) {
			fail(j, err == -ENOENT || err == -EMSGSIZE || err == 0 ? -ENOENT : -EIO,
			     err == -EIO ? "the fleet's names did not answer"
					 : "Sandbox not found");
			return;
		}
	}
	err = fleet_owner(&fleetd, id, host, &rev);
	if (err == 0 && strcmp(host, FLEET_RELEASED) != 0) {
		/* a running box: its record in the fleet (kept for its host's loss) says whether
		 * it is this workspace's; another's is the same 404 as none */
		err = fleetd_lost_fetch(j->workspace, id, &text);
		free(text);
		if (err == 0)
			fail(j, -EEXIST,
			     "the sandbox runs: stop it first (its state then goes into "
			     "the store, from where it is pulled)");
		else
			fail(j, err == -ENOENT ? -ENOENT : -EIO,
			     err == -ENOENT ? "Sandbox not found" : "the fleet did not answer");
		return;
	}
	if (err == 0)
		err = fleetd_released_fetch(j->workspace, id, &text);
	if (err == -EACCES) /* another workspace's: as none */
		err = -ENOENT;
	if (err == 0 && box_parse_record(text, &b) < 0)
		err = -EIO;
	free(text);
	if (err < 0) {
		box_record_free(&b);
		fail(j, err, err == -ENOENT ? "Sandbox not found" : "the fleet did not answer");
		return;
	}
	box_move_names(id, b.fleet_gen, snap_name, manifest);
	err = fstore_export(j->workspace, manifest, b.fleet_gen, &j->resp, &j->resp_len, msg,
			    sizeof(msg));
	box_record_free(&b);
	if (err < 0) {
		fail(j, err == -ENOENT ? -EIO : err, msg);
		return;
	}
	j->ctype = "text/plain";
	j->status = 200;
}

static void xfer_run(struct sd_job *sj)
{
	struct xfer_job *j = (struct xfer_job *)sj;
	char msg[FLEET_ERR_MAX] = "";
	uint8_t *data;
	size_t len;
	int err;

	switch (j->kind) {
	case R_CHUNKS_MISSING:
		err = fstore_missing(j->workspace, j->body, j->body_len, &j->json, msg,
				     sizeof(msg));
		if (err < 0) {
			fail(j, err, msg);
			return;
		}
		j->json = json_pack("{s:o}", "missing", j->json);
		j->status = j->json ? 200 : 503;
		return;
	case R_CHUNK:
		if (j->method == M_PUT) {
			err = fstore_chunk_put(j->workspace, j->arg, j->body, j->body_len, msg,
					       sizeof(msg));
			if (err < 0)
				fail(j, err, msg);
			else
				j->status = 204;
			return;
		}
		err = fstore_chunk_get(j->workspace, j->arg, &data, &len, msg, sizeof(msg));
		if (err < 0) {
			fail(j, err, msg);
			return;
		}
		j->resp = (char *)data;
		j->resp_len = len;
		j->ctype = "application/octet-stream";
		j->status = 200;
		return;
	case R_IMPORTS:
		import_run(j);
		return;
	case R_BOX_EXPORT:
		export_run(j);
		return;
	default:
		fail(j, -ENOENT, "no such route");
	}
}

static void xfer_done(struct sd_job *sj)
{
	struct xfer_job *j = (struct xfer_job *)sj;
	struct sd_req *q = pending_take(j->pending);
	unsigned *n = inflight_of(j->workspace, false);

	if (n && *n)
		(*n)--;
	if (q && j->json) {
		req_reply_json(q, j->status, j->json);
		j->json = NULL;
	} else if (q && j->resp) {
		req_reply_raw(q, j->status, j->ctype, j->resp, j->resp_len);
		j->resp = NULL;
	} else if (q && j->status == 204) {
		req_reply_raw(q, 204, "application/json", NULL, 0);
	} else if (q) {
		req_reply_error(q, j->status ? j->status : 503,
				j->etype ? j->etype : "ServiceUnavailable", "%s", j->emsg);
	}
	req_budget_return(j->budget);
	json_decref(j->json);
	free(j->resp);
	free(j->body);
	free(j);
}

void fleetd_xfer(struct sd_req *q)
{
	unsigned *n = inflight_of(q->workspace, true);
	struct xfer_job *j;

	if (!snap_store_hooks) {
		req_reply_error(q, 404, "NotFound",
				"this fleet keeps no object store: sandboxes are pushed to and "
				"pulled from one that does");
		return;
	}
	char name[SD_NAME_MAX + 1] = "";

	if (q->rt.kind == R_IMPORTS &&
	    (req_query(q, "name", name, sizeof(name)) < 0 || !valid_box_name(name))) {
		req_reply_invalid(q, "name", "a pushed sandbox needs a valid ?name=");
		return;
	}
	if (!n || *n >= XFER_PER_WS) {
		req_add_header(q, "retry-after:", "1");
		req_reply_error(q, 429, "TooManyRequests",
				"too many transfers of this workspace at once: try again");
		return;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	j->kind = q->rt.kind;
	j->method = q->method;
	snprintf(j->workspace, sizeof(j->workspace), "%s", q->workspace);
	snprintf(j->arg, sizeof(j->arg), "%s", q->rt.arg);
	memcpy(j->name, name, sizeof(j->name));
	snprintf(j->dp_base, sizeof(j->dp_base), "%s", sd_conf.public_url);
	j->body = q->body;
	j->body_len = q->body_len;
	j->budget = req_budget_take(q);
	q->body = NULL;
	q->body_len = q->body_cap = 0;
	if (!(j->pending = req_park(q))) {
		req_budget_return(j->budget);
		free(j->body);
		free(j);
		return;
	}
	(*n)++;
	j->job.run = xfer_run;
	j->job.done = xfer_done;
	work_queue_class(&j->job, WORK_XFER);
}
