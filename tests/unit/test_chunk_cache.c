/* SPDX-License-Identifier: Apache-2.0 */
/*
 * store/chunk_cache.c: the bound, the least recently used first out, a hit checked against
 * its hash (a damaged entry a miss), the order kept across a reopen, a chunk over the bound
 * never kept, one workspace's chunk not another's hit.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

#define CH (256u << 10)

static char dir[64];
static uint8_t *buf, *out;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test-chunk-cache.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	buf = malloc(CH);
	out = malloc(CH);
	cr_assert(buf && out);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	free(buf);
	free(out);
}

TestSuite(chunk_cache, .init = setup, .fini = teardown);

/* Chunk i of workspace keys k: its bytes in buf, its hash and object id. */
static void chunk(const struct chunk_keys *k, int i, uint8_t hash[32], uint8_t oid[32])
{
	for (size_t j = 0; j < CH; j++)
		buf[j] = (uint8_t)(i * 131 + j * 7);
	chunk_hash(buf, CH, hash);
	chunk_object_id(k, hash, oid);
}

static void keys(struct chunk_keys *k, uint8_t seed)
{
	uint8_t secret[32];

	memset(secret, seed, sizeof(secret));
	chunk_keys_derive(secret, k);
}

static bool has(struct chunk_cache *c, const struct chunk_keys *k, int i)
{
	uint8_t hash[32], oid[32];
	size_t len;

	chunk(k, i, hash, oid);
	return chunk_cache_get(c, oid, hash, out, CH, &len) == 1 && len == CH &&
	       memcmp(out, buf, CH) == 0;
}

static void put(struct chunk_cache *c, const struct chunk_keys *k, int i)
{
	uint8_t hash[32], oid[32];

	chunk(k, i, hash, oid);
	cr_assert_eq(chunk_cache_put(c, oid, buf, CH), 0);
}

Test(chunk_cache, bounded_oldest_out)
{
	struct chunk_cache *c;
	struct chunk_keys k;

	keys(&k, 1);
	cr_assert_eq(chunk_cache_open(dir, 4 * CH, &c), 0);
	for (int i = 0; i < 10; i++) {
		put(c, &k, i);
		cr_assert_leq(chunk_cache_bytes(c), 4 * CH);
	}
	cr_assert_eq(chunk_cache_count(c), 4);
	for (int i = 0; i < 6; i++)
		cr_assert(!has(c, &k, i), "chunk %d should have gone", i);
	for (int i = 6; i < 10; i++)
		cr_assert(has(c, &k, i), "chunk %d should be there", i);
	chunk_cache_close(c);
}

Test(chunk_cache, a_use_keeps_it)
{
	struct chunk_cache *c;
	struct chunk_keys k;

	keys(&k, 1);
	cr_assert_eq(chunk_cache_open(dir, 4 * CH, &c), 0);
	for (int i = 0; i < 4; i++)
		put(c, &k, i);
	cr_assert(has(c, &k, 0)); /* 0 is the newest now: 1 goes first */
	put(c, &k, 4);
	cr_assert(has(c, &k, 0));
	cr_assert(!has(c, &k, 1));
	chunk_cache_close(c);
}

Test(chunk_cache, damaged_is_a_miss)
{
	struct chunk_cache *c;
	struct chunk_keys k;
	uint8_t hash[32], oid[32];
	char hex[65], path[256];
	int fd;

	keys(&k, 1);
	cr_assert_eq(chunk_cache_open(dir, 4 * CH, &c), 0);
	put(c, &k, 3);
	chunk(&k, 3, hash, oid);
	chunk_hex(oid, hex);
	snprintf(path, sizeof(path), "%s/%s", dir, hex);
	fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "X", 1, 1000), 1);
	close(fd);
	cr_assert(!has(c, &k, 3));
	cr_assert_eq(access(path, F_OK), -1, "a damaged entry is removed");
	cr_assert_eq(chunk_cache_count(c), 0);
	chunk_cache_close(c);
}

Test(chunk_cache, reopen_keeps_order_and_bound)
{
	struct chunk_cache *c;
	struct chunk_keys k;
	struct timespec pause = {0, 20000000};

	keys(&k, 1);
	cr_assert_eq(chunk_cache_open(dir, 4 * CH, &c), 0);
	for (int i = 0; i < 4; i++) {
		put(c, &k, i);
		nanosleep(&pause, NULL); /* mtimes apart */
	}
	cr_assert(has(c, &k, 0)); /* used last */
	chunk_cache_close(c);
	/* a smaller bound at the next start: the least recently used go */
	cr_assert_eq(chunk_cache_open(dir, 2 * CH, &c), 0);
	cr_assert_eq(chunk_cache_count(c), 2);
	cr_assert(has(c, &k, 0));
	cr_assert(has(c, &k, 3));
	cr_assert(!has(c, &k, 1));
	chunk_cache_close(c);
}

Test(chunk_cache, over_the_bound_not_kept)
{
	struct chunk_cache *c;
	struct chunk_keys k;

	keys(&k, 1);
	cr_assert_eq(chunk_cache_open(dir, CH / 2, &c), 0);
	put(c, &k, 0);
	cr_assert_eq(chunk_cache_count(c), 0);
	cr_assert(!has(c, &k, 0));
	chunk_cache_close(c);
}

Test(chunk_cache, workspaces_apart)
{
	struct chunk_cache *c;
	struct chunk_keys a, b;

	keys(&a, 1);
	keys(&b, 2);
	cr_assert_eq(chunk_cache_open(dir, 4 * CH, &c), 0);
	put(c, &a, 7);
	cr_assert(has(c, &a, 7));
	cr_assert(!has(c, &b, 7), "the same bytes under another workspace's keys");
	chunk_cache_close(c);
}
