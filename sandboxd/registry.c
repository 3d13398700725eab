/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workspace's registries (docs/api.md, "Registries"): a name, a URL and credentials that a
 * snapshot made from a Docker image pulls with. The record (service/registries/<workspace>/
 * <name>.json) has no password: that is a workspace secret of its own ("registry.<name>"),
 * AES-256-GCM at rest, never returned by the API.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostutil.h"
#include "sandboxd.h"

#define REGISTRY_FILE_MAX (16u << 10)

static int reg_path(const char *workspace, const char *name, char *out, size_t len)
{
	if (!valid_box_name(name))
		return -EINVAL;
	int n = snprintf(out, len, "%s/registries/%s%s%s%s", sd_dir(), workspace, name ? "/" : "",
			 name ? name : "", name ? ".json" : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int registry_load(const char *workspace, const char *name, json_t **out)
{
	char path[4400];
	json_error_t jerr;

	if (reg_path(workspace, name, path, sizeof(path)) < 0)
		return -ENOENT;
	*out = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	return *out ? 0 : -ENOENT;
}

int registry_find(const char *workspace, const char *ref, json_t **out)
{
	char dir[4400];
	DIR *d;
	struct dirent *e;

	if (registry_load(workspace, ref, out) == 0)
		return 0;
	snprintf(dir, sizeof(dir), "%s/registries/%s", sd_dir(), workspace);
	if (!(d = opendir(dir)))
		return -ENOENT;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		json_t *r;

		if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0)
			continue;
		e->d_name[n - 5] = 0;
		if (registry_load(workspace, e->d_name, &r) < 0)
			continue;
		const char *id = json_string_value(json_object_get(r, "id"));

		if (id && strcmp(id, ref) == 0) {
			closedir(d);
			*out = r;
			return 0;
		}
		json_decref(r);
	}
	closedir(d);
	return -ENOENT;
}

static json_t *reg_public(json_t *r)
{
	json_t *o = json_deep_copy(r);

	if (o) {
		json_object_del(o, "workspace");
		json_object_del(o, "username");
	}
	return o;
}

static bool valid_url(const char *u)
{
	size_t n = strlen(u);

	if (n == 0 || n > 512)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)u[i] <= 0x20 || u[i] == 0x7f || u[i] == '"' || u[i] == '\\')
			return false;
	return true;
}

static void reg_put(struct sd_req *q, json_t *o, json_t *old)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *url = json_string_value(json_object_get(o, "url"));
	const char *user = json_string_value(json_object_get(o, "username"));
	const char *pass = json_string_value(json_object_get(o, "password"));
	const char *auth = json_string_value(json_object_get(o, "auth_type"));
	char path[4400], dir[4400], created[32];

	if (old) {
		name = json_string_value(json_object_get(old, "name"));
		if (!url)
			url = json_string_value(json_object_get(old, "url"));
		if (!user)
			user = json_string_value(json_object_get(old, "username"));
	}
	if (!name || !valid_box_name(name)) {
		req_reply_invalid(q, "name", "a registry's name is letters, digits, '-', '_', '.'");
		return;
	}
	if (!url || !valid_url(url)) {
		req_reply_invalid(q, "url", "url must be a registry's host[:port] or URL");
		return;
	}
	if (auth && strcmp(auth, "DOCKER_CONFIG") != 0) {
		req_reply_error(q, 422, "SandboxConfig", "auth_type %.32s is not supported", auth);
		return;
	}
	if ((user && strlen(user) > 256) || (pass && strlen(pass) > 4096)) {
		req_reply_invalid(q, "password", "credentials too long");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/registries/%s", sd_dir(), q->workspace);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		req_reply_error(q, 500, "InternalError", "cannot store the registry");
		return;
	}
	if (pass) {
		char sname[80];

		snprintf(sname, sizeof(sname), "registry.%s", name);
		if (secret_set(q->workspace, sname, pass, strlen(pass)) < 0) {
			req_reply_error(q, 500, "InternalError", "cannot store the credentials");
			return;
		}
	}
	char id[SD_ID_LEN + 1];
	const char *oid = old ? json_string_value(json_object_get(old, "id")) : NULL;

	if (oid)
		snprintf(id, sizeof(id), "%s", oid);
	else
		sd_uuid(id);
	sd_iso(sd_now_ms(), created);
	json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "name", name, "url",
			      url, "auth_type", "DOCKER_CONFIG", "provider", "DOCKER_REGISTRY",
			      "workspace", q->workspace, "updated_at", created);

	if (!r) {
		req_reply_error(q, 500, "InternalError", "out of memory");
		return;
	}
	json_object_set_new(r, "created_at",
			    old && json_object_get(old, "created_at")
				    ? json_incref(json_object_get(old, "created_at"))
				    : json_string(created));
	if (user)
		json_object_set_new(r, "username", json_string(user));
	char *text = json_dumps(r, JSON_COMPACT);

	(void)reg_path(q->workspace, name, path, sizeof(path));
	if (!text || write_file_atomic(path, text, strlen(text), 0600) < 0) {
		free(text);
		json_decref(r);
		req_reply_error(q, 500, "InternalError", "cannot store the registry");
		return;
	}
	free(text);
	req_reply_json(q, old ? 200 : 201, reg_public(r));
	json_decref(r);
}

void registry_handle(struct sd_req *q, json_t *o)
{
	char dir[4400];
	json_t *r = NULL;

	if (q->rt.kind == R_REGISTRIES && q->method == M_POST) {
		const char *name = json_string_value(json_object_get(o, "name"));

		if (name && registry_load(q->workspace, name, &r) == 0) {
			json_decref(r);
			req_reply_error(q, 409, "Conflict", "a registry named '%s' exists", name);
			return;
		}
		reg_put(q, o, NULL);
		return;
	}
	if (q->rt.kind == R_REGISTRIES) {
		json_t *arr = json_array();
		DIR *d;

		snprintf(dir, sizeof(dir), "%s/registries/%s", sd_dir(), q->workspace);
		if ((d = opendir(dir))) {
			struct dirent *e;

			while ((e = readdir(d)) && json_array_size(arr) < 1000) {
				size_t n = strlen(e->d_name);

				if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0)
					continue;
				e->d_name[n - 5] = 0;
				if (registry_load(q->workspace, e->d_name, &r) == 0) {
					json_array_append_new(arr, reg_public(r));
					json_decref(r);
				}
			}
			closedir(d);
		}
		req_reply_json(q, 200,
			       json_pack("{s:O, s:o, s:n, s:i}", "items", arr, "registries", arr,
					 "next_cursor", "offset", 0));
		return;
	}
	if (registry_load(q->workspace, q->rt.arg, &r) < 0) {
		req_reply_error(q, 404, "NotFound", "registry not found");
		return;
	}
	if (q->method == M_GET) {
		req_reply_json(q, 200, reg_public(r));
	} else if (q->method == M_PATCH) {
		reg_put(q, o, r);
	} else {
		char path[4400], sname[80];

		(void)reg_path(q->workspace, q->rt.arg, path, sizeof(path));
		(void)unlink(path);
		snprintf(sname, sizeof(sname), "registry.%.63s", q->rt.arg);
		snprintf(path, sizeof(path), "%s/secrets/%s/%s", sd_dir(), q->workspace, sname);
		(void)unlink(path);
		req_reply_raw(q, 204, "application/json", NULL, 0);
	}
	json_decref(r);
}
