/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The state under $SANDBOX_HOME (docs/design.md, "Host state"): sandboxes/<id>/ holds `config`
 * (key value lines, written atomically), `pid`, `api.sock`, `vsock.sock`, `console.log`,
 * `root.layer` and, once stopped on purpose, `stopped`. Every file read here is checked as
 * hostile input: a bad one makes that sandbox unusable, never a crash.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_proto.h"
#include "client.h"

#define CONFIG_MAX 4096

const char *state_home(void)
{
	static char real[PATH_MAX];
	const char *h = getenv("SANDBOX_HOME");

	/* Canonical once it exists: a sandbox's directory is its VMM's jail, which must be
	 * named without links (sandbox-vmm --jail), and so must the paths the VMM is given. */
	if (real[0])
		return real;
	h = h && *h ? h : "/var/lib/sandbox";
	if (realpath(h, real))
		return real;
	real[0] = '\0';
	return h;
}

int state_init(void)
{
	char p[4096];
	int err;

	if (mkdir(state_home(), 0755) < 0 && errno != EEXIST)
		return -errno;
	if ((err = path_fmt(p, sizeof(p), "%s/images", state_home())) < 0)
		return err;
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	if ((err = path_fmt(p, sizeof(p), "%s/sandboxes", state_home())) < 0)
		return err;
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((err = path_fmt(p, sizeof(p), "%s/snapshots", state_home())) < 0)
		return err;
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

const char *sandbox_state_name(enum sandbox_state s)
{
	switch (s) {
	case SB_RUNNING:
		return "running";
	case SB_PAUSED:
		return "paused";
	case SB_STOPPED:
		return "stopped";
	case SB_DEAD:
		return "dead";
	case SB_SUSPENDED:
		return "suspended";
	}
	return "unknown";
}

static bool valid_id(const char *s)
{
	if (strlen(s) != ID_LEN)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int sandbox_path(const struct sandbox *sb, const char *file, char *out, size_t len)
{
	return path_fmt(out, len, "%s/%s", sb->dir, file);
}

/*
 * The root disk's top layer is the highest-numbered root layer in the directory: a snapshot
 * freezes root.<n>.layer and the VMM goes on over a new root.<n+1>.layer, so the files say
 * which is the top whatever became of the sandboxctl that asked for the snapshot. Only root's
 * layers count: a jailed VMM's new layer is the sandbox uid's until the snapshot's sandboxctl
 * takes it over (sandbox_snapshot), and its header, written by a VMM that may be compromised,
 * is not trusted before. One left over (that sandboxctl died in between) is sb->stray_top.
 */
void sandbox_find_top(struct sandbox *sb)
{
	unsigned long best = 0, stray = 0, n;
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(sb->dir);

	snprintf(sb->top, sizeof(sb->top), "root.layer");
	sb->stray_top[0] = '\0';
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!snap_valid_layer_name(e->d_name) || strcmp(e->d_name, "root.layer") == 0)
			continue;
		n = strtoul(e->d_name + 5, NULL, 10);
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (st.st_uid != 0 || !S_ISREG(st.st_mode)) {
			if (n > stray)
				stray = n;
		} else if (n > best) {
			best = n;
			snprintf(sb->top, sizeof(sb->top), "root.%lu.layer", n);
		}
	}
	closedir(d);
	if (stray > best)
		snprintf(sb->stray_top, sizeof(sb->stray_top), "root.%lu.layer", stray);
}

int sandbox_save(const struct sandbox *sb)
{
	char buf[CONFIG_MAX], path[4200];
	int n, err;

	n = snprintf(buf, sizeof(buf),
		     "version 1\nid %s\nname %s\nimage %s\ncpus %u\nmemory_mib %llu\n"
		     "created %llu\n",
		     sb->id, sb->name, sb->image, sb->cpus, (unsigned long long)sb->memory_mib,
		     (unsigned long long)sb->created);
	for (unsigned i = 0; i < sb->ndisks && n >= 0 && (size_t)n < sizeof(buf); i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "disk %s %s\n",
			      sb->disks[i].ro ? "ro" : "rw", sb->disks[i].path);
	if (sb->base[0] && n >= 0 && (size_t)n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "base %s\n", sb->base);
	if (n >= 0 && (size_t)n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "network %s\n",
			      sb->network ? "proxy" : "none");
	if (sb->deadline && n >= 0 && (size_t)n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "deadline %llu\n",
			      (unsigned long long)sb->deadline);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -E2BIG;
	if ((err = sandbox_path(sb, "config", path, sizeof(path))) < 0)
		return err;
	return write_file_atomic(path, buf, (size_t)n, 0600);
}

/* Parse one "key value" line into `sb`; false for anything unexpected. */
static bool config_line(struct sandbox *sb, const char *key, const char *val, unsigned *seen)
{
	uint64_t v;

	if (strcmp(key, "version") == 0)
		return strcmp(val, "1") == 0;
	if (strcmp(key, "id") == 0) {
		*seen |= 1;
		return strcmp(val, sb->id) == 0;
	}
	if (strcmp(key, "name") == 0) {
		if (!valid_name(val))
			return false;
		snprintf(sb->name, sizeof(sb->name), "%s", val);
		return true;
	}
	if (strcmp(key, "image") == 0) {
		*seen |= 2;
		if (!valid_name(val))
			return false;
		snprintf(sb->image, sizeof(sb->image), "%s", val);
		return true;
	}
	if (strcmp(key, "cpus") == 0) {
		*seen |= 4;
		if (!parse_u64(val, 1, 32, &v))
			return false;
		sb->cpus = (unsigned)v;
		return true;
	}
	if (strcmp(key, "memory_mib") == 0) {
		*seen |= 8;
		return parse_u64(val, 1, 1u << 20, &sb->memory_mib);
	}
	if (strcmp(key, "created") == 0)
		return parse_u64(val, 0, UINT64_MAX, &sb->created);
	if (strcmp(key, "disk") == 0) {
		/* "disk ro|rw /absolute/path", the path without commas (sandbox-vmm's --disk). */
		bool ro = strncmp(val, "ro ", 3) == 0;

		if ((!ro && strncmp(val, "rw ", 3) != 0) || sb->ndisks == EXTRA_DISKS_MAX ||
		    val[3] != '/' || strchr(val + 3, ',') || strlen(val + 3) >= DISK_PATH_MAX)
			return false;
		snprintf(sb->disks[sb->ndisks].path, DISK_PATH_MAX, "%s", val + 3);
		sb->disks[sb->ndisks++].ro = ro;
		return true;
	}
	if (strcmp(key, "base") == 0) {
		if (!valid_name(val) && !(val[0] == '.' && valid_name(val + 1)))
			return false;
		snprintf(sb->base, sizeof(sb->base), "%s", val);
		return true;
	}
	if (strcmp(key, "network") == 0) {
		if (strcmp(val, "proxy") != 0 && strcmp(val, "none") != 0)
			return false;
		sb->network = strcmp(val, "proxy") == 0;
		return true;
	}
	if (strcmp(key, "deadline") == 0)
		return parse_u64(val, 1, UINT64_MAX, &sb->deadline);
	return true; /* a newer sandboxctl's key: ignored */
}

int sandbox_load(const char *id, struct sandbox *sb)
{
	char path[4200], *buf = NULL, *save = NULL;
	unsigned seen = 0;
	int err;

	memset(sb, 0, sizeof(*sb));
	if (!valid_id(id))
		return -ENOENT;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	if ((err = path_fmt(sb->dir, sizeof(sb->dir), "%s/sandboxes/%s", state_home(), id)) < 0 ||
	    (err = sandbox_path(sb, "config", path, sizeof(path))) < 0)
		return err;
	if ((err = read_file(path, CONFIG_MAX, &buf, NULL)) < 0)
		return err == -ENOENT ? -ENOENT : -EBADMSG;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');

		if (!sp || !config_line(sb, line, (*sp = '\0', sp + 1), &seen)) {
			err = -EBADMSG;
			goto out;
		}
	}
	if (seen != 15) {
		err = -EBADMSG;
		goto out;
	}
	sandbox_find_top(sb);
	free(buf);
	buf = NULL;
	/* The pid file: absent (never started, or stopped) or a number. */
	if ((err = sandbox_path(sb, "pid", path, sizeof(path))) < 0)
		goto out;
	if (read_file(path, 64, &buf, NULL) == 0) {
		uint64_t pid, start;
		char *sp;

		/* "PID [STARTTIME]" (the start time since the jail: pid_start_time) */
		buf[strcspn(buf, "\n")] = '\0';
		if ((sp = strchr(buf, ' '))) {
			*sp = '\0';
			if (parse_u64(sp + 1, 1, UINT64_MAX, &start))
				sb->pid_start = start;
		}
		if (parse_u64(buf, 2, 1u << 22, &pid))
			sb->pid = (pid_t)pid;
	}
	err = 0;
out:
	free(buf);
	return err;
}

/* What sandbox_find's scan keeps: the one exact match and the one prefix match, counted. */
struct resolve_scan {
	const char *ref;
	struct sandbox exact, prefix;
	unsigned nexact, nprefix;
};

static int resolve_scan(const struct sandbox *sb, void *opaque)
{
	struct resolve_scan *r = opaque;

	if (strcmp(sb->id, r->ref) == 0 || strcmp(sb->name, r->ref) == 0) {
		r->exact = *sb;
		r->nexact++;
	} else if (strncmp(sb->id, r->ref, strlen(r->ref)) == 0) {
		r->prefix = *sb;
		r->nprefix++;
	}
	return 0;
}

int sandbox_find(const char *ref, struct sandbox *sb, const struct lc_report *lr)
{
	struct resolve_scan *r;
	int n, err = -ENOENT;

	if (!*ref || strlen(ref) > NAME_MAX_LEN || strchr(ref, '/'))
		return -EINVAL;
	if (!(r = calloc(1, sizeof(*r)))) /* two sandboxes' records: not on a thread's stack */
		return -ENOMEM;
	r->ref = ref;
	n = sandbox_foreach(resolve_scan, r, lr);
	if (n < 0)
		err = n;
	else if (r->nexact == 1 || (r->nexact == 0 && r->nprefix == 1)) {
		*sb = r->nexact == 1 ? r->exact : r->prefix;
		err = 0;
	} else if (r->nexact + r->nprefix > 1)
		err = -ENOTUNIQ;
	free(r);
	return err;
}

int sandbox_foreach(int (*fn)(const struct sandbox *sb, void *opaque), void *opaque,
		    const struct lc_report *r)
{
	char path[4096];
	struct dirent *e;
	DIR *d;
	int n = 0, err;

	if ((err = path_fmt(path, sizeof(path), "%s/sandboxes", state_home())) < 0)
		return err;
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		static struct sandbox sb;

		if (e->d_name[0] == '.' || !valid_id(e->d_name))
			continue;
		err = sandbox_load(e->d_name, &sb);
		if (err < 0) {
			/* -ENOENT: being created or removed */
			if (err != -ENOENT)
				lc_note(r, "%s/%s: unreadable config (%s): skipped", path,
					e->d_name, strerror(-err));
			err = 0;
			continue;
		}
		n++;
		if ((err = fn(&sb, opaque)) < 0)
			break;
		err = 0;
	}
	closedir(d);
	return err < 0 ? err : n;
}

/* True while process `pid` exists and is not a zombie. */
int pid_start_time(pid_t pid, uint64_t *out)
{
	char path[64], *buf = NULL, *p, *save = NULL;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((err = read_file(path, 4096, &buf, NULL)) < 0)
		return err;
	/* field 22, starttime; the fields after the last ')' start at field 3 */
	p = strrchr(buf, ')');
	err = -EINVAL;
	for (int field = 3; p && (p = strtok_r(field == 3 ? p + 1 : NULL, " ", &save)); field++)
		if (field == 22) {
			err = parse_u64(p, 1, UINT64_MAX, out) ? 0 : -EINVAL;
			break;
		}
	free(buf);
	return err;
}

bool pid_running(pid_t pid)
{
	char path[64], *buf = NULL, *p;
	bool running;

	if (pid <= 1 || (kill(pid, 0) < 0 && errno == ESRCH))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, 4096, &buf, NULL) < 0)
		return false;
	/* the state follows the last ')': a zombie is as good as dead */
	p = strrchr(buf, ')');
	running = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	free(buf);
	return running;
}

bool sandbox_vmm_alive(const struct sandbox *sb)
{
	char path[64], want[4200], *buf = NULL, *p;
	size_t len;
	bool alive = false;

	if (!pid_running(sb->pid))
		return false;
	/* pid reuse: the process must be the one started, by its start time when the pid file
	 * has it (the VMM could rewrite its own command line); else the VMM of this sandbox,
	 * which names its api.sock. */
	if (sb->pid_start) {
		uint64_t t;

		return pid_start_time(sb->pid, &t) == 0 && t == sb->pid_start;
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)sb->pid);
	if (sandbox_path(sb, "api.sock", want, sizeof(want)) < 0 ||
	    read_file(path, 1 << 16, &buf, &len) < 0)
		return false;
	for (p = buf; p < buf + len; p += strlen(p) + 1)
		if (strcmp(p, want) == 0)
			alive = true;
	free(buf);
	return alive;
}

int image_path(const char *name, const char *file, char *out, size_t len)
{
	int err;

	if (!valid_name(name))
		return -EINVAL;
	if ((err = path_fmt(out, len, "%s/images/%s/%s", state_home(), name, file)) < 0)
		return err;
	return access(out, R_OK) == 0 ? 0 : -errno;
}
