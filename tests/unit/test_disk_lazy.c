/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lazy lower layers (disk/disk_lazy.c, disk_set_fetch): a read or a copy-up of clusters of a
 * read-only lower layer asks the fetch function for them first, whole clusters, once; the
 * top and a raw image are never asked; a fetch that fails fails the read.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "disk.h"

#define CL (64u << 10)

static char dir[PATH_MAX];

struct asked {
	unsigned n;
	uint8_t id[DISK_ID_LEN];
	uint64_t off[8], len[8];
	int fail; /* returned from the next fetch on */
};

static int fetch(void *arg, const uint8_t id[DISK_ID_LEN], uint64_t off, uint64_t len)
{
	struct asked *a = arg;

	if (a->fail)
		return a->fail;
	cr_assert(a->n < 8);
	memcpy(a->id, id, DISK_ID_LEN);
	a->off[a->n] = off;
	a->len[a->n++] = len;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* lower (1 MiB of 64 KiB clusters: 2, 3 and 7 written, each byte its cluster's number) under
 * top; the top opened, *data_offset the lower's */
static struct disk *chain(uint64_t *data_offset)
{
	char lower[PATH_MAX + 8], top[PATH_MAX + 8];
	struct disk_error err = {{0}};
	struct disk_layer_info info;
	uint8_t buf[CL];
	struct disk *d;

	snprintf(dir, sizeof(dir), "/tmp/test_disk_lazy.XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(lower, sizeof(lower), "%s/lower", dir);
	snprintf(top, sizeof(top), "%s/top", dir);
	cr_assert(disk_create(lower, 1u << 20, CL, &err) == 0, "%s", err.msg);
	cr_assert(disk_open(lower, 0, &d, &err) == 0, "%s", err.msg);
	for (unsigned c = 2; c <= 7; c += c == 3 ? 4 : 1) {
		memset(buf, (int)c, sizeof(buf));
		cr_assert(disk_write(d, (uint64_t)c * CL, buf, CL) == 0);
	}
	cr_assert(disk_flush(d) == 0);
	disk_close(d);
	cr_assert(disk_inspect(lower, &info, &err) == 0, "%s", err.msg);
	*data_offset = info.hdr.data_offset;
	cr_assert(disk_create_overlay(top, lower, CL, &err) == 0, "%s", err.msg);
	cr_assert(disk_open(top, 0, &d, &err) == 0, "%s", err.msg);
	return d;
}

Test(disk_lazy, read_asks_once_for_whole_clusters, .fini = teardown)
{
	struct asked a = {0};
	uint64_t data_offset;
	struct disk *d = chain(&data_offset);
	uint8_t got[2 * CL];

	cr_assert(disk_set_fetch(d, fetch, &a) == 0);
	/* clusters 2 and 3 of the lower, and 4 (in no layer: zeros) */
	cr_assert(disk_read(d, 2 * CL + 100, got, sizeof(got)) == 0);
	cr_assert(got[0] == 2 && got[CL] == 3 && got[2 * CL - 1] == 0);
	cr_assert_eq(a.n, 1);
	cr_assert_eq(a.off[0], data_offset + 2 * CL);
	cr_assert_eq(a.len[0], 2 * CL);
	/* read again: in already */
	cr_assert(disk_read(d, 2 * CL, got, CL) == 0);
	cr_assert_eq(a.n, 1);
	/* a part-written cluster of the top copies cluster 7 up: asked for first */
	cr_assert(disk_write(d, 7 * CL + 10, "x", 1) == 0);
	cr_assert_eq(a.n, 2);
	cr_assert_eq(a.off[1], data_offset + 7 * CL);
	cr_assert_eq(a.len[1], CL);
	/* the top's own cluster now: no more asks */
	cr_assert(disk_read(d, 7 * CL, got, CL) == 0 && got[0] == 7 && got[10] == 'x');
	cr_assert_eq(a.n, 2);
	disk_close(d);
}

Test(disk_lazy, failed_fetch_fails_the_read, .fini = teardown)
{
	struct asked a = {.fail = -ENOENT};
	uint64_t data_offset;
	struct disk *d = chain(&data_offset);
	struct disk_extent ext[4];
	uint8_t got[CL];
	unsigned n;

	cr_assert(disk_set_fetch(d, fetch, &a) == 0);
	cr_assert_eq(disk_read(d, 3 * CL, got, CL), -EIO);
	cr_assert(disk_map(d, 3 * CL, CL, ext, 4, &n) == 0 && n == 1);
	cr_assert_eq(disk_fetch_extents(d, ext, n), -EIO);
	/* a cluster in no layer: nothing to ask */
	cr_assert(disk_read(d, 5 * CL, got, CL) == 0 && got[0] == 0);
	/* once it works, it is asked again (nothing was marked in) */
	a.fail = 0;
	cr_assert(disk_read(d, 3 * CL, got, CL) == 0 && got[0] == 3);
	cr_assert_eq(a.n, 1);
	disk_close(d);
}
