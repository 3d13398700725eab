/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk/disk_flatten.c: a chain of many layers made one layer, against an in-memory model of
 * the disk: over a raw base and over nothing, with a grown top, a chain only read (every
 * layer's identity and bytes as before), and refusals that leave nothing behind.
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

#define KIB	(1024ull)
#define MIB	(1024ull * KIB)
#define LAYERS	20
#define CLUSTER (64 * KIB)

static char tmp_dir[PATH_MAX];

static void tmp_setup(void)
{
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/test_disk_flatten.XXXXXX");
	cr_assert(mkdtemp(tmp_dir) != NULL, "mkdtemp: %s", strerror(errno));
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

/* A path in the test's directory; eight live at once. */
static const char *P(const char *name)
{
	static char bufs[8][PATH_MAX];
	static unsigned next;
	char *b = bufs[next++ % 8];

	cr_assert(snprintf(b, PATH_MAX, "%s/%s", tmp_dir, name) < PATH_MAX);
	return b;
}

/* Layer i of the chain. */
static const char *L(int i)
{
	char name[32];

	snprintf(name, sizeof(name), "l%d.layer", i);
	return P(name);
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void disk_write_ok(const char *path, uint64_t off, const void *buf, uint64_t len)
{
	struct disk_error err = {{0}};
	struct disk *d;

	cr_assert(eq(int, disk_open(path, 0, &d, &err), 0), "%s", err.msg);
	cr_assert(eq(int, disk_write(d, off, buf, len), 0));
	cr_assert(eq(int, disk_flush(d), 0));
	disk_close(d);
}

static void disk_read_all(const char *path, uint8_t *buf, uint64_t len)
{
	struct disk_error err = {{0}};
	struct disk *d;

	cr_assert(eq(int, disk_open(path, DISK_OPEN_RDONLY, &d, &err), 0), "%s", err.msg);
	cr_assert(eq(u64, disk_size(d), len));
	cr_assert(eq(int, disk_read(d, 0, buf, len), 0));
	disk_close(d);
}

/*
 * A chain of LAYERS layers above `first` (made by the caller), each with a few random writes
 * (some of zeros over non-zero bytes below: a layer's zeros must win over its base), the last
 * one 1 MiB larger than the rest. The model gets every write; the top's path is returned.
 */
static void chain_build(const char *first, uint8_t *model, uint64_t len, uint64_t *seed,
			char top[PATH_MAX])
{
	struct disk_error err = {{0}};
	const char *below = first;
	uint8_t *buf = malloc(200 * KIB);

	cr_assert(buf != NULL);
	for (int i = 1; i <= LAYERS; i++) {
		const char *p = L(i);
		uint64_t size = i == LAYERS ? len : len - MIB;

		cr_assert(eq(int, disk_create_overlay_len(p, below, 0, size, &err), 0), "%s",
			  err.msg);
		for (int w = 0; w < 3; w++) {
			uint64_t n = 1 + rng(seed) % (200 * KIB), off = rng(seed) % (size - n);
			bool zeros = rng(seed) % 4 == 0;

			for (uint64_t k = 0; k < n; k++)
				buf[k] = zeros ? 0 : (uint8_t)(rng(seed) >> 56);
			disk_write_ok(p, off, buf, n);
			memcpy(model + off, buf, n);
		}
		below = p;
	}
	free(buf);
	snprintf(top, PATH_MAX, "%s", below);
}

static void identities(const char *first, uint8_t ids[LAYERS + 1][DISK_HASH_LEN])
{
	struct disk_layer_info *info = malloc(sizeof(*info));
	struct disk_error err = {{0}};

	cr_assert(info != NULL);
	for (int i = 0; i <= LAYERS; i++) {
		cr_assert(eq(int, disk_inspect(i ? L(i) : first, info, &err), 0), "%s", err.msg);
		memcpy(ids[i], info->identity, DISK_HASH_LEN);
	}
	free(info);
}

/* flatten `top` to flat.layer: the same bytes as the model, one layer over `base` (or none) */
static void flatten_check(const char *top, const char *base, const uint8_t *model, uint64_t len)
{
	struct disk_layer_info *info = malloc(sizeof(*info));
	struct disk_error err = {{0}};
	uint8_t *got = malloc(len);
	char canon[PATH_MAX];

	cr_assert(info != NULL && got != NULL);
	cr_assert(eq(int, disk_flatten(top, P("flat.layer"), &err), 0), "%s", err.msg);
	disk_read_all(P("flat.layer"), got, len);
	cr_assert(memcmp(got, model, len) == 0, "the flat layer reads other bytes than the chain");
	cr_assert(eq(int, disk_inspect(P("flat.layer"), info, &err), 0), "%s", err.msg);
	cr_assert(eq(int, info->chain_status, 0), "%s", info->chain_error.msg);
	cr_assert(eq(u32, info->hdr.parent_kind, base ? DISK_PARENT_RAW : DISK_PARENT_NONE));
	if (base) {
		cr_assert(realpath(base, canon) != NULL);
		cr_assert(eq(str, info->parent_path, canon));
	}
	/* a new top over it, as a restore makes, opens and reads the same */
	cr_assert(eq(int, disk_create_overlay(P("next.layer"), P("flat.layer"), 0, &err), 0), "%s",
		  err.msg);
	memset(got, 0xee, len);
	disk_read_all(P("next.layer"), got, len);
	cr_assert(memcmp(got, model, len) == 0);
	free(got);
	free(info);
}

TestSuite(disk_flatten, .init = tmp_setup, .fini = tmp_teardown);

Test(disk_flatten, over_a_raw_base)
{
	uint64_t seed = 0x5eed0001, len = 8 * MIB, base_len = 6 * MIB;
	uint8_t *model = calloc(1, len), ids[LAYERS + 1][DISK_HASH_LEN], after[LAYERS + 1][32];
	struct disk_error err = {{0}};
	int fd = open(P("base.img"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	cr_assert(model != NULL && fd >= 0);
	for (uint64_t i = 0; i < base_len; i++)
		model[i] = (uint8_t)(rng(&seed) >> 56);
	cr_assert(eq(int, disk_pwrite_full(fd, model, base_len, 0), 0));
	close(fd);
	cr_assert(
		eq(int,
		   disk_create_overlay_len(P("l0.layer"), P("base.img"), CLUSTER, len - MIB, &err),
		   0),
		"%s", err.msg);
	char top[PATH_MAX];

	chain_build(P("l0.layer"), model, len, &seed, top);

	identities(P("l0.layer"), ids);
	flatten_check(top, P("base.img"), model, len);
	identities(P("l0.layer"), after);
	cr_assert(memcmp(ids, after, sizeof(ids)) == 0, "flatten changed a layer of the chain");
	free(model);
}

Test(disk_flatten, over_nothing_zeros_not_held)
{
	uint64_t seed = 0x5eed0002, len = 4 * MIB;
	uint8_t *model = calloc(1, len);
	struct disk_layer_info info;
	struct disk_error err = {{0}};

	cr_assert(model != NULL);
	cr_assert(eq(int, disk_create(P("l0.layer"), len - MIB, CLUSTER, &err), 0), "%s", err.msg);
	char top[PATH_MAX];

	chain_build(P("l0.layer"), model, len, &seed, top);
	uint64_t nonzero = 0;

	for (uint64_t c = 0; c < len / CLUSTER; c++) {
		bool any = false;

		for (uint64_t k = 0; k < CLUSTER && !any; k++)
			any = model[c * CLUSTER + k] != 0;
		nonzero += any;
	}
	flatten_check(top, NULL, model, len);
	cr_assert(eq(int, disk_inspect(P("flat.layer"), &info, &err), 0));
	cr_assert(le(u64, info.allocated_clusters, nonzero),
		  "a cluster of zeros over nothing held");
	free(model);
}

Test(disk_flatten, refusals_leave_nothing)
{
	struct disk_error err = {{0}};
	struct stat st;
	uint8_t byte = 1;

	cr_assert(eq(int, disk_create(P("l0.layer"), MIB, CLUSTER, &err), 0));
	cr_assert(eq(int, disk_create_overlay(P("l1.layer"), P("l0.layer"), 0, &err), 0));
	/* out exists: never replaced */
	cr_assert(eq(int, disk_create(P("flat.layer"), MIB, CLUSTER, &err), 0));
	cr_assert(eq(int, disk_flatten(P("l1.layer"), P("flat.layer"), &err), -EEXIST));
	cr_assert(eq(int, unlink(P("flat.layer")), 0));
	/* a parent changed under its child: refused, naming it, and no out */
	disk_write_ok(P("l0.layer"), 0, &byte, 1);
	cr_assert(eq(int, disk_flatten(P("l1.layer"), P("flat.layer"), &err), -ESTALE));
	cr_assert(strstr(err.msg, "l0.layer") != NULL, "%s", err.msg);
	cr_assert(ne(int, stat(P("flat.layer"), &st), 0));
	/* a missing top */
	cr_assert(eq(int, disk_flatten(P("none.layer"), P("flat.layer"), &err), -ENOENT));
	cr_assert(ne(int, stat(P("flat.layer"), &st), 0));
}
