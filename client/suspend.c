/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Suspend and resume (docs/snapshots.md): a sandbox snapshotted to disk as the hidden
 * snapshot .suspend-<id> and its VMM ended, holding no memory and no CPU; resumed by a VMM
 * restoring it over the sandbox's own top layer. And what rm leaves of snapshots: the
 * sandbox's suspend, a fork's snapshot no one uses any more. Lifecycle verbs (client.h):
 * errors as values, in the caller's report.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api_proto.h"
#include "client.h"
#include "disk.h"

static int suspend_name(const struct sandbox *sb, char *out, size_t len)
{
	return path_fmt(out, len, ".suspend-%s", sb->id);
}

int sandbox_suspend(struct sandbox *sb, struct snap_take *t, struct lc_report *r)
{
	char name[NAME_MAX_LEN + 2], marker[4200];
	int err;

	if ((err = suspend_name(sb, name, sizeof(name))) < 0)
		return err;
	*t = (struct snap_take){.name = name, .flags = API_SNAPSHOT_STOP};
	if ((err = sandbox_snapshot(sb, t, r)) < 0) {
		int32_t error;

		/* The VMM may have stayed paused for the snapshot that failed: run it again. */
		if (api_call(sb, API_RESUME, 2000, &error, NULL) < 0)
			lc_note(r, "%s: cannot resume it after the failed suspend", sb->id);
		t->name = NULL;
		return err;
	}
	t->name = NULL; /* (name was ours) */
	/* The marker first: from here the snapshot is the sandbox. */
	if ((err = sandbox_path(sb, "suspended", marker, sizeof(marker))) < 0 ||
	    (err = write_file_atomic(marker, name, strlen(name), 0600)) < 0)
		return lc_fail(r, err, "%s: cannot mark it suspended: %s", sb->id, strerror(-err));
	if ((err = sandbox_stop_vmm(sb, false, r)) < 0)
		return lc_fail(r, err, "%s: cannot end its VMM: %s", sb->id, strerror(-err));
	if (sandbox_path(sb, "stopped", marker, sizeof(marker)) == 0)
		unlink(marker);
	return 0;
}

int sandbox_resume_suspended(struct sandbox *sb, struct lc_report *r)
{
	char name[NAME_MAX_LEN + 2], dir[4200], marker[4200], msg[640] = "";
	struct snap_meta m;
	struct snap_fds fds;
	struct boot_src src;
	int err;

	if ((err = sandbox_host_check(r)) < 0)
		return err;
	if ((err = suspend_name(sb, name, sizeof(name))) < 0 ||
	    (err = sandbox_snapshot_open(name, dir, sizeof(dir), &m, r)) < 0)
		return err;
	/* The sandbox's own top layer is the empty one over the frozen one: the disk is as
	 * the snapshot saw it, and the VM goes on writing where it was. */
	if ((err = snap_restore_open(dir, &m, true, &fds, msg, sizeof(msg))) < 0)
		return lc_fail(r, err, "%s: its suspend snapshot: %s", sb->id,
			       msg[0] ? msg : strerror(-err));
	src = (struct boot_src){.dir = dir, .fds = &fds};
	err = sandbox_start_vmm(sb, NULL, &src, RESTORE_TIMEOUT_S, false, r);
	snap_restore_close(&fds);
	if (err < 0) {
		char top[4200], frozen[4200];
		struct disk_error derr = {""};

		if (sandbox_stop_vmm(sb, true, r) < 0)
			return err;
		if (sandbox_path(sb, "stopped", marker, sizeof(marker)) == 0)
			unlink(marker); /* still suspended: resume can be tried again */
		/* The guest ran meanwhile and may have written the top layer: an empty one
		 * again, or the next resume would put the snapshot's RAM over a newer disk. */
		if (sandbox_path(sb, sb->top, top, sizeof(top)) < 0 ||
		    sandbox_path(sb, m.root_layer, frozen, sizeof(frozen)) < 0 || unlink(top) < 0 ||
		    disk_create_overlay(top, frozen, 0, &derr) < 0)
			lc_note(r,
				"%s: cannot make its top layer empty again (%s): do not resume it",
				sb->id, derr.msg[0] ? derr.msg : strerror(errno));
		return err;
	}
	if (sandbox_path(sb, "suspended", marker, sizeof(marker)) == 0)
		unlink(marker);
	/* The VM maps the memory file privately: its pages stay until the VM ends. */
	remove_flat_dir(dir);
	return 0;
}

/* ---- after rm ---- */

struct users {
	const char *name;
	unsigned n;
};

static int base_users(const struct sandbox *sb, void *opaque)
{
	struct users *u = opaque;

	u->n += strcmp(sb->base, u->name) == 0;
	return 0;
}

static int snapshot_parent_users(const char *name, void *opaque)
{
	struct users *u = opaque;
	char dir[4200], msg[640];
	struct snap_meta m;

	if (snap_dir(name, dir, sizeof(dir)) == 0 && snap_open(dir, &m, msg, sizeof(msg)) == 0)
		u->n += strcmp(m.parent, u->name) == 0;
	return 0;
}

void snapshots_gc(const struct sandbox *removed, const struct lc_report *r)
{
	char name[NAME_MAX_LEN + 2], dir[4200];
	struct users u = {.name = removed->base};

	if (suspend_name(removed, name, sizeof(name)) == 0 && snap_dir(name, dir, sizeof(dir)) == 0)
		remove_flat_dir(dir);
	if (strncmp(removed->base, ".fork-", 6) != 0)
		return; /* a named or a ready snapshot stays */
	sandbox_foreach(base_users, &u, r);
	/* A snapshot taken of a child goes through the fork's layers too. */
	snap_foreach(snapshot_parent_users, &u);
	if (!u.n && snap_dir(removed->base, dir, sizeof(dir)) == 0)
		remove_flat_dir(dir);
}
