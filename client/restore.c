/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox from a snapshot (docs/snapshots.md): its directory (make.c), the snapshot's layers
 * linked into it and a new top over them, its proxy's files from the snapshot (each checked
 * against meta.yaml) or from a create's options (a warm create, ready.c), and a VMM restoring
 * the snapshot's state and memory as checked here, handed over as fds (snap_restore_open).
 * restore, fork, resume of a suspended sandbox and the warm create all come here. A lifecycle verb
 * (client.h): errors as values, in the caller's report.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "client.h"

/* sandbox_restore, with the proxy's files made from `o` (a create) or taken from the
 * snapshot (NULL). */
static int restore_into(const char *dir, const struct snap_meta *m, const char *name,
			const char *console, const struct boot_src *src, bool no_wait,
			const struct create_opts *o, struct sandbox *sb, struct lc_report *r);

int sandbox_restore(const char *dir, const struct snap_meta *m, const char *name,
		    const char *console, const struct boot_src *src, bool no_wait,
		    struct sandbox *sb, struct lc_report *r)
{
	return restore_into(dir, m, name, console, src, no_wait, NULL, sb, r);
}

int sandbox_restore_create(const char *dir, const struct snap_meta *m, const struct create_opts *o,
			   const struct boot_src *src, struct sandbox *sb, struct lc_report *r)
{
	return restore_into(dir, m, o->name, o->console, src, false, o, sb, r);
}

/* The snapshot's frozen layers, hard-linked into the sandbox's directory, and its top the
 * layer after the highest of them. Both directories are two levels below $SANDBOX_HOME, so
 * every parent path resolves the same from either: the sandbox's disk no longer needs the
 * snapshot, and a snapshot of the sandbox holds its disk's whole chain (down to its image),
 * so one pushed to a fleet's store restores on a host that never saw this one. The new top's
 * parent, the snapshot's frozen top, into `parent` (a layer's name). */
static int link_layers(const char *dir, const struct snap_meta *m, struct sandbox *sb,
		       char parent[32])
{
	char from[4200], to[4200];
	const char *high = "root.layer";
	int err;

	for (unsigned i = 0; i < m->nlayers; i++) {
		const char *f = m->layers[i].file;

		if ((err = path_fmt(from, sizeof(from), "%s/%s", dir, f)) < 0 ||
		    (err = sandbox_path(sb, f, to, sizeof(to))) < 0)
			return err;
		if (link(from, to) < 0)
			return -errno;
		if (strcmp(f, "root.layer") != 0 &&
		    (strcmp(high, "root.layer") == 0 ||
		     strtoul(f + 5, NULL, 10) > strtoul(high + 5, NULL, 10)))
			high = f;
	}
	snprintf(parent, 32, "%s", m->root_layer);
	return snap_next_layer(high, sb->top, sizeof(sb->top));
}

/* A snapshot of more than RESTORE_FLATTEN_AT frozen layers (each snapshot adds one, and a box
 * a fleet stops into its store and wakes again is one more snapshot and restore each time):
 * its chain made one layer, root.layer, read through it (disk_flatten), and the new top over
 * that. Without it a sandbox restored and snapshotted SNAP_LAYERS_MAX times could never be
 * snapshotted (nor stopped into a store) again. */
static int flatten_layers(const char *dir, const struct snap_meta *m, struct sandbox *sb,
			  char parent[32], struct disk_error *derr)
{
	char from[4200], to[4200];
	int err;

	if ((err = path_fmt(from, sizeof(from), "%s/%s", dir, m->root_layer)) < 0 ||
	    (err = sandbox_path(sb, "root.layer", to, sizeof(to))) < 0 ||
	    (err = disk_flatten(from, to, derr)) < 0)
		return err;
	snprintf(parent, 32, "root.layer");
	return snap_next_layer("root.layer", sb->top, sizeof(sb->top));
}

static int restore_into(const char *dir, const struct snap_meta *m, const char *name,
			const char *console, const struct boot_src *src, bool no_wait,
			const struct create_opts *o, struct sandbox *sb, struct lc_report *r)
{
	char top[4200], parent[4200], below[32], msg[640] = "";
	struct disk_error derr = {""};
	struct snap_fds fds;
	struct boot_src checked;
	int err;

	memset(sb, 0, sizeof(*sb));
	snprintf(sb->image, sizeof(sb->image), "%s", m->image);
	snprintf(sb->base, sizeof(sb->base), "%s", m->name);
	snprintf(sb->top, sizeof(sb->top), "root.layer");
	sb->cpus = m->cpus;
	sb->memory_mib = m->memory_mib;
	sb->created = (uint64_t)time(NULL);
	for (unsigned i = 0; i < m->ndisks; i++) {
		snprintf(sb->disks[i].path, DISK_PATH_MAX, "%s", m->disks[i]);
		sb->disks[i].ro = true;
	}
	sb->ndisks = m->ndisks;
	sb->network = m->network;
	if (o) { /* a warm create: its lifetime and lifeline are the create's */
		sb->deadline = o->ttl_s ? sb->created + o->ttl_s : 0;
		sb->lifeline_fd = o->lifeline_fd;
	}
	if ((err = sandbox_make_dir(sb, name, r)) < 0)
		return err;
	if (sb->network) {
		if (o)
			err = sandbox_net_prepare(sb, o, r);
		else if ((err = snap_net_restore(dir, m, sb, msg, sizeof(msg))) < 0)
			lc_fail(r, err, "%s: the snapshot's proxy files: %s", sb->id,
				msg[0] ? msg : strerror(-err));
		if (err < 0) {
			sandbox_discard(sb, r);
			return err;
		}
	}
	/* (a fork's children stay cheap: they link, and go with their parent) */
	/* (a lazy restore's layers past RESTORE_FLATTEN_AT were pulled whole for it:
	 * snap_lazy_layers) */
	bool flat = m->nlayers > RESTORE_FLATTEN_AT && !src->memory;

	if ((err = flat ? flatten_layers(dir, m, sb, below, &derr)
			: link_layers(dir, m, sb, below)) < 0 ||
	    (err = sandbox_path(sb, sb->top, top, sizeof(top))) < 0 ||
	    (err = sandbox_path(sb, below, parent, sizeof(parent))) < 0 ||
	    (err = disk_create_overlay(top, parent, 0, &derr)) < 0) {
		lc_fail(r, err, "%s: cannot create the root disk over the snapshot's: %s", sb->id,
			derr.msg[0] ? derr.msg : strerror(-err));
		sandbox_discard(sb, r);
		return err;
	}
	/* The state and (unless a fork's child maps the parent's frozen RAM, or a pager fills
	 * a lazy restore's) the memory, checked against the MAC'd digests and given to the VMM
	 * as they were checked. */
	if ((err = snap_restore_open(dir, m, !src->memory && src->pager_fd <= 0, &fds, msg,
				     sizeof(msg))) < 0) {
		lc_fail(r, err, "%s: %s", sb->id, msg[0] ? msg : strerror(-err));
		sandbox_discard(sb, r);
		return err;
	}
	checked = *src;
	checked.fds = &fds;
	/* a lazy restore's layers hold holes until its pager is done: marked so (its pager's
	 * owner removes the mark then), so that a VMM that ends first is never followed by a
	 * boot from them */
	if (src->pager_fd > 0 &&
	    (err = sandbox_path(sb, SANDBOX_LAZY_MARK, top, sizeof(top))) == 0 &&
	    (err = write_file_atomic(top, "lazy\n", 5, 0600)) < 0)
		lc_fail(r, err, "%s: cannot mark its layers as coming: %s", sb->id, strerror(-err));
	if (err == 0)
		err = sandbox_start_vmm(sb, console, &checked, RESTORE_TIMEOUT_S, no_wait, r);
	snap_restore_close(&fds);
	if (err < 0)
		sandbox_discard(sb, r);
	return err;
}

int sandbox_snapshot_open(const char *name, char *dir, size_t dir_len, struct snap_meta *m,
			  struct lc_report *r)
{
	char msg[640] = "";
	int err;

	if ((err = snap_dir(name, dir, dir_len)) < 0 ||
	    (err = snap_open(dir, m, msg, sizeof(msg))) < 0)
		return lc_fail(r, err, "snapshot '%s': %s", name,
			       err == -ENOENT ? "no such snapshot"
			       : msg[0]	      ? msg
					      : strerror(-err));
	return 0;
}
