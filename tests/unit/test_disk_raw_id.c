/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk/disk_raw_id.c: a raw image's identity by content. A layer made over an image with an
 * identity file opens over a copy of the same bytes on "another machine" (another directory,
 * another mtime, its own identity file), not over one without that file or with other bytes;
 * a write to the image after its file was made is refused as before; a layer recorded before
 * the file existed still opens.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/new/assert.h>

#include "disk.h"

#define MIB (1024ull * 1024)

static char tmp_dir[PATH_MAX];

/* A path in the test's directory; eight live at once. */
static const char *P_dir(const char *name)
{
	static char bufs[8][PATH_MAX];
	static unsigned next;
	char *b = bufs[next++ % 8];

	cr_assert(snprintf(b, PATH_MAX, "%s/%s", tmp_dir, name) < PATH_MAX);
	return b;
}

static void tmp_setup(void)
{
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/test_disk_raw_id.XXXXXX");
	cr_assert(mkdtemp(tmp_dir) != NULL, "mkdtemp: %s", strerror(errno));
	cr_assert(eq(int, mkdir(P_dir("a"), 0700), 0));
	cr_assert(eq(int, mkdir(P_dir("b"), 0700), 0));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void tmp_teardown(void)
{
	nftw(tmp_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void image_make(const char *path, uint8_t seed)
{
	uint8_t *buf = malloc(2 * MIB);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	cr_assert(buf != NULL && fd >= 0);
	for (size_t i = 0; i < 2 * MIB; i++)
		buf[i] = (uint8_t)(i * 7 + seed);
	cr_assert(eq(int, disk_pwrite_full(fd, buf, 2 * MIB, 0), 0));
	close(fd);
	free(buf);
}

/* Copy `from` to `to` with another mtime (as an install on another machine would have). */
static void image_copy(const char *from, const char *to, int secs_later)
{
	char cmd[3 * PATH_MAX];
	struct stat st;
	struct timespec t[2];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	cr_assert(eq(int, system(cmd), 0));
	cr_assert(eq(int, stat(from, &st), 0));
	t[0] = st.st_atim;
	t[1] = st.st_mtim;
	t[1].tv_sec += secs_later;
	cr_assert(eq(int, utimensat(AT_FDCWD, to, t, 0), 0));
}

static void identity_ok(const char *image)
{
	struct disk_error err = {{0}};

	cr_assert(eq(int, disk_raw_identity_write(image, &err), 0), "%s", err.msg);
}

static int chain_open(const char *top, struct disk_error *err)
{
	struct disk *d;
	int r = disk_open(top, DISK_OPEN_RDONLY, &d, err);

	if (r == 0)
		disk_close(d);
	return r;
}

/* The layer a/o1 over a/base.img, with a write in it, copied to b/o1 (its parent the same
 * relative name: b/base.img). */
static void layer_over_a_copied_to_b(void)
{
	struct disk_error err = {{0}};
	struct disk *d;
	uint8_t b = 0x42;
	char cmd[3 * PATH_MAX];

	cr_assert(eq(int, disk_create_overlay(P_dir("a/o1"), P_dir("a/base.img"), 0, &err), 0),
		  "%s", err.msg);
	cr_assert(eq(int, disk_open(P_dir("a/o1"), 0, &d, &err), 0), "%s", err.msg);
	cr_assert(eq(int, disk_write(d, 4096, &b, 1), 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", P_dir("a/o1"), P_dir("b/o1"));
	cr_assert(eq(int, system(cmd), 0));
}

TestSuite(disk_raw_id, .init = tmp_setup, .fini = tmp_teardown);

Test(disk_raw_id, same_bytes_elsewhere_open)
{
	struct disk_error err = {{0}};
	struct disk_layer base = {0};
	struct disk_header h;
	uint8_t v3[DISK_HASH_LEN];
	int fd;

	image_make(P_dir("a/base.img"), 1);
	identity_ok(P_dir("a/base.img"));
	layer_over_a_copied_to_b();
	/* what a/o1 recorded is the image's identity by content */
	cr_assert(eq(int, disk_layer_open(&base, P_dir("a/base.img"), DISK_LAYER_RAW, &err), 0));
	cr_assert(eq(int, disk_layer_raw_identity_v3(&base, v3), 0));
	disk_layer_close(&base);
	fd = open(P_dir("a/o1"), O_RDONLY);
	cr_assert(fd >= 0 && disk_pread_full(fd, &h, sizeof(h), 0) == 0);
	close(fd);
	cr_assert(memcmp(h.parent_identity, v3, DISK_HASH_LEN) == 0, "v3 recorded");

	/* b: the same bytes, 5 s younger: refused without its identity file, opens with it */
	image_copy(P_dir("a/base.img"), P_dir("b/base.img"), 5);
	cr_assert(eq(int, chain_open(P_dir("b/o1"), &err), -ESTALE));
	cr_assert(strstr(err.msg, "mtime") != NULL, "%s", err.msg);
	identity_ok(P_dir("b/base.img"));
	cr_assert(eq(int, chain_open(P_dir("b/o1"), &err), 0), "%s", err.msg);
	cr_assert(eq(int, chain_open(P_dir("a/o1"), &err), 0), "%s", err.msg);
}

Test(disk_raw_id, other_bytes_or_a_write_refused)
{
	struct disk_error err = {{0}};
	uint8_t x = 0x99;
	int fd;

	image_make(P_dir("a/base.img"), 1);
	identity_ok(P_dir("a/base.img"));
	layer_over_a_copied_to_b();
	/* b: other bytes in the middle (the ends the same), with their own identity file */
	image_copy(P_dir("a/base.img"), P_dir("b/base.img"), 5);
	fd = open(P_dir("b/base.img"), O_WRONLY);
	cr_assert(fd >= 0 && pwrite(fd, &x, 1, MIB) == 1);
	close(fd);
	identity_ok(P_dir("b/base.img"));
	cr_assert(eq(int, chain_open(P_dir("b/o1"), &err), -ESTALE), "%s", err.msg);
	/* a: written after its identity file was made: the file vouches for nothing, refused */
	fd = open(P_dir("a/base.img"), O_WRONLY);
	cr_assert(fd >= 0 && pwrite(fd, &x, 1, MIB) == 1);
	close(fd);
	cr_assert(eq(int, chain_open(P_dir("a/o1"), &err), -ESTALE), "%s", err.msg);
}

Test(disk_raw_id, recorded_before_the_file_still_opens)
{
	struct disk_error err = {{0}};
	int fd;

	image_make(P_dir("a/base.img"), 3);
	layer_over_a_copied_to_b(); /* v2 recorded: no identity file yet */
	identity_ok(P_dir("a/base.img"));
	cr_assert(eq(int, chain_open(P_dir("a/o1"), &err), 0), "%s", err.msg);
	/* a garbage identity file is no identity: v2 again */
	fd = open(P_dir("a/base.img.identity"), O_WRONLY | O_TRUNC);
	if (fd < 0) { /* (made 0444: root writes it anyway; others replace it) */
		cr_assert(eq(int, unlink(P_dir("a/base.img.identity")), 0));
		fd = open(P_dir("a/base.img.identity"), O_WRONLY | O_CREAT, 0644);
	}
	cr_assert(fd >= 0 && write(fd, "blocks-sha256 zz\n", 17) == 17);
	close(fd);
	cr_assert(eq(int, chain_open(P_dir("a/o1"), &err), 0), "%s", err.msg);
}
