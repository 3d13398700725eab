/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Usage per workspace (docs/api.md, "Tenancy and quotas"): sandbox-seconds, vCPU-seconds and
 * GiB-seconds of memory while boxes run, counted each tick. The counts live in
 * $SANDBOX_HOME/service/usage/<workspace>, written each second a workspace's count moved and
 * at SIGTERM, and read at start: a kill -9 loses at most the last second (a write without
 * fsync: a crash of the process keeps what the kernel has; a crash of the host may lose the
 * last writes, never the file, which a rename replaces whole).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "sandboxd.h"

#define USAGE_WORKSPACES_MAX 1024
#define USAGE_SAVE_MS	     1000
#define USAGE_VALUE_MAX	     1e15 /* seconds: 31 million years of a workspace's boxes */

static struct {
	char workspace[SD_WORKSPACE_MAX + 1];
	double sandbox_s, vcpu_s, gib_s;
	bool dirty;
} usage[USAGE_WORKSPACES_MAX];
static unsigned nusage;

static int usage_slot(const char *workspace)
{
	static bool full_said;

	for (unsigned i = 0; i < nusage; i++)
		if (strcmp(usage[i].workspace, workspace) == 0)
			return (int)i;
	if (nusage >= USAGE_WORKSPACES_MAX) {
		if (!full_said)
			sd_log("usage: %u workspaces counted already: %s and later ones are not",
			       USAGE_WORKSPACES_MAX, workspace);
		full_said = true;
		return -1;
	}
	snprintf(usage[nusage].workspace, sizeof(usage[0].workspace), "%s", workspace);
	return (int)nusage++;
}

static void usage_save(unsigned i)
{
	char path[4200], tmp[4210], text[256];
	int n = snprintf(text, sizeof(text),
			 "sandbox_seconds %.3f\nvcpu_seconds %.3f\nmemory_gib_seconds %.3f\n",
			 usage[i].sandbox_s, usage[i].vcpu_s, usage[i].gib_s);

	if (n < 0 || (size_t)n >= sizeof(text))
		return; /* never: the values are bounded at load and grow by seconds */
	snprintf(path, sizeof(path), "%s/usage/%s", sd_dir(), usage[i].workspace);
	/* a leading dot: no workspace's name (valid_name), so no workspace's file */
	snprintf(tmp, sizeof(tmp), "%s/usage/.%s.tmp", sd_dir(), usage[i].workspace);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600), err = 0;

	if (fd < 0 || write_all(fd, text, (size_t)n) < 0)
		err = errno;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	if (!err && rename(tmp, path) < 0)
		err = errno;
	if (err) {
		if (fd >= 0)
			unlink(tmp);
		sd_log("usage of %s cannot be saved: %s", usage[i].workspace, strerror(err));
		return;
	}
	usage[i].dirty = false;
}

int usage_load(void)
{
	char dir[4200];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/usage", sd_dir());
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char path[4500], *text = NULL;
		double s, v, g;
		int slot;

		if (!valid_workspace(e->d_name))
			continue; /* ".", "..", a ".NAME.tmp" left by a crash */
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (read_file(path, 4096, &text, NULL) < 0 ||
		    sscanf(text, "sandbox_seconds %lf\nvcpu_seconds %lf\nmemory_gib_seconds %lf",
			   &s, &v, &g) != 3 ||
		    !(s >= 0 && s <= USAGE_VALUE_MAX && v >= 0 && v <= USAGE_VALUE_MAX && g >= 0 &&
		      g <= USAGE_VALUE_MAX) ||
		    (slot = usage_slot(e->d_name)) < 0) {
			sd_log("usage of %s cannot be read: counted from 0", e->d_name);
			free(text);
			continue;
		}
		free(text);
		usage[slot].sandbox_s = s;
		usage[slot].vcpu_s = v;
		usage[slot].gib_s = g;
	}
	closedir(d);
	return 0;
}

void usage_flush(void)
{
	for (unsigned i = 0; i < nusage; i++)
		if (usage[i].dirty)
			usage_save(i);
}

void usage_tick(uint64_t elapsed_ms)
{
	static uint64_t last_save;
	uint64_t now = sd_now_ms();
	double s = (double)elapsed_ms / 1000.0;

	for (struct box *b = box_first(); b; b = b->next) {
		int slot;

		if (b->status != BOX_READY || (slot = usage_slot(b->workspace)) < 0)
			continue;
		usage[slot].sandbox_s += s;
		usage[slot].vcpu_s += s * b->vcpus;
		usage[slot].gib_s += s * (double)b->mem_bytes / (double)(1ull << 30);
		usage[slot].dirty = true;
	}
	if (now - last_save >= USAGE_SAVE_MS) {
		last_save = now;
		usage_flush();
	}
}

void usage_handle(struct sd_req *q)
{
	for (unsigned i = 0; i < nusage; i++)
		if (strcmp(usage[i].workspace, q->workspace) == 0) {
			req_reply_json(q, 200,
				       json_pack("{s:f, s:f, s:f}", "sandbox_seconds",
						 usage[i].sandbox_s, "vcpu_seconds",
						 usage[i].vcpu_s, "memory_gib_seconds",
						 usage[i].gib_s));
			return;
		}
	req_reply_json(q, 200,
		       json_pack("{s:f, s:f, s:f}", "sandbox_seconds", 0.0, "vcpu_seconds", 0.0,
				 "memory_gib_seconds", 0.0));
}
