/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A host's cache of chunks (store.h): DIR/<object id in hex>, each a chunk's checked plaintext,
 * bounded in bytes, the least recently used dropped first. Keyed by object id (an HMAC under
 * the workspace's name key), so one workspace's chunk is never another's hit. A hit is checked
 * against the hash asked for (a damaged entry is dropped, a miss); its use is kept in its mtime,
 * so the order survives a restart. One lock: the pager's threads share a cache.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "store.h"

#define CACHE_BUCKETS 4096

struct cache_entry {
	uint8_t oid[CHUNK_HASH_LEN];
	uint64_t size;
	struct cache_entry *older, *newer; /* the use order */
	struct cache_entry *next;	   /* in its bucket */
};

struct chunk_cache {
	char dir[3900];
	uint64_t max, bytes;
	unsigned count;
	struct cache_entry *bucket[CACHE_BUCKETS];
	struct cache_entry *oldest, *newest;
	pthread_mutex_t lock;
};

static unsigned cc_bucket(const uint8_t oid[CHUNK_HASH_LEN])
{
	return ((unsigned)oid[0] << 8 | oid[1]) % CACHE_BUCKETS; /* an HMAC: uniform */
}

static void cc_path(const struct chunk_cache *c, const uint8_t oid[CHUNK_HASH_LEN], char *out,
		    size_t len)
{
	char hex[2 * CHUNK_HASH_LEN + 1];

	chunk_hex(oid, hex);
	snprintf(out, len, "%s/%s", c->dir, hex);
}

static struct cache_entry *cc_find(struct chunk_cache *c, const uint8_t oid[CHUNK_HASH_LEN])
{
	for (struct cache_entry *e = c->bucket[cc_bucket(oid)]; e; e = e->next)
		if (memcmp(e->oid, oid, CHUNK_HASH_LEN) == 0)
			return e;
	return NULL;
}

static void cc_unlink_order(struct chunk_cache *c, struct cache_entry *e)
{
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	e->older = e->newer = NULL;
}

static void cc_make_newest(struct chunk_cache *c, struct cache_entry *e)
{
	e->older = c->newest;
	e->newer = NULL;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
}

/* Forget e and remove its file. */
static void cc_drop(struct chunk_cache *c, struct cache_entry *e)
{
	char path[4000];

	for (struct cache_entry **pp = &c->bucket[cc_bucket(e->oid)]; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	cc_unlink_order(c, e);
	c->bytes -= e->size;
	c->count--;
	cc_path(c, e->oid, path, sizeof(path));
	unlink(path);
	free(e);
}

static void cc_evict(struct chunk_cache *c, const struct cache_entry *keep)
{
	while (c->bytes > c->max && c->oldest && c->oldest != keep)
		cc_drop(c, c->oldest);
}

static struct cache_entry *cc_add(struct chunk_cache *c, const uint8_t oid[CHUNK_HASH_LEN],
				  uint64_t size)
{
	struct cache_entry *e = calloc(1, sizeof(*e));
	unsigned b = cc_bucket(oid);

	if (!e)
		return NULL;
	memcpy(e->oid, oid, CHUNK_HASH_LEN);
	e->size = size;
	e->next = c->bucket[b];
	c->bucket[b] = e;
	cc_make_newest(c, e);
	c->bytes += size;
	c->count++;
	return e;
}

static int cc_unhex(const char *s, uint8_t out[CHUNK_HASH_LEN])
{
	if (strlen(s) != 2 * CHUNK_HASH_LEN)
		return -1;
	for (int i = 0; i < 2 * CHUNK_HASH_LEN; i++) {
		int v = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
			: s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
						     : -1;

		if (v < 0)
			return -1;
		out[i / 2] = i % 2 ? (uint8_t)(out[i / 2] | v) : (uint8_t)(v << 4);
	}
	return 0;
}

struct cc_found {
	uint8_t oid[CHUNK_HASH_LEN];
	uint64_t size;
	struct timespec used;
};

static int cc_by_use(const void *a, const void *b)
{
	const struct cc_found *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

int chunk_cache_open(const char *dir, uint64_t max_bytes, struct chunk_cache **out)
{
	struct chunk_cache *c;
	struct cc_found *found = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	*out = NULL;
	if (strlen(dir) >= sizeof(c->dir) - 80)
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	c->max = max_bytes;
	pthread_mutex_init(&c->lock, NULL);
	if (!(d = opendir(dir))) {
		int err = -errno;

		chunk_cache_close(c);
		return err;
	}
	/* what is there: by last use, oldest first; a put's leftover temporary removed */
	while ((de = readdir(d))) {
		struct stat st;
		uint8_t oid[CHUNK_HASH_LEN];

		if (strncmp(de->d_name, ".tmp-", 5) == 0) {
			unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (cc_unhex(de->d_name, oid) < 0 ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_size > CHUNK_SIZE_MAX)
			continue; /* not ours: left alone */
		if (n == cap) {
			struct cc_found *f =
				realloc(found, (cap = cap ? cap * 2 : 256) * sizeof(*f));

			if (!f)
				break;
			found = f;
		}
		memcpy(found[n].oid, oid, CHUNK_HASH_LEN);
		found[n].size = (uint64_t)st.st_size;
		found[n].used = st.st_mtim;
		n++;
	}
	closedir(d);
	if (n)
		qsort(found, n, sizeof(*found), cc_by_use);
	for (size_t i = 0; i < n; i++)
		if (!cc_find(c, found[i].oid))
			cc_add(c, found[i].oid, found[i].size);
	free(found);
	cc_evict(c, NULL);
	*out = c;
	return 0;
}

void chunk_cache_close(struct chunk_cache *c)
{
	if (!c)
		return;
	while (c->oldest) {
		struct cache_entry *e = c->oldest;

		cc_unlink_order(c, e);
		free(e);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int chunk_cache_get(struct chunk_cache *c, const uint8_t oid[CHUNK_HASH_LEN],
		    const uint8_t hash[CHUNK_HASH_LEN], uint8_t *out, size_t cap, size_t *len)
{
	char path[4000];
	uint8_t got[CHUNK_HASH_LEN];
	struct cache_entry *e;
	ssize_t n = -1;
	int fd;

	*len = 0;
	pthread_mutex_lock(&c->lock);
	e = cc_find(c, oid);
	if (!e || e->size > cap) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	cc_path(c, oid, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		size_t done = 0;

		while (done < e->size && (n = read(fd, out + done, e->size - done)) > 0)
			done += (size_t)n;
		n = (ssize_t)done;
		if (n == (ssize_t)e->size)
			futimens(fd, NULL); /* its use: the order after a restart */
		close(fd);
	}
	if (n == (ssize_t)e->size)
		chunk_hash(out, (size_t)n, got);
	if (n != (ssize_t)e->size || CRYPTO_memcmp(got, hash, CHUNK_HASH_LEN) != 0) {
		cc_drop(c, e); /* damaged, or gone: a miss, fetched again */
		pthread_mutex_unlock(&c->lock);
		OPENSSL_cleanse(out, cap < CHUNK_SIZE_MAX ? cap : CHUNK_SIZE_MAX);
		return 0;
	}
	cc_unlink_order(c, e);
	cc_make_newest(c, e);
	pthread_mutex_unlock(&c->lock);
	*len = (size_t)n;
	return 1;
}

int chunk_cache_put(struct chunk_cache *c, const uint8_t oid[CHUNK_HASH_LEN], const void *data,
		    size_t len)
{
	char path[4000], tmp[4000], hex[2 * CHUNK_HASH_LEN + 1];
	struct cache_entry *e;
	int fd, err = 0;

	if (len > c->max || len > CHUNK_SIZE_MAX)
		return 0; /* never kept: it would evict everything */
	pthread_mutex_lock(&c->lock);
	if ((e = cc_find(c, oid))) {
		cc_unlink_order(c, e);
		cc_make_newest(c, e);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	chunk_hex(oid, hex);
	cc_path(c, oid, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", c->dir, hex);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		err = -errno;
	} else {
		const uint8_t *p = data;
		size_t done = 0;

		while (done < len && err == 0) {
			ssize_t n = write(fd, p + done, len - done);

			if (n < 0)
				err = -errno;
			else
				done += (size_t)n;
		}
		if (close(fd) < 0 && err == 0)
			err = -errno;
		if (err == 0 && rename(tmp, path) < 0)
			err = -errno;
		if (err < 0)
			unlink(tmp);
	}
	if (err == 0 && (e = cc_add(c, oid, len)))
		cc_evict(c, e);
	else if (err == 0)
		unlink(path), err = -ENOMEM;
	pthread_mutex_unlock(&c->lock);
	return err;
}

uint64_t chunk_cache_bytes(struct chunk_cache *c)
{
	uint64_t b;

	pthread_mutex_lock(&c->lock);
	b = c->bytes;
	pthread_mutex_unlock(&c->lock);
	return b;
}

unsigned chunk_cache_count(struct chunk_cache *c)
{
	unsigned n;

	pthread_mutex_lock(&c->lock);
	n = c->count;
	pthread_mutex_unlock(&c->lock);
	return n;
}
