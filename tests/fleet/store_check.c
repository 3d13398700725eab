/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The object store's layer against a real S3 API (tests/fleet/store.sh starts Swift's):
 *
 *   store-check ENDPOINT ACCESS SECRET REGION WORKDIR
 *
 * Prints `ok NAME` per check, `FAIL NAME: why` and exits 1 at the first that fails, and a
 * last line `store chunk_size= first_up= second_up= ratio=` (the bytes two snapshots of a
 * 32 MiB file uploaded, the second after 1 MiB of writes: its 5 chunks).
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fleet_check.h"
#include "fleet_files.h"
#include "store.h"

#define FILE_MIB   32
#define CHUNK_SIZE (256u << 10)

/* Whether a .part file of a restore is left in dir. */
static bool part_left(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	while (d && (e = readdir(d)))
		if (strstr(e->d_name, ".part-"))
			found = true;
	if (d)
		closedir(d);
	return found;
}

/* A file that does not block a snapshot's read: a FIFO is refused, not waited on. */
static void fifo_check(struct manifest *m, struct chunk_store *cs, const char *dir)
{
	char path[4200];
	int err;

	snprintf(path, sizeof(path), "%s/fifo", dir);
	if (mkfifo(path, 0600) < 0)
		exit(2);
	err = manifest_add_file(m, cs, "fifo", path);
	check(err == -EINVAL && strstr(cs->err, "not a regular file"), "fifo-refused", "%d %s", err,
	      cs->err);
	unlink(path);
}

struct listed {
	char last[S3_KEY_MAX + 1];
	unsigned n, out_of_order, undated; /* (undated: no LastModified, or not a time of today) */
};

static int list_one(const struct s3_entry *e, void *arg)
{
	struct listed *l = arg;
	const char *key = e->key;

	l->out_of_order += strcmp(key, l->last) <= 0;
	l->undated += e->modified < (int64_t)time(NULL) - 86400 ||
		      e->modified > time(NULL) + 86400 || !e->size;
	snprintf(l->last, sizeof(l->last), "%s", key);
	l->n++;
	return 0;
}

/* The listing's pages: 40 keys each, in order, every key once, the last page saying no
 * more; a prefix that is no key refused before a request. */
static void list_check(struct s3 *s3, const char *prefix)
{
	char marker[S3_KEY_MAX + 1] = "";
	struct listed l = {.n = 0};
	unsigned pages = 0, short_pages = 0;
	bool more = true;
	int n = 0;

	while (more && pages < 100 && n >= 0) {
		n = s3_list(s3, prefix, marker, 40, list_one, &l, &more);
		pages++;
		short_pages += n >= 0 && n < 40 && more;
	}
	/* (a last page of exactly 40 may say more, and the next none) */
	check(n >= 0 && !more && l.n > 40 && (pages == (l.n + 39) / 40 || pages == l.n / 40 + 1) &&
		      !l.out_of_order && !short_pages && !l.undated,
	      "list-pages",
	      "%d %s: %u keys in %u pages, %u out of order, %u without their time and size", n,
	      s3->err, l.n, pages, l.out_of_order, l.undated);
	n = s3_list(s3, "../x", marker, 40, list_one, &l, &more);
	check(n == -EINVAL, "list-refused", "%d", n);
}

/*
 * The collector (store/gc.c) in a prefix of its own: manifests a and b of 4 MiB of random
 * bytes each, a deleted: its 16 chunks are named by none. A dry run and a cutoff before they
 * were made delete nothing; a manifest that does not open stops it; then a's chunks go, b's
 * stay and b restores.
 */
static void gc_check(struct s3 *s3, const uint8_t secret[32], const uint8_t *img, const char *dir)
{
	const size_t part = 4u << 20, n_a = part / CHUNK_SIZE;
	struct chunk_store cs;
	struct manifest a, b, back;
	struct store_gc_report rep;
	char path[4200], out[4200], key[S3_KEY_MAX + 1], name[65];
	int64_t later = (int64_t)time(NULL) + 3600, earlier = (int64_t)time(NULL) - 3600;
	uint64_t size;
	size_t n;
	int err;

	check(chunk_store_open(&cs, s3, "ws/test-gc", secret) == 0, "gc-open", "%s", cs.err);
	snprintf(path, sizeof(path), "%s/gc-a.img", dir);
	write_file(path, img, part);
	check(manifest_init(&a, CHUNK_SIZE) == 0 && manifest_add_file(&a, &cs, "disk", path) == 0 &&
		      manifest_put(&a, &cs, "a") == 0,
	      "gc-a", "%s", cs.err);
	snprintf(path, sizeof(path), "%s/gc-b.img", dir);
	write_file(path, img + part, part);
	check(manifest_init(&b, CHUNK_SIZE) == 0 && manifest_add_file(&b, &cs, "disk", path) == 0 &&
		      manifest_put(&b, &cs, "b") == 0,
	      "gc-b", "%s", cs.err);
	check(manifest_delete(&cs, "a") == 0, "gc-a-deleted", "%s", cs.err);
	chunk_object_name(&cs.keys, a.file[0].hash[0], name);
	snprintf(key, sizeof(key), "ws/test-gc/c/%s", name);

	err = store_gc(&cs, later, true, &rep, NULL, NULL);
	check(err == 0 && rep.manifests == 1 && rep.deleted == n_a && rep.kept == n_a &&
		      s3_head(s3, key, &size) == 0,
	      "gc-dry-run", "%d %s: %llu manifests, %llu deleted, %llu kept", err, cs.err,
	      (unsigned long long)rep.manifests, (unsigned long long)rep.deleted,
	      (unsigned long long)rep.kept);
	err = store_gc(&cs, earlier, false, &rep, NULL, NULL);
	check(err == 0 && rep.deleted == 0 && rep.young == n_a && s3_head(s3, key, &size) == 0,
	      "gc-grace", "%d %s: %llu deleted, %llu young", err, cs.err,
	      (unsigned long long)rep.deleted, (unsigned long long)rep.young);
	check(s3_put(s3, "ws/test-gc/m/bad", "not a manifest", 14) == 0, "gc-bad-put", "%s",
	      s3->err);
	err = store_gc(&cs, later, false, &rep, NULL, NULL);
	check(err < 0 && strstr(cs.err, "bad") && rep.deleted == 0 && s3_head(s3, key, &size) == 0,
	      "gc-stops-on-doubt", "%d %s", err, cs.err);
	check(s3_delete(s3, "ws/test-gc/m/bad") == 0, "gc-bad-gone", "%s", s3->err);
	err = store_gc(&cs, later, false, &rep, NULL, NULL);
	check(err == 0 && rep.deleted == n_a && rep.kept == n_a &&
		      rep.kept_bytes == n_a * (CHUNK_SIZE + CHUNK_SEAL_EXTRA) &&
		      s3_head(s3, key, &size) == -ENOENT,
	      "gc-collected", "%d %s: %llu deleted (%llu bytes), %llu kept (%llu bytes)", err,
	      cs.err, (unsigned long long)rep.deleted, (unsigned long long)rep.deleted_bytes,
	      (unsigned long long)rep.kept, (unsigned long long)rep.kept_bytes);
	printf("gc: %llu chunks of a deleted manifest collected (%llu bytes), %llu kept (%llu "
	       "bytes)\n",
	       (unsigned long long)rep.deleted, (unsigned long long)rep.deleted_bytes,
	       (unsigned long long)rep.kept, (unsigned long long)rep.kept_bytes);
	snprintf(out, sizeof(out), "%s/gc-b.out", dir);
	uint8_t *got = NULL;

	check(manifest_get(&back, &cs, "b", 0) == 0 &&
		      manifest_fetch_file(&back, &cs, "disk", out) == 0 &&
		      (got = read_all(out, &n)) != NULL && n == part &&
		      memcmp(got, img + part, part) == 0,
	      "gc-b-restores", "%s", cs.err);
	free(got);
	manifest_free(&back);
	/* every manifest gone but chunks listed: not judged (a listing that lost its manifests
	 * would read the same) */
	check(manifest_delete(&cs, "b") == 0, "gc-b-deleted", "%s", cs.err);
	chunk_object_name(&cs.keys, b.file[0].hash[0], name);
	snprintf(key, sizeof(key), "ws/test-gc/c/%s", name);
	err = store_gc(&cs, later, false, &rep, NULL, NULL);
	check(err == -EBADMSG && strstr(cs.err, "no manifest") && rep.deleted == 0 &&
		      s3_head(s3, key, &size) == 0,
	      "gc-no-manifest-refused", "%d %s", err, cs.err);
	manifest_free(&a);
	manifest_free(&b);
	chunk_store_close(&cs);
}

/* A client's fetch through the API, as sandbox-transfer's pull has it (cs->fetch_args, one
 * connection each): chunks of one file image by their hash, after a pause (so that fetches
 * overlap when they can), the most at once counted; one chunk (bad) given wrong. */
struct api_fetch {
	const struct manifest_file *f;
	const uint8_t *img;
	size_t len;
	uint32_t chunk_size;
	int bad; /* a chunk index, or -1 */
	pthread_mutex_t mu;
	unsigned now, most;
};

static int api_fetch(void *arg, const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap,
		     size_t *len, char *err, size_t err_len)
{
	struct api_fetch *a = arg;
	uint64_t i = 0;

	while (i < a->f->nchunks && memcmp(a->f->hash[i], hash, CHUNK_HASH_LEN) != 0)
		i++;
	if (i == a->f->nchunks) {
		snprintf(err, err_len, "no such chunk");
		return -ENOENT;
	}
	pthread_mutex_lock(&a->mu);
	if (++a->now > a->most)
		a->most = a->now;
	pthread_mutex_unlock(&a->mu);
	usleep(10000);
	*len = a->len - i * a->chunk_size < a->chunk_size ? a->len - i * a->chunk_size
							  : a->chunk_size;
	memcpy(out, a->img + i * a->chunk_size, *len < cap ? *len : cap);
	if ((int)i == a->bad)
		out[7] ^= 1;
	pthread_mutex_lock(&a->mu);
	a->now--;
	pthread_mutex_unlock(&a->mu);
	return 0;
}

static void api_fetch_check(const struct manifest *m, const char *path)
{
	struct api_fetch a = {
		.f = manifest_find(m, "disk"), .chunk_size = m->chunk_size, .bad = -1};
	struct api_fetch *args[3] = {&a, &a, &a};
	char out[4300], hex[2 * CHUNK_HASH_LEN + 1];
	struct chunk_store local;
	uint8_t *back;
	size_t n;
	int err;

	a.img = read_all(path, &a.len);
	pthread_mutex_init(&a.mu, NULL);
	snprintf(out, sizeof(out), "%s.fetched", path);
	unlink(out);
	check(a.img && chunk_store_local(&local) == 0, "api-fetch-open", "-");
	local.fetch = api_fetch;
	local.fetch_args = (void *const *)args;
	local.nfetch_args = 2;
	local.transfers = 4; /* no more than its fetch args: 2 */
	err = manifest_fetch_file(m, &local, "disk", out);
	back = read_all(out, &n);
	check(err == 0 && back && n == a.len && memcmp(back, a.img, n) == 0 && a.most == 2,
	      "api-fetch-parallel", "%d %s: %u at once", err, local.err, a.most);
	free(back);
	unlink(out);
	a.bad = 5;
	chunk_hex(a.f->hash[5], hex);
	err = manifest_fetch_file(m, &local, "disk", out);
	check(err == -EBADMSG && strstr(local.err, hex) && access(out, F_OK) != 0,
	      "api-fetch-corrupt-named", "%d %s", err, local.err);
	chunk_store_close(&local);
	pthread_mutex_destroy(&a.mu);
	free((void *)a.img);
}

/* What a read-ahead check works on: m's "disk" file, its bytes, a fresh cache and a handle of
 * its chunks over that cache. */
struct ahead_run {
	const struct manifest *m;
	const struct manifest_file *f;
	struct chunk_cache *cache;
	struct chunk_store h;
	uint8_t *img, *buf;
};

static const uint8_t ahead_zero[CHUNK_HASH_LEN];

static void ahead_open(struct ahead_run *r, const struct manifest *m, struct s3 *s3,
		       const uint8_t secret[32], const char *path, const char *cdir,
		       const char *name)
{
	size_t n;

	r->m = m;
	r->f = manifest_find(m, "disk");
	r->img = read_all(path, &n);
	r->buf = malloc(m->chunk_size);
	check(r->f && r->img && r->buf && chunk_cache_open(cdir, 256u << 20, &r->cache) == 0 &&
		      chunk_store_open(&r->h, s3, "ws/test-a", secret) == 0,
	      name, "%s", r->h.err);
	r->h.cache = r->cache;
}

/* Every chunk with data asked for in order, as a pager does (claimed first, a guest's pause
 * between): whether each came right; *nonzero how many, *hits how many came read ahead. */
static bool ahead_take_all(struct ahead_run *r, struct chunk_ahead *a, uint64_t *nonzero,
			   uint64_t *hits)
{
	uint32_t cs = r->m->chunk_size;
	bool same = true;
	size_t len;

	*nonzero = *hits = 0;
	for (uint64_t i = 0; i < r->f->nchunks; i++) {
		if (memcmp(r->f->hash[i], ahead_zero, CHUNK_HASH_LEN) == 0)
			continue;
		(*nonzero)++;
		*hits += chunk_ahead_claim(a, i) == 1;
		if (chunk_get(&r->h, r->f->hash[i], r->buf, cs, &len) < 0 || len != cs ||
		    memcmp(r->buf, r->img + i * cs, len) != 0)
			same = false;
		usleep(2000); /* a guest between faults */
	}
	return same;
}

static void ahead_close(struct ahead_run *r)
{
	chunk_store_close(&r->h);
	chunk_cache_close(r->cache);
	free(r->buf);
	free(r->img);
}

/* A lazy restore's read-ahead (chunk_ahead.c): 3 workers fetch m's chunks into a cache while
 * this thread asks for each in order, as a pager does; every chunk comes right, none is
 * fetched twice, and some came ahead. */
static void ahead_check(const struct manifest *m, struct s3 *s3, const uint8_t secret[32],
			const char *path, const char *dir)
{
	struct ahead_run r;
	struct chunk_ahead *a;
	char cdir[4300];
	uint64_t nonzero, hits, fetched;
	bool same;

	snprintf(cdir, sizeof(cdir), "%s/ahead-cache", dir);
	ahead_open(&r, m, s3, secret, path, cdir, "ahead-open");
	a = chunk_ahead_start(&r.h, (const uint8_t(*)[CHUNK_HASH_LEN])r.f->hash, r.f->nchunks,
			      m->chunk_size, 3, NULL);
	check(a != NULL, "ahead-started", "-");
	same = ahead_take_all(&r, a, &nonzero, &hits);
	fetched = chunk_ahead_stop(a);
	check(same && fetched == hits && fetched > 0 && r.h.got_chunks + fetched == nonzero &&
		      r.h.cache_hits == hits,
	      "ahead-once-each",
	      "same %d: %llu chunks, %llu read ahead (%llu taken), %llu by "
	      "the caller, %llu cache hits",
	      same, (unsigned long long)nonzero, (unsigned long long)fetched,
	      (unsigned long long)hits, (unsigned long long)r.h.got_chunks,
	      (unsigned long long)r.h.cache_hits);
	printf("read-ahead: %llu of %llu chunks came ahead, %llu fetched by the caller\n",
	       (unsigned long long)fetched, (unsigned long long)nonzero,
	       (unsigned long long)r.h.got_chunks);
	ahead_close(&r);
}

/* The read-ahead given the chunks a snapshot's last run touched (chunk_ahead.c, snap_touched.c):
 * the workers fetch those (every third chunk with data here) and nothing else until released;
 * a claimed hot chunk comes from the cache; after the release the rest comes too, each chunk
 * right and none fetched twice. */
static void ahead_hot_check(const struct manifest *m, struct s3 *s3, const uint8_t secret[32],
			    const char *path, const char *dir)
{
	struct ahead_run r;
	struct chunk_ahead *a;
	char cdir[4300];
	uint8_t *hot;
	uint64_t nonzero = 0, nhot = 0, held, hits, fetched;
	bool same;

	snprintf(cdir, sizeof(cdir), "%s/ahead-hot-cache", dir);
	ahead_open(&r, m, s3, secret, path, cdir, "ahead-hot-open");
	hot = calloc(r.f->nchunks, 1);
	check(hot != NULL, "ahead-hot-list", "-");
	for (uint64_t i = 0; i < r.f->nchunks; i++)
		if (memcmp(r.f->hash[i], ahead_zero, CHUNK_HASH_LEN) != 0 && nonzero++ % 3 == 1) {
			hot[i] = 1;
			nhot++;
		}
	a = chunk_ahead_start(&r.h, (const uint8_t(*)[CHUNK_HASH_LEN])r.f->hash, r.f->nchunks,
			      m->chunk_size, 3, hot);
	check(a != NULL && nhot > 1 && nhot < nonzero, "ahead-hot-started", "%llu hot of %llu",
	      (unsigned long long)nhot, (unsigned long long)nonzero);
	for (unsigned ms = 0; ms < 60000 && chunk_ahead_fetched(a) < nhot; ms += 20)
		usleep(20000);
	usleep(500000); /* long enough for a worker that was not held to take another */
	held = chunk_ahead_fetched(a);
	check(held == nhot, "ahead-hot-first", "%llu fetched before the release, %llu hot",
	      (unsigned long long)held, (unsigned long long)nhot);
	chunk_ahead_release(a);
	same = ahead_take_all(&r, a, &nonzero, &hits);
	fetched = chunk_ahead_stop(a);
	check(same && hits >= nhot && fetched == hits && r.h.got_chunks + fetched == nonzero,
	      "ahead-hot-then-rest",
	      "same %d: %llu chunks, %llu hot, %llu read ahead (%llu taken), %llu by the caller",
	      same, (unsigned long long)nonzero, (unsigned long long)nhot,
	      (unsigned long long)fetched, (unsigned long long)hits,
	      (unsigned long long)r.h.got_chunks);
	printf("read-ahead of touched chunks: %llu hot first, then %llu of %llu chunks ahead\n",
	       (unsigned long long)nhot, (unsigned long long)fetched, (unsigned long long)nonzero);
	free(hot);
	ahead_close(&r);
}

/* Several transfers at once (chunk_par.c): the manifest m (made with cs->transfers 4) lists the
 * same chunks, in the same order, as the file hashed one chunk at a time; a store that refuses
 * every request fails the add with the store's word, whatever was in flight, and nothing waits
 * on after it. */
static void par_check(const struct manifest *m, struct chunk_store *cs, struct s3 *s3,
		      const char *path)
{
	struct chunk_store local, refused;
	struct manifest serial, failing;
	struct s3_conf wrong = s3->conf;
	struct s3 bad;
	const struct manifest_file *a, *b;
	int err;

	check(chunk_store_local(&local) == 0 && manifest_init(&serial, m->chunk_size) == 0 &&
		      manifest_add_file(&serial, &local, "disk", path) == 0,
	      "par-serial-made", "%s", local.err);
	a = manifest_find(m, "disk");
	b = manifest_find(&serial, "disk");
	check(a && b && a->nchunks == b->nchunks &&
		      memcmp(a->hash, b->hash, a->nchunks * CHUNK_HASH_LEN) == 0,
	      "par-same-chunks", "%llu / %llu chunks", a ? (unsigned long long)a->nchunks : 0,
	      b ? (unsigned long long)b->nchunks : 0);
	manifest_free(&serial);
	chunk_store_close(&local);
	api_fetch_check(m, path);
	snprintf(wrong.secret, sizeof(wrong.secret), "not-the-secret");
	check(s3_open(&bad, &wrong) == 0 &&
		      chunk_store_open(&refused, &bad, "ws/test-par", cs->keys.enc) == 0 &&
		      manifest_init(&failing, m->chunk_size) == 0,
	      "par-refused-open", "%s", bad.err);
	refused.transfers = 8;
	refused.listed = true; /* no HEADs: every chunk a PUT, all refused */
	err = manifest_add_file(&failing, &refused, "disk", path);
	check(err == -EACCES && strstr(refused.err, "SignatureDoesNotMatch") &&
		      strstr(refused.err, "chunk ") && failing.nfiles == 0 &&
		      refused.put_chunks == 0,
	      "par-refused", "%d %s", err, refused.err);
	printf("parallel puts refused: %s\n", refused.err);
	manifest_free(&failing);
	chunk_store_close(&refused);
	s3_close(&bad);
}

int main(int argc, char **argv)
{
	struct s3_conf conf = {0};
	struct s3 s3, bad;
	struct chunk_store cs, other;
	struct manifest m1, m2, back;
	uint8_t secret[32], secret2[32], *got, *img;
	size_t n, len = (size_t)FILE_MIB << 20;
	uint64_t size, first_up, second_up;
	char path[4200], out[4200], key[S3_KEY_MAX + 1], name[65];
	int err;

	if (argc != 6) {
		fprintf(stderr, "usage: store-check ENDPOINT ACCESS SECRET REGION WORKDIR\n");
		return 2;
	}
	store_conf_from_args(&conf, argv, "sandbox-test");

	/* the S3 layer */
	check(s3_open(&s3, &conf) == 0, "s3-open", "%s", s3.err);
	err = s3_bucket_create(&s3);
	check(err == 0, "bucket-create", "%s", s3.err);
	check(s3_bucket_create(&s3) == 0, "bucket-create-again", "%s", s3.err);
	check(s3_put(&s3, "t/hello", "hello world", 11) == 0, "put", "%s", s3.err);
	err = s3_get(&s3, "t/hello", 0, 0, 1024, &got, &n);
	check(err == 0 && n == 11 && memcmp(got, "hello world", 11) == 0, "get", "%d %s", err,
	      s3.err);
	free(got);
	err = s3_get(&s3, "t/hello", 6, 5, 1024, &got, &n);
	check(err == 0 && n == 5 && memcmp(got, "world", 5) == 0, "get-range", "%d %s", err,
	      s3.err);
	free(got);
	err = s3_get(&s3, "t/hello", 0, 0, 4, &got, &n);
	check(err == -EFBIG, "get-bounded", "%d %s", err, s3.err);
	check(s3_head(&s3, "t/hello", &size) == 0 && size == 11, "head", "%s", s3.err);
	err = s3_head(&s3, "t/nothing", &size);
	check(err == -ENOENT, "head-missing", "%d %s", err, s3.err);
	err = s3_get(&s3, "t/nothing", 0, 0, 1024, &got, &n);
	check(err == -ENOENT && strstr(s3.err, "NoSuchKey"), "get-missing", "%d %s", err, s3.err);
	check(s3_delete(&s3, "t/hello") == 0 && s3_head(&s3, "t/hello", &size) == -ENOENT, "delete",
	      "%s", s3.err);
	check(s3_put(&s3, "../x", "x", 1) == -EINVAL && s3_put(&s3, "a//b", "x", 1) == -EINVAL &&
		      s3_put(&s3, "a/%2e", "x", 1) == -EINVAL,
	      "key-refused", "%s", s3.err);
	struct s3_conf wrong = conf;

	snprintf(wrong.secret, sizeof(wrong.secret), "not-the-secret");
	check(s3_open(&bad, &wrong) == 0, "s3-open-wrong", "%s", bad.err);
	err = s3_put(&bad, "t/x", "x", 1);
	check(err == -EACCES && strstr(bad.err, "SignatureDoesNotMatch"), "wrong-secret", "%d %s",
	      err, bad.err);
	s3_close(&bad);
	struct s3_conf silent = conf;

	/* a port on this machine's loopback nothing listens on: refused at once */
	snprintf(silent.endpoint, sizeof(silent.endpoint), "http://127.0.0.1:9");
	check(s3_open(&bad, &silent) == 0, "s3-open-refused", "%s", bad.err);
	err = s3_put(&bad, "t/x", "x", 1);
	check(err == -EIO && bad.err[0], "refused", "%d %s", err, bad.err);
	s3_close(&bad);

	/* chunks and manifests: a 32 MiB file of random bytes with 8 MiB of zeros in it */
	img = malloc(len);
	if (!img)
		return 2;
	fill_random(img, len);
	memset(img + (8u << 20), 0, 8u << 20);
	snprintf(path, sizeof(path), "%s/disk.img", argv[5]);
	write_file(path, img, len);
	fill_random(secret, sizeof(secret));
	fill_random(secret2, sizeof(secret2));
	check(chunk_store_open(&cs, &s3, "ws/test-a", secret) == 0, "chunk-store-open", "%s",
	      cs.err);
	cs.transfers = 4; /* as sandboxd's default; `learned` below keeps one at a time */
	check(manifest_init(&m1, CHUNK_SIZE) == 0, "manifest-init", "-");
	fifo_check(&m1, &cs, argv[5]);
	struct manifest huge;

	/* a file whose chunk list would not fit a manifest: refused before a byte is read */
	check(manifest_init(&huge, MANIFEST_CHUNK_MIN) == 0, "huge-init", "-");
	snprintf(path, sizeof(path), "%s/huge.img", argv[5]);
	err = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	check(err >= 0 && ftruncate(err, 8ll << 30) == 0 && close(err) == 0, "huge-made", "-");
	uint64_t req0 = s3.requests;

	err = manifest_add_file(&huge, &cs, "huge", path);
	check(err == -E2BIG && s3.requests == req0, "huge-refused-first", "%d %s", err, cs.err);
	unlink(path);
	manifest_free(&huge);
	snprintf(path, sizeof(path), "%s/disk.img", argv[5]);
	uint64_t up0 = s3.bytes_up;

	err = manifest_add_file(&m1, &cs, "disk", path);
	check(err == 0, "snapshot-first", "%s", cs.err);
	first_up = s3.bytes_up - up0;
	check(cs.put_chunks == (FILE_MIB - 8) * (1u << 20) / CHUNK_SIZE, "zeros-not-stored",
	      "%llu chunks put", (unsigned long long)cs.put_chunks);
	check(manifest_put(&m1, &cs, "snap-1") == 0, "manifest-put", "%s", cs.err);
	par_check(&m1, &cs, &s3, path);
	ahead_check(&m1, &s3, secret, path, argv[5]);
	ahead_hot_check(&m1, &s3, secret, path, argv[5]);

	/* 1 MiB of writes, then the second snapshot: only their chunks go up */
	fill_random(img + (20u << 20) + 12345, 1u << 20);
	write_file(path, img, len);
	check(manifest_init(&m2, CHUNK_SIZE) == 0, "manifest-init-2", "-");
	up0 = s3.bytes_up;
	err = manifest_add_file(&m2, &cs, "disk", path);
	check(err == 0, "snapshot-second", "%s", cs.err);
	second_up = s3.bytes_up - up0;
	/* 1 MiB at an odd offset touches 5 chunks of 256 KiB: those 5, nothing else */
	check(second_up == 5ull * (CHUNK_SIZE + CHUNK_SEAL_EXTRA), "second-uploads-little",
	      "%llu bytes after %llu (chunk %u)", (unsigned long long)second_up,
	      (unsigned long long)first_up, CHUNK_SIZE);
	check(manifest_put(&m2, &cs, "snap-2") == 0, "manifest-put-2", "%s", cs.err);

	/* a fresh handle that learns the store's chunks by listing: the same file again asks
	 * nothing (no HEAD a chunk), one changed chunk is one PUT and nothing else */
	struct chunk_store learned;
	struct manifest m3;
	uint64_t req1;

	check(chunk_store_open(&learned, &s3, "ws/test-a", secret) == 0 &&
		      chunk_store_learn(&learned, 16) == 0 && learned.listed,
	      "learn", "%s", learned.err);
	req1 = s3.requests;
	check(manifest_init(&m3, CHUNK_SIZE) == 0, "manifest-init-3", "-");
	err = manifest_add_file(&m3, &learned, "disk", path);
	check(err == 0 && learned.put_chunks == 0 && s3.requests == req1, "learned-no-requests",
	      "%d %s: %llu put, %u requests", err, learned.err,
	      (unsigned long long)learned.put_chunks, s3.requests - (unsigned)req1);
	manifest_free(&m3);
	img[(4u << 20) + 7] ^= 0x5a;
	write_file(path, img, len);
	req1 = s3.requests;
	check(manifest_init(&m3, CHUNK_SIZE) == 0, "manifest-init-4", "-");
	err = manifest_add_file(&m3, &learned, "disk", path);
	check(err == 0 && learned.put_chunks == 1 && s3.requests == req1 + 1, "learned-one-put",
	      "%d %s: %llu put, %u requests", err, learned.err,
	      (unsigned long long)learned.put_chunks, s3.requests - (unsigned)req1);
	manifest_free(&m3);
	img[(4u << 20) + 7] ^= 0x5a;
	write_file(path, img, len);
	chunk_store_close(&learned);
	list_check(&s3, "ws/test-a/c/");

	/* read back through a fresh handle (nothing known): equal bytes */
	struct chunk_store fresh;

	check(chunk_store_open(&fresh, &s3, "ws/test-a", secret) == 0, "fresh-open", "%s",
	      fresh.err);
	fresh.transfers = 4;
	check(manifest_get(&back, &fresh, "snap-2", 0) == 0 && back.nfiles == 1 &&
		      manifest_bytes(&back) == len,
	      "manifest-get", "%s", fresh.err);
	snprintf(out, sizeof(out), "%s/restored.img", argv[5]);
	unlink(out);
	err = manifest_fetch_file(&back, &fresh, "disk", out);
	got = read_all(out, &n);
	check(err == 0 && got && n == len && memcmp(got, img, len) == 0, "restore-equal", "%d %s",
	      err, fresh.err);
	free(got);
	err = manifest_fetch_file(&back, &fresh, "disk", out);
	check(err == -EEXIST, "restore-never-over", "%d %s", err, fresh.err);
	unlink(out);
	manifest_free(&back);

	/* through a host's chunk cache: one of 8 MiB is never over it; one that holds the file's
	 * 24 MiB of chunks answers a second restore alone, with no GET */
	struct chunk_cache *cache;
	struct chunk_store cached;
	char cdir[4200];
	const uint64_t bounds[2] = {8u << 20, 40u << 20};

	for (int b = 0; b < 2; b++) {
		snprintf(cdir, sizeof(cdir), "%s/cache-%d", argv[5], b);
		check(chunk_cache_open(cdir, bounds[b], &cache) == 0 &&
			      chunk_store_open(&cached, &s3, "ws/test-a", secret) == 0,
		      "cache-open", "%s", cached.err);
		cached.cache = cache;
		cached.transfers = b ? 4 : 1;
		check(manifest_get(&back, &cached, "snap-2", 0) == 0, "cache-manifest", "%s",
		      cached.err);
		err = manifest_fetch_file(&back, &cached, "disk", out);
		check(err == 0 && chunk_cache_bytes(cache) <= bounds[b] && cached.cache_hits == 0,
		      b ? "cache-first-restore" : "cache-bounded", "%d %s bytes %llu", err,
		      cached.err, (unsigned long long)chunk_cache_bytes(cache));
		unlink(out);
		if (b == 1) {
			uint64_t got0 = cached.got_chunks;

			err = manifest_fetch_file(&back, &cached, "disk", out);
			got = read_all(out, &n);
			check(err == 0 &&
				      cached.cache_hits ==
					      (FILE_MIB - 8) * (1u << 20) / CHUNK_SIZE &&
				      cached.got_chunks == got0 && got && n == len &&
				      memcmp(got, img, len) == 0,
			      "cache-second-restore", "%d hits %llu gets %llu", err,
			      (unsigned long long)cached.cache_hits,
			      (unsigned long long)(cached.got_chunks - got0));
			free(got);
			unlink(out);
		}
		manifest_free(&back);
		chunk_store_close(&cached);
		chunk_cache_close(cache);
	}

	/* another workspace's secret opens nothing of this one */
	check(chunk_store_open(&other, &s3, "ws/test-a", secret2) == 0, "other-open", "%s",
	      other.err);
	err = manifest_get(&back, &other, "snap-2", 0);
	check(err == -EBADMSG && strstr(other.err, "does not open"), "other-workspace-refused",
	      "%d %s", err, other.err);
	chunk_store_close(&other);

	/* a manifest stored under another id does not open there */
	err = s3_get(&s3, "ws/test-a/m/snap-1", 0, 0, S3_OBJECT_MAX, &got, &n);
	check(err == 0 && s3_put(&s3, "ws/test-a/m/snap-x", got, n) == 0, "manifest-copied", "%s",
	      s3.err);
	free(got);
	err = manifest_get(&back, &fresh, "snap-x", 0);
	check(err == -EBADMSG, "manifest-moved-refused", "%d %s", err, fresh.err);

	/* nor under the same id in another prefix sealed with the same secret */
	struct chunk_store elsewhere;

	check(chunk_store_open(&elsewhere, &s3, "ws/test-b", secret) == 0, "elsewhere-open", "%s",
	      elsewhere.err);
	err = s3_get(&s3, "ws/test-a/m/snap-1", 0, 0, S3_OBJECT_MAX, &got, &n);
	check(err == 0 && s3_put(&s3, "ws/test-b/m/snap-1", got, n) == 0, "manifest-copied-2", "%s",
	      s3.err);
	free(got);
	err = manifest_get(&back, &elsewhere, "snap-1", 0);
	check(err == -EBADMSG, "manifest-other-prefix-refused", "%d %s", err, elsewhere.err);
	chunk_store_close(&elsewhere);

	/* an older generation put back under its id: refused by the generation kept outside */
	uint8_t *old_obj;
	size_t old_len;

	m1.generation = 1;
	check(manifest_put(&m1, &cs, "latest") == 0, "gen-1", "%s", cs.err);
	check(s3_get(&s3, "ws/test-a/m/latest", 0, 0, S3_OBJECT_MAX, &old_obj, &old_len) == 0,
	      "gen-1-copy", "%s", s3.err);
	m2.generation = 2;
	check(manifest_put(&m2, &cs, "latest") == 0, "gen-2", "%s", cs.err);
	check(s3_put(&s3, "ws/test-a/m/latest", old_obj, old_len) == 0, "gen-1-put-back", "%s",
	      s3.err);
	free(old_obj);
	err = manifest_get(&back, &fresh, "latest", 2);
	check(err == -ESTALE && strstr(fresh.err, "generation 1"), "replay-refused", "%d %s", err,
	      fresh.err);

	/* one chunk corrupted in the store: the restore names it and leaves no file */
	const struct manifest_file *f = manifest_find(&m2, "disk");
	char hex[65];

	chunk_object_name(&cs.keys, f->hash[3], name);
	chunk_hex(f->hash[3], hex);
	snprintf(key, sizeof(key), "ws/test-a/c/%s", name);
	err = s3_get(&s3, key, 0, 0, S3_OBJECT_MAX, &got, &n);
	check(err == 0 && n == CHUNK_SIZE + CHUNK_SEAL_EXTRA, "chunk-read", "%s", s3.err);
	got[n / 2] ^= 1;
	check(s3_put(&s3, key, got, n) == 0, "chunk-corrupted", "%s", s3.err);
	free(got);
	check(manifest_get(&back, &fresh, "snap-2", 0) == 0, "manifest-get-again", "%s", fresh.err);
	err = manifest_fetch_file(&back, &fresh, "disk", out);
	check(err == -EBADMSG && strstr(fresh.err, hex) && access(out, F_OK) != 0 &&
		      !part_left(argv[5]),
	      "corrupt-chunk-named", "%d %s", err, fresh.err);
	printf("corrupt chunk refused: %s\n", fresh.err);
	manifest_free(&back);

	/* a chunk swapped for another chunk's object: refused too (the hash is sealed in) */
	chunk_object_name(&cs.keys, f->hash[5], name);
	snprintf(path, sizeof(path), "ws/test-a/c/%s", name);
	err = s3_get(&s3, path, 0, 0, S3_OBJECT_MAX, &got, &n);
	check(err == 0 && s3_put(&s3, key, got, n) == 0, "chunk-swapped", "%s", s3.err);
	free(got);
	check(manifest_get(&back, &fresh, "snap-2", 0) == 0, "manifest-get-3", "%s", fresh.err);
	err = manifest_fetch_file(&back, &fresh, "disk", out);
	check(err == -EBADMSG && strstr(fresh.err, hex), "swapped-chunk-named", "%d %s", err,
	      fresh.err);
	manifest_free(&back);

	gc_check(&s3, secret2, img, argv[5]);
	printf("store chunk_size=%u first_up=%llu second_up=%llu ratio=%.4f\n", CHUNK_SIZE,
	       (unsigned long long)first_up, (unsigned long long)second_up,
	       (double)second_up / (double)first_up);
	manifest_free(&m1);
	manifest_free(&m2);
	chunk_store_close(&fresh);
	chunk_store_close(&cs);
	s3_close(&s3);
	free(img);
	return 0;
}
