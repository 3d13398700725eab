/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Patched chunks (store/chunk_patch.c) against a real S3 API (tests/fleet/store.sh starts
 * Swift's):
 *
 *   patch-check ENDPOINT ACCESS SECRET REGION WORKDIR
 *
 * A 16 MiB "memory" pushed through a host's chunk cache, then again after one page changed
 * in each of 24 of its chunks and one chunk rewritten whole, the first snapshot its parent:
 * 24 patches and one chunk go up. Restored on a handle with no cache, equal; a third snapshot
 * patches against the first's chunks still (one level); a corrupt patch, a patch that is not
 * one and recipes out of form are refused naming the chunk; a collection after the first's
 * delete keeps the bases the others' recipes name. Last line:
 *   patch chunk_size= first_up= second_up= whole_up= ratio=
 * (whole_up: what the second would have sent without a parent).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet_check.h"
#include "fleet_files.h"
#include "store.h"

#define CHUNK_SIZE (256u << 10)
#define FILE_LEN   (16u << 20)
#define NCHUNKS	   (FILE_LEN / CHUNK_SIZE)
#define ZERO_FROM  (12u << 20) /* the last 4 MiB are zeros: 48 chunks hold data */
#define PATCHED	   24
#define REWRITTEN  41 /* the chunk written anew whole (the patched ones are even) */
#define PREFIX	   "ws/test-patch"

static uint8_t *img;
static char path[4200], out[4200];

/* Chunk c gets one page of new bytes (page c % 64 of it). */
static void change_page(unsigned c)
{
	fill_random(img + (size_t)c * CHUNK_SIZE + (c % 64) * CHUNK_PATCH_PAGE, CHUNK_PATCH_PAGE);
}

/* Fetch file "memory" of manifest id through a fresh handle (no cache): equal to expect? */
static bool restores(struct s3 *s3, const uint8_t secret[32], const char *id, const uint8_t *expect,
		     char *why, size_t wlen)
{
	struct chunk_store cs;
	struct manifest m;
	uint8_t *got = NULL;
	size_t n = 0;
	int err;

	if (chunk_store_open(&cs, s3, PREFIX, secret) < 0)
		return false;
	cs.transfers = 4;
	unlink(out);
	err = manifest_get(&m, &cs, id, 0);
	if (err == 0)
		err = manifest_fetch_file(&m, &cs, "memory", out);
	if (err == 0)
		got = read_all(out, &n);
	snprintf(why, wlen, "%d %s", err, cs.err);
	bool same = err == 0 && got && n == FILE_LEN && memcmp(got, expect, FILE_LEN) == 0;

	free(got);
	unlink(out);
	if (err == 0)
		manifest_free(&m);
	chunk_store_close(&cs);
	return same;
}

/* The manifest's text changed by edit (its first and last recipe lines), parsed again. */
static int reparse(const struct manifest *m, void (*edit)(char *first, char *last))
{
	struct chunk_store local;
	struct manifest back;
	size_t len;
	char *text = manifest_encode(m, &len), *t, *first, *last, *next;
	int err = -ENOMEM;

	if (!text || !(t = realloc(text, len + 1)) || chunk_store_local(&local) < 0) {
		free(text);
		return err;
	}
	text = t;
	text[len] = 0;
	first = last = strstr(text, "\nrecipe ");
	while (last && (next = strstr(last + 1, "\nrecipe ")))
		last = next;
	if (first && last != first) {
		edit(first + 1, last + 1);
		err = manifest_parse(text, strlen(text), &back, &local);
		if (err == 0)
			manifest_free(&back);
	}
	chunk_store_close(&local);
	free(text);
	return err;
}

/* "recipe HASH BASE PATCH": HASH at 7, BASE at 72, PATCH at 137. */

/* The last recipe's chunk made one no file lists (the largest hash: the order holds). */
static void edit_unlisted(char *first, char *last)
{
	(void)first;
	memset(last + 7, 'f', 64);
}

/* The first recipe's chunk made the last's: a listed chunk, out of order. */
static void edit_order(char *first, char *last)
{
	memcpy(first + 7, last + 7, 64);
}

/* The first recipe's base made the last recipe's chunk: a base that is not stored. */
static void edit_base(char *first, char *last)
{
	memcpy(first + 72, last + 7, 64);
}

int main(int argc, char **argv)
{
	struct s3_conf conf = {.timeout_ms = 30000};
	struct s3 s3;
	struct chunk_store cs;
	struct chunk_cache *cache;
	struct manifest m1, m2, m3, bad;
	struct store_gc_report rep;
	uint8_t secret[32];
	char dir[4200], why[STORE_ERR_MAX + 64], hex[2 * CHUNK_HASH_LEN + 1];
	uint64_t up0, first_up, second_up, whole_up;
	int err;

	if (argc != 6) {
		fprintf(stderr, "usage: patch-check ENDPOINT ACCESS SECRET REGION WORKDIR\n");
		return 2;
	}
	store_conf_from_args(&conf, argv, "patch-check");
	check(s3_open(&s3, &conf) == 0 && s3_bucket_create(&s3) == 0, "patch-s3", "%s", s3.err);
	snprintf(dir, sizeof(dir), "%s/patch-cache", argv[5]);
	snprintf(path, sizeof(path), "%s/patch-memory", argv[5]);
	snprintf(out, sizeof(out), "%s/patch-restored", argv[5]);
	img = malloc(FILE_LEN);
	if (!img)
		return 2;
	fill_random(img, FILE_LEN);
	memset(img + ZERO_FROM, 0, FILE_LEN - ZERO_FROM);
	fill_random(secret, sizeof(secret));
	write_file(path, img, FILE_LEN);

	/* the first snapshot, its chunks in the host's cache as a push leaves them */
	check(chunk_cache_open(dir, 64u << 20, &cache) == 0 &&
		      chunk_store_open(&cs, &s3, PREFIX, secret) == 0,
	      "patch-open", "%s", cs.err);
	cs.cache = cache;
	cs.transfers = 4;
	up0 = s3.bytes_up;
	check(manifest_init(&m1, CHUNK_SIZE) == 0 &&
		      manifest_add_file(&m1, &cs, "memory", path) == 0 && m1.nrecipes == 0,
	      "patch-first", "%s", cs.err);
	first_up = s3.bytes_up - up0; /* its 48 chunks of data */
	check(first_up == 48ull * (CHUNK_SIZE + CHUNK_SEAL_EXTRA) &&
		      manifest_put(&m1, &cs, "p-1") == 0,
	      "patch-first-put", "%llu bytes up; %s", (unsigned long long)first_up, cs.err);

	/* one page changed in each of 24 chunks, one chunk rewritten whole */
	for (unsigned c = 0; c < PATCHED; c++)
		change_page(c * 2);
	fill_random(img + (size_t)REWRITTEN * CHUNK_SIZE, CHUNK_SIZE);
	write_file(path, img, FILE_LEN);
	struct chunk_store plain;
	struct manifest whole;

	/* what it would send whole: a local handle only hashes, counting nothing up */
	check(chunk_store_local(&plain) == 0 && manifest_init(&whole, CHUNK_SIZE) == 0 &&
		      manifest_add_file(&whole, &plain, "memory", path) == 0,
	      "patch-whole-hashed", "%s", plain.err);
	whole_up = (uint64_t)(PATCHED + 1) * (CHUNK_SIZE + CHUNK_SEAL_EXTRA);
	uint64_t put0 = cs.put_chunks;

	up0 = s3.bytes_up;
	check(manifest_init(&m2, CHUNK_SIZE) == 0, "patch-init-2", "-");
	m2.parent = &m1;
	err = manifest_add_file(&m2, &cs, "memory", path);
	second_up = s3.bytes_up - up0;
	/* a patch: "SBPT", length, count, one index, one page; sealed */
	const uint64_t patch_wire = 12 + 4 + CHUNK_PATCH_PAGE + CHUNK_SEAL_EXTRA;

	check(err == 0 && m2.nrecipes == PATCHED && cs.put_chunks - put0 == PATCHED + 1 &&
		      second_up == PATCHED * patch_wire + CHUNK_SIZE + CHUNK_SEAL_EXTRA,
	      "patch-second-uploads-pages", "%d %s: %llu recipes, %llu chunks up, %llu bytes", err,
	      cs.err, (unsigned long long)m2.nrecipes, (unsigned long long)(cs.put_chunks - put0),
	      (unsigned long long)second_up);
	for (unsigned c = 0; c < NCHUNKS; c++) /* the manifest names the chunks' own hashes */
		if (memcmp(m2.file[0].hash[c], whole.file[0].hash[c], CHUNK_HASH_LEN) != 0)
			check(false, "patch-hashes-kept", "chunk %u", c);
	check(manifest_put(&m2, &cs, "p-2") == 0, "patch-put-2", "%s", cs.err);
	check(restores(&s3, secret, "p-2", img, why, sizeof(why)), "patch-restores", "%s", why);

	/* a lazy restore's gets: one patched chunk made by chunk_get, then kept as itself */
	struct chunk_store lazy;
	uint8_t *buf = malloc(CHUNK_SIZE);
	size_t len = 0;
	uint64_t hits0;

	check(buf && chunk_store_open(&lazy, &s3, PREFIX, secret) == 0, "patch-lazy-open", "-");
	lazy.cache = cache;
	chunk_store_recipes(&lazy, &m2);
	err = chunk_get(&lazy, m2.file[0].hash[2], buf, CHUNK_SIZE, &len);
	hits0 = lazy.cache_hits;
	check(err == 0 && len == CHUNK_SIZE && memcmp(buf, img + 2 * CHUNK_SIZE, CHUNK_SIZE) == 0 &&
		      chunk_get(&lazy, m2.file[0].hash[2], buf, CHUNK_SIZE, &len) == 0 &&
		      lazy.cache_hits == hits0 + 1,
	      "patch-lazy-get", "%d %s", err, lazy.err);
	chunk_store_close(&lazy);

	uint8_t *img2 = malloc(FILE_LEN); /* p-2's bytes */

	check(img2 != NULL, "patch-copy", "-");
	memcpy(img2, img, FILE_LEN);
	/* the third, through a handle that knows nothing yet (each "is it stored" a HEAD): chunk
	 * 2 changed again (patched against the first's chunk: one level), chunk 3 changed (a
	 * patch of the first's chunk 3) and chunk 5 made chunk 3's first bytes exactly (stored:
	 * skipped, never a recipe, so no base is one); the 23 other patched chunks made as
	 * before, nothing sent for them */
	fill_random(img + 2 * CHUNK_SIZE + 5 * CHUNK_PATCH_PAGE, CHUNK_PATCH_PAGE);
	memcpy(img + 5 * CHUNK_SIZE, img + 3 * CHUNK_SIZE, CHUNK_SIZE);
	change_page(3);
	write_file(path, img, FILE_LEN);
	struct manifest p2;
	struct chunk_store cs3;

	check(chunk_store_open(&cs3, &s3, PREFIX, secret) == 0 &&
		      manifest_get(&p2, &cs3, "p-2", 0) == 0 && manifest_init(&m3, CHUNK_SIZE) == 0,
	      "patch-parent-from-store", "%s", cs3.err);
	cs3.cache = cache;
	cs3.transfers = 4;
	m3.parent = &p2;
	up0 = s3.bytes_up;
	err = manifest_add_file(&m3, &cs3, "memory", path);
	const struct chunk_recipe *r2 =
		chunk_recipe_find(m3.recipe, m3.nrecipes, m3.file[0].hash[2]);
	const struct chunk_recipe *r3 =
		chunk_recipe_find(m3.recipe, m3.nrecipes, m3.file[0].hash[3]);

	check(err == 0 && m3.nrecipes == PATCHED + 1 && cs3.put_chunks == 2 && r2 && r3 &&
		      memcmp(r2->base, m1.file[0].hash[2], CHUNK_HASH_LEN) == 0 &&
		      memcmp(r3->base, m1.file[0].hash[3], CHUNK_HASH_LEN) == 0 &&
		      memcmp(m3.file[0].hash[5], m1.file[0].hash[3], CHUNK_HASH_LEN) == 0 &&
		      !chunk_recipe_find(m3.recipe, m3.nrecipes, m3.file[0].hash[5]) &&
		      s3.bytes_up - up0 == 12 + 8 + 2 * CHUNK_PATCH_PAGE + CHUNK_SEAL_EXTRA + 12 +
						   4 + CHUNK_PATCH_PAGE + CHUNK_SEAL_EXTRA,
	      "patch-third-one-level", "%d %s: %llu recipes, %llu up (%llu bytes)", err, cs3.err,
	      (unsigned long long)m3.nrecipes, (unsigned long long)cs3.put_chunks,
	      (unsigned long long)(s3.bytes_up - up0));
	check(manifest_put(&m3, &cs3, "p-3") == 0, "patch-put-3", "%s", cs3.err);
	chunk_store_close(&cs3);
	check(restores(&s3, secret, "p-3", img, why, sizeof(why)), "patch-third-restores", "%s",
	      why);

	/* a collection after the first's delete: the bases stay, its rewritten chunk goes */
	check(manifest_delete(&cs, "p-1") == 0, "patch-first-deleted", "%s", cs.err);
	err = store_gc(&cs, (int64_t)time(NULL) + 3600, false, &rep, NULL, NULL);
	check(err == 0 && rep.deleted == 1, "patch-gc-keeps-bases",
	      "%d %s: %llu deleted, %llu kept", err, cs.err, (unsigned long long)rep.deleted,
	      (unsigned long long)rep.kept);
	check(restores(&s3, secret, "p-3", img, why, sizeof(why)) &&
		      restores(&s3, secret, "p-2", img2, why, sizeof(why)),
	      "patch-restores-after-gc", "%s", why);

	/* a recipe whose "patch" is another chunk's bytes: refused, naming the chunk */
	check(manifest_get(&bad, &cs, "p-3", 0) == 0 && bad.nrecipes > 0, "patch-bad-get", "%s",
	      cs.err);
	memcpy(bad.recipe[0].patch, bad.file[0].hash[1], CHUNK_HASH_LEN);
	chunk_hex(bad.recipe[0].hash, hex);
	check(manifest_put(&bad, &cs, "p-bad") == 0, "patch-bad-put", "%s", cs.err);
	err = restores(&s3, secret, "p-bad", img, why, sizeof(why)) ? 0 : -1;
	check(err < 0 && strstr(why, hex) && strstr(why, "-74"), "patch-not-a-patch-refused", "%s",
	      why);
	manifest_free(&bad);

	/* a patch object corrupted in the store: refused, naming the chunk it makes */
	char name[2 * CHUNK_HASH_LEN + 1], key[S3_KEY_MAX + 1];
	uint8_t *obj = NULL;
	size_t olen = 0;

	chunk_object_name(&cs.keys, m3.recipe[0].patch, name);
	snprintf(key, sizeof(key), PREFIX "/c/%s", name);
	chunk_hex(m3.recipe[0].hash, hex);
	check(s3_get(&s3, key, 0, 0, S3_OBJECT_MAX, &obj, &olen) == 0 && olen > 40,
	      "patch-object-read", "%s", s3.err);
	obj[olen / 2] ^= 0x40;
	check(s3_put(&s3, key, obj, olen) == 0, "patch-object-corrupted", "%s", s3.err);
	free(obj);
	err = restores(&s3, secret, "p-3", img, why, sizeof(why)) ? 0 : -1;
	check(err < 0 && strstr(why, hex) && strstr(why, "stored as a patch"),
	      "patch-corrupt-refused", "%s", why);

	/* recipes out of form: refused at parse */
	check(reparse(&m3, edit_unlisted) == -EBADMSG, "patch-recipe-unlisted-refused", "-");
	check(reparse(&m3, edit_order) == -EBADMSG, "patch-recipe-order-refused", "-");
	check(reparse(&m3, edit_base) == -EBADMSG, "patch-recipe-base-refused", "-");

	/* the API's list of what a pull fetches: bases and patches, not the patched chunks */
	size_t n = 0;
	uint8_t(*st)[CHUNK_HASH_LEN] = manifest_stored_hashes(&m2, &n);
	bool named = false;

	for (size_t i = 0; st && i < n && !named; i++)
		named = memcmp(st[i], m2.recipe[0].hash, CHUNK_HASH_LEN) == 0;
	check(st && !named && bsearch(m2.recipe[0].base, st, n, CHUNK_HASH_LEN, chunk_hash_cmp) &&
		      bsearch(m2.recipe[0].patch, st, n, CHUNK_HASH_LEN, chunk_hash_cmp),
	      "patch-stored-hashes", "%zu", n);
	free(st);

	printf("patch chunk_size=%u first_up=%llu second_up=%llu whole_up=%llu ratio=%.4f\n",
	       CHUNK_SIZE, (unsigned long long)first_up, (unsigned long long)second_up,
	       (unsigned long long)whole_up, (double)second_up / (double)first_up);
	manifest_free(&p2);
	manifest_free(&m3);
	manifest_free(&m2);
	manifest_free(&m1);
	manifest_free(&whole);
	chunk_store_close(&plain);
	chunk_store_close(&cs);
	chunk_cache_close(cache);
	s3_close(&s3);
	free(buf);
	free(img2);
	free(img);
	return 0;
}
