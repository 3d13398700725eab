/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Taking a snapshot (docs/snapshots.md): in a temporary directory beside its final place,
 * which the VMM gets as an fd (a jailed VMM cannot see the store); what a jailed VMM wrote is
 * taken over before anything trusts it; the memory limit makes room for what the snapshot
 * leaves charged; then sealed (meta.yaml, mac) and renamed into place, so one that exists is
 * whole. The VMM freezes the top disk layer and goes on over root.<n+1>.layer; hard links of
 * the frozen layers go into the snapshot, so removing the sandbox leaves it whole.
 * A lifecycle verb (client.h): errors as values, in the caller's report.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "api_proto.h"
#include "disk.h"
#include "client.h"

#define SNAPSHOT_TIMEOUT_MS   300000 /* the VMM writes RAM and fsyncs within this */
#define SNAPSHOT_FILL_WAIT_MS 120000 /* a lazy restore's memory whole within this */
#define SNAPSHOT_AGAIN_MS     200

int snap_next_layer(const char *top, char *out, size_t len)
{
	unsigned long n = 0;

	if (strcmp(top, "root.layer") != 0)
		n = strtoul(top + 5, NULL, 10);
	if (n >= 1000000)
		return -ELOOP;
	return path_fmt(out, len, "root.%lu.layer", n + 1);
}

static int stray_refused(const struct sandbox *sb, struct lc_report *r)
{
	return lc_fail(
		r, -EPERM,
		"%s: its directory holds %s, a layer above its top %s that is not one its "
		"VMM could have made: check it, then chown it to root to keep it or remove it",
		sb->id, sb->stray_top, sb->top);
}

int sandbox_adopt_stray_top(struct sandbox *sb, struct lc_report *r)
{
	struct disk_header h;
	char path[4200], next[32];
	int fd, err;

	if (!sb->stray_top[0])
		return 0;
	/* Only the one a snapshot of the top would have made, over the top, by name. */
	if ((err = snap_next_layer(sb->top, next, sizeof(next))) < 0 ||
	    strcmp(next, sb->stray_top) != 0 ||
	    (err = sandbox_path(sb, sb->stray_top, path, sizeof(path))) < 0)
		return stray_refused(sb, r);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return stray_refused(sb, r);
	err = pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) ? 0 : -EIO;
	close(fd);
	if (err < 0 || memcmp(h.magic, DISK_MAGIC, DISK_MAGIC_LEN) != 0 ||
	    le32toh(h.parent_kind) != DISK_PARENT_LAYER ||
	    le32toh(h.parent_path_len) != strlen(sb->top) ||
	    memcmp(h.parent_path, sb->top, strlen(sb->top)) != 0 ||
	    (err = sandbox_jail_adopt(sb, path)) < 0)
		return stray_refused(sb, r);
	snprintf(sb->top, sizeof(sb->top), "%s", sb->stray_top);
	sb->stray_top[0] = '\0';
	return 0;
}

static int snapshots_root(char *out, size_t len)
{
	int err = path_fmt(out, len, "%s/snapshots", state_home());

	/* 0700 root, every time: a jailed VMM given a staging directory's fd here must not be
	 * able to walk up out of it. */
	if (!err && chmod(out, 0700) < 0 && errno != ENOENT)
		err = -errno;
	if (!err && mkdir(out, 0700) < 0 && errno != EEXIST)
		err = -errno;
	return err;
}

static void fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* Remove the temporary directories of sandboxctls that died mid-snapshot ("+tmp-NAME-PID"
 * whose PID is gone): no snapshot is there, only what one left half made. */
static void remove_stale_tmp(const char *root)
{
	char path[4200];
	struct dirent *e;
	DIR *d = opendir(root);

	if (!d)
		return;
	while ((e = readdir(d))) {
		const char *dash = strrchr(e->d_name, '-');
		char *end;
		long pid;

		if (strncmp(e->d_name, "+tmp-", 5) != 0 || !dash)
			continue;
		pid = strtol(dash + 1, &end, 10);
		if (*end || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (path_fmt(path, sizeof(path), "%s/%s", root, e->d_name) == 0)
			remove_flat_dir(path);
	}
	closedir(d);
}

/* Hard links of the sandbox's frozen layers (every root*.layer but its new top), recorded in
 * the meta. */
static int link_layers(const struct sandbox *sb, const char *tmp, struct snap_meta *m)
{
	char from[4200], to[4200];
	DIR *d = opendir(sb->dir);
	struct dirent *e;
	int err = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) && !err) {
		if (!snap_valid_layer_name(e->d_name) || strcmp(e->d_name, sb->top) == 0)
			continue;
		if (m->nlayers == SNAP_LAYERS_MAX) {
			err = -ELOOP;
			break;
		}
		if ((err = path_fmt(from, sizeof(from), "%s/%s", sb->dir, e->d_name)) < 0 ||
		    (err = path_fmt(to, sizeof(to), "%s/%s", tmp, e->d_name)) < 0)
			break;
		if (link(from, to) < 0) {
			err = -errno;
			break;
		}
		/* snap_valid_layer_name bounds the name to 30 bytes */
		memcpy(m->layers[m->nlayers++].file, e->d_name, strlen(e->d_name) + 1);
	}
	closedir(d);
	return err;
}

/* Take over what a jailed VMM wrote: its new top layer, and in `tmp` exactly the state and
 * (unless a fork's) the memory, each a plain file of its own; `tmp` becomes root's again. */
static int adopt_snapshot(const struct sandbox *sb, const char *tmp, const char *new_top)
{
	char path[4200];
	struct dirent *e;
	DIR *d;
	int err;

	if ((err = sandbox_jail_adopt(sb, new_top)) < 0)
		return err;
	if (chown(tmp, 0, 0) < 0 || chmod(tmp, 0700) < 0)
		return -errno;
	if (!(d = opendir(tmp)))
		return -errno;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strcmp(e->d_name, "state.fdt") && strcmp(e->d_name, "memory")) {
			err = -EPERM;
			break;
		}
		if ((err = path_fmt(path, sizeof(path), "%s/%s", tmp, e->d_name)) < 0 ||
		    (err = sandbox_jail_adopt(sb, path)) < 0)
			break;
	}
	closedir(d);
	return err;
}

/* Is `path` on tmpfs or ramfs, where a file's bytes are memory charged to who wrote them? */
static bool on_tmpfs(const char *path)
{
	struct statfs fs;

	return statfs(path, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

/* The bytes a file holds there, else 0. */
static uint64_t tmpfs_bytes(const char *path)
{
	struct stat st;

	return on_tmpfs(path) && stat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/*
 * The VMM's SNAPSHOT into `tmp`, with the sandbox's memory limit made room for what the
 * snapshot leaves charged to its cgroup (client/cgroup.c, cgroup_snap_begin): a fork's
 * frozen RAM, or what it wrote to tmpfs (the memory file; the frozen top layer's data,
 * after which the new top may grow as far again).
 */
static int snapshot_api_limited(struct sandbox *sb, struct snap_take *t, const char *tmp,
				int tmp_fd, const char *const *tops, char *msg, size_t msg_len,
				const struct lc_report *r)
{
	bool live = t->flags & API_SNAPSHOT_LIVE;
	char path[4300], top[4200];
	struct cgroup_snap cg;
	uint64_t extra = 0;
	int err, e;

	if (!live && !on_tmpfs(tmp) && !on_tmpfs(sb->dir))
		return api_snapshot(sb, t->flags, tmp, tmp_fd, tops, 1, SNAPSHOT_TIMEOUT_MS,
				    &t->out, msg, msg_len);
	if ((err = cgroup_snap_begin(sb, &cg)) < 0) {
		snprintf(msg, msg_len, "cannot raise its memory limit for it: %s", strerror(-err));
		if (cgroup_snap_end(sb, &cg, false, 0) < 0)
			lc_note(r, "%s: cannot set its memory limit back", sb->id);
		return err;
	}
	/* the top layer about to be frozen */
	if (sandbox_path(sb, sb->top, top, sizeof(top)) < 0)
		top[0] = '\0';
	err = api_snapshot(sb, t->flags, tmp, tmp_fd, tops, 1, SNAPSHOT_TIMEOUT_MS, &t->out, msg,
			   msg_len);
	if (err == 0 && !live && path_fmt(path, sizeof(path), "%s/memory", tmp) == 0)
		extra = tmpfs_bytes(path) + (top[0] ? tmpfs_bytes(top) : 0);
	if ((e = cgroup_snap_end(sb, &cg, err == 0 && live, extra)) < 0)
		lc_note(r, "warning: %s: cannot set its memory limit after the snapshot: %s",
			sb->id, strerror(-e));
	return err;
}

int sandbox_snapshot(struct sandbox *sb, struct snap_take *t, struct lc_report *r)
{
	char root[4200], tmp[4200], new_top[4200], next[32], old_top[32], msg[API_ERROR_MSG_MAX];
	const char *tops[1];
	struct stat st;
	int err, tmp_fd;

	for (unsigned i = 0; i < sb->ndisks; i++)
		if (!sb->disks[i].ro)
			return lc_fail(r, -ENOTSUP,
				       "%s: its extra disk %s is writable: snapshots of writable "
				       "extra disks are not supported (give it :ro)",
				       sb->id, sb->disks[i].path);
	if ((err = sandbox_adopt_stray_top(sb, r)) < 0)
		return err;
	if (!sandbox_vmm_alive(sb))
		return lc_fail(r, -ESRCH,
			       "%s is %s: only a running or paused sandbox can be snapshotted",
			       sb->id, sandbox_state_name(sandbox_state(sb, NULL)));
	if ((err = snapshots_root(root, sizeof(root))) < 0 ||
	    (err = path_fmt(t->dir, sizeof(t->dir), "%s/%s", root, t->name)) < 0 ||
	    (err = path_fmt(tmp, sizeof(tmp), "%s/+tmp-%s-%d", root, t->name, (int)getpid())) < 0 ||
	    (err = snap_next_layer(sb->top, next, sizeof(next))) < 0 ||
	    (err = sandbox_path(sb, next, new_top, sizeof(new_top))) < 0)
		return lc_fail(r, err, "%s: %s", sb->id, strerror(-err));
	if (lstat(t->dir, &st) == 0)
		return lc_fail(r, -EEXIST,
			       "a snapshot named '%s' exists already (snapshot rm it first)",
			       t->name);
	remove_stale_tmp(root);
	remove_flat_dir(tmp); /* a leftover of a crashed sandboxctl of this pid */
	if (mkdir(tmp, 0700) < 0)
		return lc_fail(r, -errno, "cannot make %s: %s", tmp, strerror(errno));
	if (jail_enabled() && chown(tmp, sandbox_uid(sb->id), sandbox_uid(sb->id)) < 0) {
		err = lc_fail(r, -errno, "cannot give %s to the jailed VMM: %s", tmp,
			      strerror(errno));
		goto fail_rm;
	}
	snprintf(old_top, sizeof(old_top), "%s", sb->top);
	tops[0] = new_top;
	/* The directory goes to the VMM as an fd: jailed, it cannot open the store. */
	tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmp_fd < 0) {
		err = lc_fail(r, -errno, "cannot open %s: %s", tmp, strerror(errno));
		goto fail_rm;
	}
	/* -EAGAIN: a lazily restored VM whose memory is still arriving (its pager fills it
	 * within seconds once the guest answered): asked again, for a while */
	for (unsigned ms = 0;; ms += SNAPSHOT_AGAIN_MS) {
		err = snapshot_api_limited(sb, t, tmp, tmp_fd, tops, msg, sizeof(msg), r);
		if (err != -EAGAIN || ms >= SNAPSHOT_FILL_WAIT_MS)
			break;
		usleep(SNAPSHOT_AGAIN_MS * 1000);
	}
	close(tmp_fd);
	if (err < 0) {
		lc_fail(r, err, "%s: the snapshot failed: %s", sb->id,
			msg[0] ? msg : strerror(-err));
		/* (the VMM's errno is its word: it never makes the sandbox "unusable", 125) */
		err = err == -ESRCH ? -EIO : err;
		goto fail_rm;
	}
	/* The VMM goes on over the new top now (sandbox_find_top finds it there, once it is
	 * root's). */
	if (jail_enabled() && (err = adopt_snapshot(sb, tmp, new_top)) < 0) {
		lc_fail(r, err,
			"%s: the jailed VMM's snapshot files are not what it should have made "
			"(%s): refused",
			sb->id, strerror(-err));
		goto fail_rm;
	}
	snprintf(sb->top, sizeof(sb->top), "%s", next);
	memset(&t->meta, 0, sizeof(t->meta));
	t->meta.format = SNAP_META_FORMAT;
	snprintf(t->meta.name, sizeof(t->meta.name), "%s", t->name);
	snprintf(t->meta.parent, sizeof(t->meta.parent), "%s", sb->base);
	snprintf(t->meta.sandbox, sizeof(t->meta.sandbox), "%s", sb->id);
	snprintf(t->meta.image, sizeof(t->meta.image), "%s", sb->image);
	t->meta.created = (uint64_t)time(NULL);
	t->meta.cpus = sb->cpus;
	t->meta.memory_mib = sb->memory_mib;
	t->meta.memory_bytes = sb->memory_mib << 20;
	snprintf(t->meta.root_layer, sizeof(t->meta.root_layer), "%s", old_top);
	t->meta.network = sb->network;
	/* The memory file's page digest, as the VMM computed it while writing the file: a
	 * snapshot whose memory the MAC cannot cover is not made. */
	if (!(t->flags & API_SNAPSHOT_LIVE) || (t->flags & API_SNAPSHOT_DURABLE)) {
		static const uint8_t none[sizeof(t->out.memory_sha256)];

		if (memcmp(t->out.memory_sha256, none, sizeof(none)) == 0) {
			err = lc_fail(r, -EPROTO,
				      "%s: the VMM gave no digest of the memory file (an older "
				      "VMM?): refused",
				      sb->id);
			goto fail_rm;
		}
		snap_memory_hex(t->out.memory_sha256, t->meta.memory_sha256);
	}
	if (sb->network && (err = snap_net_save(sb, tmp)) < 0) {
		lc_fail(r, err, "%s: cannot keep its proxy's files in the snapshot: %s", sb->id,
			strerror(-err));
		goto fail_rm;
	}
	for (unsigned i = 0; i < sb->ndisks; i++)
		snprintf(t->meta.disks[t->meta.ndisks++], DISK_PATH_MAX, "%s", sb->disks[i].path);
	if ((err = link_layers(sb, tmp, &t->meta)) < 0) {
		if (err == -ELOOP)
			lc_fail(r, err,
				"%s: its disk has more than %d frozen layers (one per snapshot, "
				"its "
				"restores' included): no more snapshots of it",
				sb->id, SNAP_LAYERS_MAX);
		else
			lc_fail(r, err, "%s: cannot link its disk layers into the snapshot: %s",
				sb->id, strerror(-err));
		goto fail_rm;
	}
	if ((err = snap_seal(tmp, &t->meta, msg, sizeof(msg))) < 0) {
		lc_fail(r, err, "%s: %s", sb->id, msg);
		goto fail_rm;
	}
	fsync_path(tmp);
	/* The commit: a directory rename never replaces a non-empty one, so a snapshot made
	 * meanwhile under this name is refused here, not overwritten. */
	if (rename(tmp, t->dir) < 0) {
		err = lc_fail(r, -errno, "cannot put the snapshot in place as %s: %s", t->dir,
			      strerror(errno));
		goto fail_rm;
	}
	fsync_path(root);
	return 0;
fail_rm:
	remove_flat_dir(tmp);
	return err;
}
