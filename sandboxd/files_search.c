/* SPDX-License-Identifier: Apache-2.0 */
/*
 * {D}/glob and {D}/grep (the clients' glob, ls and grep; docs/api.md "Files"): a worker walks
 * the guest's tree from `path` through its agent (LIST, and FILE_READ for grep), bounded in
 * every way a guest or a client could stretch it: depth, entries visited, bytes read, matches.
 * glob's pattern is matched on the path below `path`, '*' within a component and "**" across
 * any number of them; grep looks for a literal in each regular file (of at most
 * GREP_FILE_MAX bytes, without NUL bytes) whose name matches its `glob`.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "proto.h"
#include "sandboxd.h"

#define WALK_DEPTH_MAX	 32
#define WALK_ENTRIES_MAX 100000u
#define MATCHES_DEFAULT	 1000u
#define MATCHES_MAX	 10000u
#define GREP_FILE_MAX	 (4u << 20)
#define GREP_BYTES_MAX	 (256u << 20)
#define GREP_LINE_MAX	 4096u /* a matching line's text, cut */
#define SEARCH_DIRS_MAX	 20000u

struct search_job {
	struct sd_job job;
	struct sd_pending *pending;
	char vsock[4200];
	bool grep;
	char base[4097];
	char pattern[1024];
	char file_glob[256];
	unsigned limit;
	/* out */
	json_t *matches;
	bool truncated;
	int err;
	char msg[256];
};

/* Does the path below the base, split in components, match the pattern's components? The
 * pattern's runs of "**" are one (split), and each match has a budget of steps: no pattern
 * makes a walk's matching exponential. */
#define GLOB_STEPS_MAX 100000u
static bool glob_match(char **pat, unsigned np, char **path, unsigned nc, unsigned *steps)
{
	if (++*steps > GLOB_STEPS_MAX)
		return false;
	if (np == 0)
		return nc == 0;
	if (strcmp(pat[0], "**") == 0) {
		for (unsigned skip = 0; skip <= nc; skip++)
			if (glob_match(pat + 1, np - 1, path + skip, nc - skip, steps))
				return true;
		return false;
	}
	return nc > 0 && fnmatch(pat[0], path[0], 0) == 0 &&
	       glob_match(pat + 1, np - 1, path + 1, nc - 1, steps);
}

static unsigned split(char *s, char **out, unsigned max)
{
	unsigned n = 0;
	char *save = NULL;

	for (char *t = strtok_r(s, "/", &save); t && n < max; t = strtok_r(NULL, "/", &save))
		if (!(n && strcmp(t, "**") == 0 && strcmp(out[n - 1], "**") == 0))
			out[n++] = t;
	return n;
}

struct dir_entries {
	struct {
		char name[256];
		struct proto_stat st;
	} * e;
	unsigned n, cap;
};

static int on_dirent(void *arg, const struct proto_frame *f)
{
	struct dir_entries *d = arg;

	if (f->hdr.type != PROTO_MSG_DIRENT || f->hdr.len < 32)
		return 0;
	size_t nl = f->hdr.len - 32;

	if (nl == 0 || nl > 255)
		return 0;
	if (d->n == d->cap) {
		unsigned cap = d->cap ? d->cap * 2 : 64;
		void *n = cap > WALK_ENTRIES_MAX ? NULL : realloc(d->e, cap * sizeof(*d->e));

		if (!n)
			return -E2BIG;
		d->e = n;
		d->cap = cap;
	}
	memcpy(d->e[d->n].name, f->payload + 32, nl);
	d->e[d->n].name[nl] = 0;
	d->e[d->n].st.size = proto_get_le64(f->payload);
	d->e[d->n].st.mtime_sec = (int64_t)proto_get_le64(f->payload + 8);
	d->e[d->n].st.mode = proto_get_le32(f->payload + 20);
	d->n++;
	return 0;
}

static void grep_file(struct search_job *j, struct agent_conn *c, const char *path,
		      uint64_t *budget)
{
	char *data = NULL;
	size_t len;

	if (agent_file_get(c, path, GREP_FILE_MAX, &data, &len) < 0)
		return;
	if (len > *budget || memchr(data, 0, len)) { /* over the budget, or binary */
		free(data);
		return;
	}
	*budget -= len;
	unsigned line = 1;

	for (char *p = data, *end = data + len; p < end && !j->truncated;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (memmem(p, ll, j->pattern, strlen(j->pattern))) {
			if (json_array_size(j->matches) >= j->limit) {
				j->truncated = true;
				break;
			}
			json_t *t = json_stringn(p, ll > GREP_LINE_MAX ? GREP_LINE_MAX : ll);

			if (t) /* a line that is not UTF-8 is left out */
				json_array_append_new(j->matches,
						      json_pack("{s:s, s:i, s:o}", "path", path,
								"line", (int)line, "text", t));
		}
		line++;
		p += ll + 1;
	}
	free(data);
}

static void search_run(struct sd_job *sj)
{
	struct search_job *j = (struct search_job *)sj;
	struct agent_conn c;
	char pat[1024], *pats[WALK_DEPTH_MAX + 1];
	unsigned np = 0, visited = 0, ndirs = 1, head = 0;
	uint64_t budget = GREP_BYTES_MAX;
	char **dirs = calloc(SEARCH_DIRS_MAX, sizeof(char *));

	j->matches = json_array();
	if (!dirs || !j->matches || !(dirs[0] = strdup(j->base))) {
		j->err = -ENOMEM;
		free(dirs);
		return;
	}
	snprintf(pat, sizeof(pat), "%s", j->pattern);
	if (!j->grep)
		np = split(pat, pats, WALK_DEPTH_MAX);
	j->err = agent_connect_path(j->vsock, 10000, &c);
	if (j->err < 0) {
		snprintf(j->msg, sizeof(j->msg), "cannot reach the sandbox");
		goto out;
	}
	size_t blen = strlen(j->base);

	while (head < ndirs && !j->truncated) {
		char *dir = dirs[head++];
		struct dir_entries d = {0};
		struct proto_frame f;
		int err = agent_call(&c, PROTO_MSG_LIST, dir, (uint32_t)strlen(dir) + 1, 30000,
				     on_dirent, &d, &f);

		if (err < 0 || f.hdr.type == PROTO_MSG_ERROR) {
			if (head == 1) {
				j->err = err < 0 ? err : -(int)proto_get_le32(f.payload);
				snprintf(j->msg, sizeof(j->msg), "cannot list %.200s", dir);
			}
			free(d.e);
			continue;
		}
		for (unsigned i = 0; i < d.n && !j->truncated; i++) {
			char full[4097], rel[4097], *comps[WALK_DEPTH_MAX + 1];
			bool is_dir = (d.e[i].st.mode & 0170000) == 0040000;
			bool is_reg = (d.e[i].st.mode & 0170000) == 0100000;

			if (++visited > WALK_ENTRIES_MAX) {
				j->truncated = true;
				break;
			}
			if (snprintf(full, sizeof(full), "%s%s%s", dir,
				     dir[strlen(dir) - 1] == '/' ? "" : "/",
				     d.e[i].name) >= (int)sizeof(full))
				continue;
			snprintf(rel, sizeof(rel), "%s",
				 full + blen + (j->base[blen - 1] == '/' ? 0 : 1));
			unsigned nc = split(rel, comps, WALK_DEPTH_MAX + 1);

			if (j->grep) {
				if (is_reg && (!j->file_glob[0] ||
					       fnmatch(j->file_glob, d.e[i].name, 0) == 0))
					grep_file(j, &c, full, &budget);
			} else if (nc <= WALK_DEPTH_MAX &&
				   glob_match(pats, np, comps, nc, &(unsigned){0})) {
				char mt[32];

				if (json_array_size(j->matches) >= j->limit) {
					j->truncated = true;
					break;
				}
				sd_iso((uint64_t)d.e[i].st.mtime_sec * 1000, mt);
				json_t *p = json_string(full);

				if (p)
					json_array_append_new(j->matches,
							      json_pack("{s:o, s:b, s:I, s:s}",
									"path", p, "is_dir", is_dir,
									"size_bytes",
									(json_int_t)d.e[i].st.size,
									"modified_at", mt));
			}
			/* descend: glob only when the pattern can reach deeper */
			if (is_dir && nc < WALK_DEPTH_MAX && ndirs < SEARCH_DIRS_MAX &&
			    (j->grep || np > nc || (np && strcmp(pats[np - 1], "**") == 0) ||
			     strstr(j->pattern, "**")))
				dirs[ndirs++] = strdup(full);
		}
		free(d.e);
	}
	agent_close(&c);
out:
	for (unsigned i = 0; i < ndirs; i++)
		free(dirs[i]);
	free(dirs);
}

static void search_done(struct sd_job *sj)
{
	struct search_job *j = (struct search_job *)sj;
	struct sd_req *q = pending_take(j->pending);

	if (q && j->err == -ENOENT)
		req_reply_error(q, 404, "FileNotFound", "%s", j->msg);
	else if (q && j->err < 0)
		req_reply_error(q, 500, "ReadError", "%s", j->msg[0] ? j->msg : strerror(-j->err));
	else if (q)
		req_reply_json(
			q, 200,
			json_pack("{s:O, s:b}", "matches", j->matches, "truncated", j->truncated));
	json_decref(j->matches);
	free(j);
}

void files_search(struct sd_req *q, struct box *b)
{
	json_t *o = req_json(q);

	if (!o)
		return;
	const char *pattern = json_string_value(json_object_get(o, "pattern"));
	const char *path = json_string_value(json_object_get(o, "path"));
	const char *fg = json_string_value(json_object_get(o, "glob"));
	json_t *lim = json_object_get(o, "limit");
	struct search_job *j = calloc(1, sizeof(*j));

	if (!j || !pattern || !*pattern || strlen(pattern) >= sizeof(j->pattern) || !path ||
	    path[0] != '/' || strlen(path) >= sizeof(j->base) ||
	    (fg && strlen(fg) >= sizeof(j->file_glob)) ||
	    (lim && !json_is_null(lim) &&
	     (!json_is_integer(lim) || json_integer_value(lim) < 1 ||
	      json_integer_value(lim) > MATCHES_MAX))) {
		free(j);
		json_decref(o);
		req_reply_error(q, 400, "InvalidRequest",
				"give a pattern, an absolute path and a limit of 1 to %u",
				MATCHES_MAX);
		return;
	}
	j->grep = q->rt.kind == R_DP_GREP;
	snprintf(j->pattern, sizeof(j->pattern), "%s", pattern);
	snprintf(j->base, sizeof(j->base), "%s", path);
	snprintf(j->file_glob, sizeof(j->file_glob), "%s", fg ? fg : "");
	j->limit =
		lim && json_is_integer(lim) ? (unsigned)json_integer_value(lim) : MATCHES_DEFAULT;
	json_decref(o);
	snprintf(j->vsock, sizeof(j->vsock), "%s/sandboxes/%s/vsock.sock", state_home(),
		 b->sandbox);
	j->pending = req_park(q);
	if (!j->pending) {
		free(j);
		return;
	}
	j->job.run = search_run;
	j->job.done = search_done;
	work_queue_io(&j->job);
}
