/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /snapshots: a snapshot from a Docker image (docs/api.md, "Snapshots from images"). A
 * worker pulls the image (tools/oci: the registry API v2 with token auth over libcurl, every
 * blob checked against its digest, bounded in time) with the workspace's registry credentials
 * when the request names a registry, imports it with our OCI importer as an image of its own
 * (images/api-img-<hex>), and the snapshot stands for that image: a box created from it boots
 * the image (the first such create makes the image's ready snapshot, so the next ones
 * restore). The snapshot is "building" until then, "failed" with the puller's message
 * (never the registry's text, never a credential) otherwise. A Dockerfile build is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client.h"
#include "oci.h"
#include "sandboxd.h"

#define PULL_LAYERS_MAX (8ull << 30)

struct pull_job {
	struct sd_job job;
	char snap_id[SD_ID_LEN + 1];
	char ref[OCI_REF_MAX + 1];
	char image[64];
	char *user, *password;
	char layout_dir[4400];
	char kernel[4200], initrd[4200];
	int err;
	char msg[1100];
};

static void pull_run(struct sd_job *sj)
{
	struct pull_job *j = (struct pull_job *)sj;
	struct oci_msg *m = calloc(1, sizeof(*m));
	struct oci_pull_req q = {
		.ref = j->ref,
		.user = j->user,
		.password = j->password,
		.refuse_loopback = !sd_conf.registry_loopback,
		.layers_max = PULL_LAYERS_MAX,
		.stall_s = sd_conf.registry_stall_s,
		.deadline_s = 1800,
	};
	char hash[65];

	if (!m) {
		j->err = -ENOMEM;
		return;
	}
	oci_rmtree(AT_FDCWD, j->layout_dir);
	j->err = oci_pull(&q, j->layout_dir, m);
	if (j->err == 0)
		j->err = oci_import(j->image, j->layout_dir, j->kernel, j->initrd, NULL, NULL, hash,
				    m);
	if (j->err < 0)
		snprintf(j->msg, sizeof(j->msg), "ImagePull: %s",
			 m->text[0] ? m->text : strerror(-j->err));
	oci_rmtree(AT_FDCWD, j->layout_dir);
	free(m);
}

static void pull_done(struct sd_job *sj)
{
	struct pull_job *j = (struct pull_job *)sj;

	snap_capture_done(j->snap_id, j->err, j->msg);
	if (j->password)
		explicit_bzero(j->password, strlen(j->password));
	free(j->password);
	free(j->user);
	free(j);
}

/* The kernel and initrd images of ours boot with: the default image's, else busybox's. */
static int boot_files(char *kernel, char *initrd, size_t len)
{
	const char *from[] = {sd_conf.default_image, "debian", "busybox"};

	for (int i = 0; i < 3; i++)
		if (image_path(from[i], "kernel", kernel, len) == 0 &&
		    image_path(from[i], "initrd", initrd, len) == 0)
			return 0;
	return -ENOENT;
}

void image_snapshot_create(struct sd_req *q, json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *image = json_string_value(json_object_get(o, "docker_image"));
	const char *reg = json_string_value(json_object_get(o, "registry_id"));
	json_t *fs = json_object_get(o, "fs_capacity_bytes");
	struct pull_job *j;

	if (json_object_get(o, "dockerfile") || json_object_get(o, "context")) {
		req_reply_error(q, 422, "SandboxConfig",
				"building from a Dockerfile is not supported");
		return;
	}
	if (!name || !valid_snap_name(name)) {
		req_reply_invalid(q, "name",
				  "name must be a snapshot name (lowercase components "
				  "separated by '/', an optional :tag)");
		return;
	}
	if (!image || !image[0] || strlen(image) > OCI_REF_MAX || strpbrk(image, " \t\r\n\"\\")) {
		req_reply_invalid(q, "docker_image", "docker_image must be an image reference");
		return;
	}
	if (fs && !json_is_null(fs) && (!json_is_integer(fs) || json_integer_value(fs) < 0)) {
		req_reply_invalid(q, "fs_capacity_bytes", "must be a size in bytes");
		return;
	}
	if (snap_find(q->workspace, name)) {
		req_reply_error(q, 409, "Conflict", "a snapshot named '%s' exists", name);
		return;
	}
	if (quota_refuse_snapshot(q))
		return;
	j = calloc(1, sizeof(*j));
	if (!j) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	if (reg) {
		json_t *r = NULL;
		char sname[80];
		size_t len;

		/* by name or id, in this workspace only */
		if (registry_find(q->workspace, reg, &r) < 0) {
			free(j);
			req_reply_error(q, 404, "NotFound", "registry not found");
			return;
		}
		const char *user = json_string_value(json_object_get(r, "username"));

		snprintf(sname, sizeof(sname), "registry.%.63s",
			 json_string_value(json_object_get(r, "name")));
		j->user = user ? strdup(user) : NULL;
		if (secret_get(q->workspace, sname, &j->password, &len) < 0)
			j->password = NULL;
		json_decref(r);
	}
	if (boot_files(j->kernel, j->initrd, sizeof(j->kernel)) < 0) {
		free(j->user);
		free(j->password);
		free(j);
		req_reply_error(q, 503, "Unschedulable",
				"this host has no image to take a kernel from");
		return;
	}
	struct sd_snap *s = snap_new(q->workspace, name);

	if (!s) {
		free(j->user);
		free(j->password);
		free(j);
		req_reply_error(q, 503, "ServiceUnavailable", "this host holds no more snapshots");
		return;
	}
	snprintf(s->docker_image, sizeof(s->docker_image), "%s", image);
	snprintf(s->image, sizeof(s->image), "api-img-%s", s->store_name + 4);
	s->store_name[0] = 0; /* it stands for the image: no lifecycle snapshot */
	s->fs_capacity_bytes = fs && json_is_integer(fs) ? (uint64_t)json_integer_value(fs) : 0;
	snprintf(j->snap_id, sizeof(j->snap_id), "%s", s->id);
	snprintf(j->ref, sizeof(j->ref), "%s", image);
	snprintf(j->image, sizeof(j->image), "%s", s->image);
	snprintf(j->layout_dir, sizeof(j->layout_dir), "%s/tmp/pull-%s", sd_dir(), s->id);
	if (snap_save(s) < 0) {
		snap_forget(s);
		free(j->user);
		free(j->password);
		free(j);
		req_reply_error(q, 500, "InternalError", "cannot save the snapshot's record");
		return;
	}
	j->job.run = pull_run;
	j->job.done = pull_done;
	work_queue_io(&j->job);
	snap_reply_new(q, s);
}
