/* SPDX-License-Identifier: Apache-2.0 */
/*
 * {D}/upload and {D}/download (docs/api.md, "Files"): a worker opens its own connection to the
 * box's agent and writes or reads the whole file (agent_files.c), bounded by SD_UPLOAD_MAX and
 * SD_DOWNLOAD_MAX. Upload takes the one part of a multipart/form-data body (multipart.c),
 * makes the parent directories and replaces the file; download answers GET, HEAD and Range
 * (range.c) with an ETag from the file's size and mtime.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

/* Where the clients' createSnapshotFromDockerfile uploads its build context. */
#define DOCKERFILE_BUILD_DIR "/var/lib/langsmith-build/"

struct file_job {
	struct sd_job job;
	struct sd_pending *pending;
	char vsock[4200];
	char path[4097];
	bool upload, head;
	const char *up; /* upload: the part's bytes, inside `body` */
	char *data;	/* download: what was read */
	size_t len;
	char *body; /* upload: the request body the data points into (freed here) */
	int err;
	char msg[256];
	struct proto_stat st;
};

/* The file's path from ?path=: absolute, no NUL, at most 4096 bytes. */
static int file_path(struct sd_req *q, char *out, size_t len)
{
	int err = req_query(q, "path", out, len);

	if (err == -E2BIG || (err == 0 && out[0] != '/')) {
		req_reply_error(q, 400, "InvalidRequest", "path must be an absolute path");
		return -EINVAL;
	}
	if (err < 0) {
		req_reply_error(q, 400, "InvalidRequest", "the query needs path=");
		return -EINVAL;
	}
	return 0;
}

static int stat_call(struct agent_conn *c, const char *path, struct proto_stat *st, char *msg,
		     size_t mlen)
{
	struct proto_frame f;
	int err = agent_call(c, PROTO_MSG_STAT, path, (uint32_t)strlen(path) + 1, 30000, NULL, NULL,
			     &f);

	if (err < 0)
		return err;
	if (f.hdr.type == PROTO_MSG_ERROR) {
		agent_error_text(&f, msg, mlen);
		return -(int)proto_get_le32(f.payload);
	}
	if (f.hdr.type != PROTO_MSG_STAT_REPLY)
		return -EPROTO;
	st->size = proto_get_le64(f.payload);
	st->mtime_sec = (int64_t)proto_get_le64(f.payload + 8);
	st->mtime_nsec = proto_get_le32(f.payload + 16);
	st->mode = proto_get_le32(f.payload + 20);
	return 0;
}

static void file_run(struct sd_job *sj)
{
	struct file_job *j = (struct file_job *)sj;
	struct agent_conn c;

	j->err = agent_connect_path(j->vsock, 10000, &c);
	if (j->err < 0) {
		snprintf(j->msg, sizeof(j->msg), "cannot reach the sandbox: %s", strerror(-j->err));
		return;
	}
	if (j->upload) {
		char parent[4097];

		snprintf(parent, sizeof(parent), "%s", j->path);
		char *slash = strrchr(parent, '/');

		if (slash && slash != parent) {
			*slash = 0;
			j->err = agent_mkdir_p(&c, parent, 0755);
		}
		if (j->err == 0)
			j->err = agent_file_put(&c, j->path, j->up, j->len, 0644);
		if (j->err < 0)
			snprintf(j->msg, sizeof(j->msg), "cannot write %.200s: %s", j->path,
				 strerror(-j->err));
	} else {
		j->err = stat_call(&c, j->path, &j->st, j->msg, sizeof(j->msg));
		if (j->err == 0 && (j->st.mode & 0170000) != 0100000)
			j->err = -EISDIR;
		else if (j->err == 0 && j->st.size > SD_DOWNLOAD_MAX)
			j->err = -EFBIG;
		if (j->err == 0 && !j->head)
			j->err = agent_file_get(&c, j->path, SD_DOWNLOAD_MAX, &j->data, &j->len);
		if (j->err < 0 && !j->msg[0])
			snprintf(j->msg, sizeof(j->msg), "cannot read %.200s: %s", j->path,
				 j->err == -EFBIG ? "larger than this server sends"
						  : strerror(-j->err));
	}
	agent_close(&c);
}

static void file_done(struct sd_job *sj)
{
	struct file_job *j = (struct file_job *)sj;
	struct sd_req *q = pending_take(j->pending);

	if (!q)
		goto out;
	if (j->upload) {
		if (j->err < 0)
			req_reply_error(q, 500, "WriteError", "%s", j->msg);
		else
			req_reply_json(q, 200,
				       json_pack("{s:s, s:I}", "path", j->path, "size",
						 (json_int_t)j->len));
		goto out;
	}
	if (j->err == -ENOENT || j->err == -ENOTDIR) {
		req_reply_error(q, 404, "FileNotFound", "%s", j->msg);
		goto out;
	}
	if (j->err < 0) {
		req_reply_error(q, 500, "ReadError", "%s", j->msg);
		goto out;
	}
	range_reply(q, j->data, j->head ? j->st.size : j->len, &j->st);
	j->data = NULL; /* taken by the reply */
out:
	free(j->body);
	free(j->data);
	free(j);
}

static void files_start(struct sd_req *q, struct box *b, struct file_job *j)
{
	snprintf(j->vsock, sizeof(j->vsock), "%s/sandboxes/%s/vsock.sock", state_home(),
		 b->sandbox);
	j->pending = req_park(q);
	if (!j->pending) {
		free(j->body);
		free(j);
		return;
	}
	j->job.run = file_run;
	j->job.done = file_done;
	work_queue_io(&j->job);
}

void files_serve_path(struct sd_req *q, struct box *b, const char *path)
{
	struct file_job *j = calloc(1, sizeof(*j));

	if (!j) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->head = q->method == M_HEAD;
	files_start(q, b, j);
}

void files_handle(struct sd_req *q, struct box *b)
{
	char path[4097];

	if (q->rt.kind == R_DP_GLOB || q->rt.kind == R_DP_GREP) {
		files_search(q, b);
		return;
	}
	if (file_path(q, path, sizeof(path)) < 0)
		return;
	if (q->rt.kind == R_DP_UPLOAD &&
	    strncmp(path, DOCKERFILE_BUILD_DIR, strlen(DOCKERFILE_BUILD_DIR)) == 0) {
		/* the first step of the clients' createSnapshotFromDockerfile: said at once, rather
		 * than after a build in the guest that cannot become a snapshot here */
		req_reply_error(
			q, 422, "SandboxConfig",
			"snapshots from a Dockerfile (createSnapshotFromDockerfile) are not "
			"supported: build and push the image, then create the snapshot from "
			"it (docker_image)");
		return;
	}
	if (q->rt.kind == R_DP_DOWNLOAD) {
		files_serve_path(q, b, path);
		return;
	}
	struct file_job *j = calloc(1, sizeof(*j));
	char ctype[512];
	const char *data;
	size_t len;

	if (!j) {
		req_reply_error(q, 503, "ServiceUnavailable", "out of memory");
		return;
	}
	if (req_header(q, "content-type:", ctype, sizeof(ctype)) < 0 ||
	    multipart_file(ctype, q->body, q->body_len, &data, &len) < 0) {
		free(j);
		req_reply_error(q, 400, "InvalidRequest",
				"the body must be multipart/form-data with a part named file");
		return;
	}
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->upload = true;
	j->up = data;
	j->len = len;
	j->body = q->body; /* the data points into it: the job frees it */
	q->body = NULL;
	q->body_len = q->body_cap = 0;
	files_start(q, b, j);
}
