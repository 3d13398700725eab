/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control plane's box routes (docs/api.md, "Boxes"): create, list, get, update, delete,
 * status, start, stop. Every lookup is in the key's workspace: another workspace's box is a
 * 404 exactly as a box that does not exist. Slow work is started here and done by a worker
 * (box_work.c); only a create with wait_for_ready waits for it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sandboxd.h"

#define VCPUS_MAX     16
#define MEM_MIN_BYTES (128ull << 20)
#define MEM_MAX_BYTES (64ull << 30)
#define FS_MAX_BYTES  (1ull << 40)
#define TTL_MAX_S     (365ll * 86400)

/* labels and run_config are kept in the box's record and sent in every answer: bounded. */
#define BOX_FIELD_MAX (64u << 10)

static bool json_too_big(json_t *v)
{
	if (!v)
		return false;
	char *t = json_dumps(v, JSON_COMPACT);
	bool big = !t || strlen(t) > BOX_FIELD_MAX;

	free(t);
	return big;
}

static void reply_box(struct sd_req *q, struct box *b, int status)
{
	req_reply_json(q, status, box_json(b));
}

/* The same answer for a name that exists nowhere and for another workspace's: the name is
 * not even echoed, so no answer differs by a byte whoever holds it. */
static void not_found(struct sd_req *q, const char *what, const char *ref)
{
	(void)ref;
	req_reply_error(q, 404, "NotFound", "%s not found", what);
}

/* A box's name: the lifecycle layer's rule for names (valid_name), and no "..". */
bool valid_box_name(const char *s)
{
	return valid_name(s) && strstr(s, "..") == NULL;
}

static int opt_int(struct sd_req *q, json_t *o, const char *name, int64_t min, int64_t max,
		   int64_t *out)
{
	json_t *v = json_object_get(o, name);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		req_reply_invalid(q, name, "%s must be an integer from %lld to %lld", name,
				  (long long)min, (long long)max);
		return -EINVAL;
	}
	*out = json_integer_value(v);
	return 1;
}

static int ttl_field(struct sd_req *q, json_t *o, const char *name, int64_t *out)
{
	int64_t v;
	int r = opt_int(q, o, name, 0, TTL_MAX_S, &v);

	if (r == 1 && v % 60) {
		req_reply_invalid(q, name, "%s must be 0 or a multiple of 60", name);
		return -EINVAL;
	}
	if (r == 1)
		*out = v;
	return r < 0 ? r : 0;
}

static void create_replied(struct sd_req *q, struct box *b, int err, const char *msg)
{
	if (!b) {
		req_reply_error(q, 503, "Unschedulable",
				"the sandbox was deleted while it was made");
		return;
	}
	if (err == 0) {
		reply_box(q, b, 200);
		return;
	}
	/* A failed create leaves nothing (box_work.c forgets the box once this is said): the
	 * client may retry under the same name. */
	req_reply_error(q, err == -ESRCH ? 503 : 422, err == -ESRCH ? "Unschedulable" : "CrashLoop",
			"the sandbox could not be made: %s", msg);
}

/* A create that waits for ready past its `timeout`: 408 (the clients' timeout error); the box
 * goes on being made. */
void create_timed_out(struct sd_req *q, struct box *b)
{
	req_reply_error(q, 408, "Timeout",
			"the sandbox was not ready within the create's timeout: "
			"poll its status");
}

const struct fleet_hooks *fleet_hooks;

/* A create's fields, checked: -1 when one is refused (answered). */
struct create_fields {
	const char *name, *sid, *sname;
	int64_t vcpus, mem, fs, timeout, idle, del;
	json_t *labels, *rc;
};

static int create_parse(struct sd_req *q, json_t *o, struct create_fields *f)
{
	*f = (struct create_fields){
		.name = json_string_value(json_object_get(o, "name")),
		.sid = json_string_value(json_object_get(o, "snapshot_id")),
		.sname = json_string_value(json_object_get(o, "snapshot_name")),
		.vcpus = sd_conf.default_vcpus,
		.mem = (int64_t)sd_conf.default_mem_bytes,
		.idle = 600,
		.del = 14 * 86400,
		.timeout = 30,
	};
	if (json_object_get(o, "mount_config") &&
	    !json_is_null(json_object_get(o, "mount_config"))) {
		req_reply_error(q, 422, "SandboxConfig",
				"mount_config is not supported by this server");
		return -1;
	}
	if (json_object_get(o, "proxy_config") &&
	    !json_is_null(json_object_get(o, "proxy_config")) &&
	    proxy_config_check(q, json_object_get(o, "proxy_config")) < 0)
		return -1;
	if ((json_object_get(o, "name") && !f->name) || (f->name && !valid_box_name(f->name))) {
		req_reply_invalid(q, "name",
				  "name must be 1 to 63 letters, digits, '-', '_' or '.', starting "
				  "with a letter or digit");
		return -1;
	}
	if (f->sid && f->sname) {
		req_reply_invalid(q, "snapshot_id", "give snapshot_id or snapshot_name, not both");
		return -1;
	}
	if (opt_int(q, o, "vcpus", 1, VCPUS_MAX, &f->vcpus) < 0 ||
	    opt_int(q, o, "mem_bytes", (int64_t)MEM_MIN_BYTES, (int64_t)MEM_MAX_BYTES, &f->mem) <
		    0 ||
	    opt_int(q, o, "fs_capacity_bytes", 0, (int64_t)FS_MAX_BYTES, &f->fs) < 0 ||
	    opt_int(q, o, "timeout", 1, 3600, &f->timeout) < 0 ||
	    ttl_field(q, o, "idle_ttl_seconds", &f->idle) < 0 ||
	    ttl_field(q, o, "delete_after_stop_seconds", &f->del) < 0)
		return -1;
	json_t *labels = f->labels = json_object_get(o, "labels"),
	       *rc = f->rc = json_object_get(o, "run_config");

	if ((labels && !json_is_object(labels) && !json_is_null(labels)) ||
	    (rc && !json_is_object(rc) && !json_is_null(rc)) || json_too_big(labels) ||
	    json_too_big(rc)) {
		req_reply_invalid(q, labels && !json_is_object(labels) ? "labels" : "run_config",
				  "must be an object of at most %u bytes", BOX_FIELD_MAX);
		return -1;
	}
	return 0;
}

bool box_create_refused(struct sd_req *q, json_t *o)
{
	struct create_fields f;
	struct sd_snap *snap;

	if (create_parse(q, o, &f) < 0)
		return true;
	if (f.sid || f.sname) {
		snap = snap_find(q->workspace, f.sid ? f.sid : f.sname);
		if (!snap || snap->status != SNAP_READY) {
			not_found(q, "snapshot", f.sid ? f.sid : f.sname);
			return true;
		}
	}
	return false;
}

static void box_create(struct sd_req *q, json_t *o)
{
	struct create_fields f;
	struct box_create_args a = {.cpus = sd_conf.default_vcpus, .claim_fd = -1};
	char gen[SD_NAME_MAX + 1];
	struct sd_snap *snap = NULL;

	if (create_parse(q, o, &f) < 0)
		return;
	const char *name = f.name, *sid = f.sid, *sname = f.sname;
	int64_t vcpus = f.vcpus, mem = f.mem, fs = f.fs, timeout = f.timeout, idle = f.idle,
		del = f.del;
	json_t *labels = f.labels, *rc = f.rc;

	if (sid || sname) {
		snap = snap_find(q->workspace, sid ? sid : sname);
		if (!snap || snap->status != SNAP_READY) {
			not_found(q, "snapshot", sid ? sid : sname);
			return;
		}
	}
	if (q->fleet_box_id[0] && box_by_id(q->fleet_box_id)) { /* taken again: made already */
		reply_box(q, box_by_id(q->fleet_box_id), 200);
		return;
	}
	if (name && box_find(q->workspace, name)) {
		req_reply_error(q, 409, "Conflict", "a sandbox named '%s' exists", name);
		return;
	}
	if (!name) {
		uint8_t r[4];

		if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
			req_reply_error(q, 503, "ServiceUnavailable", "no randomness");
			return;
		}
		snprintf(gen, sizeof(gen), "sandbox-%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
		name = gen;
	}
	if (quota_refuse_box(q, (unsigned)vcpus, (uint64_t)mem, (uint64_t)fs))
		return;
	struct box *b = box_new(q->workspace, name);

	if (!b) {
		req_reply_error(q, 503, "Unschedulable", "this host holds no more sandboxes");
		return;
	}
	if (q->fleet_box_id[0]) /* the fleet's id: placed, owned and named under it */
		snprintf(b->id, sizeof(b->id), "%s", q->fleet_box_id);
	/* its dataplane_url names this host, and keeps naming it wherever the box moves */
	snprintf(b->dp_base, sizeof(b->dp_base), "%s", sd_conf.public_url);
	b->vcpus = (unsigned)vcpus;
	b->mem_bytes = (uint64_t)mem;
	b->fs_capacity_bytes = (uint64_t)fs;
	b->idle_ttl_s = idle;
	b->delete_after_stop_s = del;
	if (labels && json_is_object(labels))
		b->labels = json_incref(labels);
	if (rc && json_is_object(rc))
		b->run_config = json_incref(rc);
	if (json_is_object(json_object_get(o, "proxy_config")))
		b->proxy_config = json_incref(json_object_get(o, "proxy_config"));
	snprintf(a.image, sizeof(a.image), "%s", sd_conf.default_image);
	snprintf(b->image, sizeof(b->image), "%s", sd_conf.default_image);
	if (snap && snap->image[0]) { /* from a Docker image: boot it */
		snprintf(a.image, sizeof(a.image), "%s", snap->image);
		snprintf(b->image, sizeof(b->image), "%s", snap->image);
		snprintf(b->snapshot_id, sizeof(b->snapshot_id), "%s", snap->id);
	} else if (snap) {
		snprintf(a.snap_store, sizeof(a.snap_store), "%s", snap->store_name);
		snprintf(a.snap_id, sizeof(a.snap_id), "%s", snap->id);
		snprintf(b->snapshot_id, sizeof(b->snapshot_id), "%s", snap->id);
		snprintf(b->snapshot_store, sizeof(b->snapshot_store), "%s", snap->store_name);
	}
	a.cpus = b->vcpus;
	a.memory_mib = b->mem_bytes >> 20;
	a.disk_gib = (b->fs_capacity_bytes + (1ull << 30) - 1) >> 30;
	a.timeout_s = 120;
	box_sandbox_name(b, a.sandbox_name);
	if (!snap && pool_take(a.image, a.cpus, a.memory_mib, a.claim, &a.claim_fd))
		snprintf(b->sandbox, sizeof(b->sandbox), "%s", a.claim); /* adopted after a crash */
	if (b->proxy_config && proxy_config_words(b, &a.net_opts, &a.nnet_opts) < 0) {
		claim_drop(&a);
		box_forget(b);
		req_reply_error(q, 422, "SandboxConfig", "proxy_config cannot be served");
		return;
	}
	if (box_save(b) < 0) {
		claim_drop(&a);
		box_forget(b);
		req_reply_error(q, 500, "InternalError", "cannot save the sandbox's record");
		return;
	}
	bool wait = !json_is_false(json_object_get(o, "wait_for_ready"));

	b->create_deadline_ms = wait ? sd_now_ms() + (uint64_t)timeout * 1000 : 0;
	if (box_create_job(b, &a, wait ? q : NULL, create_replied) < 0) {
		claim_drop(&a);
		box_forget(b);
		req_reply_error(q, 503, "Unschedulable", "out of memory");
		return;
	}
	if (!wait)
		reply_box(q, b, 200);
}

static void box_list(struct sd_req *q)
{
	json_t *arr = json_array();

	for (struct box *b = box_first(); b; b = b->next)
		if (strcmp(b->workspace, q->workspace) == 0 && b->status != BOX_DELETING)
			json_array_append_new(arr, box_json(b));
	req_reply_json(q, 200,
		       json_pack("{s:O, s:o, s:n, s:i}", "sandboxes", arr, "items", arr,
				 "next_cursor", "offset", 0));
}

static void box_update(struct sd_req *q, struct box *b, json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	int64_t idle = b->idle_ttl_s, del = b->delete_after_stop_s;
	json_t *rc = json_object_get(o, "run_config");

	if ((json_object_get(o, "name") && !name) || (name && !valid_box_name(name))) {
		req_reply_invalid(q, "name", "not a valid name");
		return;
	}
	if (ttl_field(q, o, "idle_ttl_seconds", &idle) < 0 ||
	    ttl_field(q, o, "delete_after_stop_seconds", &del) < 0)
		return;
	if (rc && !json_is_object(rc)) {
		req_reply_invalid(q, "run_config", "must be an object");
		return;
	}
	if (json_object_get(o, "proxy_config")) {
		req_reply_error(q, 400, "InvalidRequest",
				"proxy_config cannot change on a running sandbox here: create it "
				"with its proxy_config");
		return;
	}
	if (name && strcmp(name, b->name) != 0) {
		struct box *other = box_find(q->workspace, name);

		if (other && other != b) {
			req_reply_error(q, 409, "Conflict", "a sandbox named '%s' exists", name);
			return;
		}
		if (fleet_hooks && strcmp(q->fleet_name_claimed, name) != 0) {
			fleet_hooks->rename(q, b, name); /* claimed first; then this again */
			return;
		}
		snprintf(b->name, sizeof(b->name), "%s", name);
	}
	b->idle_ttl_s = idle;
	b->delete_after_stop_s = del;
	if (rc) {
		json_t *merged = b->run_config ? json_deep_copy(b->run_config) : json_object();

		if (!merged || json_object_update(merged, rc) < 0 || json_too_big(merged)) {
			json_decref(merged);
			req_reply_invalid(q, "run_config", "the run_config would be over %u bytes",
					  BOX_FIELD_MAX);
			return;
		}
		json_decref(b->run_config);
		b->run_config = merged;
	}
	b->updated_ms = sd_now_ms();
	if (box_save(b) < 0) {
		req_reply_error(q, 500, "InternalError", "cannot save the sandbox's record");
		return;
	}
	reply_box(q, b, 200);
}

static void box_delete(struct sd_req *q, struct box *b)
{
	b->status = BOX_DELETING; /* gone for every lookup from now on */
	box_store(b);
	if (b->release_cancel) /* its stop into the store: not let go after its push */
		__atomic_store_n(b->release_cancel, 1, __ATOMIC_RELEASE);
	if (b->busy)
		b->delete_requested = true;
	else if (box_simple_job(b, J_DELETE, NULL, NULL) < 0)
		b->delete_requested = true;
	if (fleet_hooks)
		fleet_hooks->deleted(q, b); /* its name freed first */
	else
		req_reply_raw(q, 204, "application/json", NULL, 0);
}

/* GET /boxes/{name}/stats: what its cgroup counted (CPU time, memory now and at its peak,
 * I/O, processes); zeros for a box that does not run. */
static void box_stats(struct sd_req *q, struct box *b)
{
	struct sandbox sb;
	struct cgroup_stats st;

	if (!b->sandbox[0] || sandbox_load(b->sandbox, &sb) < 0 || cgroup_stats(&sb, &st) < 0)
		memset(&st, 0, sizeof(st));
	req_reply_json(
		q, 200,
		json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "status",
			  box_status_name(b->status), "cpu_usec", (json_int_t)st.cpu_usec,
			  "memory_bytes", (json_int_t)st.memory_bytes, "memory_peak_bytes",
			  (json_int_t)st.memory_peak_bytes, "memory_max_bytes",
			  (json_int_t)(st.memory_max_bytes == UINT64_MAX ? 0 : st.memory_max_bytes),
			  "io_read_bytes", (json_int_t)st.io_read_bytes, "io_write_bytes",
			  (json_int_t)st.io_write_bytes));
}

static void box_start(struct sd_req *q, struct box *b)
{
	if ((b->status == BOX_STOPPED || b->status == BOX_FAILED) && !b->busy) {
		if (!b->sandbox[0]) {
			req_reply_error(q, 409, "Conflict",
					"the sandbox was never made: delete it");
			return;
		}
		/* shown as provisioning, never saved as such: a restart must not take a start for
		 * a create it cuts short (idle.c) */
		b->starting = true;
		(void)box_start_job(b, NULL, NULL);
	}
	reply_box(q, b, 200);
}

static void box_stop(struct sd_req *q, struct box *b)
{
	if (b->status == BOX_READY && !b->busy && box_stop_job(b) < 0) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	req_reply_raw(q, 204, "application/json", NULL, 0);
}

void control_handle(struct sd_req *q, struct box *unused)
{
	json_t *o = NULL;

	if (q->rt.kind == R_CHUNKS_MISSING || q->rt.kind == R_CHUNK || q->rt.kind == R_IMPORTS) {
		/* their bodies are a manifest's text, a chunk's bytes (fleet_xfer.c) */
		if (fleet_hooks && fleet_hooks->xfer)
			fleet_hooks->xfer(q);
		else
			req_reply_error(
				q, 404, "NotFound",
				"this service keeps no object store: sandboxes are pushed to "
				"and pulled from a fleet's");
		return;
	}
	if (q->method == M_POST || q->method == M_PATCH || q->method == M_PUT) {
		o = req_json(q);
		if (!o)
			return;
	}
	switch (q->rt.kind) {
	case R_BOXES:
		if (fleet_hooks && !q->on_reply && q->method == M_POST)
			fleet_hooks->create(q, o);
		else if (fleet_hooks && !q->on_reply)
			fleet_hooks->list(q);
		else if (q->method == M_POST)
			box_create(q, o);
		else
			box_list(q);
		break;
	case R_SNAPSHOTS:
	case R_SNAPSHOT:
	case R_SNAPSHOT_BY_NAME:
		snap_handle(q, o);
		break;
	case R_REGISTRIES:
	case R_REGISTRY:
		registry_handle(q, o);
		break;
	case R_USAGE:
		usage_handle(q);
		break;
	default: {
		struct box *b = box_find(q->workspace, q->rt.arg);

		if (!b && fleet_hooks && fleet_hooks->xfer && q->rt.kind == R_BOX_EXPORT) {
			fleet_hooks->xfer(q); /* released into the store, or another host's */
			break;
		}
		if (!b && fleet_hooks && !q->on_reply) {
			fleet_hooks->forward(q); /* another host's, or no one's */
			break;
		}
		if (!b && fleet_hooks && box_released_lately(q->workspace, q->rt.arg)) {
			req_moved(q); /* sent here as its owner a moment after it went: 421 */
			break;
		}
		if (!b) {
			not_found(q, "Sandbox", q->rt.arg);
			break;
		}
		/* a call that changes the box is activity (a PATCH of its idle_ttl_seconds and a
		 * run right behind it must not find it stopping); reads, which clients poll
		 * (status), are not, or a polled box would never go idle */
		if (q->method != M_GET)
			b->last_active_ms = sd_now_ms();
		switch (q->rt.kind) {
		case R_BOX:
			if (q->method == M_GET)
				reply_box(q, b, 200);
			else if (q->method == M_PATCH)
				box_update(q, b, o);
			else
				box_delete(q, b);
			break;
		case R_BOX_STATUS:
			req_reply_json(q, 200, box_status_json(b));
			break;
		case R_BOX_START:
			box_start(q, b);
			break;
		case R_BOX_STOP:
			box_stop(q, b);
			break;
		case R_BOX_SNAPSHOT:
			snap_capture(q, b, o);
			break;
		case R_BOX_DOWNLOAD_URL:
		case R_BOX_SERVICE_URL:
		case R_BOX_SERVICE_URLS:
			links_make(q, b, o);
			break;
		case R_BOX_COMMANDS:
			commands_list(q, b);
			break;
		case R_BOX_STATS:
			box_stats(q, b);
			break;
		case R_BOX_EXPORT: /* (a stopped one is the store's: fleet_xfer.c) */
			req_reply_error(
				q, 409, "Conflict",
				"sandbox '%s' is %s here: stop it first (its state then goes "
				"into the store, from where it is pulled)",
				b->name, b->busy ? "stopping" : box_status_name(b->status));
			break;
		default:
			req_reply_error(q, 404, "NotFound", "no such route");
		}
	}
	}
	json_decref(o);
}
