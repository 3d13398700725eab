/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Boxes: the API's sandboxes, one record each in service/boxes/<id>.json, beside the lifecycle
 * layer's sandbox it names (sandboxes/<sandbox id>). The record is the service's: its
 * workspace, name, status, timers and the API's fields; the sandbox is the lifecycle's.
 * Records are read at start (a restart adopts every box) and written atomically on change.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostutil.h"
#include "sandboxd.h"

static struct box *boxes;
static unsigned nboxes;

static const char *const status_names[] = {
	[BOX_PROVISIONING] = "provisioning", [BOX_READY] = "ready",	  [BOX_FAILED] = "failed",
	[BOX_STOPPED] = "stopped",	     [BOX_DELETING] = "deleting",
};

const char *box_status_name(enum box_status s)
{
	return (unsigned)s < sizeof(status_names) / sizeof(status_names[0]) ? status_names[s]
									    : "failed";
}

static int status_parse(const char *s, enum box_status *out)
{
	for (unsigned i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++)
		if (strcmp(s, status_names[i]) == 0) {
			*out = (enum box_status)i;
			return 0;
		}
	return -EBADMSG;
}

static bool valid_uuid(const char *s)
{
	if (strlen(s) != SD_ID_LEN)
		return false;
	for (int i = 0; i < SD_ID_LEN; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-'
			 : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	}
	return true;
}

static void copy_str(json_t *o, const char *key, char *out, size_t len)
{
	const char *v = json_string_value(json_object_get(o, key));

	snprintf(out, len, "%s", v ? v : "");
}

static int box_from_json(json_t *o, struct box *b)
{
	const char *st = json_string_value(json_object_get(o, "status"));

	copy_str(o, "id", b->id, sizeof(b->id));
	copy_str(o, "name", b->name, sizeof(b->name));
	copy_str(o, "workspace", b->workspace, sizeof(b->workspace));
	copy_str(o, "sandbox", b->sandbox, sizeof(b->sandbox));
	copy_str(o, "snapshot_id", b->snapshot_id, sizeof(b->snapshot_id));
	copy_str(o, "image", b->image, sizeof(b->image));
	copy_str(o, "snapshot_store", b->snapshot_store, sizeof(b->snapshot_store));
	copy_str(o, "status_message", b->status_message, sizeof(b->status_message));
	if (!valid_uuid(b->id) || !b->name[0] || !valid_workspace(b->workspace) || !st ||
	    status_parse(st, &b->status) < 0)
		return -EBADMSG;
	b->created_ms = (uint64_t)json_integer_value(json_object_get(o, "created_ms"));
	b->updated_ms = (uint64_t)json_integer_value(json_object_get(o, "updated_ms"));
	b->stopped_ms = (uint64_t)json_integer_value(json_object_get(o, "stopped_ms"));
	b->idle_ttl_s = json_integer_value(json_object_get(o, "idle_ttl_seconds"));
	b->delete_after_stop_s =
		json_integer_value(json_object_get(o, "delete_after_stop_seconds"));
	b->vcpus = (unsigned)json_integer_value(json_object_get(o, "vcpus"));
	b->mem_bytes = (uint64_t)json_integer_value(json_object_get(o, "mem_bytes"));
	b->fs_capacity_bytes =
		(uint64_t)json_integer_value(json_object_get(o, "fs_capacity_bytes"));
	b->fleet_gen = (uint64_t)json_integer_value(json_object_get(o, "fleet_gen"));
	b->ckpt_gen = (uint64_t)json_integer_value(json_object_get(o, "checkpoint_gen"));
	b->ckpt_ms = (uint64_t)json_integer_value(json_object_get(o, "checkpoint_ms"));
	b->wake_min_gen = (uint64_t)json_integer_value(json_object_get(o, "wake_min_gen"));
	if (b->ckpt_gen > b->fleet_gen) /* (a checkpoint is one of its generations) */
		b->ckpt_gen = b->ckpt_ms = 0;
	if (b->wake_min_gen > b->fleet_gen)
		b->wake_min_gen = 0;
	copy_str(o, "dataplane_base", b->dp_base, sizeof(b->dp_base));
	if (strncmp(b->dp_base, "http://", 7) && strncmp(b->dp_base, "https://", 8))
		b->dp_base[0] = 0;
	json_t *v;

	if ((v = json_object_get(o, "labels")) && json_is_object(v))
		b->labels = json_incref(v);
	if ((v = json_object_get(o, "run_config")) && json_is_object(v))
		b->run_config = json_incref(v);
	if ((v = json_object_get(o, "proxy_config")) && json_is_object(v))
		b->proxy_config = json_incref(v);
	return 0;
}

int boxes_load(void)
{
	char dir[4200];

	snprintf(dir, sizeof(dir), "%s/boxes", sd_dir());
	DIR *d = opendir(dir);

	if (!d)
		return -errno;
	struct dirent *e;

	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n != SD_ID_LEN + 5 || strcmp(e->d_name + SD_ID_LEN, ".json") != 0)
			continue;
		char path[4300];
		json_error_t jerr;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
		struct box *b = calloc(1, sizeof(*b));

		if (!o || !b || box_from_json(o, b) < 0 || nboxes >= SD_BOXES_MAX) {
			sd_log("%s: not a box record, ignored", path);
			free(b);
			json_decref(o);
			continue;
		}
		json_decref(o);
		b->last_active_ms = sd_now_ms();
		b->next = boxes;
		boxes = b;
		nboxes++;
	}
	closedir(d);
	return 0;
}

struct box *box_new(const char *workspace, const char *name)
{
	if (nboxes >= SD_BOXES_MAX)
		return NULL;
	struct box *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	sd_uuid(b->id);
	snprintf(b->workspace, sizeof(b->workspace), "%s", workspace);
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->created_ms = b->updated_ms = b->last_active_ms = sd_now_ms();
	b->status = BOX_PROVISIONING;
	b->next = boxes;
	boxes = b;
	nboxes++;
	return b;
}

char *box_record(const struct box *b)
{
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, "
		"s:I, s:I, s:s}",
		"id", b->id, "name", b->name, "workspace", b->workspace, "sandbox", b->sandbox,
		"snapshot_id", b->snapshot_id, "image", b->image, "status",
		box_status_name(b->status), "status_message", b->status_message, "created_ms",
		(json_int_t)b->created_ms, "updated_ms", (json_int_t)b->updated_ms, "stopped_ms",
		(json_int_t)b->stopped_ms, "idle_ttl_seconds", (json_int_t)b->idle_ttl_s,
		"delete_after_stop_seconds", (json_int_t)b->delete_after_stop_s, "vcpus",
		(json_int_t)b->vcpus, "mem_bytes", (json_int_t)b->mem_bytes, "fs_capacity_bytes",
		(json_int_t)b->fs_capacity_bytes, "snapshot_store", b->snapshot_store);

	if (!o)
		return NULL;
	json_object_set_new(o, "fleet_gen", json_integer((json_int_t)b->fleet_gen));
	if (b->wake_min_gen)
		json_object_set_new(o, "wake_min_gen", json_integer((json_int_t)b->wake_min_gen));
	if (b->ckpt_gen) {
		json_object_set_new(o, "checkpoint_gen", json_integer((json_int_t)b->ckpt_gen));
		json_object_set_new(o, "checkpoint_ms", json_integer((json_int_t)b->ckpt_ms));
	}
	if (b->dp_base[0])
		json_object_set_new(o, "dataplane_base", json_string(b->dp_base));
	if (b->labels)
		json_object_set(o, "labels", b->labels);
	if (b->run_config)
		json_object_set(o, "run_config", b->run_config);
	if (b->proxy_config)
		json_object_set(o, "proxy_config", b->proxy_config);
	char *text = json_dumps(o, JSON_COMPACT);

	json_decref(o);
	return text;
}

int box_parse_record(const char *text, struct box *b)
{
	json_error_t jerr;
	json_t *o = jsonx_parse(text, strlen(text), &jerr);
	int err = o ? box_from_json(o, b) : -EBADMSG;

	json_decref(o);
	if (err < 0)
		box_record_free(b);
	return err;
}

void box_record_free(struct box *b)
{
	json_decref(b->labels);
	json_decref(b->run_config);
	json_decref(b->proxy_config);
	b->labels = b->run_config = b->proxy_config = NULL;
}

struct box *box_from_record(const char *text)
{
	struct box *b = nboxes < SD_BOXES_MAX ? calloc(1, sizeof(*b)) : NULL;

	if (!b || box_parse_record(text, b) < 0 || box_by_id(b->id)) {
		if (b)
			box_record_free(b);
		free(b);
		return NULL;
	}
	b->last_active_ms = sd_now_ms();
	b->next = boxes;
	boxes = b;
	nboxes++;
	return b;
}

int box_save(const struct box *b)
{
	char *text = box_record(b);

	if (!text)
		return -ENOMEM;
	char path[4300];

	snprintf(path, sizeof(path), "%s/boxes/%s.json", sd_dir(), b->id);
	int err = write_file_atomic(path, text, strlen(text), 0600);

	free(text);
	return err;
}

void box_store(const struct box *b)
{
	if (box_save(b) < 0)
		sd_log("box %s: cannot save its record", b->id);
}

void (*box_forget_hook)(const struct box *b);

void box_forget(struct box *b)
{
	char path[4300];

	if (box_forget_hook)
		box_forget_hook(b);

	snprintf(path, sizeof(path), "%s/boxes/%s.json", sd_dir(), b->id);
	(void)unlink(path);
	for (struct box **p = &boxes; *p; p = &(*p)->next)
		if (*p == b) {
			*p = b->next;
			nboxes--;
			break;
		}
	json_decref(b->labels);
	json_decref(b->run_config);
	json_decref(b->proxy_config);
	if (b->conf)
		image_conf_free(b->conf);
	free(b->conf);
	free(b);
}

const struct image_conf *box_image_conf(struct box *b)
{
	if (!b->conf_read && b->image[0]) {
		struct image_conf *c = calloc(1, sizeof(*c));

		if (!c)
			return NULL; /* read at the next command */
		if (image_conf_load(b->image, c) < 0) {
			free(c); /* as if it had none; read again at the next command */
			return NULL;
		}
		b->conf = c;
		b->conf_read = true;
	}
	return b->conf;
}

struct box *box_find(const char *workspace, const char *ref)
{
	for (struct box *b = boxes; b; b = b->next)
		if (strcmp(b->workspace, workspace) == 0 && b->status != BOX_DELETING &&
		    (strcmp(b->name, ref) == 0 || strcmp(b->id, ref) == 0))
			return b;
	return NULL;
}

struct box *box_by_id(const char *id)
{
	for (struct box *b = boxes; b; b = b->next)
		if (strcmp(b->id, id) == 0)
			return b;
	return NULL;
}

struct box *box_first(void)
{
	return boxes;
}

unsigned box_count(const char *workspace, unsigned *vcpus, uint64_t *mem_mib, uint64_t *disk_gib)
{
	unsigned n = 0;

	*vcpus = 0;
	*mem_mib = *disk_gib = 0;
	for (struct box *b = boxes; b; b = b->next)
		if (strcmp(b->workspace, workspace) == 0) {
			n++;
			*vcpus += b->vcpus;
			*mem_mib += b->mem_bytes >> 20;
			*disk_gib += (b->fs_capacity_bytes + (1ull << 30) - 1) >> 30;
		}
	return n;
}

void box_dataplane_url(const struct box *b, char *out, size_t len)
{
	snprintf(out, len, "%s/dp/%s", b->dp_base[0] ? b->dp_base : sd_conf.public_url, b->id);
}

static json_t *iso_or_null(uint64_t ms)
{
	char t[32];

	if (!ms)
		return json_null();
	sd_iso(ms, t);
	return json_string(t);
}

/* What the API shows: a start in progress is provisioning. */
static const char *box_shown_status(const struct box *b)
{
	return b->starting ? "provisioning" : box_status_name(b->status);
}

json_t *box_json(const struct box *b)
{
	char dp[1024], created[32], updated[32];

	box_dataplane_url(b, dp, sizeof(dp));
	sd_iso(b->created_ms, created);
	sd_iso(b->updated_ms, updated);
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:b}", "id", b->id,
		"name", b->name, "status", box_shown_status(b), "dataplane_url", dp, "created_at",
		created, "updated_at", updated, "idle_ttl_seconds", (json_int_t)b->idle_ttl_s,
		"delete_after_stop_seconds", (json_int_t)b->delete_after_stop_s, "vcpus",
		(json_int_t)b->vcpus, "mem_bytes", (json_int_t)b->mem_bytes, "fs_capacity_bytes",
		(json_int_t)b->fs_capacity_bytes, "persistent", 1, "preserve_memory_on_stop", 1);

	if (!o)
		return NULL;
	json_object_set_new(o, "status_message",
			    b->status_message[0] ? json_string(b->status_message) : json_null());
	json_object_set_new(o, "stopped_at", iso_or_null(b->stopped_ms));
	json_object_set_new(o, "snapshot_id",
			    b->snapshot_id[0] ? json_string(b->snapshot_id) : json_null());
	json_object_set_new(o, "labels", b->labels ? json_incref(b->labels) : json_object());
	if (b->run_config)
		json_object_set(o, "run_config", b->run_config);
	return o;
}

json_t *box_status_json(const struct box *b)
{
	return json_pack("{s:s, s:o}", "status", box_shown_status(b), "status_message",
			 b->status_message[0] ? json_string(b->status_message) : json_null());
}
