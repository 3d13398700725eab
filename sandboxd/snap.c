/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API's snapshots (docs/api.md, "Snapshots"): a record in service/snapshots/<id>.json
 * naming the lifecycle layer's snapshot (snapshots/api-<hex>, sealed and MAC'ed as every
 * snapshot of ours). A capture of a box takes its disk and memory; a create from a Docker
 * image pulls it (image_pull.c) and boots it once to make the snapshot. Names are unique per
 * workspace; another workspace's snapshot is a 404 as a missing one.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostutil.h"
#include "sandboxd.h"

static struct sd_snap *snaps;
static unsigned nsnaps;

static const char *const snap_status_names[] = {
	[SNAP_BUILDING] = "building",
	[SNAP_READY] = "ready",
	[SNAP_FAILED] = "failed",
};

/* "name" and "name:latest" are one name; a tag is kept as given. */
static void snap_norm(const char *in, char *out, size_t len)
{
	const char *slash = strrchr(in, '/');
	const char *last = slash ? slash + 1 : in;

	snprintf(out, len, strchr(last, ':') ? "%s" : "%s:latest", in);
}

bool valid_snap_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SD_SNAP_NAME_MAX || s[0] == '/' || s[n - 1] == '/' || strstr(s, "//") ||
	    strstr(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		      c == '.' || c == '/' || c == ':' || (c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

/* loading: read from this host's disk at start (a capture it ran is over), else a record of
 * the fleet's, whose capture may run on its host now. */
static int snap_from_json(json_t *o, struct sd_snap *s, bool loading)
{
	const char *st = json_string_value(json_object_get(o, "status"));
	const char *v;

#define STR(k, f)                                                                                  \
	v = json_string_value(json_object_get(o, k));                                              \
	snprintf(s->f, sizeof(s->f), "%s", v ? v : "")
	STR("id", id);
	STR("name", name);
	STR("workspace", workspace);
	STR("store_name", store_name);
	STR("image", image);
	STR("docker_image", docker_image);
	STR("source_box", source_box);
	STR("host", host);
	STR("status_message", status_message);
#undef STR
	if (strlen(s->id) != SD_ID_LEN || !valid_snap_name(s->name) ||
	    !valid_workspace(s->workspace) || !st ||
	    (strncmp(s->store_name, "api-", 4) != 0 && strncmp(s->image, "api-img-", 8) != 0))
		return -EBADMSG;
	s->status = SNAP_FAILED;
	for (unsigned i = 0; i < 3; i++)
		if (strcmp(st, snap_status_names[i]) == 0)
			s->status = (enum snap_status)i;
	s->created_ms = (uint64_t)json_integer_value(json_object_get(o, "created_ms"));
	s->updated_ms = (uint64_t)json_integer_value(json_object_get(o, "updated_ms"));
	s->fs_capacity_bytes =
		(uint64_t)json_integer_value(json_object_get(o, "fs_capacity_bytes"));
	if (loading && s->status == SNAP_BUILDING) { /* its job died with the daemon that ran it */
		s->status = SNAP_FAILED;
		snprintf(s->status_message, sizeof(s->status_message),
			 "interrupted by a restart of the service");
	}
	return 0;
}

int snaps_load(void)
{
	char dir[4200];

	snprintf(dir, sizeof(dir), "%s/snapshots", sd_dir());
	DIR *d = opendir(dir);

	if (!d)
		return -errno;
	struct dirent *e;

	while ((e = readdir(d))) {
		if (strlen(e->d_name) != SD_ID_LEN + 5 || strcmp(e->d_name + SD_ID_LEN, ".json"))
			continue;
		char path[4300];
		json_error_t jerr;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
		struct sd_snap *s = calloc(1, sizeof(*s));

		if (!o || !s || snap_from_json(o, s, true) < 0 || nsnaps >= SD_SNAPS_MAX) {
			sd_log("%s: not a snapshot record, ignored", path);
			free(s);
			json_decref(o);
			continue;
		}
		json_decref(o);
		s->next = snaps;
		snaps = s;
		nsnaps++;
	}
	closedir(d);
	return 0;
}

struct sd_snap *snap_new(const char *workspace, const char *name)
{
	if (nsnaps >= SD_SNAPS_MAX)
		return NULL;
	struct sd_snap *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	sd_uuid(s->id);
	snprintf(s->workspace, sizeof(s->workspace), "%s", workspace);
	snap_norm(name, s->name, sizeof(s->name));
	char hex[33] = {0};

	for (size_t i = 0, j = 0; s->id[i] && j < 32; i++)
		if (s->id[i] != '-')
			hex[j++] = s->id[i];
	snprintf(s->store_name, sizeof(s->store_name), "api-%s", hex);
	s->created_ms = s->updated_ms = sd_now_ms();
	if (snap_fleet_hooks && snap_fleet_hooks->host)
		snprintf(s->host, sizeof(s->host), "%s", snap_fleet_hooks->host());
	s->status = SNAP_BUILDING;
	s->next = snaps;
	snaps = s;
	nsnaps++;
	return s;
}

const struct snap_fleet_hooks *snap_fleet_hooks;

/* The record on this host's disk (its text into *text when asked). */
static int snap_write(const struct sd_snap *s, char **text_out)
{
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "id", s->id,
		"name", s->name, "workspace", s->workspace, "store_name", s->store_name, "image",
		s->image, "docker_image", s->docker_image, "source_box", s->source_box, "host",
		s->host, "status", snap_status_names[s->status], "status_message",
		s->status_message, "created_ms", (json_int_t)s->created_ms, "updated_ms",
		(json_int_t)s->updated_ms, "fs_capacity_bytes", (json_int_t)s->fs_capacity_bytes);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (!text)
		return -ENOMEM;
	char path[4300];

	snprintf(path, sizeof(path), "%s/snapshots/%s.json", sd_dir(), s->id);
	int err = write_file_atomic(path, text, strlen(text), 0600);

	if (text_out)
		*text_out = text;
	else
		free(text);
	return err;
}

int snap_save(const struct sd_snap *s)
{
	char *text = NULL;
	int err = snap_write(s, snap_fleet_hooks ? &text : NULL);

	if (err == 0 && snap_fleet_hooks)
		snap_fleet_hooks->saved(s->id, s->workspace, text);
	free(text);
	return err;
}

/* Off the list and its file gone; the fleet told when `tell`. */
static void snap_drop(struct sd_snap *s, bool tell)
{
	char path[4300];

	if (tell && snap_fleet_hooks)
		snap_fleet_hooks->saved(s->id, s->workspace, NULL);

	snprintf(path, sizeof(path), "%s/snapshots/%s.json", sd_dir(), s->id);
	(void)unlink(path);
	for (struct sd_snap **p = &snaps; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			nsnaps--;
			break;
		}
	free(s);
}

void snap_forget(struct sd_snap *s)
{
	snap_drop(s, true);
}

void snap_mirror(const char *id, const char *text)
{
	struct sd_snap *s = NULL, in = {0};
	json_error_t jerr;

	for (s = snaps; s && strcmp(s->id, id) != 0; s = s->next)
		;
	if (!text) { /* deleted through another host: this host's copy of it goes too */
		if (s && !s->busy) {
			if (s->store_name[0])
				snap_remove_store(s->store_name);
			snap_drop(s, false);
		}
		return;
	}
	json_t *o = jsonx_parse(text, strlen(text), &jerr);
	int err = o ? snap_from_json(o, &in, false) : -EBADMSG;

	json_decref(o);
	if (err < 0 || strcmp(in.id, id) != 0) {
		sd_log("fleet: snapshot record %.40s is not one: ignored", id);
		return;
	}
	if (s && (s->busy || s->updated_ms > in.updated_ms))
		return; /* ours is newer (this host runs its capture) */
	if (!s) {
		if (nsnaps >= SD_SNAPS_MAX || !(s = calloc(1, sizeof(*s))))
			return;
		s->next = snaps;
		snaps = s;
		nsnaps++;
	}
	struct sd_snap *next = s->next;

	*s = in;
	s->next = next;
	if (snap_write(s, NULL) < 0)
		sd_log("snapshot %s: cannot save its record", s->id);
}

void snap_reply_new(struct sd_req *q, const struct sd_snap *s)
{
	json_t *o = snap_json(s);

	if (snap_fleet_hooks)
		snap_fleet_hooks->answer(q, o);
	else
		req_reply_json(q, 200, o);
}

void snap_reply_record(struct sd_req *q, const char *id, const char *text)
{
	struct sd_snap in = {0};
	json_error_t jerr;
	json_t *o = text ? jsonx_parse(text, strlen(text), &jerr) : NULL;
	int err = o ? snap_from_json(o, &in, false) : -ENOENT;

	json_decref(o);
	if (err < 0 || strcmp(in.id, id) != 0 || strcmp(in.workspace, q->workspace) != 0) {
		req_reply_error(q, 404, "NotFound", "snapshot not found");
		return;
	}
	req_reply_json(q, 200, snap_json(&in));
}

struct sd_snap *snap_find(const char *workspace, const char *ref)
{
	char norm[SD_SNAP_NAME_MAX + 16];

	snap_norm(ref, norm, sizeof(norm));
	for (struct sd_snap *s = snaps; s; s = s->next)
		if (strcmp(s->workspace, workspace) == 0 &&
		    (strcmp(s->id, ref) == 0 || strcmp(s->name, norm) == 0))
			return s;
	return NULL;
}

struct sd_snap *snap_first(void)
{
	return snaps;
}

unsigned snap_count(const char *workspace)
{
	unsigned n = 0;

	for (struct sd_snap *s = snaps; s; s = s->next)
		n += strcmp(s->workspace, workspace) == 0;
	return n;
}

json_t *snap_json(const struct sd_snap *s)
{
	char created[32], updated[32];

	sd_iso(s->created_ms, created);
	sd_iso(s->updated_ms, updated);
	json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}", "id", s->id, "name", s->name,
			      "status", snap_status_names[s->status], "fs_capacity_bytes",
			      (json_int_t)s->fs_capacity_bytes, "created_at", created, "updated_at",
			      updated);

	if (!o)
		return NULL;
	json_object_set_new(o, "status_message",
			    s->status_message[0] ? json_string(s->status_message) : json_null());
	json_object_set_new(o, "docker_image",
			    s->docker_image[0] ? json_string(s->docker_image) : json_null());
	json_object_set_new(o, "source_sandbox_id",
			    s->source_box[0] ? json_string(s->source_box) : json_null());
	return o;
}

/* ---- handlers ---- */

void snap_capture_done(const char *snap_id, int err, const char *msg)
{
	for (struct sd_snap *s = snaps; s; s = s->next)
		if (strcmp(s->id, snap_id) == 0) {
			s->status = err == 0 ? SNAP_READY : SNAP_FAILED;
			snprintf(s->status_message, sizeof(s->status_message), "%s",
				 err == 0 ? "" : msg);
			s->updated_ms = sd_now_ms();
			if (snap_save(s) < 0)
				sd_log("snapshot %s: cannot save its record", s->id);
			return;
		}
}

void snap_capture(struct sd_req *q, struct box *b, json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "name"));

	if (json_string_value(json_object_get(o, "docker_image"))) {
		req_reply_error(q, 422, "SandboxConfig",
				"docker_image capture (export from the guest's Docker) is not "
				"supported: capture the file system");
		return;
	}
	if (!name || !valid_snap_name(name)) {
		req_reply_invalid(q, "name",
				  "name must be a snapshot name (lowercase components "
				  "separated by '/', an optional :tag)");
		return;
	}
	if (snap_find(q->workspace, name)) {
		req_reply_error(q, 409, "Conflict", "a snapshot named '%s' exists", name);
		return;
	}
	if (quota_refuse_snapshot(q))
		return;
	if (b->status != BOX_READY || b->busy) {
		req_reply_error(q, 400, "NotReady", "the sandbox is %s: start it first",
				b->busy ? "busy" : box_status_name(b->status));
		return;
	}
	struct sd_snap *s = snap_new(q->workspace, name);

	if (!s) {
		req_reply_error(q, 503, "ServiceUnavailable", "this host holds no more snapshots");
		return;
	}
	snprintf(s->source_box, sizeof(s->source_box), "%s", b->id);
	s->fs_capacity_bytes = b->fs_capacity_bytes;
	if (snap_save(s) < 0 || box_snapshot_job(b, s->store_name, s->id) < 0) {
		snap_forget(s);
		req_reply_error(q, 500, "InternalError", "cannot start the capture");
		return;
	}
	snap_reply_new(q, s);
}

static void snap_list(struct sd_req *q)
{
	char filter[256] = "", arg[32];
	uint64_t limit = 50, offset = 0;

	if (req_query(q, "name_contains", filter, sizeof(filter)) == -E2BIG ||
	    (req_query(q, "limit", arg, sizeof(arg)) == 0 && !parse_u64(arg, 1, 500, &limit)) ||
	    (req_query(q, "offset", arg, sizeof(arg)) == 0 &&
	     !parse_u64(arg, 0, SD_SNAPS_MAX, &offset))) {
		req_reply_invalid(q, "limit", "limit is 1 to 500, offset 0 or more");
		return;
	}
	json_t *arr = json_array();
	uint64_t i = 0;

	for (struct sd_snap *s = snaps; s; s = s->next) {
		if (strcmp(s->workspace, q->workspace) != 0 ||
		    (filter[0] && !strcasestr(s->name, filter)))
			continue;
		if (i++ < offset)
			continue;
		if (json_array_size(arr) >= limit)
			break;
		json_array_append_new(arr, snap_json(s));
	}
	req_reply_json(q, 200,
		       json_pack("{s:O, s:o, s:n, s:I}", "snapshots", arr, "items", arr,
				 "next_cursor", "offset", (json_int_t)offset));
}

static void snap_delete(struct sd_req *q, struct sd_snap *s)
{
	if (s->status == SNAP_BUILDING) {
		req_reply_error(q, 409, "Conflict", "the snapshot is still being made");
		return;
	}
	if (s->store_name[0])
		snap_remove_store(s->store_name);
	else
		snap_remove_image(s->image);
	snap_forget(s);
	if (snap_fleet_hooks)
		snap_fleet_hooks->answer(q, NULL); /* once its delete is in the fleet */
	else
		req_reply_raw(q, 204, "application/json", NULL, 0);
}

void snap_handle(struct sd_req *q, json_t *o)
{
	if (q->rt.kind == R_SNAPSHOTS) {
		if (q->method == M_GET)
			snap_list(q);
		else
			image_snapshot_create(q, o);
		return;
	}
	struct sd_snap *s = snap_find(q->workspace, q->rt.arg);

	if (!s && snap_fleet_hooks && q->method == M_GET && q->rt.kind == R_SNAPSHOT) {
		snap_fleet_hooks->lookup(q, q->rt.arg); /* made a moment ago through another host */
		return;
	}
	if (!s) {
		req_reply_error(q, 404, "NotFound", "snapshot not found");
		return;
	}
	if (q->method == M_DELETE)
		snap_delete(q, s);
	else
		req_reply_json(q, 200, snap_json(s));
}

/* ---- removing a lifecycle snapshot ---- */

struct rm_job {
	struct sd_job job;
	char dir[4200];
};

static void rm_run(struct sd_job *sj)
{
	struct rm_job *j = (struct rm_job *)sj;

	pthread_mutex_lock(&lifecycle_lock);
	remove_flat_dir(j->dir);
	pthread_mutex_unlock(&lifecycle_lock);
}

static int image_dir(const char *image, char *out, size_t len)
{
	int n = snprintf(out, len, "%s/images/%s", state_home(), image);

	return n < 0 || (size_t)n >= len || !valid_name(image) ? -EINVAL : 0;
}

static void rm_done(struct sd_job *sj)
{
	free(sj);
}

void snap_remove_image(const char *image)
{
	for (struct box *b = box_first(); b; b = b->next)
		if (strcmp(b->image, image) == 0)
			return; /* its disk stacks on the image's rootfs */
	struct rm_job *j = calloc(1, sizeof(*j));

	if (!j || image_dir(image, j->dir, sizeof(j->dir)) < 0) {
		free(j);
		return;
	}
	j->job.run = rm_run;
	j->job.done = rm_done;
	work_queue(&j->job);
}

void snap_remove_store(const char *store_name)
{
	/* A box restored from it stacks its disk on the snapshot's frozen layers: the files stay
	 * while one does (the store is removed with the last such box, box_work.c). */
	for (struct box *b = box_first(); b; b = b->next)
		if (b->snapshot_store[0] && strcmp(b->snapshot_store, store_name) == 0)
			return;
	struct rm_job *j = calloc(1, sizeof(*j));

	if (!j || snap_dir(store_name, j->dir, sizeof(j->dir)) < 0) {
		free(j);
		return;
	}
	j->job.run = rm_run;
	j->job.done = rm_done;
	work_queue(&j->job);
}
