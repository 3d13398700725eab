/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of client/snap_layers.c: what a snapshot from elsewhere (a client's push, a service's
 * pull) may name as its layers' parents, and the rebase of its image's file onto this host's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
#include "client.h"

static char home[PATH_MAX], snap[PATH_MAX + 32];
static struct snap_meta m;

static void raw_file(const char *path, char fill)
{
	char buf[65536];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0, "%s", path);
	memset(buf, fill, sizeof(buf));
	for (int i = 0; i < 16; i++)
		cr_assert_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
}

static void layer(const char *name, const char *parent)
{
	char path[PATH_MAX + 64];
	struct disk_error err;

	snprintf(path, sizeof(path), "%s/%s", snap, name);
	cr_assert_eq(disk_create_overlay(path, parent, 0, &err), 0, "%s", err.msg);
	snprintf(m.layers[m.nlayers++].file, sizeof(m.layers[0].file), "%s", name);
}

/* $SANDBOX_HOME with images/busybox/rootfs, a snapshot directory with root.layer over it and
 * root.1.layer over that. */
static void setup(void)
{
	char path[PATH_MAX + 64];

	snprintf(home, sizeof(home), "/tmp/test-snap-layers.XXXXXX");
	cr_assert_not_null(mkdtemp(home));
	setenv("SANDBOX_HOME", home, 1);
	snprintf(path, sizeof(path), "%s/images", home);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/images/busybox", home);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/images/busybox/rootfs", home);
	raw_file(path, 'a');
	snprintf(path, sizeof(path), "%s/snapshots", home);
	mkdir(path, 0700);
	snprintf(snap, sizeof(snap), "%s/snapshots/s", home);
	mkdir(snap, 0700);
	memset(&m, 0, sizeof(m));
	snprintf(m.image, sizeof(m.image), "busybox");
	snprintf(path, sizeof(path), "%s/images/busybox/rootfs", home);
	layer("root.layer", path);
	snprintf(path, sizeof(path), "%s/root.layer", snap);
	layer("root.1.layer", path);
}

static void teardown(void)
{
	remove_flat_dir(home);
}

TestSuite(snap_layers, .init = setup, .fini = teardown);

Test(snap_layers, own_layers_and_the_image_pass)
{
	char err[512] = "";

	cr_assert_eq(snap_layers_check(snap, &m, err, sizeof(err)), 0, "%s", err);
}

Test(snap_layers, a_parent_elsewhere_on_the_host_is_refused)
{
	char err[512] = "", secret[PATH_MAX + 32];

	snprintf(secret, sizeof(secret), "%s/secret.img", home);
	raw_file(secret, 's');
	layer("root.2.layer", secret);
	cr_assert_eq(snap_layers_check(snap, &m, err, sizeof(err)), -EPERM);
	cr_assert_not_null(strstr(err, "root.2.layer"), "%s", err);
}

Test(snap_layers, a_layer_parent_outside_the_snapshot_is_refused)
{
	char err[512] = "", other[PATH_MAX + 64], path[PATH_MAX + 64];
	struct disk_error derr;

	/* another sandbox's layer, named by a path (not one of the snapshot's own) */
	snprintf(other, sizeof(other), "%s/sandboxes", home);
	mkdir(other, 0700);
	snprintf(other, sizeof(other), "%s/sandboxes/victim.layer", home);
	snprintf(path, sizeof(path), "%s/images/busybox/rootfs", home);
	cr_assert_eq(disk_create_overlay(other, path, 0, &derr), 0, "%s", derr.msg);
	layer("root.2.layer", other);
	cr_assert_eq(snap_layers_check(snap, &m, err, sizeof(err)), -EPERM);
}

Test(snap_layers, an_image_not_installed_here_is_said)
{
	char err[512] = "";

	snprintf(m.image, sizeof(m.image), "debian");
	cr_assert_eq(snap_layers_check(snap, &m, err, sizeof(err)), -ENOENT);
	cr_assert_not_null(strstr(err, "debian"), "%s", err);
}

Test(snap_layers, a_rebase_points_the_image_layer_at_this_hosts_file)
{
	char err[512] = "", there[PATH_MAX + 64], path[PATH_MAX + 64];
	struct disk *d = NULL;
	struct disk_error derr;
	bool changed = false;

	/* a snapshot made where the image's file was elsewhere: the same file (its bytes and
	 * mtime, which a raw parent's identity covers: disk-format.md) */
	struct stat st;
	struct timespec ts[2];

	snprintf(there, sizeof(there), "%s/laptop-rootfs", home);
	raw_file(there, 'a');
	snprintf(path, sizeof(path), "%s/images/busybox/rootfs", home);
	cr_assert_eq(stat(path, &st), 0);
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	cr_assert_eq(utimensat(AT_FDCWD, there, ts, 0), 0);
	snprintf(path, sizeof(path), "%s/root.layer", snap);
	unlink(path);
	m.nlayers = 0;
	layer("root.layer", there);
	snprintf(path, sizeof(path), "%s/root.1.layer", snap);
	unlink(path);
	snprintf(path, sizeof(path), "%s/root.layer", snap);
	layer("root.1.layer", path);
	unlink(there); /* (that machine's file is not here) */
	cr_assert_eq(snap_layers_check(snap, &m, err, sizeof(err)), -EPERM);
	cr_assert_eq(snap_layers_rebase(snap, &m, &changed, err, sizeof(err)), 0, "%s", err);
	cr_assert(changed);
	cr_assert_eq(snap_layers_check(snap, &m, err, sizeof(err)), 0, "%s", err);
	/* and the chain opens: the parent's identity (its bytes) is the one recorded */
	snprintf(path, sizeof(path), "%s/root.1.layer", snap);
	cr_assert_eq(disk_open(path, DISK_OPEN_RDONLY, &d, &derr), 0, "%s", derr.msg);
	disk_close(d);
	cr_assert_eq(snap_layers_rebase(snap, &m, &changed, err, sizeof(err)), 0, "%s", err);
	cr_assert(!changed);
}

Test(snap_layers, a_rebase_onto_other_bytes_fails_at_open)
{
	char err[512] = "", there[PATH_MAX + 64], path[PATH_MAX + 64];
	struct disk *d = NULL;
	struct disk_error derr;
	bool changed = false;

	snprintf(there, sizeof(there), "%s/laptop-rootfs", home);
	raw_file(there, 'b'); /* "busybox" there is not this host's busybox */
	snprintf(path, sizeof(path), "%s/root.layer", snap);
	unlink(path);
	snprintf(path, sizeof(path), "%s/root.1.layer", snap);
	unlink(path);
	m.nlayers = 0;
	layer("root.layer", there);
	cr_assert_eq(snap_layers_rebase(snap, &m, &changed, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/root.layer", snap);
	cr_assert_eq(disk_open(path, DISK_OPEN_RDONLY, &d, &derr), -ESTALE, "%s", derr.msg);
}
